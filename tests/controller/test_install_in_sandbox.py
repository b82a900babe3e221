"""The controller as users install it: ``kubectl apply -k configs/controller`` on a sandbox with
containers, the manifests unchanged.

The sandbox's image store builds ``ghcr.io/sky-kueue/sky-kueue:0.1.0`` with the Containerfile's
install steps (``configs/controller/install.sh``; ``sandbox/containers/recipes_controller.py``),
the deployment controller turns the Deployment into two pods, the container runtime runs
``sky-kueue controller run --in-cluster`` in each, and they reach the API server as their
ServiceAccount over HTTPS (``load_incluster_config``: token, ``ca.crt``, the
``KUBERNETES_SERVICE_*`` variables). The Kueue emulation runs in real time.

Checked: two replicas Running; exactly one leader by the Lease; a preemption (team-b's dev job
borrowing cohort CPU, reclaimed by team-a's prod job) recorded as a JobHistory object; the
leader pod deleted, the other replica takes the Lease; a second preemption recorded; every
preemption recorded exactly once (JobHistory objects counted). The requests the controller
pods made were authenticated as the ServiceAccount, and each is allowed by the shipped RBAC
(the sandbox stores RBAC but does not enforce it, so least privilege is checked here against
the request log, as ``test_rbac.py`` does for a controller outside the cluster).

Skipped (with the reason) only when containers cannot run here: not root, or a tool missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
from kubernetes import client

from sky_kueue.sandbox.containers import node as container_node
from sky_kueue.sandbox.containers import recipes_controller
from sky_kueue.sandbox.containers.images import ImageStore
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.seed import seed_cluster
from sky_kueue.sandbox.workloads.service_accounts import user_name

from .live_support import group_pod
from .test_rbac import _allows, _key, _rules

pytestmark = [pytest.mark.slow, pytest.mark.long]

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "configs" / "controller"
PLUGIN_CONFIG = REPO / "configs" / "sky-kueue.yaml"
NAMESPACE = "sky-kueue-system"
ACCOUNT = "sky-kueue-controller"
LEASE = "sky-kueue-controller"
DEPLOYMENT = "sky-kueue-controller"
POD_SELECTOR = "app.kubernetes.io/name=sky-kueue,app.kubernetes.io/component=controller"
JOBHISTORY = ("sky-kueue.io", "v1alpha1", "jobhistories")
WORKLOADS = "workloads.kueue.x-k8s.io"
#: Two controller processes start in containers (SkyPilot's imports take a few seconds each).
ROLLOUT_TIMEOUT_SECONDS = 240.0
#: Another replica takes over within one lease duration (15 s in the manifests) after the leader
#: releases or stops renewing, plus its retry period and the pod's termination. Which one is a
#: race, as on a real cluster: the surviving follower, or the Deployment's replacement pod when
#: it starts while the follower is between retries (seen under load).
TAKEOVER_TIMEOUT_SECONDS = 90.0
PREEMPTION_TIMEOUT_SECONDS = 90.0
#: How long the prod jobs run (the emulation finishes them), freeing the cohort for the next round.
PROD_RUN_SECONDS = 20
POLL_SECONDS = 0.5
SANDBOX_NAME = "install-test"

T = TypeVar("T")


def _missing_requirement() -> str | None:
    if os.geteuid() != 0:
        return "containers need root (network namespaces, mounts)"
    if shutil.which("kubectl") is None:
        return "kubectl is not installed"
    try:
        container_node.preflight()
    except container_node.ContainersUnavailable as exc:
        return str(exc)
    if recipes_controller.CONTROLLER is None:
        return "not running from a checkout: the controller image is built from its sources"
    return None


def _wait(what: str, timeout_seconds: float, probe: Callable[[], T | None]) -> T:
    deadline = time.monotonic() + timeout_seconds
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_seconds:.0f} s waiting for {what}")
        time.sleep(POLL_SECONDS)


class Cluster:
    """kubectl and the official client against one sandbox."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.sandbox = sandbox
        api = sandbox.api_client()
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.coordination = client.CoordinationV1Api(api)

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(self.sandbox.kubeconfig_path), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
        return done.stdout

    def controller_pods(self) -> list[Any]:
        return [
            p
            for p in self.core.list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items
            if p.metadata.deletion_timestamp is None
        ]

    def running(self) -> list[str]:
        names = []
        for pod in self.controller_pods():
            statuses = pod.status.container_statuses or []
            if pod.status.phase == "Running" and statuses and all(s.state.running for s in statuses):
                names.append(pod.metadata.name)
        return sorted(names)

    def leader(self) -> str | None:
        try:
            lease = self.coordination.read_namespaced_lease(LEASE, NAMESPACE)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return lease.spec.holder_identity or None

    def histories(self) -> list[dict[str, Any]]:
        group, version, plural = JOBHISTORY
        return list(self.custom.list_namespaced_custom_object(group, version, NAMESPACE, plural)["items"])

    def preemptions_by_job(self) -> dict[str, int]:
        """Job key -> preemptions recorded in its JobHistory (job records only, not aliases or
        the runtime record); every job key must appear once."""
        counts: dict[str, int] = {}
        for item in self.histories():
            spec = item.get("spec") or {}
            if spec.get("aliasOf") or not str(spec.get("job", "")).startswith("managed-job/"):
                continue
            job = spec["job"]
            assert job not in counts, f"{job} has two JobHistory records"
            counts[job] = len(spec.get("preemptions") or [])
        return counts

    def logs(self) -> str:
        parts = []
        for pod in self.controller_pods():
            try:
                text = self.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, container="controller")
            except client.ApiException as exc:
                text = f"<no log: {exc.status}>"
            parts.append(f"--- {pod.metadata.name} ({pod.status.phase})\n{text[-3000:]}")
        return "\n".join(parts)


def _sleeping(pod: dict[str, Any]) -> dict[str, Any]:
    """A SkyPilot-labelled pod whose container runs in the sandbox's Debian base image."""
    for container in pod["spec"]["containers"]:
        container.update(image="debian:bookworm", command=["sleep", "infinity"])
    return pod


def _preempt(cluster: Cluster, dev_job: str, prod_job: str) -> None:
    """team-b's dev job borrows cohort CPU; team-a's prod job reclaims it (Kueue's preemption)."""
    store = cluster.sandbox.store
    dev = f"dev-{dev_job}-fcd1e5cf"
    cluster.sandbox.apply(_sleeping(group_pod("dev", dev_job, "team-b", "dev-priority", "5")))
    _wait(f"{dev} admitted", PREEMPTION_TIMEOUT_SECONDS, lambda: _admitted(store.try_get(WORKLOADS, dev, "team-b")))
    prod = group_pod("train", prod_job, "team-a", "prod-priority", "7", gpus="2", run_seconds=PROD_RUN_SECONDS)
    cluster.sandbox.apply(_sleeping(prod))


def _admitted(workload: dict[str, Any] | None) -> bool:
    conditions = (workload or {}).get("status", {}).get("conditions") or []
    return any(c.get("type") == "Admitted" and c.get("status") == "True" for c in conditions)


@pytest.fixture(scope="module")
def controller_image() -> tuple[float, str]:
    """The image built (or found in the cache): build seconds and its size (du -sh)."""
    missing = _missing_requirement()
    if missing:
        pytest.skip(f"controller install test: {missing}")
    started = time.monotonic()
    store = ImageStore()
    image = store.ensure(recipes_controller.CONTROLLER_IMAGE_REFERENCE)
    seconds = time.monotonic() - started
    recipes_controller.prune_stale_images(store.cache, image.rootfs)
    size = subprocess.run(["du", "-sh", str(image.rootfs)], capture_output=True, text=True, check=True)
    print(f"controller image {image.rootfs.name}: ready in {seconds:.1f} s, {size.stdout.split()[0]}")
    return seconds, size.stdout.split()[0]


def test_the_controller_installs_from_its_manifests_and_fails_over(controller_image: tuple[float, str]) -> None:
    started = time.monotonic()
    stages: list[tuple[str, float]] = []

    def stage(name: str) -> None:
        stages.append((name, time.monotonic() - started))

    with Sandbox(containers=True, name=SANDBOX_NAME) as sandbox:
        cluster = Cluster(sandbox)
        sandbox.apply(seed_cluster())
        # kueue-system: where Kueue runs (the gate-detection Role lives there); the sandbox has
        # it as a cluster with Kueue installed does. The README's steps as written (`kubectl
        # create` sends protobuf bodies).
        assert "kueue-system" in cluster.kubectl("get", "namespace", "kueue-system", "-o", "name")
        cluster.kubectl("create", "namespace", NAMESPACE)
        cluster.kubectl(
            "create", "configmap", "sky-kueue-config", "-n", NAMESPACE, f"--from-file=sky-kueue.yaml={PLUGIN_CONFIG}"
        )
        applied = cluster.kubectl("apply", "-k", str(MANIFESTS))
        assert "deployment.apps/sky-kueue-controller created" in applied
        stage("applied")
        try:
            first = _wait("two controller replicas Running", ROLLOUT_TIMEOUT_SECONDS, lambda: _two(cluster.running()))
            stage("two replicas running")
            deployment = client.AppsV1Api(sandbox.api_client()).read_namespaced_deployment(DEPLOYMENT, NAMESPACE)
            assert deployment.status.ready_replicas == 2
            leader = _wait("a leader in the Lease", ROLLOUT_TIMEOUT_SECONDS, cluster.leader)
            assert leader in first, f"the Lease names {leader}, not one of the replicas {first}"
            stage("one leader")
            (follower,) = [name for name in first if name != leader]

            _preempt(cluster, "1", "2")
            _wait(
                "the first preemption in a JobHistory",
                PREEMPTION_TIMEOUT_SECONDS,
                lambda: cluster.preemptions_by_job().get("managed-job/1") == 1,
            )
            stage("first preemption recorded")

            # --wait=false: return once the deletion is accepted, not when the pod is gone.
            cluster.kubectl("delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
            new_leader = _wait(
                f"a running replica other than {leader} to take the Lease",
                TAKEOVER_TIMEOUT_SECONDS,
                lambda: holder if (holder := cluster.leader()) not in (None, leader) else None,
            )
            replacement = _wait(
                "the Deployment's replacement pod Running",
                ROLLOUT_TIMEOUT_SECONDS,
                lambda: _two([n for n in cluster.running() if n != leader]),
            )
            assert follower in replacement and leader not in replacement
            assert new_leader in replacement, f"the Lease names {new_leader}, not a running replica {replacement}"
            stage("the follower took over" if new_leader == follower else "the replacement pod took over")

            _preempt(cluster, "3", "4")  # dev-3 is admitted once prod-2 has run its PROD_RUN_SECONDS
            _wait(
                "the second preemption in a JobHistory",
                PREEMPTION_TIMEOUT_SECONDS,
                lambda: cluster.preemptions_by_job().get("managed-job/3") == 1,
            )
            stage("second preemption recorded")
            time.sleep(5 * POLL_SECONDS)  # a doubled write would land now
            counts = cluster.preemptions_by_job()
            assert {job: n for job, n in counts.items() if n} == {"managed-job/1": 1, "managed-job/3": 1}
            assert cluster.leader() == new_leader
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n{cluster.logs()}") from failure

        account = user_name(NAMESPACE, ACCOUNT)
        theirs = [r for r in sandbox.requests.records() if r.user == account]
        assert theirs, "no request was authenticated as the controller's ServiceAccount"
        rules = _rules()
        denied = set()
        for record in theirs:
            key = _key(record)
            if key is not None and not any(_allows(scope, rule, *key) for scope, rule in rules):
                denied.add(key)
        assert not denied, f"requests the shipped RBAC would deny: {sorted(denied)}"

    print(f"controller image: {controller_image[0]:.1f} s to build or find, {controller_image[1]}")
    print("stages (s since apply started): " + ", ".join(f"{name} {at:.1f}" for name, at in stages))


def _two(names: list[str]) -> list[str] | None:
    return names if len(names) == 2 else None

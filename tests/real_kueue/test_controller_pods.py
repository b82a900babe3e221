"""The controller installed as users install it, running as real pods on the real node.

``kubectl apply -k configs/controller`` with the manifests unchanged, on the real cluster with
a real node (``real_node_cluster``): the controller's image, built from this checkout by the
image store with the Containerfile's install steps, is imported into the node's containerd
under the name the Deployment gives (``ghcr.io/sky-kueue/sky-kueue:0.1.0``,
``imagePullPolicy: IfNotPresent``). The kubelet runs both replicas with the Deployment's
security context (uid 65532, read-only root, no capabilities, RuntimeDefault seccomp), and
they reach the API server at the ``kubernetes`` Service with their ServiceAccount's token.

The workload pods are SkyPilot-shaped pods placed on the KWOK nodes (they tolerate the
cluster's KWOK taint), so the seed's quotas apply unchanged; the controller's pods, which
tolerate nothing, can only land on the real node.

Checked: two replicas Running on the real node; exactly one leader by the Lease; Kueue's
preemption of team-b's borrowing job recorded once; the leader pod deleted (its 30-s grace:
the controller releases the Lease on SIGTERM), the other replica takes the Lease; a second
preemption recorded once; no JobHistory doubled; no request of either replica refused.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.realcluster.cluster import RealCluster
from sky_kueue.realcluster.node import NODE_NAME
from tests.real_kueue.conftest import KWOK_TAINT, REPO
from tests.real_kueue.support import KueueCluster, condition_true, run_cli
from tests.real_kueue.test_preemption import skypilot_pod

pytestmark = pytest.mark.real_node

MANIFESTS = REPO / "configs" / "controller"
TEAMS = REPO / "configs" / "teams.yaml"
PLUGIN_CONFIG = REPO / "configs" / "sky-kueue.yaml"
NAMESPACE = "sky-kueue-system"
LEASE = "sky-kueue-controller"
CONFIG_MAP = "sky-kueue-config"
POD_SELECTOR = "app.kubernetes.io/name=sky-kueue,app.kubernetes.io/component=controller"
JOBHISTORY = ("sky-kueue.io", "v1alpha1", "jobhistories")
#: Two replicas start (image present; the controller's imports take seconds each on 2 cores).
ROLLOUT_SECONDS = 240.0
#: The leader's SIGTERM releases the Lease; a lost release costs one lease duration (15 s).
TAKEOVER_SECONDS = 120.0
PREEMPTION_SECONDS = 120.0
REFUSED = re.compile(r"forbidden|\bHTTP 403\b", re.IGNORECASE)


def kubectl(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def on_kwok(pod: dict[str, Any]) -> dict[str, Any]:
    """A workload pod for the KWOK nodes (the seed's quotas are larger than the real node)."""
    pod["spec"]["tolerations"] = [{**KWOK_TAINT, "operator": "Equal"}]
    pod["spec"]["nodeSelector"] = {"type": "kwok"}
    return pod


@pytest.fixture
def node_env(real_node_cluster: RealCluster, tmp_path: Path) -> Iterator[dict[str, str]]:
    import os

    env = dict(os.environ)
    env["KUBECONFIG"] = str(real_node_cluster.kubeconfig)
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    helper = KueueCluster(real_node_cluster)
    try:
        yield env
    finally:
        kubectl(env, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=120s")
        kubectl(env, "delete", "-k", str(MANIFESTS), "--ignore-not-found", "--wait=true", "--timeout=60s")
        helper.reset()


class Installed:
    def __init__(self, cluster: RealCluster) -> None:
        from kubernetes import client

        self.kueue = KueueCluster(cluster)
        self.core = self.kueue.core
        self.coordination = client.CoordinationV1Api(self.kueue.api)

    def pods(self) -> list[Any]:
        found = self.core.list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items
        return [p for p in found if p.metadata.deletion_timestamp is None]

    def running(self) -> list[str] | None:
        names = sorted(
            p.metadata.name
            for p in self.pods()
            if p.status.phase == "Running" and all(s.ready for s in p.status.container_statuses or [])
        )
        return names if len(names) == 2 else None

    def holder(self) -> str | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.coordination.read_namespaced_lease(LEASE, NAMESPACE).spec.holder_identity or None
        except ApiException as err:
            if err.status == 404:
                return None
            raise

    def preemptions(self) -> dict[str, int]:
        group, version, plural = JOBHISTORY
        items = self.kueue.custom.list_namespaced_custom_object(group, version, NAMESPACE, plural)["items"]
        counts: dict[str, int] = {}
        for item in items:
            spec = item["spec"]
            if spec.get("aliasOf") or not str(spec.get("job", "")).startswith("managed-job/"):
                continue
            assert spec["job"] not in counts, f"{spec['job']} has two JobHistory records"
            counts[spec["job"]] = int((item.get("status") or {}).get("preemptions") or 0)
        return counts

    def logs(self) -> str:
        from kubernetes.client.exceptions import ApiException

        parts = []
        for pod in self.core.list_namespaced_pod(NAMESPACE, label_selector=POD_SELECTOR).items:
            try:
                text = self.core.read_namespaced_pod_log(pod.metadata.name, NAMESPACE, container="controller")
            except ApiException as err:
                text = f"<no log: {err.status}>"
            parts.append(f"--- {pod.metadata.name} ({pod.status.phase})\n{text}")
        return "\n".join(parts)


def _group(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"])


def _preempt(installed: Installed, dev_job: str, prod_job: str) -> dict[str, Any]:
    kueue = installed.kueue
    dev = on_kwok(skypilot_pod("dev", dev_job, "team-b", "dev-priority", cpu="6"))
    kueue.create_pod(dev)
    kueue.wait_workload("team-b", _group(dev), lambda w: condition_true(w, "Admitted"), "admitted", PREEMPTION_SECONDS)
    prod = on_kwok(skypilot_pod("train", prod_job, "team-a", "prod-priority", cpu="8"))
    kueue.create_pod(prod)
    kueue.wait(
        f"job {dev_job}'s preemption recorded",
        lambda: installed.preemptions().get(f"managed-job/{dev_job}") == 1,
        PREEMPTION_SECONDS,
    )
    return prod


def test_the_controller_runs_as_two_real_pods_and_fails_over(
    real_node_cluster: RealCluster, node_env: dict[str, str], tmp_path: Path
) -> None:
    started = time.monotonic()
    stages: list[str] = []

    def stage(name: str) -> None:
        stages.append(f"{name} {time.monotonic() - started:.1f}")

    env = node_env
    done = run_cli(env, "setup", "--teams", str(TEAMS), "--apply", timeout=180)
    assert done.returncode == 0, done.stderr
    kubectl(env, "create", "namespace", NAMESPACE)
    kubectl(env, "create", "configmap", CONFIG_MAP, "-n", NAMESPACE, f"--from-file=sky-kueue.yaml={PLUGIN_CONFIG}")
    applied = kubectl(env, "apply", "-k", str(MANIFESTS))
    assert "deployment.apps/sky-kueue-controller created" in applied, applied
    stage("applied")
    installed = Installed(real_node_cluster)
    kueue = installed.kueue
    try:
        first = kueue.wait("two controller replicas Running and Ready", installed.running, ROLLOUT_SECONDS)
        assert {p.spec.node_name for p in installed.pods()} == {NODE_NAME}
        image_ids = {s.image_id for p in installed.pods() for s in p.status.container_statuses}
        stage("two replicas running")
        leader = kueue.wait("a replica holding the Lease", installed.holder, ROLLOUT_SECONDS)
        assert leader in first, f"the Lease names {leader}, not one of {first}"
        (follower,) = [name for name in first if name != leader]
        stage("one leader")

        prod = _preempt(installed, "1", "2")
        stage("first preemption recorded")

        kubectl(env, "delete", "pod", leader, "-n", NAMESPACE, "--wait=false")
        new_leader = kueue.wait(
            f"a replica other than {leader} holding the Lease",
            lambda: holder if (holder := installed.holder()) not in (None, leader) else None,
            TAKEOVER_SECONDS,
        )
        stage("the follower took over" if new_leader == follower else f"{new_leader} took over")

        def replaced() -> list[str] | None:
            names = installed.running()
            return names if names is not None and leader not in names else None

        replacement = kueue.wait("the Deployment's replacement Running", replaced, ROLLOUT_SECONDS)
        assert new_leader in replacement

        kueue.delete_pod("team-a", prod["metadata"]["name"], grace_seconds=0)
        _preempt(installed, "3", "4")
        stage("second preemption recorded")
        time.sleep(3)  # a doubled write would land now
        assert {job: n for job, n in installed.preemptions().items() if n} == {"managed-job/1": 1, "managed-job/3": 1}
        assert installed.holder() == new_leader
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{installed.logs()[-6000:]}") from failure
    logs = installed.logs()
    assert not REFUSED.search(logs), f"a request of the controller was refused:\n{logs[-3000:]}"
    print(f"controller image ids {sorted(image_ids)}")
    print("stages (s since apply): " + ", ".join(stages))

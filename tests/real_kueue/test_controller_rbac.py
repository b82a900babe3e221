"""The controller as ``kubectl apply -k configs/controller`` installs it, under that RBAC (plus the
Roles ``sky-kueue setup`` renders) enforced by the real API server, two replicas on a real Lease.

No kubelet runs containers here, so the Deployment is scaled to zero and its process runs
directly: two local ``sky-kueue controller run`` processes with the Deployment's own arguments
(``--in-cluster`` replaced by a kubeconfig holding a TokenRequest token of the controller's
ServiceAccount, the pod's name and namespace filled in, ``/metrics`` on a free loopback port)
and the config the Deployment mounts (the ``sky-kueue-config`` ConfigMap, read back from the
cluster). Only the Lease timing is shorter than the Deployment's client-go defaults, so a
failover fits in a test.

Checked: one leader; Kueue's preemption of team-b's borrowing job recorded once; the leader
killed (SIGKILL: no release), the other replica takes the Lease, ages the relaunch from the
history the first one left, and records a second preemption once; no request of either
replica was refused (no 403 in their logs); and a write outside the team namespaces setup
created is refused by the API server (403), as it was not before setup rendered the writes
into namespaced Roles; so is a pod list or watch there or across all namespaces (403), as it
was not before pods were granted per team namespace. The home cluster's history-writer
account of a fleet (configs/fleet/home) keeps a shared history and reads nothing else.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.realcluster import manifests
from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KUEUE_GROUP, KUEUE_VERSION, KueueCluster, condition_true, run_cli
from tests.real_kueue.test_preemption import skypilot_pod

MANIFESTS = REPO / "configs" / "controller"
TEAMS = REPO / "configs" / "teams.yaml"
#: The plugin config the README puts in the ConfigMap the Deployment mounts.
PLUGIN_CONFIG = REPO / "configs" / "sky-kueue.yaml"
#: Its aging parameters here: one boost step of 100 per preemption (test_preemption.py's), so the
#: relaunch is aged above team-a's maxPriorityThreshold and Kueue's choice of victim is certain.
AGING_PARAMETERS = {"policy": "bounded", "preemptions_per_step": 1, "boost_per_step": 100}
NAMESPACE = "sky-kueue-system"
ACCOUNT = "sky-kueue-controller"
DEPLOYMENT = "sky-kueue-controller"
CONFIG_MAP = "sky-kueue-config"
LEASE = "sky-kueue-controller"
JOBHISTORY = ("sky-kueue.io", "v1alpha1", "jobhistories")
#: A namespace that exists on every cluster and that setup did not create.
OUTSIDE = "default"
#: Lease timing of the test's replicas, seconds (the Deployment keeps client-go's 15/10/2).
LEASE_ARGS = ("--lease-duration=4", "--renew-deadline=3", "--retry-period=1")
#: Lifetime of the controller's token, seconds (longer than the test).
TOKEN_SECONDS = 3600
#: How long a replica gets to start (SkyPilot's imports) and one to take the Lease.
START_SECONDS = 60.0
#: What a refused request leaves in a log line (``HTTP 403 Forbidden``, ``... is forbidden: User``).
REFUSED = re.compile(r"forbidden|\bHTTP 403\b", re.IGNORECASE)


def kubectl(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(["kubectl", *args], env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def sky_kueue(env: dict[str, str], *args: str) -> str:
    done = run_cli(env, *args, timeout=120)
    assert done.returncode == 0, f"sky-kueue {' '.join(args)}: {done.stderr}"
    return done.stdout


@dataclass
class Replica:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def lines(self) -> list[str]:
        return self.log.read_text(encoding="utf-8", errors="replace").splitlines()

    def metrics_url(self) -> str | None:
        for line in self.lines():
            if '"controller starting"' in line:
                url = json.loads(line).get("metrics")
                return str(url) if url else None
        return None


@dataclass
class Installed:
    """configs/controller applied, setup applied, and the controller's credentials."""

    kueue: KueueCluster
    env: dict[str, str]
    kubeconfig: Path
    config: Path
    directory: Path
    replicas: list[Replica] = field(default_factory=list)

    def controller_api(self) -> Any:
        from kubernetes import config as kube_config

        return kube_config.new_client_from_config(config_file=str(self.kubeconfig))

    def start(self, name: str) -> Replica:
        """``controller run`` with the Deployment's arguments, as the ServiceAccount."""
        (deployment,) = [
            d
            for d in yaml.safe_load_all((MANIFESTS / "deployment.yaml").read_text())
            if d and d["kind"] == "Deployment"
        ]
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["command"] == ["sky-kueue", "controller", "run"]
        local = {
            "--in-cluster": f"--kubeconfig={self.kubeconfig}",
            "--config=/etc/sky-kueue/sky-kueue.yaml": f"--config={self.config}",
            "--metrics-port=9464": "--metrics-port=0",
            "--metrics-host=0.0.0.0": "--metrics-host=127.0.0.1",
        }
        args = [
            local.get(arg, arg).replace("$(POD_NAME)", name).replace("$(POD_NAMESPACE)", NAMESPACE)
            for arg in container["args"]
        ]
        env = {k: v for k, v in self.env.items() if k != "KUBECONFIG"}  # only the token's kubeconfig
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, "-m", "sky_kueue.cli.main", "controller", "run", *args, *LEASE_ARGS],
                env=env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        replica = Replica(name, process, log)
        self.replicas.append(replica)
        return replica

    def holder(self) -> str | None:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        try:
            lease = client.CoordinationV1Api(self.kueue.api).read_namespaced_lease(LEASE, NAMESPACE)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return lease.spec.holder_identity or None

    def preemptions(self) -> dict[str, int]:
        """Preemptions recorded per job, from the JobHistory objects."""
        items = self.kueue.custom.list_namespaced_custom_object(*JOBHISTORY[:2], NAMESPACE, JOBHISTORY[2])["items"]
        return {
            item["spec"]["job"]: int((item.get("status") or {}).get("preemptions") or 0)
            for item in items
            if not item["spec"].get("aliasOf")
        }

    def recorders(self, namespace: str, reason: str, uid: str) -> list[tuple[str, int]]:
        """(reporting replica, count) of the controller's Events of ``reason`` on one Workload."""
        found = self.kueue.core.list_namespaced_event(namespace).items
        return sorted(
            (str(e.reporting_instance), int(e.count or 1))
            for e in found
            if e.reason == reason
            and e.reporting_component == "sky-kueue.io/controller"
            and e.involved_object.uid == uid
        )

    def stop_all(self) -> None:
        for replica in self.replicas:
            if replica.process.poll() is None:
                replica.process.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                replica.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                replica.process.kill()
                replica.process.wait(timeout=10)

    def logs(self) -> str:
        return "\n".join(f"--- {r.name} ({r.log})\n" + "\n".join(r.lines()[-40:]) for r in self.replicas)


def _status(call: Callable[[], object]) -> int:
    """The HTTP status the API server answered ``call`` with (200 when it succeeded)."""
    from kubernetes.client.exceptions import ApiException

    try:
        call()
    except ApiException as err:
        return int(err.status)
    return 200


def _token_kubeconfig(kueue: KueueCluster, account: str, path: Path) -> Path:
    """A kubeconfig at ``path`` holding a TokenRequest token of ServiceAccount ``account`` in
    the controller's namespace (what a Pod of that account, or a member cluster, holds)."""
    token = kueue.core.create_namespaced_service_account_token(
        account, NAMESPACE, {"spec": {"expirationSeconds": TOKEN_SECONDS}}
    ).status.token
    path.write_text(
        yaml.safe_dump(
            manifests.kubeconfig(
                server=kueue.cluster.server,
                ca_pem=(kueue.cluster.pki / "ca.crt").read_bytes(),
                user=account,
                context=account,
                token=token,
                namespace=NAMESPACE,
            )
        )
    )
    path.chmod(0o600)
    return path


@pytest.fixture
def installed(kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path) -> Iterator[Installed]:
    # The team namespaces, Kueue objects and the controller's Roles in them, as an admin runs it.
    sky_kueue(cli_env, "setup", "--teams", str(TEAMS), "--apply")
    plugin_config = yaml.safe_load(PLUGIN_CONFIG.read_text())
    plugin_config["aging"]["parameters"] = AGING_PARAMETERS
    (tmp_path / "plugin.yaml").write_text(yaml.safe_dump(plugin_config))
    try:
        # The README's steps: the namespace, the ConfigMap, then the manifests unchanged.
        kubectl(cli_env, "create", "namespace", NAMESPACE)
        kubectl(
            cli_env,
            *("create", "configmap", CONFIG_MAP, "-n", NAMESPACE),
            f"--from-file=sky-kueue.yaml={tmp_path / 'plugin.yaml'}",
        )
        applied = kubectl(cli_env, "apply", "-k", str(MANIFESTS))
        assert "deployment.apps/sky-kueue-controller created" in applied, applied
        # KWOK would only fake the Deployment's pods; the replicas run below as processes.
        kubectl(cli_env, "scale", "deployment", DEPLOYMENT, "-n", NAMESPACE, "--replicas=0")
        core = kueue.core
        # The file the Deployment mounts: the ConfigMap's key, as the cluster holds it.
        config = tmp_path / "sky-kueue.yaml"
        config.write_text(core.read_namespaced_config_map(CONFIG_MAP, NAMESPACE).data["sky-kueue.yaml"])
        kubeconfig = _token_kubeconfig(kueue, ACCOUNT, tmp_path / "controller.kubeconfig")
        env = dict(cli_env)
        env["HOME"] = str(tmp_path / "home")
        result = Installed(kueue, env, kubeconfig, config, tmp_path)
        try:
            yield result
        finally:
            result.stop_all()
    finally:
        # Gone before the next test installs again: the namespace (its Lease and JobHistories) first,
        # while the CRD is still served, then the cluster-wide objects. The Deployment's fake pods
        # would run out their 30-s grace period (KWOK), so they go at once.
        kubectl(cli_env, "delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force")
        kubectl(cli_env, "delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=60s")
        kubectl(cli_env, "delete", "-k", str(MANIFESTS), "--ignore-not-found", "--wait=true", "--timeout=60s")


def _admitted(workload: dict[str, Any]) -> bool:
    return condition_true(workload, "Admitted")


def _group(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"])


def _running(kueue: KueueCluster, pod: dict[str, Any]) -> None:
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    kueue.wait(
        f"pod {namespace}/{name} Running",
        lambda: (kueue.pod(namespace, name) or {}).get("status", {}).get("phase") == "Running",
    )


def _gone(kueue: KueueCluster, pod: dict[str, Any]) -> None:
    """The pod gone and its (finished) Workload collected, as SkyPilot waits before relaunching."""
    namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    kueue.wait(f"pod {namespace}/{name} gone", lambda: kueue.pod(namespace, name) is None)
    kueue.wait(f"Workload {namespace}/{_group(pod)} collected", lambda: kueue.workload(namespace, _group(pod)) is None)


def test_two_replicas_under_the_shipped_rbac_fail_over_and_record_each_preemption_once(
    installed: Installed,
) -> None:
    kueue = installed.kueue
    replicas = {r.name: r for r in (installed.start("replica-a"), installed.start("replica-b"))}
    try:

        def lease_holder() -> str | None:
            holder = installed.holder()
            return holder if holder in replicas else None

        leader = kueue.wait("a replica holding the Lease", lease_holder, START_SECONDS)
        (follower,) = [name for name in replicas if name != leader]

        # Before the failover: team-a's prod job reclaims the CPUs team-b's dev job borrowed.
        dev = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="6")
        kueue.create_pod(dev)
        first = kueue.wait_workload("team-b", _group(dev), _admitted, "admitted")
        _running(kueue, dev)
        prod = skypilot_pod("train", "2", "team-a", "prod-priority", cpu="8")
        kueue.create_pod(prod)
        kueue.wait("job 1's preemption recorded", lambda: installed.preemptions().get("managed-job/1") == 1)
        first_uid = first["metadata"]["uid"]
        kueue.wait(
            f"the PreemptionRecorded Event from {leader}",
            lambda: installed.recorders("team-b", "PreemptionRecorded", first_uid) == [(leader, 1)],
        )

        replicas[leader].process.send_signal(signal.SIGKILL)  # no release: the Lease must expire
        replicas[leader].process.wait(timeout=10)
        kueue.wait(f"{follower} holding the Lease", lambda: installed.holder() == follower, START_SECONDS)

        # The new leader ages the relaunch from the history the old one left, without recording again.
        kueue.wait_workload("team-a", _group(prod), _admitted, "admitted after the victim's grace period")
        _gone(kueue, dev)
        kueue.create_pod(skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="6"))
        aged = kueue.wait_workload(
            "team-b",
            _group(dev),
            lambda w: w["metadata"]["uid"] != first_uid and w["spec"].get("priority") == 200,
            "the relaunch aged to dev-priority + one boost step (100 + 100) by the new leader",
        )
        aged_uid = aged["metadata"]["uid"]
        kueue.wait(
            f"the Aged Event from {follower}",
            lambda: {who for who, _ in installed.recorders("team-b", "Aged", aged_uid)} == {follower},
        )

        # After the failover: prod-2 ends, the aged relaunch (6 CPUs) and dev-3 (4) share the
        # cohort's 10; prod-4 reclaims 4, and only dev-3 is at or below team-a's
        # maxPriorityThreshold (100): the aged relaunch is not a candidate.
        kueue.delete_pod("team-a", prod["metadata"]["name"], grace_seconds=0)
        kueue.wait_workload("team-b", _group(dev), _admitted, "the aged relaunch admitted")
        dev3 = skypilot_pod("dev", "3", "team-b", "dev-priority", cpu="4")
        kueue.create_pod(dev3)
        dev3_uid = kueue.wait_workload("team-b", _group(dev3), _admitted, "admitted")["metadata"]["uid"]
        kueue.create_pod(skypilot_pod("train", "4", "team-a", "prod-priority", cpu="4"))
        kueue.wait("job 3's preemption recorded", lambda: installed.preemptions().get("managed-job/3") == 1)
        kueue.wait(
            f"the PreemptionRecorded Event from {follower}",
            lambda: installed.recorders("team-b", "PreemptionRecorded", dev3_uid) == [(follower, 1)],
        )

        counts = {job: n for job, n in installed.preemptions().items() if n}
        assert counts == {"managed-job/1": 1, "managed-job/3": 1}
        relaunch = kueue.workload("team-b", _group(dev)) or {}
        assert relaunch["metadata"]["uid"] == aged_uid and _admitted(relaunch), "the aged relaunch kept its quota"
        assert installed.recorders("team-b", "PreemptionRecorded", first_uid) == [(leader, 1)]
        assert installed.recorders("team-b", "PreemptionRecorded", aged_uid) == []
        assert installed.holder() == follower and replicas[follower].process.poll() is None
        url = replicas[follower].metrics_url()
        assert url is not None
        with urllib.request.urlopen(url, timeout=10) as answer:
            metrics = answer.read().decode()
        assert re.search(r"^sky_kueue_controller_leader 1(\.0)?$", metrics, re.MULTILINE), metrics
    except AssertionError as failure:
        raise AssertionError(f"{failure}\n{installed.logs()}") from failure

    installed.stop_all()
    assert any("became leader" in line for line in replicas[follower].lines())
    for replica in replicas.values():
        lines = replica.lines()
        refused = [line for line in lines if REFUSED.search(line)]
        assert not refused, f"{replica.name} was refused: {refused[:5]}"


def test_a_write_outside_the_team_namespaces_is_refused_by_the_api_server(installed: Installed) -> None:
    """The controller's token may patch a Workload in a team namespace (dry run) but not in a
    namespace setup did not create: patch, delete and an Event there are each answered 403.
    It lists pods in a team namespace, but not in that namespace nor across all of them (403):
    a pod's spec holds its environment, and the controller needs SkyPilot's pods only."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    kueue = installed.kueue
    workload: dict[str, Any] = {
        "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
        "kind": "Workload",
        "metadata": {"name": "outside", "namespace": OUTSIDE},
        "spec": {
            "queueName": "nowhere",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}],
                        }
                    },
                }
            ],
        },
    }
    inside: dict[str, Any] = dict(workload, metadata={"name": "inside", "namespace": "team-b"})
    for doc in (workload, inside):
        kueue.custom.create_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, doc["metadata"]["namespace"], "workloads", doc
        )
    try:
        api = installed.controller_api()
        custom = client.CustomObjectsApi(api)
        patch = {"spec": {"priority": 1000}}
        # In a team namespace the Role setup rendered allows it (dry run: nothing changes).
        custom.patch_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "team-b", "workloads", "inside", patch, dry_run="All"
        )
        refused: dict[str, int] = {}
        for what, call in (
            (
                "patch",
                lambda: custom.patch_namespaced_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, OUTSIDE, "workloads", "outside", patch
                ),
            ),
            (
                "delete",
                lambda: custom.delete_namespaced_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, OUTSIDE, "workloads", "outside"
                ),
            ),
            (
                "event",
                lambda: client.CoreV1Api(api).create_namespaced_event(
                    OUTSIDE,
                    {
                        "metadata": {"generateName": "outside."},
                        "involvedObject": {"kind": "Workload", "namespace": OUTSIDE, "name": "outside"},
                        "reason": "Aged",
                        "message": "m",
                    },
                ),
            ),
        ):
            refused[what] = _status(call)
        core = client.CoreV1Api(api)
        for what, call in (
            ("pod list outside", lambda: core.list_namespaced_pod(OUTSIDE)),
            (
                "pod watch outside",
                lambda: core.list_namespaced_pod(
                    OUTSIDE, watch=True, timeout_seconds=1, _preload_content=False
                ).release_conn(),
            ),
            ("pod list everywhere", lambda: core.list_pod_for_all_namespaces(limit=1)),
        ):
            refused[what] = _status(call)
        assert refused == {
            "patch": 403,
            "delete": 403,
            "event": 403,
            "pod list outside": 403,
            "pod watch outside": 403,
            "pod list everywhere": 403,
        }
        assert core.list_namespaced_pod("team-b", label_selector="parent=skypilot").items is not None
        unchanged = kueue.workload(OUTSIDE, "outside")
        assert unchanged is not None and unchanged["spec"].get("priority") != 1000, unchanged
        # It still reads everywhere (its watches are cluster-wide).
        listed = custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, OUTSIDE, "workloads")["items"]
        assert [w["metadata"]["name"] for w in listed] == ["outside"]
    finally:
        for doc in (workload, inside):
            try:
                kueue.custom.delete_namespaced_custom_object(
                    KUEUE_GROUP, KUEUE_VERSION, doc["metadata"]["namespace"], "workloads", doc["metadata"]["name"]
                )
            except ApiException as err:
                if err.status != 404:  # gone already: a write the RBAC should have refused deleted it
                    raise


def test_a_lease_name_the_rbac_does_not_name_is_refused_with_what_to_change(installed: Installed) -> None:
    """``--lease-name`` other than the Lease rule's resourceNames: every read is refused (403), and
    the message names the Lease and the rule to change; the shipped name is granted."""
    from sky_kueue.controller.leader import KubernetesLeaseClient, LeaderElector, LeaseSettings, LeaseUnavailable

    lease_client = KubernetesLeaseClient(installed.controller_api())
    with pytest.raises(LeaseUnavailable) as refused:
        lease_client.get(NAMESPACE, "renamed")
    assert str(refused.value) == (
        "read: HTTP 403 Forbidden: the controller's RBAC does not allow it on Lease sky-kueue-system/renamed; "
        "the Lease rule's resourceNames (configs/controller/rbac.yaml) must name the --lease-name"
    )
    assert not LeaderElector(lease_client, LeaseSettings(NAMESPACE, "probe", name="renamed")).try_acquire_or_renew()
    assert LeaderElector(lease_client, LeaseSettings(NAMESPACE, "probe", name=LEASE)).try_acquire_or_renew()
    assert installed.holder() == "probe"


def test_the_home_clusters_history_writer_may_write_job_histories_and_nothing_else(installed: Installed) -> None:
    """configs/fleet/home, applied in the home cluster of a fleet: with its account's token, a
    member cluster's controller keeps the shared history (the store's create, get, list and
    update), and the API server refuses it every Workload, pod and Lease of the home cluster."""
    from kubernetes import client
    from kubernetes import config as kube_config

    from sky_kueue.controller.history import PreemptionRecord, StepDecision
    from sky_kueue.controller.keys import EpisodeKey
    from sky_kueue.controller.kube_store import KubernetesHistoryStore
    from sky_kueue.mirror.identity import JobIdentity

    kubectl(installed.env, "apply", "-k", str(REPO / "configs" / "fleet" / "home"))
    path = _token_kubeconfig(installed.kueue, "sky-kueue-history-writer", installed.directory / "history.kubeconfig")
    api = kube_config.new_client_from_config(config_file=str(path))
    store = KubernetesHistoryStore(api, NAMESPACE)
    store.check()
    job = JobIdentity("team-b", pod_group="x-1-ab", managed_job_id="1", skypilot_owned=True)
    for uid in ("on-a", "on-b"):
        store.record_preemption(job, PreemptionRecord(EpisodeKey(uid, 1), 1.0, "x-1-ab"))
    store.decide_step(job, StepDecision(EpisodeKey("on-b+", 0), "team-b", "x-1-ab", "bounded", 200, 2.0, cluster="b"))
    history = store.load("managed-job/1")
    assert history is not None and history.preemption_count == 2 and [s.cluster for s in store.pending_steps()] == ["b"]
    refused: dict[str, int] = {}
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    for what, call in (
        ("workloads", lambda: custom.list_cluster_custom_object(KUEUE_GROUP, KUEUE_VERSION, "workloads")),
        (
            "team workloads",
            lambda: custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, "team-b", "workloads"),
        ),
        ("team pods", lambda: core.list_namespaced_pod("team-b")),
        ("lease", lambda: client.CoordinationV1Api(api).read_namespaced_lease(LEASE, NAMESPACE)),
        (
            "delete history",
            lambda: custom.delete_namespaced_custom_object(*JOBHISTORY[:2], NAMESPACE, JOBHISTORY[2], "managed-job.1"),
        ),
    ):
        refused[what] = _status(call)
    assert refused == dict.fromkeys(refused, 403), refused

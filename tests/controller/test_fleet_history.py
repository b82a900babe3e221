"""One history per job across clusters: every controller of a fleet keeps its JobHistory objects
in one home cluster (``--state kubernetes`` with ``--state-kubeconfig``/``--state-context``).

Two sandboxes are two clusters, A and B, each with its own controller; the history lives on A.
SkyPilot's managed job 1 of team-b is preempted twice on A, then relaunched on B (placement):
B's controller ages the relaunch from the two preemptions A recorded (+200, where a history of
its own would start at +0), records the third preemption as the third, and ages the next
relaunch from all three (+300). The job has one record, in the home cluster; each cluster
keeps only its own watch cursor and heartbeat, and every sighting and step says which
cluster's Workload it was. The SkyPilot recovery strategy reads the same record.

Before, each cluster's controller had its own store: B started the job at zero preemptions
and aged its relaunch from nothing, so the bound on preemptions leaked across clusters.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.controller import history_document as doc
from sky_kueue.controller.history import PreemptionRecord, StepDecision, Transition, TransitionCause, transition_key
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.kube_store import KubernetesHistoryStore
from sky_kueue.controller.state_spec import OpenedState, StateKind, StateSpec, open_state
from sky_kueue.mirror.identity import JobIdentity
from sky_kueue.sandbox.seed import seed_setup

from .live_support import CONTROLLER_USER_AGENT, STORE_NAMESPACE, Live, demo_aging, group_pod, live_sandbox

JOB_HISTORIES = "jobhistories.sky-kueue.io"
X = "team-b/x-1-fcd1e5cf"
FLEET = Path(__file__).resolve().parents[2] / "configs" / "fleet"
#: The User-Agent of B's requests to the home cluster (to find them in A's request log).
B_HISTORY_AGENT = f"{CONTROLLER_USER_AGENT} (cluster b, history)"
KUBECTL_TIMEOUT_SECONDS = 30


def _reclaiming_setup() -> list[dict[str, Any]]:
    """The seed setup with the cohort's CPUs nominal to team-a: team-a's prod jobs reclaim them
    from team-b's borrowing job whatever its (aged) priority, so it can be preempted again."""
    docs = copy.deepcopy(seed_setup())
    quotas = {"team-a-cq": {"cpu": "10", "memory": "64Gi"}, "shared-cq": {"cpu": "0", "memory": "0"}}
    for obj in docs:
        name = obj["metadata"]["name"]
        if obj.get("kind") != "ClusterQueue" or name not in quotas:
            continue
        (group,) = [g for g in obj["spec"]["resourceGroups"] if "cpu" in g["coveredResources"]]
        for resource in group["flavors"][0]["resources"]:
            resource["nominalQuota"] = quotas[name][resource["name"]]
    return docs


def _priority(live: Live) -> int:
    """spec.priority of job 1's Workload, which must be waiting."""
    workload = live.workload("team-b", "x-1-fcd1e5cf")
    assert workload is not None, "no Workload of x"
    conditions = {c["type"]: c["status"] for c in (workload.get("status") or {}).get("conditions") or []}
    assert conditions.get("QuotaReserved") != "True", f"x holds quota: {conditions}"
    return int(workload["spec"]["priority"])


def _identity(live: Live) -> str:
    return str(live.sandbox.store.get("namespaces", "kube-system")["metadata"]["uid"])


@contextmanager
def _fleet(tmp_path: Path) -> Iterator[tuple[Live, Live, OpenedState]]:
    """Clusters A (home of the history) and B; B's state opened as ``controller run
    --state kubernetes --state-kubeconfig <A's>`` opens it."""
    with ExitStack() as stack:
        lives = []
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            lives.append(stack.enter_context(live_sandbox(tmp_path / name, setup=_reclaiming_setup())))
        a, b = lives
        own, home = b.sandbox.api_client(), a.sandbox.api_client()
        own.user_agent, home.user_agent = CONTROLLER_USER_AGENT, B_HISTORY_AGENT
        a.sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORE_NAMESPACE}})
        b.sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORE_NAMESPACE}})
        a_state = open_state(StateSpec(StateKind.KUBERNETES, namespace=STORE_NAMESPACE), api_client=home)
        b_state = open_state(
            StateSpec(StateKind.KUBERNETES, namespace=STORE_NAMESPACE), api_client=own, history_api_client=home
        )
        stack.callback(a_state.close)
        stack.callback(b_state.close)
        a.store, a.runtime = a_state.store, a_state.runtime
        b.store, b.runtime = b_state.store, b_state.runtime
        yield a, b, b_state


def _jobs(live: Live) -> list[dict[str, Any]]:
    """The JobHistory objects of jobs (not aliases, not the runtime record) on a cluster."""
    items = live.sandbox.store.list(JOB_HISTORIES, namespace=STORE_NAMESPACE).items
    labels = [(o, o["metadata"].get("labels") or {}) for o in items]
    return [o for o, label in labels if label.get(doc.RECORD_LABEL) == doc.RecordKind.JOB]


def test_a_job_relaunched_on_another_cluster_continues_its_one_history(tmp_path: Path) -> None:
    with _fleet(tmp_path) as (a, b, b_state):
        assert "of http" in b_state.location and _identity(a) != _identity(b)
        a.new_controller(demo_aging(), gate=False, pod_namespaces=("team-a", "team-b"))
        b.new_controller(demo_aging(), gate=False, pod_namespaces=("team-a", "team-b"))
        x = group_pod("x", "1", "team-b", "dev-priority", "6")

        # Cluster A: x is preempted, its relaunch aged (+100) and admitted, then preempted again.
        a.apply(x)
        assert a.step().admitted == [X]
        prod = group_pod("train", "2", "team-a", "prod-priority", "7")
        a.apply(prod)
        assert a.step(60).preempted == [X]
        assert a.step().admitted == ["team-a/train-2-fcd1e5cf"]
        a.apply(x)  # SkyPilot's relaunch on A: it waits behind train-2
        a.step(10)
        assert _priority(a) == 200  # dev-priority 100 + one step of 100
        a.sandbox.store.delete("pods", prod["metadata"]["name"], "team-a")
        assert a.step(10).admitted == [X]
        a.apply(group_pod("train", "3", "team-a", "prod-priority", "7"))
        assert a.step(60).preempted == [X]
        assert a.history("1").preemption_count == 2

        # Cluster B: SkyPilot relaunches the job there, behind B's own prod job. B ages the
        # relaunch from A's two preemptions, and counts B's preemption as the third.
        b.clock.advance(a.now() - b.now())  # one wall clock for the fleet, as in production
        busy = group_pod("train", "4", "team-a", "prod-priority", "7")
        b.apply(busy)
        assert b.step().admitted == ["team-a/train-4-fcd1e5cf"]
        b.apply(x)
        b.step(10)
        assert _priority(b) == 300, "aged from A's history: 100 + 200"
        b.sandbox.store.delete("pods", busy["metadata"]["name"], "team-a")
        assert b.step(10).admitted == [X]
        b.apply(group_pod("train", "5", "team-a", "prod-priority", "7"))
        assert b.step(60).preempted == [X]
        assert b.history("1").preemption_count == 3  # continues A's count
        b.step()
        b.apply(x)
        b.step(10)
        assert _priority(b) == 400  # 100 + 300

        history = b.history("1")
        assert history.current_boost == 300
        aged = [s for s in history.steps if s.boost > 0]
        assert [(s.boost, s.cluster) for s in aged] == [(100, _identity(a)), (200, _identity(b)), (300, _identity(b))]
        b_workloads = {s.key.workload_uid for s in aged[1:]}
        sightings = [t for t in history.transitions if t.cause in (TransitionCause.QUEUED, TransitionCause.ADMITTED)]
        assert {t.cluster for t in sightings if t.workload_uid in b_workloads} == {_identity(b)}
        assert {t.cluster for t in sightings} == {_identity(a), _identity(b)}
        # One record of job 1, in the home cluster; B keeps its cursor and heartbeat, no history.
        assert [o["spec"]["job"] for o in _jobs(a) if o["spec"]["job"].startswith("managed-job/1")] == ["managed-job/1"]
        assert _jobs(b) == []
        assert b.runtime.cursors() and b.runtime.cursors() != a.runtime.cursors()
        # The recovery strategy, pointed at the home cluster, reads the same record.
        from sky_kueue.controller.skypilot_plugin import AgingSource  # imports SkyPilot: only here

        source = AgingSource(
            None, f"kubernetes:{STORE_NAMESPACE}", kubeconfig=str(a.sandbox.kubeconfig_path), context=None
        )
        read = source.history(1, "team-b")
        assert read is not None and read.preemption_count == 3 and read.current_boost == 300

        # Everything B asked of the home cluster is allowed by configs/fleet/home's Role.
        (role,) = [d for d in yaml.safe_load_all((FLEET / "home" / "rbac.yaml").read_text()) if d["kind"] == "Role"]
        (rule,) = role["rules"]
        asked = [r.info for r in a.sandbox.requests.records() if r.user_agent.startswith(B_HISTORY_AGENT)]
        assert asked
        for info in asked:
            assert (info.group, info.resource, info.namespace) == ("sky-kueue.io", "jobhistories", STORE_NAMESPACE)
            assert info.verb in rule["verbs"], info
        assert {"get", "list", "update"} <= {info.verb for info in asked}


def test_two_clusters_controllers_writing_one_job_at_once_lose_no_update(tmp_path: Path) -> None:
    """The controllers of A and B (two API clients of the home cluster) record their own
    clusters' sightings, preemptions and steps of one job at the same time: every write lands
    once (compare-and-swap PUTs: a 409 re-reads and re-applies), none is lost."""
    per_cluster = 15
    with ExitStack() as stack:
        (tmp_path / "home").mkdir()
        home = stack.enter_context(live_sandbox(tmp_path / "home", state_kind="kubernetes"))
        job = JobIdentity("team-b", pod_group="x-1-fcd1e5cf", managed_job_id="1", skypilot_owned=True)
        stores = [KubernetesHistoryStore(home.sandbox.api_client(), STORE_NAMESPACE) for _ in ("a", "b")]
        start = threading.Barrier(len(stores))

        def write(store: KubernetesHistoryStore, cluster: str) -> None:
            start.wait()
            for i in range(per_cluster):
                uid = f"{cluster}-w{i}"
                queued = EpisodeKey(uid, 0)
                cause = TransitionCause.QUEUED
                store.record_transition(job, Transition(transition_key(queued, cause), cause, i, uid, cluster))
                store.decide_step(
                    job, StepDecision(queued, "team-b", "x-1-fcd1e5cf", "bounded", 100, i + 0.5, cluster=cluster)
                )
                store.record_preemption(job, PreemptionRecord(EpisodeKey(uid, 1), i + 0.9, "x-1-fcd1e5cf"))

        with ThreadPoolExecutor(max_workers=len(stores)) as pool:
            writers = [pool.submit(write, s, c) for s, c in zip(stores, ("a", "b"), strict=True)]
            for writer in writers:
                writer.result()  # a writer's failure fails the test

        history = home.store.load("managed-job/1")
        assert history is not None
        assert history.preemption_count == 2 * per_cluster
        assert sorted((s.cluster, s.key.workload_uid) for s in history.steps) == sorted(
            (c, f"{c}-w{i}") for c in ("a", "b") for i in range(per_cluster)
        )
        queued = [t for t in history.transitions if t.cause is TransitionCause.QUEUED]
        assert {(t.cluster, t.workload_uid) for t in queued} == {
            (c, f"{c}-w{i}") for c in ("a", "b") for i in range(per_cluster)
        }
        assert sum(s.write_stats().conflicts for s in stores) > 0, "the writers never raced; the test proves nothing"


def test_a_member_clusters_deployment_keeps_its_history_in_the_home_cluster() -> None:
    """``kubectl apply -k configs/fleet/member``: the controller of configs/controller, with
    ``--state-kubeconfig`` naming the home cluster's kubeconfig, mounted from its Secret."""
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    rendered = subprocess.run(
        [kubectl, "kustomize", str(FLEET / "member")],
        capture_output=True,
        text=True,
        check=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
    ).stdout
    (deployment,) = [d for d in yaml.safe_load_all(rendered) if d and d["kind"] == "Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    from sky_kueue.cli.controller_cmd import run

    params = run.make_context("run", list(container["args"]), resilient_parsing=False).params
    assert params["state_text"] == "kubernetes" and params["in_cluster"] is True
    path = Path(params["state_kubeconfig"])
    (mount,) = [m for m in container["volumeMounts"] if m["name"] == "history-kubeconfig"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "history-kubeconfig"]
    assert path.parent == Path(mount["mountPath"]) and mount["readOnly"] is True
    assert volume["secret"]["secretName"] == "sky-kueue-history-kubeconfig" and path.name == "kubeconfig"

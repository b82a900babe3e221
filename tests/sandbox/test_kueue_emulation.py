"""The sandbox behaves like Kueue toward clients: the seed flow, Jobs, priority, run time.

The seed flow is driven through the official ``kubernetes`` client over HTTP, with the
emulator running on its own thread, and observed through a watch, as the mirror and the
controller will observe a real cluster.
"""

from __future__ import annotations

import datetime
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, watch

from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.sandbox import Sandbox, SandboxError

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SEED = ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"
GROUP, VERSION, WORKLOADS = "kueue.x-k8s.io", "v1beta2", "workloads"
WAIT_SECONDS = 20


def seed_setup() -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(SEED.read_text()) if d and d["kind"] != "Workload"]


def group_pod(
    name: str,
    ns: str,
    queue: str,
    group: str,
    priority_class: str,
    cpu: str,
    gpus: str | None = None,
    run_seconds: str | None = None,
) -> dict[str, Any]:
    requests = {"cpu": cpu}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
        limits["nvidia.com/gpu"] = gpus
    annotations = {"kueue.x-k8s.io/pod-group-total-count": "1", "kueue.x-k8s.io/retriable-in-group": "false"}
    if run_seconds:
        annotations["sandbox.sky-kueue.io/run-seconds"] = run_seconds
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                "kueue.x-k8s.io/queue-name": queue,
                "kueue.x-k8s.io/pod-group-name": group,
                "kueue.x-k8s.io/priority-class": priority_class,
                "skypilot-cluster-name": group,
            },
            "annotations": annotations,
        },
        "spec": {
            "containers": [{"name": "ray", "image": "ray", "resources": {"requests": requests, "limits": limits}}]
        },
    }


@pytest.fixture
def live() -> Iterator[Sandbox]:
    with Sandbox(time_scale=1.0, step_interval_seconds=0.02) as sandbox:
        sandbox.apply(seed_setup())
        yield sandbox


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {
        c["type"]: (c["status"], c.get("reason", ""), c.get("message", ""))
        for c in (obj.get("status") or {}).get("conditions") or []
    }


def test_seed_flow_over_the_official_client(live: Sandbox) -> None:
    api = live.api_client()
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    seen: list[dict[str, Any]] = []
    done = threading.Event()

    def observe() -> None:
        stream = watch.Watch()
        for event in stream.stream(
            custom.list_cluster_custom_object, GROUP, VERSION, WORKLOADS, timeout_seconds=WAIT_SECONDS
        ):
            seen.append({"type": event["type"], "object": event["object"]})
            obj = event["object"]
            if obj["metadata"]["name"] == "prod" and _conditions(obj).get("Admitted", ("",))[0] == "True":
                done.set()
                stream.stop()

    watcher = threading.Thread(target=observe)
    watcher.start()
    assert live.server.wait_for_watches(1, WAIT_SECONDS)

    core.create_namespaced_pod("team-b", group_pod("dev-head", "team-b", "team-b-lq", "dev", "dev-priority", "5"))
    for _ in range(int(WAIT_SECONDS / 0.05)):
        pod = core.read_namespaced_pod("dev-head", "team-b")
        if not pod.spec.scheduling_gates:
            break
        threading.Event().wait(0.05)
    assert not pod.spec.scheduling_gates, "the admission gate of team-b's pod was not removed"
    dev = custom.get_namespaced_custom_object(GROUP, VERSION, "team-b", WORKLOADS, "dev")
    assert dev["spec"]["priority"] == 100
    assert dev["status"]["admission"]["clusterQueue"] == "team-b-cq"

    core.create_namespaced_pod(
        "team-a", group_pod("prod-head", "team-a", "team-a-lq", "prod", "prod-priority", "7", gpus="2")
    )
    assert done.wait(WAIT_SECONDS), "team-a was not admitted"
    watcher.join(WAIT_SECONDS)

    dev_states = [e["object"] for e in seen if e["object"]["metadata"]["name"] == "dev"]
    preempted = [o for o in dev_states if _conditions(o).get("Preempted", ("",))[0] == "True"]
    assert preempted, "team-b's Workload never showed Preempted=True"
    conds = _conditions(preempted[-1])
    assert conds["Evicted"][:2] == ("True", "Preempted")
    assert conds["Preempted"][1] == "InCohortReclaimWhileBorrowing"
    prod_uid = custom.get_namespaced_custom_object(GROUP, VERSION, "team-a", WORKLOADS, "prod")["metadata"]["uid"]
    assert f"(UID: {prod_uid}, JobUID: UNKNOWN)" in conds["Preempted"][2]
    assert "preemptor path: /team-ab/team-a-cq; preemptee path: /team-ab/team-b-cq" in conds["Preempted"][2]
    assert any(_conditions(o).get("Finished", ("",))[0] == "True" for o in dev_states)
    assert preempted[-1]["status"]["schedulingStats"]["evictions"] == [{"reason": "Preempted", "count": 1}]
    assert any(e["type"] == "DELETED" and e["object"]["metadata"]["name"] == "dev" for e in seen)
    with pytest.raises(client.ApiException) as gone:
        core.read_namespaced_pod("dev-head", "team-b")
    assert gone.value.status == 404


def _manual(priority_boost: bool = False) -> tuple[Sandbox, ManualClock]:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    return Sandbox(clock=clock, run_emulator=False, priority_boost=priority_boost), clock


def test_run_seconds_finish_the_group_and_free_its_quota() -> None:
    sandbox, clock = _manual()
    with sandbox:
        sandbox.apply(seed_setup())
        sandbox.apply(group_pod("a-head", "team-b", "team-b-lq", "a", "dev-priority", "6", run_seconds="600"))
        assert sandbox.step().admitted == ["team-b/a"]
        sandbox.apply(group_pod("b-head", "team-b", "team-b-lq", "b", "dev-priority", "6"))
        assert sandbox.step().admitted == []  # b waits: 6 + 6 > 10
        clock.advance(601)
        later = sandbox.step()
        assert later.finished == ["team-b/a"]
        assert later.admitted == ["team-b/b"]
        finished = sandbox.store.get("workloads.kueue.x-k8s.io", "a", "team-b")
        assert _conditions(finished)["Finished"] == ("True", "Succeeded", "Pods succeeded: 1/1.")


def test_a_job_is_suspended_admitted_and_requeued_on_preemption() -> None:
    sandbox, _ = _manual()
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-b",
            "labels": {"kueue.x-k8s.io/queue-name": "team-b-lq", "kueue.x-k8s.io/priority-class": "dev-priority"},
        },
        "spec": {
            "parallelism": 1,
            "template": {
                "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "5"}}}]}
            },
        },
    }
    with sandbox:
        sandbox.apply(seed_setup())
        stored = sandbox.apply(job)[0]
        assert stored["spec"]["suspend"] is True  # Kueue's webhook
        report = sandbox.step()
        (name,) = [k.split("/")[1] for k in report.admitted]
        assert name.startswith("job-train-") and len(name) == len("job-train-") + 5
        assert sandbox.store.get("jobs.batch", "train", "team-b")["spec"]["suspend"] is False
        sandbox.apply(group_pod("prod-head", "team-a", "team-a-lq", "prod", "prod-priority", "7", gpus="2"))
        report = sandbox.step()
        assert report.preempted == [f"team-b/{name}"]
        assert sandbox.store.get("jobs.batch", "train", "team-b")["spec"]["suspend"] is True
        wl = sandbox.store.get("workloads.kueue.x-k8s.io", name, "team-b")
        conds = _conditions(wl)
        assert conds["Requeued"][:2] == ("True", "Preempted")
        assert conds["QuotaReserved"][:2] == ("False", "PendingEvaluation")
        assert "admission" not in wl["status"]
        assert sandbox.step().admitted == ["team-a/prod"]


def test_raising_a_pending_workloads_priority_reorders_the_queue() -> None:
    sandbox, _ = _manual()
    with sandbox:
        sandbox.apply(seed_setup())
        sandbox.apply(group_pod("big-head", "team-b", "team-b-lq", "big", "dev-priority", "8"))
        assert sandbox.step().admitted == ["team-b/big"]
        for name in ("first", "second"):
            sandbox.apply(group_pod(f"{name}-head", "team-b", "team-b-lq", name, "dev-priority", "4"))
        sandbox.step()  # both pending: only 2 cpu left
        sandbox.store.patch("workloads.kueue.x-k8s.io", "second", {"spec": {"priority": 500}}, "team-b")
        sandbox.store.delete("pods", "big-head", "team-b")  # the user tears the big job down
        reports = [sandbox.step() for _ in range(3)]
        assert reports[0].finished == ["team-b/big"]
        admitted = [k for r in reports for k in r.admitted]
        assert admitted == ["team-b/second", "team-b/first"]


def test_priority_boost_annotation_counts_only_with_the_gate() -> None:
    for gate, expected in ((True, "team-b/boosted"), (False, "team-b/plain")):
        sandbox, clock = _manual(priority_boost=gate)
        with sandbox:
            sandbox.apply(seed_setup())
            sandbox.apply(group_pod("blocker-head", "team-b", "team-b-lq", "blocker", "dev-priority", "10"))
            assert sandbox.step().admitted == ["team-b/blocker"]
            sandbox.apply(group_pod("plain-head", "team-b", "team-b-lq", "plain", "dev-priority", "6"))
            sandbox.step()
            clock.advance(60)  # "boosted" is newer: without a boost it queues behind "plain"
            sandbox.apply(group_pod("boosted-head", "team-b", "team-b-lq", "boosted", "dev-priority", "6"))
            sandbox.step()
            sandbox.store.patch(
                "workloads.kueue.x-k8s.io",
                "boosted",
                {"metadata": {"annotations": {"kueue.x-k8s.io/priority-boost": "50"}}},
                "team-b",
            )
            sandbox.store.delete("pods", "blocker-head", "team-b")
            assert sandbox.step().admitted == [expected], json.dumps({"gate": gate})


def test_apply_reports_bad_manifests_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: d}\n")
    sandbox, _ = _manual()
    with sandbox, pytest.raises(SandboxError, match="PodDisruptionBudget policy/v1: not served by the sandbox"):
        sandbox.apply(bad)

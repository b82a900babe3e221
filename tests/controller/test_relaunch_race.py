"""The relaunch race (``docs/kueue.md`` §2): SkyPilot's new pods meet the finished Workload.

The emulated Kueue, like the real one, matches new pods of a group to an existing finished
Workload of the same name, adds them as its owners and never ungates them. The test builds
that state the way it arises on a cluster (the preempted Workload not yet collected when the
relaunch's pods are created), shows that without the controller the job hangs, then starts
the controller: it records the preemption the finished Workload still shows, deletes it with
a UID precondition, and Kueue creates a fresh Workload that is aged and admitted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sky_kueue.controller.events import ControllerEventKind
from sky_kueue.controller.relaunch import ADMISSION_GATE, stale_workload

from .builders import rfc3339
from .live_support import WORKLOADS, demo_aging, group_pod, live_sandbox

GROUP = "dev-1-fcd1e5cf"


def _finished_preempted_workload(preemptor_uid: str, at: str) -> tuple[dict[str, Any], dict[str, Any]]:
    message = (
        f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: UNKNOWN) due to reclamation within "
        "the cohort while borrowing; preemptor path: /team-ab/team-a-cq; preemptee path: /team-ab/team-b-cq"
    )
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": GROUP,
            "namespace": "team-b",
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
        },
        "spec": {
            "queueName": "team-b-lq",
            "priority": 100,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "dev-priority"},
            "podSets": [
                {
                    "name": "a1b2c3d4",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "ray", "resources": {"requests": {"cpu": "5"}}}]}},
                }
            ],
        },
    }
    status = {
        "conditions": [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": message,
                "lastTransitionTime": at,
            },
            {"type": "Evicted", "status": "True", "reason": "Preempted", "message": message, "lastTransitionTime": at},
            {
                "type": "Preempted",
                "status": "True",
                "reason": "InCohortReclaimWhileBorrowing",
                "message": message,
                "lastTransitionTime": at,
            },
            {
                "type": "Finished",
                "status": "True",
                "reason": "Succeeded",
                "message": "Pods succeeded: 0/1.",
                "lastTransitionTime": at,
            },
        ],
        "schedulingStats": {"evictions": [{"reason": "Preempted", "count": 1}]},
    }
    return workload, status


def test_a_finished_workload_holding_new_pods_is_deleted_and_the_job_runs(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        store = live.sandbox.store
        prod = group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2")
        live.sandbox.apply(prod)
        live.sandbox.step()  # team-a's prod job runs (7 of the cohort's 10 CPUs)
        prod_uid = store.get(WORKLOADS, "train-2-fcd1e5cf", "team-a")["metadata"]["uid"]

        # The preempted Workload of team-b's job, not yet garbage-collected...
        manifest, status = _finished_preempted_workload(prod_uid, rfc3339(live.now()))
        stale = store.create(WORKLOADS, manifest, "team-b")
        store.mutate(WORKLOADS, GROUP, lambda obj: obj.update(status=status), "team-b", subresource="status")
        # ...when SkyPilot relaunches: new pods of the same group.
        live.clock.advance(20)
        live.sandbox.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.sandbox.store.delete("pods", prod["metadata"]["name"], "team-a")  # capacity frees up
        for _ in range(3):
            live.sandbox.step()
        adopted = store.get(WORKLOADS, GROUP, "team-b")
        assert adopted["metadata"]["uid"] == stale["metadata"]["uid"]  # Kueue matched the pods to it
        pod = store.get("pods", f"{GROUP}-head", "team-b")
        assert any(g["name"] == ADMISSION_GATE for g in pod["spec"]["schedulingGates"])  # stuck
        assert stale_workload(adopted, [pod]) is not None

        live.new_controller(demo_aging())  # the controller starts and sees the race at once
        deleted = [e for e in live.recorder.snapshot() if e.kind is ControllerEventKind.STALE_DELETED]
        assert [e.stale.uid for e in deleted if e.stale is not None] == [stale["metadata"]["uid"]]
        assert live.history("1").preemptions[0].key.workload_uid == stale["metadata"]["uid"]

        report = live.step(10)  # Kueue creates a fresh Workload for the waiting pods
        assert report.created == [f"team-b/{GROUP}"]
        fresh = live.workload("team-b", GROUP)
        assert fresh is not None and fresh["metadata"]["uid"] != stale["metadata"]["uid"]
        assert fresh["spec"]["priority"] == 200  # aged by the recorded preemption
        live.step(10)
        admitted = live.workload("team-b", GROUP)
        assert admitted is not None
        conditions = {c["type"]: c["status"] for c in admitted["status"]["conditions"]}
        assert conditions["Admitted"] == "True"
        assert not store.get("pods", f"{GROUP}-head", "team-b")["spec"].get("schedulingGates")


def test_a_finished_workload_without_new_pods_is_left_to_the_garbage_collector() -> None:
    workload, status = _finished_preempted_workload("prod-uid", "2026-01-01T12:00:00Z")
    workload["metadata"]["uid"] = "old"
    workload["status"] = status
    old_pod = group_pod("dev", "1", "team-b", "dev-priority", "5")
    old_pod["status"] = {"phase": "Failed"}
    assert stale_workload(workload, []) is None
    assert stale_workload(workload, [old_pod]) is None  # terminated: not a relaunch
    gated = group_pod("dev", "1", "team-b", "dev-priority", "5")
    gated["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    verdict = stale_workload(workload, [gated])
    assert verdict is not None and verdict.uid == "old" and verdict.waiting_pods == (f"{GROUP}-head",)
    someone_elses = group_pod("dev", "1", "team-b", "dev-priority", "5")
    someone_elses["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]
    someone_elses["metadata"]["labels"] = {"kueue.x-k8s.io/pod-group-name": GROUP}
    someone_elses["metadata"]["annotations"] = {}
    assert stale_workload(workload, [someone_elses]) is None  # not SkyPilot's, not unretriable

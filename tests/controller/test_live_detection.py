"""Detection through the sandbox: every eviction kind reaches the history, only preemptions count.

The preemption is produced by the Kueue emulation itself (team-a's prod job reclaims the
cohort CPU team-b borrows). The other evictions are not emulated, so the test writes them
through the official client exactly as Kueue's controllers write them (``Evicted`` reason
and message, ``QuotaReserved=False``, ``schedulingStats``; ``docs/kueue.md`` §1.2); the
controller sees them over its watch like any other change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client

from sky_kueue.controller.detection import DetectionKind

from .builders import rfc3339
from .live_support import EPOCH, demo_aging, group_pod, live_sandbox

GROUP, VERSION = "kueue.x-k8s.io", "v1beta2"

#: Evicted reason -> (message Kueue writes, underlying cause in schedulingStats).
OTHER_EVICTIONS: dict[str, tuple[str, str | None]] = {
    "PodsReadyTimeout": ("Exceeded the PodsReady timeout team-b/{name}", "WaitForStart"),
    "InactiveWorkload": ("The workload is deactivated", None),
    "DeactivatedDueToRequeuingLimitExceeded": (
        "The workload is deactivated due to exceeding the maximum number of re-queuing retries",
        None,
    ),
    "AdmissionCheck": ("At least one admission check is false", None),
    "ClusterQueueStopped": ("The ClusterQueue is stopped", None),
}


def _evicted_status(current: dict[str, Any], reason: str, message: str, cause: str | None, at: str) -> dict[str, Any]:
    status = dict(current.get("status") or {})
    conditions = [
        c for c in status.get("conditions") or [] if c["type"] not in ("Evicted", "QuotaReserved", "Admitted")
    ]
    conditions += [
        {"type": "Evicted", "status": "True", "reason": reason, "message": message, "lastTransitionTime": at},
        {"type": "QuotaReserved", "status": "False", "reason": "Pending", "message": message, "lastTransitionTime": at},
        {"type": "Admitted", "status": "False", "reason": "NoReservation", "message": "", "lastTransitionTime": at},
    ]
    entry: dict[str, Any] = {"reason": reason, "count": 1}
    if cause:
        entry["underlyingCause"] = cause
    status.update(conditions=conditions, schedulingStats={"evictions": [entry]})
    status.pop("admission", None)
    return {"status": status}


def test_a_kueue_preemption_is_recorded_once_with_reason_and_preemptor(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        live.new_controller(demo_aging())
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == ["team-b/dev-1-fcd1e5cf"]
        live.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2"))
        report = live.step(60)
        assert report.preempted == ["team-b/dev-1-fcd1e5cf"]
        prod = live.workload("team-a", "train-2-fcd1e5cf")
        assert prod is not None
        live.step()  # the preemptor is admitted one cycle later

        history = live.history("1")
        (preemption,) = history.preemptions
        assert preemption.reason == "InCohortReclaimWhileBorrowing"
        assert preemption.preemptor_uid == prod["metadata"]["uid"]
        assert preemption.preemptor_priority == 1000  # resolved through the prod-priority class
        assert preemption.at == (EPOCH.timestamp() + 60)
        assert history.evictions == ()
        # The Workload of an unretriable group finished ("Pods succeeded: 0/1.") and was collected:
        # the controller saw the preemption anyway, and never took the Finished for a completion.
        assert live.workload("team-b", "dev-1-fcd1e5cf") is None
        kinds = [e.detection.kind for e in live.recorder.snapshot() if e.detection is not None]
        assert DetectionKind.PREEMPTED in kinds
        assert live.history("2").preemptions == ()


def test_other_evictions_are_recorded_and_never_counted_or_aged(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        live.new_controller(demo_aging())
        custom = client.CustomObjectsApi(live.sandbox.api_client())
        names = {}
        for index, reason in enumerate(OTHER_EVICTIONS, start=1):
            pod = group_pod("job", str(index), "team-b", "dev-priority", "1")
            names[reason] = pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
            live.apply(pod)
        admitted = [key for _ in OTHER_EVICTIONS for key in live.step().admitted]  # one head per cycle
        assert len(admitted) == len(OTHER_EVICTIONS)

        live.clock.advance(30)
        at = rfc3339(live.now())
        for reason, (message, cause) in OTHER_EVICTIONS.items():
            name = names[reason]
            current = custom.get_namespaced_custom_object(GROUP, VERSION, "team-b", "workloads", name)
            body = _evicted_status(current, reason, message.format(name=name), cause, at)
            custom.patch_namespaced_custom_object_status(GROUP, VERSION, "team-b", "workloads", name, body)
        live.settle()

        for index, reason in enumerate(OTHER_EVICTIONS, start=1):
            history = live.history(str(index))
            assert history.preemptions == (), reason
            (eviction,) = history.evictions
            assert eviction.reason == reason
            assert eviction.kind == {
                "InactiveWorkload": "Deactivated",
                "DeactivatedDueToRequeuingLimitExceeded": "Deactivated",
            }.get(reason, reason)
            if reason == "PodsReadyTimeout":
                assert eviction.underlying_cause == "WaitForStart"
            # Pending again, but nothing to age: no boost was decided for any episode.
            assert all(step.boost == 0 for step in history.steps), reason
            workload = live.workload("team-b", names[reason])
            assert workload is not None and workload["spec"]["priority"] == 100

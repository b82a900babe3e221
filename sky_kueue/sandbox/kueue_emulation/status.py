"""Workload status exactly as Kueue writes it (``pkg/workload``, ``pkg/scheduler``).

Pure functions that change a Workload's ``status`` dict in place: the conditions with
Kueue's types, reasons and messages (a condition's ``lastTransitionTime`` moves only when its
status flips, as ``meta.SetStatusCondition`` does), ``status.admission`` and the eviction
counters in ``status.schedulingStats``.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
FINISHED = "Finished"
WAITING_FOR_REPLACEMENT_PODS = "WaitingForReplacementPods"

#: Human-readable preemption reasons used in the Preempted message (``preemption.go``).
HUMAN_READABLE_REASONS = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}
#: Kueue truncates condition messages to this length.
MAX_CONDITION_MESSAGE_CHARS = 32 * 1024


def set_condition(status: Obj, ctype: str, value: str, reason: str, message: str, now: str) -> bool:
    """Set a condition; returns whether anything changed."""
    message = message[:MAX_CONDITION_MESSAGE_CHARS]
    conditions: list[Obj] = status.setdefault("conditions", [])
    for cond in conditions:
        if cond.get("type") == ctype:
            changed = False
            if cond.get("status") != value:
                cond["status"] = value
                cond["lastTransitionTime"] = now
                changed = True
            for key, new in (("reason", reason), ("message", message)):
                if cond.get(key) != new:
                    cond[key] = new
                    changed = True
            return changed
    conditions.append({"type": ctype, "status": value, "reason": reason, "message": message, "lastTransitionTime": now})
    return True


def condition(status: Obj, ctype: str) -> Obj | None:
    cond: Obj
    for cond in status.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond
    return None


def is_true(status: Obj, ctype: str) -> bool:
    cond = condition(status, ctype)
    return cond is not None and cond.get("status") == "True"


def preemption_message(
    preemptor_uid: str, preemptor_job_uid: str, reason: str, preemptor_path: str, preemptee_path: str
) -> str:
    """The Preempted/Evicted condition message naming the preemptor (``preemptionMessage``)."""
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid or 'UNKNOWN'}, "
        f"JobUID: {preemptor_job_uid or 'UNKNOWN'}) due to {HUMAN_READABLE_REASONS.get(reason, 'UNKNOWN')}; "
        f"preemptor path: {preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}"
    )


def pending(status: Obj, reason: str, message: str, now: str) -> bool:
    return set_condition(status, QUOTA_RESERVED, "False", reason or "Pending", message, now)


def _previously(status: Obj, ctype: str, now: str) -> None:
    cond = condition(status, ctype)
    if cond is not None and cond.get("status") == "True":
        set_condition(status, ctype, "False", QUOTA_RESERVED, f"Previously: {cond.get('message', '')}", now)


def admit(status: Obj, admission: Obj, cluster_queue: str, now: str) -> None:
    """Quota reserved and admitted (no admission checks), as the scheduler writes it."""
    status["admission"] = admission
    set_condition(
        status, QUOTA_RESERVED, "True", QUOTA_RESERVED, f"Quota reserved in ClusterQueue {cluster_queue}", now
    )
    set_condition(status, ADMITTED, "True", ADMITTED, "The workload is admitted", now)
    _previously(status, EVICTED, now)
    _previously(status, PREEMPTED, now)
    status.pop("requeueState", None)


def evict(status: Obj, reason: str, message: str, now: str) -> None:
    """``Evicted=True/<reason>`` and the eviction counter (``workload.Evict``)."""
    set_condition(status, EVICTED, "True", reason, message, now)
    stats = status.setdefault("schedulingStats", {})
    evictions: list[Obj] = stats.setdefault("evictions", [])
    for entry in evictions:
        if entry.get("reason") == reason:
            entry["count"] = int(entry.get("count", 0)) + 1
            return
    evictions.append({"reason": reason, "count": 1})


def deactivate(status: Obj, now: str) -> None:
    """``spec.active: false``: evicted as ``Deactivated``, any requeue backoff cleared."""
    evict(status, "Deactivated", "The workload is deactivated", now)
    status.pop("requeueState", None)


def evict_for_preemption(status: Obj, reason: str, message: str, now: str) -> None:
    """``Evicted=True/Preempted`` + ``Preempted=True/<reason>`` and the eviction counter."""
    evict(status, "Preempted", message, now)
    set_condition(status, PREEMPTED, "True", reason, message, now)


def release_quota_after_eviction(status: Obj, message: str, now: str, requeue: bool = True) -> None:
    """The job stopped: the quota is released and the workload goes back to the queue."""
    status.pop("admission", None)
    set_condition(status, QUOTA_RESERVED, "False", "PendingEvaluation", message, now)
    set_condition(status, ADMITTED, "False", "NoReservation", "The workload has no reservation", now)
    if requeue:
        set_condition(status, REQUEUED, "True", "Preempted", message, now)


def finish(status: Obj, reason: str, message: str, now: str) -> None:
    set_condition(status, FINISHED, "True", reason, message, now)

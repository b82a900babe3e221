"""What the controller tells others: observers (the demo's timeline, tests, the benchmark),
the log, and the users' hooks (:mod:`sky_kueue.hooks`).

Why one place: every reconcile that changed something is reported the same three ways, and
a replayed (stale) snapshot never reaches the users' hooks, since they heard of it when it
happened.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from sky_kueue import hooks
from sky_kueue.controller.actuators import ActuationOutcome
from sky_kueue.controller.detection import Detection
from sky_kueue.controller.engine import FactKind, ReconcileOutcome
from sky_kueue.controller.relaunch import StaleWorkload

log = logging.getLogger(__name__)


class ControllerEventKind(str, Enum):
    RECONCILED = "reconciled"
    STALE_DELETED = "stale-workload-deleted"
    SESSION_STARTED = "session-started"
    SESSION_ENDED = "session-ended"
    #: The API server's state went back (``detail``: the reset's reason, see
    #: :class:`~sky_kueue.mirror.server_state.ResetReason`).
    STATE_WENT_BACK = "state-went-back"
    #: A Workload vanished while the state went back; ``detail``: how it ended as far as
    #: what remains tells (:class:`~sky_kueue.controller.vanished.EndOutcome`).
    UNOBSERVED_END = "unobserved-end"


@dataclass(frozen=True)
class ControllerEvent:
    """What the controller just did, for observers (demo timeline, benchmark)."""

    kind: ControllerEventKind
    at: float
    workload: Mapping[str, Any] | None = None
    detection: Detection | None = None
    outcome: ReconcileOutcome | None = None
    replay: bool = False
    stale: StaleWorkload | None = None
    detail: str = ""
    #: The Workload's ClusterQueue (where it holds quota, else its LocalQueue's), None when
    #: unknown: the ``cluster_queue`` label Kueue's own metrics carry.
    cluster_queue: str | None = None
    #: The pods of the Workload's group as mirrored (the run time the policy wrote on them).
    pods: tuple[Mapping[str, Any], ...] = ()


Observer = Callable[[ControllerEvent], None]


def workload_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def workload_uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def outcome_applied(outcome: ReconcileOutcome | None) -> bool:
    """The reconcile patched a Workload (an aging step reached the cluster)."""
    return (
        outcome is not None
        and outcome.actuation is not None
        and outcome.actuation.outcome is ActuationOutcome.APPLIED
        and outcome.patch is not None
    )


def notify_user_hooks(obj: Mapping[str, Any], detection: Detection, outcome: ReconcileOutcome) -> None:
    """Tell the users' ``sky_kueue.on_preempted``/``on_resubmitted``/``on_burst`` callbacks."""
    job, key, uid = outcome.job_key, workload_key(obj), workload_uid(obj)
    eviction = detection.eviction
    if eviction is not None and outcome.recorded_any(FactKind.PREEMPTION):
        preemptor = eviction.preemptor
        reason = eviction.preemption_reason.value if eviction.preemption_reason else eviction.reason
        hooks.emit(hooks.Preempted(job, key, uid, reason, preemptor.workload_uid if preemptor else None, eviction.at))
    if outcome_applied(outcome) and outcome.step:
        hooks.emit(hooks.Resubmitted(job, key, uid, outcome.step.boost, outcome.step.key.token))
    if outcome.burst is not None:
        hooks.emit(hooks.Burst(job, key, uid, outcome.burst.detail))


def log_reconcile(obj: Mapping[str, Any], detection: Detection, outcome: ReconcileOutcome, *, replay: bool) -> bool:
    """Logs a reconcile that changed something (one ``reconciled`` line); returns whether it did."""
    if not (outcome.recorded or outcome.actuation is not None or outcome.burst is not None or outcome.patch):
        return False
    fields: dict[str, Any] = {
        "job": outcome.job_key,
        "workload": workload_key(obj),
        "uid": workload_uid(obj),
        "kind": detection.kind.value,
        "recorded": [str(fact) for fact in outcome.recorded],
    }
    if replay:
        fields["replay"] = True
    if outcome.step is not None:
        fields.update(step=outcome.step.key.token, boost=outcome.step.boost, state=outcome.step.state.value)
    if outcome.patch is not None:
        fields["patch"] = outcome.patch.summary
    if outcome.actuation is not None:
        fields["actuation"] = outcome.actuation.outcome.value
    if outcome.burst is not None:
        fields["burst"] = outcome.burst.detail
    if outcome.notes:
        fields["notes"] = list(outcome.notes)
    log.info("reconciled %s", workload_key(obj), extra={"fields": fields})
    return True


@dataclass
class Recorder:
    """An observer that keeps every event (tests, demo)."""

    events: list[ControllerEvent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: ControllerEvent) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[ControllerEvent]:
        with self._lock:
            return list(self.events)

"""Callbacks users register for what happens to their jobs after submission.

The resubmission controller calls :func:`emit` when it sees a SkyPilot job preempted by
Kueue, when it resubmits (ages) one, and when it decides to burst one to a cloud; users
subscribe with the decorators :func:`on_preempted`, :func:`on_resubmitted` and
:func:`on_burst` (``sky_kueue.on_preempted`` etc.). A failing callback is logged and never
stops the controller or the other callbacks.

Each callback receives a frozen dataclass (:class:`Preempted`, :class:`Resubmitted`,
:class:`Burst`): typed fields (``event.job``, ``event.boost``), and
``dataclasses.asdict(event)`` (or :meth:`JobEvent.to_json`) for JSON.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

LOG = logging.getLogger(__name__)


class HookEvent(str, enum.Enum):
    PREEMPTED = "preempted"
    RESUBMITTED = "resubmitted"
    BURST = "burst"


@dataclass(frozen=True)
class JobEvent:
    """What every hook payload says: whose job, and which Workload.

    Attributes:
        job: the controller's job key (``managed-job/<id>`` or ``pod-group/<ns>/<name>``).
        workload: ``namespace/name`` of the Workload.
        uid: the Workload's UID.
    """

    event: ClassVar[HookEvent]

    job: str | None
    workload: str
    uid: str

    def to_json(self) -> dict[str, Any]:
        return {"event": self.event.value, **dataclasses.asdict(self)}


@dataclass(frozen=True)
class Preempted(JobEvent):
    """Kueue preempted the job's Workload.

    Attributes:
        reason: Kueue's ``Preempted`` reason (``InClusterQueue``, ``InCohortReclamation``, ...).
        preemptor: the preemptor Workload's UID, when Kueue's message named it.
        time: when it happened (POSIX seconds), when Kueue's condition said.
    """

    event: ClassVar[HookEvent] = HookEvent.PREEMPTED

    reason: str
    preemptor: str | None
    time: float | None


@dataclass(frozen=True)
class Resubmitted(JobEvent):
    """The relaunched job's Workload was given an aged priority (``boost`` above its base)."""

    event: ClassVar[HookEvent] = HookEvent.RESUBMITTED

    boost: int
    #: The aging step's idempotency key (``<uid>#<evictions>``).
    step: str


@dataclass(frozen=True)
class Burst(JobEvent):
    """The job was marked for cloud fallback; ``detail`` says where and why."""

    event: ClassVar[HookEvent] = HookEvent.BURST

    detail: str


HookPayload = Preempted | Resubmitted | Burst
Callback = Callable[[Any], None]

_lock = threading.Lock()
_callbacks: dict[HookEvent, list[Callback]] = {event: [] for event in HookEvent}


def register(event: HookEvent, callback: Callback) -> Callable[[], None]:
    """Subscribe ``callback`` to ``event``; returns a function that unsubscribes it."""
    with _lock:
        _callbacks[event].append(callback)

    return lambda: unregister(event, callback)


def unregister(event: HookEvent, callback: Callback) -> None:
    """Unsubscribe ``callback`` from ``event`` (no error if it was not subscribed)."""
    with _lock:
        if callback in _callbacks[event]:
            _callbacks[event].remove(callback)


def on_preempted(callback: Callback) -> Callback:
    """Decorator: ``callback(event: Preempted)`` runs when Kueue preempts one of your SkyPilot jobs."""
    register(HookEvent.PREEMPTED, callback)
    return callback


def on_resubmitted(callback: Callback) -> Callback:
    """Decorator: ``callback(event: Resubmitted)`` runs when a preempted job is resubmitted aged."""
    register(HookEvent.RESUBMITTED, callback)
    return callback


def on_burst(callback: Callback) -> Callback:
    """Decorator: ``callback(event: Burst)`` runs when a job is marked for cloud fallback."""
    register(HookEvent.BURST, callback)
    return callback


def emit(payload: HookPayload) -> int:
    """Call every callback subscribed to the payload's event; returns how many ran without error."""
    with _lock:
        callbacks = list(_callbacks[payload.event])
    ok = 0
    for callback in callbacks:
        try:
            callback(payload)
            ok += 1
        except Exception:  # a user's callback must never break the controller: log it, go on
            LOG.exception("sky-kueue %s hook %r failed", payload.event.value, callback)
    return ok

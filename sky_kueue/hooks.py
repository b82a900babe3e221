"""Callbacks users register for what happens to their jobs after submission.

The resubmission controller calls :func:`emit` when it sees a SkyPilot job preempted by
Kueue, when it resubmits (ages) one, and when it decides to burst one to a cloud; users
subscribe with the decorators :func:`on_preempted`, :func:`on_resubmitted` and
:func:`on_burst` (``sky_kueue.on_preempted`` etc.). A failing callback is logged and never
stops the controller or the other callbacks.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

LOG = logging.getLogger(__name__)

Callback = Callable[[Mapping[str, Any]], None]


class HookEvent(str, enum.Enum):
    PREEMPTED = "preempted"
    RESUBMITTED = "resubmitted"
    BURST = "burst"


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
    """Decorator: ``callback(event)`` runs when Kueue preempts one of your SkyPilot jobs.

    ``event`` has ``job``, ``workload``, ``reason``, ``preemptor`` and ``time``.
    """
    register(HookEvent.PREEMPTED, callback)
    return callback


def on_resubmitted(callback: Callback) -> Callback:
    """Decorator: runs when a preempted job is resubmitted with an aged priority (``boost``, ``step``)."""
    register(HookEvent.RESUBMITTED, callback)
    return callback


def on_burst(callback: Callback) -> Callback:
    """Decorator: runs when a job is marked for cloud fallback (``clouds``, ``reason``)."""
    register(HookEvent.BURST, callback)
    return callback


def emit(event: HookEvent, payload: Mapping[str, Any]) -> int:
    """Call every callback subscribed to ``event``; returns how many ran without error."""
    with _lock:
        callbacks = list(_callbacks[event])
    ok = 0
    for callback in callbacks:
        try:
            callback(payload)
            ok += 1
        except Exception:  # a user's callback must never break the controller: log it, go on
            LOG.exception("sky-kueue %s hook %r failed", event.value, callback)
    return ok

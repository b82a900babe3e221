"""Whether the controller that wrote the last heartbeat is still running.

Why: the heartbeat (:class:`sky_kueue.controller.runtime_state.Heartbeat`) records who wrote
last and whether it led. A controller that shut down writes a last beat as a non-leader, and
one that crashed simply stops writing; ``controller status`` read both as a live "follower",
however old the beat. The controller now writes how often it beats and marks its last beat on
shutdown, so the reader can tell a leader, a follower, a stopped controller and a silent one.

Pure: the beat's fields and the time are arguments.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

#: Heartbeat detail: seconds between two beats of the writing controller (its Lease retry period).
PERIOD_KEY = "beat_every_seconds"
#: Heartbeat detail set on the last beat of a controller that shut down.
STOPPED_KEY = "stopped"
#: Heartbeat detail: each relaunch lane's occupancy and waiting relaunches (``controller status``).
LANES_KEY = "lanes"
#: A beat older than this many periods means the controller is gone (killed, crashed, or cut
#: off from the store): it writes one every period while it runs.
SILENT_AFTER_PERIODS = 3


class Liveness(enum.Enum):
    """What the last heartbeat says about its writer."""

    LEADER = "leader"
    FOLLOWER = "follower"
    STOPPED = "stopped"
    SILENT = "silent"


def liveness(
    leader: bool, at: float, details: Mapping[str, Any], now: float, default_period_seconds: float
) -> tuple[Liveness, float]:
    """The writer's state, and the beat period it was judged by.

    Args:
        leader: whether the writer led when it beat.
        at: when it beat (seconds since the epoch).
        details: the beat's details (:data:`PERIOD_KEY`, :data:`STOPPED_KEY`).
        now: the time now (same clock).
        default_period_seconds: the period of beats written before the period was recorded.
    """
    if details.get(STOPPED_KEY):
        return Liveness.STOPPED, default_period_seconds
    period = details.get(PERIOD_KEY)
    period_seconds = float(period) if isinstance(period, (int, float)) and period > 0 else default_period_seconds
    if now - at > SILENT_AFTER_PERIODS * period_seconds:
        return Liveness.SILENT, period_seconds
    return (Liveness.LEADER if leader else Liveness.FOLLOWER), period_seconds

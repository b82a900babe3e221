"""The simulator's event queue: simulated time, total order, no wall clock.

Why a total order: a simulation is only reproducible if two events at the same instant
are always handled in the same order. Events are ordered by time, then by kind (quota is
released before anything else happens at that instant, so an arrival at the same second
sees it), then by insertion sequence. Every event carries the job's launch attempt
(``token``) so that events made stale by a later change (a finish scheduled for a run that
was preempted) are recognised and dropped instead of being searched for and removed.
"""

from __future__ import annotations

import enum
import heapq
from dataclasses import dataclass, field


class EventKind(enum.IntEnum):
    """What happens; the value is the order among events at the same time."""

    #: A running job exits (completes or fails): its quota is freed.
    FINISH = 0
    #: SkyPilot relaunches a preempted job: a new Workload is created.
    RELAUNCH = 1
    #: A job is submitted: its first Workload is created.
    ARRIVAL = 2
    #: The job's launch attempt reached its team's wait limit: burst to the cloud.
    BURST_CHECK = 3
    #: The controller re-ages a waiting Workload.
    RESYNC = 4
    #: A readmitted job's protection time is over: the controller lowers it to its class's plain level.
    RELEASE = 5
    #: A Workload has waited ``reserve_after_s``: it takes its cohort's reservation, or queues for it.
    RESERVE = 6
    #: The relaunch of a job marked for the cloud after a preemption: it runs there, not in Kueue.
    CLOUD_RELAUNCH = 7
    #: A relaunch held by the safe-relaunch rule reached ``safe_max_hold_seconds``.
    SAFE_TIMEOUT = 8
    #: The controller saw a reserving relaunch admitted: its team's held-back work is reactivated.
    TEAM_RELEASE = 9
    #: A cloud run ended: its GPUs return to the cloud's capacity for waiting bursts.
    CLOUD_FREE = 10


@dataclass(frozen=True, order=True)
class Event:
    at: float
    kind: EventKind
    seq: int
    job: int = field(compare=False)
    token: int = field(compare=False)


class EventQueue:
    """A heap of events; :meth:`pop` returns them in (time, kind, insertion) order."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._seq = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, at: float, kind: EventKind, job: int, token: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, int(kind), self._seq, job, token))

    def peek_time(self) -> float | None:
        return self._heap[0][0] if self._heap else None

    def pop(self) -> Event:
        at, kind, seq, job, token = heapq.heappop(self._heap)
        return Event(at, EventKind(kind), seq, job, token)

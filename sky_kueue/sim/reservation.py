"""Reservations for starved jobs: who holds one in each cohort and whom it holds back.

Why: ordering alone cannot give a large job the quota it waits for when smaller work keeps
taking each freed GPU first (Kueue's ``BestEffortFIFO`` admits whatever fits behind a head
that does not). PBS's "starving jobs" and Volcano's SLA plugin end that by holding back the
work queued behind a job starved past a limit until it runs. A Kueue cluster permits the
same from outside: a controller sets ``spec.active: false`` on the pending Workloads queued
behind the starved one. For a pod group whose pods are still scheduling-gated that
deletes nothing (Kueue ``pkg/controller/jobs/pod/pod_controller.go`` ``Stop`` skips gated
pods), and setting ``spec.active`` back to true requeues the Workload at its creation time
(``pkg/workload/workload.go`` ``GetQueueOrderTimestamp``), so the held work keeps its place.
(Kueue releases without the fix for kueue#6719, PR #8424, reactivate a deactivated Workload
whenever its job is modified.)

Measured (``benchmarks/anti_starvation.py``, README "Does aging end starvation?"), it does
not pay: holding every later arrival back behind a large starved job multiplies the short
jobs that starve, so the controller does not offer it; the simulator keeps it so the
measurement can be repeated.

This module is the bookkeeping only (pure): one holder per cohort, a first-come line of jobs
that starved while another held it, and the set of jobs held back. The simulator applies it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass(frozen=True)
class QueueOrder:
    """What Kueue orders pending Workloads by: priority, then creation time (older first)."""

    priority: int
    created_at: float

    def behind(self, other: QueueOrder) -> bool:
        """Whether a Workload with this order is admitted after ``other`` by Kueue's order."""
        return self.priority < other.priority or (
            self.priority == other.priority and self.created_at > other.created_at
        )


@dataclass
class CohortReservation:
    """One cohort's reservation state (job indices; a ``(job, launch)`` pair names a Workload)."""

    holder: tuple[int, int] | None = None
    holder_order: QueueOrder | None = None
    line: deque[tuple[int, int]] = field(default_factory=deque)
    held: set[int] = field(default_factory=set)


@dataclass
class Reservations:
    """Every cohort's reservation; the simulator calls it at each transition of a job."""

    cohorts: dict[str, CohortReservation] = field(default_factory=dict)
    #: How many reservations were taken, and how many Workloads they held back in all.
    taken: int = 0
    held_back: int = 0

    def of(self, cohort: str) -> CohortReservation:
        return self.cohorts.setdefault(cohort, CohortReservation())

    def holds_back(self, cohort: str, order: QueueOrder) -> bool:
        """Whether a Workload of ``cohort`` with ``order`` must stay inactive now."""
        state = self.cohorts.get(cohort)
        return state is not None and state.holder_order is not None and order.behind(state.holder_order)

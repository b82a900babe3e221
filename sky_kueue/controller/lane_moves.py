"""Which reconciles show a relaunch entering its relaunch lane, announced once per Workload.

Why the controller records the move although the ``KUEUE_AGING`` strategy makes it: the
strategy runs inside SkyPilot's jobs controller and only logs there; the admin who owns the
cluster reads Kubernetes. So when the controller first records a Workload of a SkyPilot job
(queued or admitted, in its first episode) whose LocalQueue is a team's lane
(``teams.<t>.lane``), it says so where the rest of its work shows: an Event ``MovedToLane`` on
the Workload (:mod:`sky_kueue.controller.kube_events`), the counter
``sky_kueue_controller_lane_entries_total`` (:mod:`sky_kueue.controller.metrics`) and a log line.
The job's history needs no new record: it already holds every Workload of the job, and the
Workload names its queue.

Each observer keeps its own :class:`LaneEntries`; a Workload seen queued and then admitted is
announced once (its UID is remembered, bounded), and a replay after a restart records nothing
new, so it is not announced again.

Pure: no I/O.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass

from sky_kueue.controller.actuators import WorkloadRef
from sky_kueue.controller.engine import FactKind
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind
from sky_kueue.controller.lane_route import Lanes, TeamLane

log = logging.getLogger(__name__)

#: Workload UIDs remembered as announced (the oldest forgotten first).
MAX_REMEMBERED_ENTRIES = 4096
_FIRST_SIGHTINGS = frozenset({FactKind.QUEUED, FactKind.ADMITTED})


@dataclass(frozen=True)
class LaneEntry:
    """A relaunch of job ``job_key`` queued in ``lane``'s LocalQueue as Workload ``workload``."""

    job_key: str
    workload: WorkloadRef
    lane: TeamLane

    def message(self) -> str:
        cq = f" (ClusterQueue {self.lane.cluster_queue})" if self.lane.cluster_queue else ""
        return (
            f"sky-kueue: job {self.job_key}'s relaunch waits in team {self.lane.team}'s relaunch lane "
            f"{self.workload.namespace}/{self.lane.local_queue}{cq}, entered after "
            f"{self.lane.after_preemptions} preemption(s): admitted there within nominal quota, no reclaim takes it"
        )


class LaneEntries:
    """Finds lane entries in reconcile events (module docstring)."""

    def __init__(self, lanes: Lanes, *, remembered: int = MAX_REMEMBERED_ENTRIES) -> None:
        self.lanes = lanes
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._remembered = remembered

    def entry(self, event: ControllerEvent) -> LaneEntry | None:
        """The lane entry ``event`` shows for the first time, if any."""
        outcome, detection = event.outcome, event.detection
        if event.kind is not ControllerEventKind.RECONCILED or outcome is None or detection is None:
            return None
        if outcome.job_key is None or not self.lanes.enabled:
            return None
        first = any(
            fact.kind in _FIRST_SIGHTINGS and fact.key is not None and fact.key.evictions == 0
            for fact in outcome.recorded
        )
        facts = detection.workload
        if not first or facts.uid in self._seen:
            return None
        lane = self.lanes.for_queue(facts.namespace, facts.queue_name)
        if lane is None:
            return None
        self._seen[facts.uid] = None
        while len(self._seen) > self._remembered:
            self._seen.popitem(last=False)
        return LaneEntry(outcome.job_key, WorkloadRef.of(facts), lane)


class LaneEntryLog:
    """An observer that logs each lane entry (one ``relaunch entered its lane`` line)."""

    def __init__(self, lanes: Lanes) -> None:
        self._entries = LaneEntries(lanes)

    def __call__(self, event: ControllerEvent) -> None:
        found = self._entries.entry(event)
        if found is None:
            return
        log.info(
            "relaunch entered its lane",
            extra={
                "fields": {
                    "job": found.job_key,
                    "workload": str(found.workload),
                    "uid": found.workload.uid,
                    "team": found.lane.team,
                    "local_queue": found.lane.local_queue,
                    "cluster_queue": found.lane.cluster_queue,
                    "after_preemptions": found.lane.after_preemptions,
                }
            },
        )

"""Where a preempted job's relaunch is queued: its team's LocalQueue, or its relaunch lane.

Why a lane (issue 39; docs/anti-starvation.md, "The relaunch lane"): a ClusterQueue that never
borrows (``borrowingLimit: 0``) and never preempts inside (``withinClusterQueue: Never``) holds
what it admitted out of every preemption's reach, so once a job's relaunch is admitted there it
is not preempted again: a job is preempted at most ``after_preemptions`` (k) times, whatever the
cluster does. The relaunch is sent there by SkyPilot's own recovery (the ``KUEUE_AGING``
strategy, :mod:`sky_kueue.controller.skypilot_plugin`) once the job's history counts k
preemptions; the count is the job's, across every Workload and cluster it ran on, so it does
not restart at each relaunch as a per-Workload count (KEP-13396's ``PreemptionLimit``) would.

A relaunch that asks for more of a resource than the lane holds (:attr:`TeamLane.capacity`)
could never be admitted there: it stays in its team's queue (a *misfit*, as the simulator
counts it) and the bound does not cover it.

Pure: no I/O; the controller and the strategy build :class:`Lanes` from ``sky-kueue.yaml``
(:mod:`sky_kueue.controller.config_file`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import quantity


@dataclass(frozen=True)
class TeamLane:
    """One team's relaunch lane, as ``teams.<team>.lane`` of ``sky-kueue.yaml`` records it."""

    team: str
    #: The team's namespaces (one per cluster), each holding the lane's LocalQueue.
    namespaces: tuple[str, ...]
    local_queue: str
    after_preemptions: int
    cluster_queue: str | None = None
    #: Resource -> the most one flavor of the lane holds (CPU in millicores); empty: unknown,
    #: every relaunch due the lane is sent.
    capacity: Mapping[str, int] = field(default_factory=dict)

    def misfit(self, requests: Mapping[str, int]) -> str | None:
        """Why a Workload asking for ``requests`` (totals) could never be admitted in the lane,
        or None when it fits (or the lane's quota is unknown)."""
        if not self.capacity:
            return None
        for resource, wanted in sorted(requests.items()):
            have = self.capacity.get(resource, 0)
            if wanted > have:
                fmt = quantity.format_amount
                return f"it asks for {fmt(resource, wanted)} {resource}, the lane holds {fmt(resource, have)}"
        return None


@dataclass(frozen=True)
class Lanes:
    """Every team's lane, by team and by LocalQueue."""

    by_team: Mapping[str, TeamLane] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.by_team)

    def for_team(self, team: str | None) -> TeamLane | None:
        return None if team is None else self.by_team.get(team)

    def for_queue(self, namespace: str, local_queue: str | None) -> TeamLane | None:
        """The lane whose LocalQueue ``namespace/local_queue`` is, if any."""
        if not local_queue:
            return None
        return next(
            (
                lane
                for lane in self.by_team.values()
                if lane.local_queue == local_queue and namespace in lane.namespaces
            ),
            None,
        )


class RouteKind(str, enum.Enum):
    NO_LANE = "no-lane"
    NOT_YET = "not-yet"
    MISFIT = "misfit"
    LANE = "lane"


@dataclass(frozen=True)
class Route:
    """Where the relaunch goes, and why (one line for the log)."""

    kind: RouteKind
    reason: str
    lane: TeamLane | None = None

    @property
    def to_lane(self) -> bool:
        return self.kind is RouteKind.LANE


def route(lane: TeamLane | None, preemptions: int, requests: Mapping[str, int]) -> Route:
    """The queue of a job's relaunch: the lane once it was preempted ``after_preemptions`` times
    and fits there, else its team's queue."""
    if lane is None:
        return Route(RouteKind.NO_LANE, "the team has no relaunch lane")
    k = lane.after_preemptions
    if preemptions < k:
        return Route(RouteKind.NOT_YET, f"preempted {preemptions} of the lane's {k} times", lane)
    misfit = lane.misfit(requests)
    if misfit is not None:
        return Route(
            RouteKind.MISFIT,
            f"preempted {preemptions} times (lane after {k}) but {misfit}: it stays in its team's queue",
            lane,
        )
    return Route(RouteKind.LANE, f"preempted {preemptions} times (lane after {k})", lane)


def lane_config_overrides(local_queue: str, *, quota_queue: bool = False) -> dict[str, Any]:
    """``Resources.copy(_cluster_config_overrides=...)`` value queueing a relaunch in ``local_queue``.

    Both places in the task where the admin policy writes a queue
    (``sky_kueue/skypilot/rewrite.py``): the pods' ``kueue.x-k8s.io/queue-name`` label, which
    Kueue reads, and ``kubernetes.kueue.local_queue_name`` (also ``kubernetes.quota.queue`` when
    the task carries that spelling, which SkyPilot prefers), so SkyPilot names the same queue
    (but see below). SkyPilot overlays the override on the task's own (``Resources.copy``),
    keeping every other key.

    The label is what decides: where the admin's config names a queue in the context's scope,
    the policy writes the team's queue there, in the job's config, which beats a task's
    ``config:`` (SkyPilot 0.14.1 ``sky/skypilot_config.py`` ``get_effective_queue_name``) and
    which the relaunch cannot change. SkyPilot then names the team's queue and its template
    labels the pods with it, but ``combine_pod_config_fields``
    (``sky/provision/kubernetes/utils.py``) merges the task's ``pod_config`` over the template
    last, so the pods still carry the lane's (``tests/controller/test_skypilot_plugin.py``
    renders it).
    """
    kubernetes: dict[str, Any] = {
        "kueue": {"local_queue_name": local_queue},
        "pod_config": {"metadata": {"labels": {kueue_api.QUEUE_NAME_LABEL: local_queue}}},
    }
    if quota_queue:
        kubernetes["quota"] = {"queue": local_queue}
    return {"kubernetes": kubernetes}

"""Relaunch lanes on a cluster: which ClusterQueues are lanes, how full each is, who waits.

Why from the cluster's own objects: ``sky-kueue queue`` and the controller's heartbeat
(``controller status``) must show a lane as Kueue holds it, whoever created it. ``sky-kueue
setup`` labels each lane ClusterQueue with :data:`LANE_LABEL` (``team`` or ``cohort``: who
shares it); its occupancy is what Kueue admitted there (``status.admission.podSetAssignments[].
resourceUsage`` of every unfinished Workload holding quota in it, Kueue
``apis/kueue/v1beta2/workload_types.go``) against its nominal quota, and the waiting
relaunches are the unadmitted Workloads of a LocalQueue that points at it, each with how long
it has waited since its Workload was created (a relaunch in a lane is a new Workload).

Pure: raw documents (dicts) in, frozen views out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import quantity, timestamps
from sky_kueue.mirror import transitions as tr
from sky_kueue.mirror.identity import SkyPilotIdentity

#: Label of a lane ClusterQueue (value: ``team`` or ``cohort``).
LANE_LABEL = "sky-kueue.io/relaunch-lane"
#: Waiting relaunches listed per lane (the longest waits first are always among them); the
#: count is complete. Bounds what the controller's heartbeat carries.
MAX_WAITING_LISTED = 20

Doc = Mapping[str, Any]


@dataclass(frozen=True)
class LaneResource:
    """One flavor/resource of a lane: admitted usage against nominal quota (Kueue amounts)."""

    flavor: str
    resource: str
    nominal: int
    usage: int

    def text(self) -> str:
        fmt = quantity.format_amount
        return f"{self.resource} {fmt(self.resource, self.usage)}/{fmt(self.resource, self.nominal)}"

    def to_json(self) -> dict[str, Any]:
        fmt = quantity.format_amount
        return {
            "flavor": self.flavor,
            "resource": self.resource,
            "admitted": fmt(self.resource, self.usage),
            "nominal": fmt(self.resource, self.nominal),
        }


@dataclass(frozen=True)
class WaitingRelaunch:
    """A relaunch queued in a lane and not admitted yet."""

    workload: str
    local_queue: str
    priority: int
    wait_seconds: float
    job: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "localQueue": self.local_queue,
            "priority": self.priority,
            "waitSeconds": round(self.wait_seconds, 1),
            "job": self.job,
        }


@dataclass(frozen=True)
class LaneView:
    """One lane ClusterQueue as a cluster holds it."""

    cluster_queue: str
    scope: str
    cohort: str | None
    resources: tuple[LaneResource, ...]
    admitted: int
    waiting_count: int
    #: The longest-waiting relaunches first, at most :data:`MAX_WAITING_LISTED`.
    waiting: tuple[WaitingRelaunch, ...]

    def occupancy_text(self) -> str:
        """``nvidia.com/gpu 2/4, cpu 8/16, memory 32Gi/64Gi``: admitted/nominal per resource
        with a quota (zero-quota entries left out)."""
        shown = [r.text() for r in self.resources if r.nominal or r.usage]
        return ", ".join(shown) or "no quota"

    def to_json(self) -> dict[str, Any]:
        return {
            "clusterQueue": self.cluster_queue,
            "scope": self.scope,
            "cohort": self.cohort,
            "resources": [r.to_json() for r in self.resources],
            "occupancy": self.occupancy_text(),
            "admitted": self.admitted,
            "waitingCount": self.waiting_count,
            "waiting": [w.to_json() for w in self.waiting],
        }


def is_lane(cluster_queue: Doc) -> bool:
    return LANE_LABEL in ((cluster_queue.get("metadata") or {}).get("labels") or {})


def _name(doc: Doc) -> str:
    return str((doc.get("metadata") or {}).get("name") or "")


def _key(doc: Doc) -> str:
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _amount(resource: str, value: object) -> int:
    try:
        return quantity.parse_amount(resource, value)
    except quantity.QuantityError:
        return 0


def _created(doc: Doc) -> float | None:
    text = (doc.get("metadata") or {}).get("creationTimestamp")
    if not isinstance(text, str):
        return None
    try:
        return timestamps.parse(text).timestamp()
    except ValueError:
        return None


def _holds_quota(workload: Doc) -> str | None:
    """The ClusterQueue an unfinished Workload holds quota in, else None."""
    if tr.is_true(tr.condition(workload, kueue_api.CONDITION_FINISHED)):
        return None
    if not tr.is_true(tr.condition(workload, kueue_api.CONDITION_QUOTA_RESERVED)):
        return None
    admission = (workload.get("status") or {}).get("admission") or {}
    name = admission.get("clusterQueue")
    return str(name) if name else None


def lane_views(
    cluster_queues: Iterable[Doc],
    local_queues: Iterable[Doc],
    workloads: Iterable[Doc],
    *,
    now: datetime | float,
    identities: Mapping[str, SkyPilotIdentity] | None = None,
    names: Iterable[str] = (),
) -> tuple[LaneView, ...]:
    """Every lane of the cluster (labelled :data:`LANE_LABEL`, or named in ``names``), by name.

    Args:
        cluster_queues, local_queues, workloads: the cluster's documents.
        now: the time waits are measured against (a datetime, or POSIX seconds).
        identities: the SkyPilot job behind each Workload (``namespace/name``), when known.
        names: ClusterQueues to treat as lanes though unlabelled (the config's ``lane.cluster_queue``).
    """
    at = now.timestamp() if isinstance(now, datetime) else float(now)
    wanted = set(names)
    lanes = {_name(cq): cq for cq in cluster_queues if is_lane(cq) or _name(cq) in wanted}
    if not lanes:
        return ()
    lane_of_queue = {
        _key(lq): str((lq.get("spec") or {}).get("clusterQueue"))
        for lq in local_queues
        if (lq.get("spec") or {}).get("clusterQueue") in lanes
    }
    usage: dict[str, dict[tuple[str, str], int]] = {name: {} for name in lanes}
    admitted = dict.fromkeys(lanes, 0)
    waiting: dict[str, list[WaitingRelaunch]] = {name: [] for name in lanes}
    for wl in workloads:
        held = _holds_quota(wl)
        if held in lanes:
            admitted[held] += 1
            for assignment in ((wl.get("status") or {}).get("admission") or {}).get("podSetAssignments") or ():
                flavors = assignment.get("flavors") or {}
                for resource, value in (assignment.get("resourceUsage") or {}).items():
                    key = (str(flavors.get(resource, "")), str(resource))
                    usage[held][key] = usage[held].get(key, 0) + _amount(str(resource), value)
            continue
        if held is not None or tr.is_true(tr.condition(wl, kueue_api.CONDITION_FINISHED)):
            continue
        meta = wl.get("metadata") or {}
        queue = str((wl.get("spec") or {}).get("queueName") or "")
        lane = lane_of_queue.get(f"{meta.get('namespace', '')}/{queue}")
        if lane is None:
            continue
        created = _created(wl)
        identity = (identities or {}).get(_key(wl))
        priority = (wl.get("spec") or {}).get("priority")
        waiting[lane].append(
            WaitingRelaunch(
                workload=_key(wl),
                local_queue=queue,
                priority=priority if isinstance(priority, int) else 0,
                wait_seconds=max(0.0, at - created) if created is not None else 0.0,
                job=(identity.display() or None) if identity is not None else None,
            )
        )
    views = []
    for name in sorted(lanes):
        spec = lanes[name].get("spec") or {}
        resources = tuple(
            LaneResource(
                str(flavor.get("name")),
                str(entry.get("name")),
                _amount(str(entry.get("name")), entry.get("nominalQuota")),
                usage[name].get((str(flavor.get("name")), str(entry.get("name"))), 0),
            )
            for group in spec.get("resourceGroups") or ()
            for flavor in group.get("flavors") or ()
            for entry in flavor.get("resources") or ()
        )
        queued = sorted(waiting[name], key=lambda w: (-w.wait_seconds, w.workload))
        labels = (lanes[name].get("metadata") or {}).get("labels") or {}
        cohort = spec.get("cohortName", spec.get("cohort"))
        views.append(
            LaneView(
                cluster_queue=name,
                scope=str(labels.get(LANE_LABEL, "unlabelled")),
                cohort=str(cohort) if cohort else None,
                resources=resources,
                admitted=admitted[name],
                waiting_count=len(queued),
                waiting=tuple(queued[:MAX_WAITING_LISTED]),
            )
        )
    return tuple(views)

"""Render the relaunch lane of a team spec (``lane:`` in ``teams.yaml``) into Kueue objects.

What a lane is, and why each field (the simulator's :mod:`sky_kueue.sim.lane`, here as
manifests):

* a ClusterQueue in the cohort whose nominal quota is *carved* from a donor ClusterQueue of the
  same cohort (the team's own with ``scope: team``, ``lane.donor`` or the cohort's largest with
  ``scope: cohort``), so the cohort's total is unchanged;
* ``borrowingLimit: "0"`` on every resource: the lane never uses more than its nominal quota,
  so Kueue never picks a Workload it admitted as a reclaim's victim (candidates come only from
  ClusterQueues whose usage exceeds nominal, ``findCandidates``/``cqIsBorrowing`` in Kueue
  ``pkg/scheduler/preemption/preemption.go``, classical and fair sharing alike);
* ``lendingLimit`` equal to the nominal quota: it lends what it does not use, and
  ``reclaimWithinCohort: Any`` takes it back when a relaunch arrives (``LowerPriority`` with
  ``lane.reclaim_within_cohort``: only from borrowers of lower priority than the relaunch);
  ``borrowWithinCohort: Never``;
* ``withinClusterQueue: Never``: nothing inside the lane preempts anything else there;
* ``queueingStrategy: StrictFIFO`` (``lane.queueing_strategy``): first come, first served by
  the relaunch's (aged) priority;
* ``namespaceSelector`` naming only the lane teams' namespaces, and a LocalQueue
  (``lane.local_queue``, default ``relaunch``) in each;
* the label :data:`~sky_kueue.mirror.lanes.LANE_LABEL` (``team`` or ``cohort``), by which
  ``sky-kueue queue`` and the controller find lanes on a cluster.

Pure: plain manifests in, manifests out; quantities are Kueue's integer amounts
(:mod:`sky_kueue.kueue.quantity`), never floats.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import quantity
from sky_kueue.kueue.api import NAMESPACE_NAME_LABEL
from sky_kueue.mirror.lanes import LANE_LABEL
from sky_kueue.skypilot.setup_spec import LaneSpec, TeamsSpec

#: Suffix of a team lane's ClusterQueue (``<team's ClusterQueue>-relaunch``) and of a cohort
#: lane's (``<cohort>-relaunch-lane``): the simulator's names (``sim/lane.py`` ``add_lanes``).
TEAM_LANE_SUFFIX = "-relaunch"
COHORT_LANE_SUFFIX = "-relaunch-lane"
#: Longest ClusterQueue name Kueue accepts (a DNS-1123 subdomain).
MAX_NAME_CHARS = 253
#: The lane's preemption block (module docstring); ``reclaimWithinCohort`` comes from the spec.
LANE_PREEMPTION: dict[str, Any] = {
    "borrowWithinCohort": {"policy": "Never"},
    "withinClusterQueue": "Never",
}

#: (flavor, resource) -> amount (CPU in millicores, other resources in base units).
Amounts = dict[tuple[str, str], int]


class LaneSetupError(ValueError):
    """The lane cannot be carved as the spec asks; the message is one line naming the fix."""


@dataclass(frozen=True)
class RenderedLane:
    """One lane ClusterQueue: its name, donor, the teams whose relaunches it takes, its quota."""

    cluster_queue: str
    donor: str
    teams: tuple[str, ...]
    quotas: Amounts
    #: The lane took every unit of some resource its donor had: the donor keeps no guarantee there.
    empties_donor: bool

    def quota_strings(self) -> dict[str, dict[str, str]]:
        """``{resource: {flavor: quantity}}``, as the plugin config records the lane's quota."""
        out: dict[str, dict[str, str]] = {}
        for (flavor, resource), amount in sorted(self.quotas.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            out.setdefault(resource, {})[flavor] = quantity.format_amount(resource, amount)
        return out


def lane_cluster_queue_name(spec: TeamsSpec, donor_cq: str) -> str:
    """The lane ClusterQueue's name: per team from its ClusterQueue, per cohort from the cohort."""
    lane = spec.lane
    assert lane is not None
    base = donor_cq if lane.scope == "team" else spec.cohort
    suffix = TEAM_LANE_SUFFIX if lane.scope == "team" else COHORT_LANE_SUFFIX
    return f"{base[: MAX_NAME_CHARS - len(suffix)]}{suffix}"


def add_lanes(
    spec: TeamsSpec, objects: Sequence[dict[str, Any]], team_names: Mapping[str, tuple[str, str, str]]
) -> tuple[list[dict[str, Any]], tuple[RenderedLane, ...]]:
    """``objects`` (rendered, in apply order) with the lanes of ``spec.lane`` carved in.

    Args:
        spec: the team spec (``spec.lane`` set).
        objects: every rendered object, in apply order; not modified.
        team_names: team -> (namespace, LocalQueue, ClusterQueue).

    Returns:
        The objects with each donor's quota lowered, the lane ClusterQueues after the last
        ClusterQueue and their LocalQueues after the last LocalQueue; and the lanes.

    Raises:
        LaneSetupError: a donor lacks the quota the lane asks for, or a name is taken.
    """
    lane = spec.lane
    if lane is None:
        return list(objects), ()
    out = [copy.deepcopy(o) for o in objects]
    queues = {o["metadata"]["name"]: o for o in out if o["kind"] == "ClusterQueue"}
    groups: dict[str, list[str]] = {}  # donor ClusterQueue -> teams
    for team in spec.lane_teams():
        donor = team_names[team][2] if lane.scope == "team" else _cohort_donor(spec, lane, queues, team_names)
        groups.setdefault(donor, []).append(team)
    lanes: list[RenderedLane] = []
    lane_queues: list[dict[str, Any]] = []
    local_queues: list[dict[str, Any]] = []
    for donor, teams in groups.items():
        name = lane_cluster_queue_name(spec, donor)
        if name in queues:
            raise LaneSetupError(f"lane: a ClusterQueue named {name!r} exists already; rename the team's ClusterQueue")
        donor_cq = queues[donor]
        amounts, empties = _carve(donor_cq, lane, donor)
        namespaces = sorted({team_names[t][0] for t in teams})
        lane_queues.append(_lane_cluster_queue(spec, lane, name, donor_cq, amounts, namespaces))
        for namespace in namespaces:
            owner = next(
                (t for t, names in team_names.items() if names[0] == namespace and names[1] == lane.local_queue), None
            )
            if owner is not None:
                raise LaneSetupError(
                    f"lane.local_queue {lane.local_queue!r} is team {owner}'s own LocalQueue in namespace {namespace}; "
                    "choose another name"
                )
            local_queues.append(_local_queue(lane.local_queue, namespace, name))
        lanes.append(RenderedLane(name, donor, tuple(teams), amounts, empties))
    return _insert_after(_insert_after(out, "ClusterQueue", lane_queues), "LocalQueue", local_queues), tuple(lanes)


def _cohort_donor(
    spec: TeamsSpec,
    lane: LaneSpec,
    queues: Mapping[str, dict[str, Any]],
    team_names: Mapping[str, tuple[str, str, str]],
) -> str:
    """The cohort lane's donor ClusterQueue: the named team's or lender's, else the one with the
    most nominal GPUs (ties by name), as the simulator picks it."""
    if lane.donor is not None:
        return team_names[lane.donor][2] if lane.donor in team_names else lane.donor
    gpus = {name: sum(a for (_, r), a in _nominal(cq).items() if r == lane.gpu_resource) for name, cq in queues.items()}
    return max(sorted(gpus), key=lambda name: gpus[name])


def _entries(cq: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(flavor, resource entry) of every quota the ClusterQueue names."""
    return [
        (flavor["name"], entry)
        for group in cq["spec"].get("resourceGroups") or ()
        for flavor in group["flavors"]
        for entry in flavor["resources"]
    ]


def _nominal(cq: Mapping[str, Any]) -> Amounts:
    return {
        (flavor, entry["name"]): quantity.parse_amount(entry["name"], entry["nominalQuota"])
        for flavor, entry in _entries(cq)
    }


def _flavor_of(spec_value: str | dict[str, str], resource: str, nominal: Amounts) -> list[tuple[str, int]]:
    """(flavor, amount) a lane ``quotas`` value names: a quantity for the first flavor that
    provides the resource, or a mapping flavor -> quantity."""
    if isinstance(spec_value, dict):
        return [(flavor, quantity.parse_amount(resource, value)) for flavor, value in spec_value.items()]
    first = next((flavor for (flavor, r) in nominal if r == resource), None)
    return [] if first is None else [(first, quantity.parse_amount(resource, spec_value))]


def _carve(donor_cq: dict[str, Any], lane: LaneSpec, donor: str) -> tuple[Amounts, bool]:
    """The lane's quota, taken out of ``donor_cq`` (modified in place); and whether the lane
    took all of some resource the donor had."""
    nominal = _nominal(donor_cq)
    wanted: Amounts = {}
    if lane.gpus is not None:
        gpu_flavors = [key for key, amount in nominal.items() if key[1] == lane.gpu_resource and amount > 0]
        if len(gpu_flavors) != 1:
            raise LaneSetupError(
                f"lane.gpus: ClusterQueue {donor} has {lane.gpu_resource} quota in {len(gpu_flavors)} flavors; "
                "a lane of gpus: N is carved from exactly one (give lane.quotas per flavor instead)"
            )
        donor_gpus = nominal[gpu_flavors[0]]
        if lane.gpus > donor_gpus:
            raise LaneSetupError(
                f"lane.gpus: {lane.gpus} exceeds the {donor_gpus} {lane.gpu_resource} of ClusterQueue {donor}; "
                "lower lane.gpus or give the donor more quota"
            )
        for key, amount in nominal.items():
            wanted[key] = lane.gpus if key == gpu_flavors[0] else amount * lane.gpus // donor_gpus
    else:
        for resource, value in lane.quotas.items():
            places = _flavor_of(value, resource, nominal)
            if not places:
                raise LaneSetupError(f"lane.quotas.{resource}: ClusterQueue {donor} has no quota of it to carve from")
            for flavor, amount in places:
                have = nominal.get((flavor, resource))
                if have is None or amount > have:
                    shown = quantity.format_amount(resource, have or 0)
                    raise LaneSetupError(
                        f"lane.quotas.{resource}: {quantity.format_amount(resource, amount)} in flavor {flavor} "
                        f"exceeds the {shown} of ClusterQueue {donor}; lower it or give the donor more quota"
                    )
                wanted[(flavor, resource)] = amount
        for key in nominal:
            wanted.setdefault(key, 0)
    empties = False
    for flavor, entry in _entries(donor_cq):
        resource = entry["name"]
        take = wanted.get((flavor, resource), 0)
        if not take:
            continue
        left = nominal[(flavor, resource)] - take
        empties = empties or left == 0
        entry["nominalQuota"] = quantity.format_amount(resource, left)
        if "lendingLimit" in entry and quantity.parse_amount(resource, entry["lendingLimit"]) > left:
            entry["lendingLimit"] = entry["nominalQuota"]
    return wanted, empties


def _lane_cluster_queue(
    spec: TeamsSpec,
    lane: LaneSpec,
    name: str,
    donor_cq: Mapping[str, Any],
    amounts: Amounts,
    namespaces: list[str],
) -> dict[str, Any]:
    groups = []
    for group in donor_cq["spec"].get("resourceGroups") or ():
        flavors = []
        for flavor in group["flavors"]:
            resources = []
            for entry in flavor["resources"]:
                resource = entry["name"]
                amount = quantity.format_amount(resource, amounts.get((flavor["name"], resource), 0))
                resources.append(
                    {"name": resource, "nominalQuota": amount, "borrowingLimit": "0", "lendingLimit": amount}
                )
            flavors.append({"name": flavor["name"], "resources": resources})
        groups.append({"coveredResources": list(group["coveredResources"]), "flavors": flavors})
    body: dict[str, Any] = {
        "cohort": spec.cohort,
        "namespaceSelector": {
            "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": namespaces}]
        },
        "queueingStrategy": lane.queueing_strategy,
        "flavorFungibility": dict(donor_cq["spec"].get("flavorFungibility") or {}),
        "preemption": {"reclaimWithinCohort": lane.reclaim_within_cohort, **copy.deepcopy(LANE_PREEMPTION)},
        "resourceGroups": groups,
    }
    if not body["flavorFungibility"]:
        del body["flavorFungibility"]
    return {
        "apiVersion": donor_cq["apiVersion"],
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": {LANE_LABEL: lane.scope}},
        "spec": body,
    }


def _local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": kueue_api.API_VERSION_V1BETA1,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


def _insert_after(objects: list[dict[str, Any]], kind: str, new: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``new`` right after the last object of ``kind`` (apply order is by kind)."""
    last = max((i for i, o in enumerate(objects) if o["kind"] == kind), default=len(objects) - 1)
    return [*objects[: last + 1], *new, *objects[last + 1 :]]

"""Does the cluster hold what a plugin config promises? (pure: plain objects in, problems out)

A plugin config names, for each team and cluster, a namespace, a LocalQueue and the
WorkloadPriorityClasses the team may use (and their values). The policy checks a class's
existence at launch time; ``check-config --cluster`` checks everything at once, before users
find out: a LocalQueue missing or pointing at a ClusterQueue that does not exist or is not
active (Kueue's ``Active`` condition) never admits anything, and a class missing on the
cluster leaves SkyPilot's pods gated with no Workload (Kueue's pod integration refuses to
create it, ``WorkloadPriorityClassNotFound``).

A team's relaunch lane (``teams.<t>.lane``) is checked as setup renders it: its LocalQueue
points at an active ClusterQueue in the same cohort as the team's own, whose nominal quota is the
one the config records, with ``borrowingLimit: 0`` on every resource and preemption inside it
off (``withinClusterQueue: Never``): the two settings the bound "no job preempted more than k
times" rests on (docs/anti-starvation.md). A lane that cannot take its lent quota back
(``reclaimWithinCohort: Never``) is named too: its relaunches would wait for lenders to finish.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sky_kueue.kueue import quantity
from sky_kueue.skypilot.config import LaneConfig, PluginConfig, TeamCluster

#: Kueue's default for ``preemption.withinClusterQueue`` and ``reclaimWithinCohort`` (``Never``).
KUEUE_PREEMPTION_DEFAULT = "Never"


@dataclass(frozen=True)
class ClusterFacts:
    """What one cluster holds: objects as the API server returns them (dicts)."""

    namespaces: frozenset[str]
    local_queues: Mapping[tuple[str, str], Mapping[str, Any]]
    cluster_queues: Mapping[str, Mapping[str, Any]]
    priority_classes: Mapping[str, int]


def _active(obj: Mapping[str, Any]) -> bool:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Active" and c.get("status") == "True" for c in conditions)


def team_cluster_problems(config: PluginConfig, team_name: str, cluster: TeamCluster, facts: ClusterFacts) -> list[str]:
    """One line per thing the cluster lacks for ``team_name``'s queue there."""
    where = f"team {team_name} on {cluster.context or 'the current context'}"
    problems: list[str] = []
    if cluster.namespace not in facts.namespaces:
        problems.append(f"{where}: namespace {cluster.namespace} does not exist")
    queue = facts.local_queues.get((cluster.namespace, cluster.local_queue))
    if queue is None:
        problems.append(f"{where}: LocalQueue {cluster.namespace}/{cluster.local_queue} does not exist")
    else:
        cq_name = str((queue.get("spec") or {}).get("clusterQueue") or "")
        cq = facts.cluster_queues.get(cq_name)
        if cq is None:
            problems.append(
                f"{where}: LocalQueue {cluster.namespace}/{cluster.local_queue} points at ClusterQueue "
                f"{cq_name or '(none)'}, which does not exist"
            )
        elif not _active(cq):
            problems.append(f"{where}: ClusterQueue {cq_name} is not active (Kueue admits nothing through it)")
    team = config.teams[team_name]
    if team.lane is not None and queue is not None:
        problems += lane_problems(where, cluster, team.lane, queue, facts)
    for name in cluster.allowed_priority_classes:
        value = facts.priority_classes.get(name)
        if value is None:
            problems.append(f"{where}: WorkloadPriorityClass {name} does not exist")
        elif name in config.priority_classes and config.priority_classes[name] != value:
            problems.append(
                f"{where}: WorkloadPriorityClass {name} has value {value} on the cluster, "
                f"{config.priority_classes[name]} in the config"
            )
    return problems


def _cohort(cq: Mapping[str, Any]) -> str | None:
    spec = cq.get("spec") or {}
    value = spec.get("cohortName", spec.get("cohort"))  # v1beta2, v1beta1
    return str(value) if value else None


def _amount(resource: str, value: object) -> int | None:
    try:
        return quantity.parse_amount(resource, value)
    except quantity.QuantityError:
        return None


def lane_problems(
    where: str, cluster: TeamCluster, lane: LaneConfig, team_queue: Mapping[str, Any], facts: ClusterFacts
) -> list[str]:
    """One line per way the cluster's lane differs from what the bound needs or the config records."""
    name = f"{cluster.namespace}/{lane.local_queue}"
    queue = facts.local_queues.get((cluster.namespace, lane.local_queue))
    if queue is None:
        return [f"{where}: relaunch lane LocalQueue {name} does not exist (sky-kueue setup --apply creates it)"]
    cq_name = str((queue.get("spec") or {}).get("clusterQueue") or "")
    if lane.cluster_queue is not None and cq_name != lane.cluster_queue:
        return [f"{where}: relaunch lane LocalQueue {name} points at {cq_name or '(none)'}, not {lane.cluster_queue}"]
    cq = facts.cluster_queues.get(cq_name)
    if cq is None:
        return [f"{where}: relaunch lane LocalQueue {name} points at ClusterQueue {cq_name}, which does not exist"]
    lane_where = f"{where}: relaunch lane ClusterQueue {cq_name}"
    problems: list[str] = []
    if not _active(cq):
        problems.append(f"{lane_where} is not active (Kueue admits nothing through it)")
    home = facts.cluster_queues.get(str((team_queue.get("spec") or {}).get("clusterQueue") or ""))
    home_cohort = _cohort(home) if home is not None else None
    if _cohort(cq) is None or (home is not None and _cohort(cq) != home_cohort):
        problems.append(
            f"{lane_where} is in cohort {_cohort(cq) or '(none)'}, not the team's ({home_cohort or '(none)'}): "
            "it can neither lend its idle quota nor take it back"
        )
    preemption = (cq.get("spec") or {}).get("preemption") or {}
    within = preemption.get("withinClusterQueue", KUEUE_PREEMPTION_DEFAULT)
    if within != "Never":
        problems.append(f"{lane_where} has withinClusterQueue {within}: a relaunch admitted there could be preempted")
    if preemption.get("reclaimWithinCohort", KUEUE_PREEMPTION_DEFAULT) == "Never":
        problems.append(f"{lane_where} has reclaimWithinCohort Never: it cannot take back the quota it lent")
    found: dict[tuple[str, str], int | None] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for entry in flavor.get("resources") or ():
                resource, flavor_name = str(entry.get("name")), str(flavor.get("name"))
                found[(flavor_name, resource)] = _amount(resource, entry.get("nominalQuota"))
                if "borrowingLimit" not in entry or _amount(resource, entry.get("borrowingLimit")) != 0:
                    problems.append(
                        f"{lane_where} may borrow {resource} in {flavor_name} (borrowingLimit "
                        f"{entry.get('borrowingLimit', 'unset')}, needs 0): a relaunch admitted on borrowed quota can "
                        "be reclaimed"
                    )
    for resource, flavors in lane.quotas.items():
        for flavor_name, value in flavors.items():
            have = found.get((flavor_name, resource))
            if have != quantity.parse_amount(resource, value):
                shown = "none" if have is None else quantity.format_amount(resource, have)
                problems.append(
                    f"{lane_where} has {shown} {resource} in {flavor_name}, "
                    f"{value} in the config (as setup rendered it)"
                )
    return problems


def config_problems(
    config: PluginConfig, facts_by_context: Mapping[str | None, ClusterFacts], contexts: Sequence[str | None]
) -> list[str]:
    """Every team's problems on every cluster in ``contexts`` whose facts were read."""
    problems: list[str] = []
    for team_name, team in config.teams.items():
        for cluster in config.team_clusters(team, discovered=tuple(c for c in contexts if c)):
            facts = facts_by_context.get(cluster.context)
            if facts is not None:
                problems += team_cluster_problems(config, team_name, cluster, facts)
    return problems

"""Does the cluster hold what a plugin config promises? (pure: plain objects in, problems out)

A plugin config names, for each team and cluster, a namespace, a LocalQueue and the
WorkloadPriorityClasses the team may use (and their values). The policy checks a class's
existence at launch time; ``check-config --cluster`` checks everything at once, before users
find out: a LocalQueue missing or pointing at a ClusterQueue that does not exist or is not
active (Kueue's ``Active`` condition) never admits anything, and a class missing on the
cluster leaves SkyPilot's pods gated with no Workload (Kueue's pod integration refuses to
create it, ``WorkloadPriorityClassNotFound``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sky_kueue.skypilot.config import PluginConfig, TeamCluster


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

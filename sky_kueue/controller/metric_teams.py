"""Which team a Workload's namespace belongs to, and that team's burst prices, for the metrics.

Why: the operator reads the metrics per team (``teams.<t>`` of ``sky-kueue.yaml``), while the
controller sees namespaces. A team owns its ``namespace`` and the namespace of each entry of
``teams.<t>.clusters``; a namespace no team claims is labelled with its own name, so the
``team`` label stays bounded by the cluster's namespaces whatever happens.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sky_kueue.controller.burst_cost import DEFAULT_GPU_RESOURCE, BurstPricing
from sky_kueue.controller.config_file import read_plugin_config

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig


@dataclass(frozen=True)
class MetricTeam:
    """A team as the metrics label it, with its burst prices (None: the team never bursts)."""

    name: str
    pricing: BurstPricing | None = None


@dataclass(frozen=True)
class MetricTeams:
    """Namespace -> team, and the GPU resource the burst cost counts."""

    by_namespace: Mapping[str, MetricTeam] = field(default_factory=dict)
    gpu_resource: str = DEFAULT_GPU_RESOURCE

    def team(self, namespace: str) -> MetricTeam | None:
        return self.by_namespace.get(namespace)

    def team_name(self, namespace: str) -> str:
        """The team owning ``namespace``; the namespace itself when no team claims it."""
        team = self.by_namespace.get(namespace)
        return team.name if team is not None else namespace


def metric_teams(config: PluginConfig) -> MetricTeams:
    """The teams of ``config`` by namespace (the first team listed wins a shared namespace)."""
    by_namespace: dict[str, MetricTeam] = {}
    for name, team in config.teams.items():
        burst = team.burst
        pricing = None if burst is None else BurstPricing(tuple(burst.clouds), dict(burst.price_per_gpu_hour_usd))
        for cluster in config.team_clusters(team):
            by_namespace.setdefault(cluster.namespace, MetricTeam(name, pricing))
    return MetricTeams(by_namespace, config.kubernetes.gpu_resource)


def load_metric_teams(path: str | os.PathLike[str]) -> MetricTeams:
    """Reads ``sky-kueue.yaml`` (validated as the admin policy validates it) for the teams.

    Raises:
        ConfigFileError: missing or unreadable file, or an invalid config (one line).
    """
    return metric_teams(read_plugin_config(path)[1])

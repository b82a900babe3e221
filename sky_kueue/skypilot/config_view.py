"""A :class:`~sky_kueue.skypilot.view.ClusterView` that knows only the plugin config.

Why it exists: the policy must work before (or without) any connection to the cluster, e.g.
on a laptop, in CI, or while the mirror is down. The plugin config declares each team's
LocalQueue and the WorkloadPriorityClasses, so those checks still run; quota coverage,
potential capacity and admission predictions are unknown, and the policy skips them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sky_kueue.skypilot.config import PluginConfig
from sky_kueue.skypilot.demand import WorkloadDemand
from sky_kueue.skypilot.verdict import UNKNOWN_VERDICT, AdmissionVerdict
from sky_kueue.skypilot.view import UNKNOWN_CAPACITY, CapacityFacts, QueueFacts


@dataclass(frozen=True)
class ConfigClusterView:
    """Answers from the plugin config alone.

    Attributes:
        config: the plugin config.
    """

    config: PluginConfig

    @property
    def source(self) -> str:
        """See :class:`~sky_kueue.skypilot.view.ClusterView`."""
        return "the sky-kueue config"

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        """A LocalQueue exists if some team declares it; nothing is known about its ClusterQueue."""
        for team in self.config.teams.values():
            for cluster in self.config.team_clusters(team):
                if (cluster.namespace, cluster.local_queue) == (namespace, name):
                    return QueueFacts(namespace=namespace, name=name)
        return None

    def priority_classes(self) -> Mapping[str, int] | None:
        """The declared classes, or None when the config declares none."""
        return dict(self.config.priority_classes) or None

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        """Always unknown: the config carries no quotas."""
        return UNKNOWN_CAPACITY

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        """Always unknown: the config carries no usage."""
        return UNKNOWN_VERDICT

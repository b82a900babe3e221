"""The teams' safe-relaunch settings, from ``sky-kueue.yaml`` (``teams.<t>.safe_*``).

Why per namespace: the controller sees Workloads, and a Workload belongs to a team through
its namespace (``teams.<t>.namespace``, or each entry of ``teams.<t>.clusters``). A team's
burst settings come along: a team that may burst goes to ``burst.clouds`` when the predicted
wait for nominal quota exceeds ``burst.max_queue_wait_seconds``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings
from sky_kueue.controller.config_file import read_plugin_config
from sky_kueue.controller.hold import OWN_CLUSTER, HoldTeams, TeamHold

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig

log = logging.getLogger(__name__)


def hold_teams(config: PluginConfig) -> HoldTeams:
    """Namespace -> the team's safe-relaunch settings (teams without them are left out)."""
    by_namespace: dict[str, TeamHold] = {}
    for name, team in config.teams.items():
        if team.safe_after_preemptions is None:
            continue
        burst = team.burst
        settings = SafeRelaunchSettings(
            safe_after_preemptions=team.safe_after_preemptions,
            safe_max_hold_seconds=float(team.safe_max_hold_seconds),
            burst_max_predicted_wait_seconds=None if burst is None else float(burst.max_queue_wait_seconds),
            hold_only_when_predicted=team.safe_hold_only_when_predicted,
        )
        clouds = () if burst is None else tuple(burst.clouds)
        for cluster in config.team_clusters(team):
            if cluster.namespace in by_namespace:
                log.warning(
                    "namespace %s belongs to teams %s and %s; safe relaunch uses %s's settings",
                    cluster.namespace,
                    by_namespace[cluster.namespace].team,
                    name,
                    by_namespace[cluster.namespace].team,
                )
                continue
            by_namespace[cluster.namespace] = TeamHold(name, settings, cluster.context or OWN_CLUSTER, clouds)
    return HoldTeams(by_namespace)


def load_hold_teams(path: str | os.PathLike[str]) -> HoldTeams:
    """Reads ``sky-kueue.yaml`` (validated as the admin policy validates it) for the holds.

    Raises:
        ConfigFileError: missing or unreadable file, or an invalid config (one line).
    """
    return hold_teams(read_plugin_config(path)[1])

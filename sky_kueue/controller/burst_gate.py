"""The teams' predicted-wait burst gates, and the question the controller asks its predictor.

Why per namespace: the controller sees Workloads, and a Workload belongs to a team through
its namespace (``teams.<t>.namespace``, or each entry of ``teams.<t>.clusters``). A team with a
``burst:`` section gets a gate (:class:`~sky_kueue.controller.predicted_burst.PredictedBurstSettings`
from ``burst.cloud_startup_seconds`` and ``burst.predicted_wait_margin_seconds``, defaults 600
and 300 s): once one of its jobs is due a burst by its preemptions, it goes to the clouds only
when the predicted on-prem wait of its relaunch exceeds their sum. A team whose section says
``predicted_wait_gate: false`` has no gate: its preemption count alone bursts it, as before the
gate existed. A team without a ``burst:`` section keeps that ungated rule too, which is also
all it can do: it has no burst targets of its own.

Why the teams by name as well: SkyPilot's recovery strategy without the controller's history
does not know a job's namespace, but the admin policy labels every pod it places with its team
(``sky-kueue.io/team``), so a job of a team with the gate off is not held by another team's gate.

The predictor is reached through :class:`RelaunchWait` (the controller's adapter reads its
mirror, :class:`sky_kueue.controller.safety_probe.MirrorRelaunchWait`), so this module and the
engine stay pure.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

from sky_kueue.controller.detection import WorkloadFacts
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedWaitKind

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig

log = logging.getLogger(__name__)


class RelaunchWait(Protocol):
    """The predictor's on-prem wait for a job's relaunch."""

    def relaunch_wait(self, facts: WorkloadFacts, priority: int, kind: PredictedWaitKind) -> float | None:
        """Seconds until Kueue admits the relaunch of ``facts``' job (``kind``: within nominal
        quota, or at all), as it will enter Kueue: the same pod sets and queue, at ``priority``
        (its priority after aging). For a Workload that is not pending (the preempted one,
        before SkyPilot relaunches it) the relaunch is projected as a new Workload created now.

        Returns:
            The wait; ``math.inf`` when it is not admitted within the predictor's horizon; None
            when the predictor cannot say (the mirror is not synced, some run time the wait
            depends on is unknown, or the model cannot read the cluster).
        """
        ...


@dataclass(frozen=True)
class BurstGates:
    """Namespace -> the team's gate (teams without a gate are left out), and team -> its gate.

    Attributes:
        by_namespace: every namespace of a gated team -> that team's settings.
        by_team: every team of the config -> its settings, None when it has no gate (no
            ``burst:`` section, or ``burst.predicted_wait_gate: false``).
    """

    by_namespace: Mapping[str, PredictedBurstSettings] = field(default_factory=dict)
    by_team: Mapping[str, PredictedBurstSettings | None] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return bool(self.by_namespace)

    def for_namespace(self, namespace: str | None, *, team: str | None = None) -> PredictedBurstSettings | None:
        """The gate of the team owning ``namespace``.

        An unknown namespace (None: the SkyPilot recovery strategy without the controller's
        history) gets the gate of ``team`` when that team is known (the ``sky-kueue.io/team``
        label the admin policy puts on the job's pods), else the strictest gate any team has
        (the highest threshold, the most stays), when some team has one: without a prediction
        the gate keeps the job in Kueue, and its admission timeout still bursts it.
        """
        if namespace is not None:
            return self.by_namespace.get(namespace)
        if team is not None and team in self.by_team:
            return self.by_team[team]
        if not self.by_namespace:
            return None
        gates = list(self.by_namespace.values())
        strictest = max(gates, key=lambda gate: gate.threshold_seconds)
        # ... and the most stays any team allows (None: unbounded), so no team's job bursts early.
        stays = [gate.max_stays for gate in gates]
        return replace(strictest, max_stays=None if None in stays else max(s for s in stays if s is not None))


def burst_gates(config: PluginConfig) -> BurstGates:
    """Every namespace of a team with a gate (a ``burst:`` section, ``predicted_wait_gate`` not
    false) -> that team's gate; every team -> its gate or None."""
    by_namespace: dict[str, PredictedBurstSettings] = {}
    by_team: dict[str, PredictedBurstSettings | None] = {}
    owners: dict[str, str] = {}
    for name, team in config.teams.items():
        by_team[name] = None
        if team.burst is None or not team.burst.predicted_wait_gate:
            continue
        gate = by_team[name] = team.burst.predicted_burst()
        for cluster in config.team_clusters(team):
            if cluster.namespace in by_namespace:
                log.warning(
                    "namespace %s belongs to teams %s and %s; the burst gate uses %s's settings",
                    cluster.namespace,
                    owners[cluster.namespace],
                    name,
                    owners[cluster.namespace],
                )
                continue
            by_namespace[cluster.namespace] = gate
            owners[cluster.namespace] = name
    return BurstGates(by_namespace, by_team)

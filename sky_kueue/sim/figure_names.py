"""The names ``sky-kueue simulate --plot`` and the Grafana dashboard
(``configs/grafana/sky-kueue-dashboard.json``) share for the same figures.

Why one table: an operator compares what the simulator predicted with what the cluster did;
a figure called "Preemptions per team" in one and "evictions" in the other invites the wrong
comparison. Each entry names the panel title (both), the controller series the dashboard
queries, and the axis label of the plot, which says the unit and names that series.
``tests/sim/test_figure_names.py`` checks both sides against this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SharedFigure:
    """One figure: its title everywhere, the series behind it on the dashboard, the plot's y label."""

    title: str
    metric: str
    axis_label: str


PREEMPTIONS_PER_TEAM = SharedFigure(
    "Preemptions per team",
    "sky_kueue_controller_preemptions_total",
    "preemptions (sky_kueue_controller_preemptions_total)",
)
RELAUNCHES_PER_TEAM = SharedFigure(
    "Relaunches per team",
    "sky_kueue_controller_relaunches_total",
    "relaunches (sky_kueue_controller_relaunches_total)",
)
JOBS_STARVING = SharedFigure(
    "Jobs starving",
    "sky_kueue_controller_starving_jobs",
    "jobs starving (sky_kueue_controller_starving_jobs)",
)
BURSTS_PER_TEAM = SharedFigure(
    "Bursts decided per team",
    "sky_kueue_controller_bursts_total",
    "bursts (sky_kueue_controller_bursts_total)",
)

#: A distribution per team (p50 and p99), not a count: the dashboard's quantiles of the
#: controller's histogram; the simulator's per-job time from a preemption to the next admission.
WAIT_AFTER_PREEMPTION = SharedFigure(
    "Wait after preemption",
    "sky_kueue_controller_wait_after_preemption_seconds",
    "wait after preemption, seconds (sky_kueue_controller_wait_after_preemption_seconds)",
)

#: Every per-team count both show, in the plot's order.
SHARED_FIGURES: tuple[SharedFigure, ...] = (PREEMPTIONS_PER_TEAM, RELAUNCHES_PER_TEAM, JOBS_STARVING, BURSTS_PER_TEAM)
#: Every per-team distribution (p50, p99) both show.
SHARED_DISTRIBUTIONS: tuple[SharedFigure, ...] = (WAIT_AFTER_PREEMPTION,)

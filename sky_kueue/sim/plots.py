"""PNG plots of a comparison: wait-time CDFs per class, one ClusterQueue's timeline, and the
per-team figures the Grafana dashboard shows too, under the same names
(:mod:`sky_kueue.sim.figure_names`); and the relaunch lane's sizing curve.

matplotlib is optional (not a dependency of sky-kueue): it is imported only inside
:func:`plot`, and its absence is a one-line :class:`PlotError`. The backend is forced to
``Agg`` so plotting works without a display.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sky_kueue.sim.compare import Comparison
from sky_kueue.sim.figure_names import (
    BURSTS_PER_TEAM,
    JOBS_STARVING,
    PREEMPTIONS_PER_TEAM,
    RELAUNCHES_PER_TEAM,
    SHARED_DISTRIBUTIONS,
    SHARED_FIGURES,
    WAIT_AFTER_PREEMPTION,
    SharedFigure,
)
from sky_kueue.sim.lane_sizing import LaneSweep
from sky_kueue.sim.lane_sizing import SweepPoint as LaneSweepPoint
from sky_kueue.sim.metrics import StarvationRule, percentile
from sky_kueue.sim.results import JobOutcome, JobResult

#: Width of the group of bars of one team (the runs' bars share it).
TEAM_GROUP_WIDTH = 0.8
_STARVATION = StarvationRule()

#: Per job, its contribution to each shared figure (summed per team).
_PER_JOB: dict[SharedFigure, Callable[[JobResult], int]] = {
    PREEMPTIONS_PER_TEAM: lambda job: job.preemptions,
    RELAUNCHES_PER_TEAM: lambda job: max(0, job.launches - 1),
    JOBS_STARVING: lambda job: int(_STARVATION.starved(job)),
    BURSTS_PER_TEAM: lambda job: int(job.outcome is JobOutcome.BURST),
}
#: Per job, its sample of each shared distribution (None: the job has none).
_PER_JOB_SAMPLE: dict[SharedFigure, Callable[[JobResult], float | None]] = {
    WAIT_AFTER_PREEMPTION: lambda job: job.wait_after_preemption_s,
}
#: The quantiles a distribution is drawn with (the dashboard's panel shows the same two).
DISTRIBUTION_QUANTILES = (50, 99)


class PlotError(RuntimeError):
    """The plot cannot be made (matplotlib missing, or the file cannot be written)."""


def require_matplotlib() -> Any:
    """matplotlib.pyplot with the Agg backend.

    Raises:
        PlotError: matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise PlotError("--plot needs matplotlib, which is not installed (pip install matplotlib)") from exc
    return plt


def plot(comparison: Comparison, path: Path) -> None:
    """Writes the figure to ``path``.

    Raises:
        PlotError: matplotlib is not installed, or the file cannot be written.
    """
    plt = require_matplotlib()
    fig = figure(comparison)
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)


def per_team(comparison: Comparison, shared: SharedFigure) -> dict[str, dict[str, int]]:
    """``shared``'s value per run and team (every team of the trace, 0 where nothing happened)."""
    teams = sorted({job.team for run in comparison.runs.values() for job in run.jobs})
    values = {name: dict.fromkeys(teams, 0) for name in comparison.runs}
    for name, run in comparison.runs.items():
        for job in run.jobs:
            values[name][job.team] += _PER_JOB[shared](job)
    return values


def per_team_quantiles(comparison: Comparison, shared: SharedFigure) -> dict[str, dict[str, dict[int, float]]]:
    """``shared``'s p50 and p99 per run and team, over the jobs that have a sample (teams
    without one are left out of that run, as the dashboard shows no series for them)."""
    values: dict[str, dict[str, dict[int, float]]] = {}
    for name, run in comparison.runs.items():
        samples: dict[str, list[float]] = {}
        for job in run.jobs:
            sample = _PER_JOB_SAMPLE[shared](job)
            if sample is not None:
                samples.setdefault(job.team, []).append(sample)
        values[name] = {
            team: {q: percentile(sorted(found), q) for q in DISTRIBUTION_QUANTILES}
            for team, found in sorted(samples.items())
        }
    return values


def figure(comparison: Comparison) -> Any:
    """The matplotlib figure (close it with ``pyplot.close``).

    Raises:
        PlotError: matplotlib is not installed.
    """
    plt = require_matplotlib()
    classes = list(reversed(comparison.class_order))
    columns = max(len(classes), len(SHARED_FIGURES), 1 + len(SHARED_DISTRIBUTIONS))
    fig, axes = plt.subplots(3, columns, figsize=(5 * columns, 12), squeeze=False)
    for col, class_name in enumerate(classes):
        ax = axes[0][col]
        for name, run in comparison.runs.items():
            waits = sorted(j.wait_s / 3600.0 for j in run.jobs if j.priority_class == class_name)
            if not waits:
                continue
            fractions = [(i + 1) / len(waits) for i in range(len(waits))]
            ax.step(waits, fractions, where="post", label=name)
        ax.set_title(f"wait CDF: {class_name}")
        ax.set_xlabel("wait (hours)")
        ax.set_ylabel("fraction of jobs")
        ax.set_ylim(0, 1.01)
        ax.grid(True, alpha=0.3)
        ax.legend(loc="lower right")
    timeline_ax = axes[1][0]
    pending_ax = timeline_ax.twinx()
    cq = ""
    for name, run in comparison.runs.items():
        cq = run.timeline_cq
        if not run.timeline:
            continue
        hours = [p.at / 3600.0 for p in run.timeline]
        line = timeline_ax.step(hours, [p.used_gpus for p in run.timeline], where="post", label=f"{name}: GPUs used")
        pending_ax.step(
            hours,
            [p.pending for p in run.timeline],
            where="post",
            linestyle=":",
            color=line[0].get_color(),
            label=f"{name}: pending",
        )
    timeline_ax.set_title(f"ClusterQueue {cq}")
    timeline_ax.set_xlabel("simulated time (hours)")
    timeline_ax.set_ylabel("GPUs in use (solid)")
    pending_ax.set_ylabel("pending Workloads (dotted)")
    timeline_ax.grid(True, alpha=0.3)
    timeline_ax.legend(loc="upper left", fontsize="small")
    for col in range(len(classes), columns):
        axes[0][col].axis("off")
    for col, shared in enumerate(SHARED_DISTRIBUTIONS, start=1):
        team_quantiles(axes[1][col], shared, per_team_quantiles(comparison, shared))
    for col in range(1 + len(SHARED_DISTRIBUTIONS), columns):
        axes[1][col].axis("off")
    for col, shared in enumerate(SHARED_FIGURES):
        team_bars(axes[2][col], shared, per_team(comparison, shared))
    for col in range(len(SHARED_FIGURES), columns):
        axes[2][col].axis("off")
    fig.suptitle(comparison.trace.description, fontsize="small")
    fig.tight_layout()
    return fig


def team_bars(ax: Any, shared: SharedFigure, values: dict[str, dict[str, int]]) -> None:
    """Bars per team (the dashboard's ``namespace``), one per run, titled as the dashboard's panel."""
    width = TEAM_GROUP_WIDTH / max(len(values), 1)
    teams: list[str] = []
    for index, (name, by_team) in enumerate(values.items()):
        teams = list(by_team)
        positions = [t + index * width for t in range(len(teams))]
        ax.bar(positions, list(by_team.values()), width=width, label=name)
    ax.set_xticks([t + (TEAM_GROUP_WIDTH - width) / 2 for t in range(len(teams))], teams)
    ax.set_title(shared.title)
    ax.set_xlabel("team")
    ax.set_ylabel(shared.axis_label, fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")


def team_quantiles(ax: Any, shared: SharedFigure, values: dict[str, dict[str, dict[int, float]]]) -> None:
    """Per team, one bar per run at p50 with a marker at p99, titled as the dashboard's panel."""
    teams = sorted({team for by_team in values.values() for team in by_team})
    width = TEAM_GROUP_WIDTH / max(len(values), 1)
    for index, (name, by_team) in enumerate(values.items()):
        positions = [t + index * width for t, team in enumerate(teams) if team in by_team]
        present = [team for team in teams if team in by_team]
        color = f"C{index}"  # matplotlib's colour cycle: the run's bar and its p99 mark match
        ax.bar(positions, [by_team[team][50] for team in present], width=width, color=color, label=f"{name} p50")
        ax.scatter(
            positions, [by_team[team][99] for team in present], marker="_", s=200, color=color, label=f"{name} p99"
        )
    ax.set_xticks([t + (TEAM_GROUP_WIDTH - width) / 2 for t in range(len(teams))], teams)
    ax.set_title(shared.title)
    ax.set_xlabel("team")
    ax.set_ylabel(shared.axis_label, fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def plot_lane_sweep(sweep: LaneSweep, path: Path) -> None:
    """The relaunch lane's curve (:mod:`sky_kueue.sim.lane_sizing`): per scope and k, against the
    nominal GPUs carved, the max preemptions, the p99 wait after a preemption, goodput and the
    high class's p95 wait, each with the baseline as a dashed line.

    Raises:
        PlotError: matplotlib is not installed, or the file cannot be written.
    """
    plt = require_matplotlib()
    panels = (
        ("max_preemptions", "max preemptions per job"),
        ("p99_wait_after_preemption_s", "p99 wait after a preemption (s)"),
        ("goodput_pct", "goodput (%)"),
        ("high_p95_wait_s", "high class p95 wait (s)"),
    )
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    series: dict[tuple[str, int], list[LaneSweepPoint]] = {}
    for point in sweep.points:
        series.setdefault((point.scope.value, point.after_preemptions), []).append(point)
    for ax, (key, label) in zip(axes.flat, panels, strict=True):
        for (scope, k), points in series.items():
            xs = [p.carved_gpus for p in points]
            ys = [getattr(p.figures, key) for p in points]
            ax.plot(xs, ys, marker="o", label=f"{scope} lane, k={k}")
        ax.axhline(getattr(sweep.baseline, key), linestyle="--", color="grey", label="SkyPilot alone")
        ax.set_xlabel("nominal GPUs carved into lanes")
        ax.set_ylabel(label)
    axes.flat[0].legend(fontsize="small")
    best = sweep.recommended
    note = "no lane meets every target" if best is None else f"smallest meeting the targets: {best.policy} "
    if best is not None:
        note += f"{best.gpus} GPUs/lane, k={best.after_preemptions} ({best.carved_gpus} carved)"
    fig.suptitle(f"relaunch lane on {sweep.trace} (seed {sweep.seed}): {note}")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as exc:
        raise PlotError(f"{path}: cannot write the plot: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)

"""``sky-kueue simulate --lane-sweep``: the relaunch lane's size x k curve on a trace, and the
smallest lane that meets the targets (:mod:`sky_kueue.sim.lane_sizing`).

Why a mode of ``simulate``: the sweep runs on the same traces (a team's own CSV included), the
same cluster and the same settings as every other comparison, against SkyPilot alone on the
same run.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

import click

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import lane_sizing
from sky_kueue.sim.lane import LaneScope, LaneSettings
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import Trace


def run(
    trace: Trace,
    config: SimConfig,
    *,
    policy: str,
    scopes: Sequence[LaneScope],
    gpus: Sequence[int],
    after: Sequence[int],
    lane: LaneSettings,
    settings: AgingSettings,
    output: str,
    plot_path: Path | None,
    quiet: bool,
) -> None:
    """Runs the sweep and prints it (text or JSON); writes the curve's plot when asked.

    Raises:
        ModelError, UnknownSimPolicyError, PlotError: for the caller to turn into one line.
    """

    def progress(done: int, total: int) -> None:
        if not quiet:
            click.echo(f"lane sweep: {done}/{total}", err=True)

    result = lane_sizing.sweep(
        trace,
        config,
        scopes=scopes,
        gpus=gpus,
        after=after,
        lane=lane,
        policy=policy,
        settings=settings,
        progress=progress,
    )
    if output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        click.echo(text(result))
    if plot_path is not None:
        from sky_kueue.sim import plots

        plots.plot_lane_sweep(result, plot_path)
        if output != "json":
            click.echo(f"plot written to {plot_path}")


def text(result: lane_sizing.LaneSweep) -> str:
    """The curve as a table, then the recommendation (or why there is none)."""
    b = result.baseline
    lines = [
        f"relaunch lane sweep on {result.trace} (seed {result.seed}); baseline (SkyPilot alone): "
        f"max preemptions {b.max_preemptions}, relaunch-starved {b.relaunch_starved}, wait after preemption "
        f"p50 {b.p50_wait_after_preemption_s:,} s p99 {b.p99_wait_after_preemption_s:,} s, goodput "
        f"{b.goodput_pct}%, high p95 {b.high_p95_wait_s:,} s, starved {b.starved}",
        "",
        "scope   GPUs  k  carved  max-pre  r-starved  p50 wait  p99 wait  goodput  high p95  starved  misfits  missed",
    ]
    for p in result.points:
        f = p.figures
        missed = ", ".join(k for k, ok in p.met.items() if not ok) or "-"
        if p.empties_donor:
            missed += " (empties its donor: not recommended)"
        lines.append(
            f"{p.scope.value:<7} {p.gpus:>4} {p.after_preemptions:>2} {p.carved_gpus:>7} {f.max_preemptions:>8} "
            f"{f.relaunch_starved:>10} {f.p50_wait_after_preemption_s:>9,} {f.p99_wait_after_preemption_s:>9,} "
            f"{f.goodput_pct:>7}% {f.high_p95_wait_s:>9,} {f.starved:>8} {p.lane_misfits:>8}  {missed}"
        )
    lines.append("")
    best = result.recommended
    near = result.closest
    if best is None and near is not None:
        missed = ", ".join(k for k, ok in near.met.items() if not ok)
        lines.append(
            f"no lane swept meets every target; closest: {near.policy} with {near.gpus} GPUs per lane after "
            f"k={near.after_preemptions} ({near.carved_gpus} nominal GPUs carved), missing {missed}"
        )
    elif best is None:
        lines.append("no lane swept")
    else:
        lines.append(
            f"recommended: {best.policy} with {best.gpus} GPUs per lane after k={best.after_preemptions} "
            f"preemptions ({best.carved_gpus} nominal GPUs carved in all)"
        )
    return "\n".join(lines)

"""A comparison as JSON (for scripts and benchmarks) or as text tables (for people).

The JSON layout is the issue's contract::

    {"policies": {NAME: {"classes": {CLASS: {"p50_wait_s", "p95_wait_s", "p99_wait_s",
                                            "max_wait_s", "starved", ...}},
                         "preemptions_per_job_mean", "preemptions_per_job_max",
                         "lost_gpu_hours", "gpu_utilization", "bursts", ...}},
     "targets": {NAME: {... against the baseline of the same run ...}}, ...}
"""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from sky_kueue.sim.compare import Comparison
from sky_kueue.sim.metrics import CauseSplit

#: Columns of the run-wide table (one row per policy).
RUN_COLUMNS: tuple[str, ...] = (
    *("policy", "preempt/job", "max", "inverted", "lost GPU-h", "GPU util", "goodput", "bursts"),
    *("burst $", "finished", "failed", "at horizon", "wall"),
)
#: Columns of the preempted-jobs table: the user's measure, what the safe-relaunch rule did, and
#: the most-preempted job's preemptions by cause (reclaim / own higher class / own class or lower
#: / other, :func:`sky_kueue.sim.metrics.preemption_cause`).
PREEMPTED_COLUMNS: tuple[str, ...] = (
    *("policy", "preempted", "relaunch-starved", "inflation p50", "p99", "max", "wasted GPU-h/job"),
    *("holds", "released safe", "timed out", "top job a/b/c/d"),
)
#: Columns of the bursting table (one row per policy that burst).
BURST_COLUMNS: tuple[str, ...] = (
    *("policy", "bursts", "cloud GPU-h", "cloud $", "on-prem goodput vs ref", "starved avoided"),
    "$ per starved job avoided",
)
#: Columns of the targets table (one row per policy).
TARGET_COLUMNS = ("policy", "starved", "low max wait", "x lower", "high p95", "change", "util delta", "all met")


def _policy_table(title: str, columns: tuple[str, ...]) -> Table:
    """A table with one row per policy: the policy's name left-aligned, figures right-aligned."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column, justify="left" if column == "policy" else "right")
    return table


def to_json(comparison: Comparison) -> dict[str, Any]:
    trace = comparison.trace
    config = comparison.config
    return {
        "trace": {
            "name": trace.name,
            "description": trace.description,
            "jobs": len(trace.jobs),
            "teams": len(trace.cluster.queues),
            "gpu_capacity": trace.cluster.gpu_capacity,
            "arrival_end_s": trace.arrival_end_s,
            "realized_load": trace.realized_load()[0],
            "realized_load_per_team": trace.realized_load()[1],
        },
        "config": {
            "seed": config.seed,
            "cycle_interval_s": config.cycle_interval_s,
            "drain_s": config.drain_s,
            "relaunch_backoff": config.relaunch.backoff,
            "wait_limit_s": config.wait_limit_s,
            "burst_cost_per_gpu_hour": config.burst_cost_per_gpu_hour,
            "cloud_startup_s": config.cloud_startup_s,
            "cloud_startup_jitter_s": config.cloud_startup_jitter_s,
            "cloud_capacity_gpus": config.cloud_capacity_gpus,
        },
        "classes": comparison.class_order,
        "reference": comparison.reference,
        "policies": {name: m.to_json() for name, m in comparison.metrics.items()},
        "targets": {name: t.to_json() for name, t in comparison.targets.items()},
        "bursting": {name: b.to_json() for name, b in comparison.bursting.items()},
    }


def duration(seconds: float | None) -> str:
    """Seconds as ``45s``, ``12m05s``, ``3h07m`` or ``2d04h``."""
    if seconds is None:
        return "-"
    if math.isinf(seconds):
        return "inf"
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86_400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86_400}d{(s % 86_400) // 3600:02d}h"


def _causes_cell(split: CauseSplit) -> str:
    """``reclaim/higher/own-or-lower/other`` counts, or ``-`` when no job was preempted."""
    if split.total == 0:
        return "-"
    return f"{split.reclaim}/{split.higher_class}/{split.own_class_or_lower}/{split.other}"


def _mark(ok: bool) -> Text:
    return Text("yes", style="green") if ok else Text("no", style="red")


def render(comparison: Comparison) -> Group:
    """Rich renderables: waits per class, run-wide figures, targets, ETA accuracy."""
    trace = comparison.trace
    header = Text(
        f"{trace.description}\nseed {comparison.config.seed}, {len(trace.jobs)} jobs, "
        f"{trace.cluster.gpu_capacity} GPUs, cycle every {comparison.config.cycle_interval_s:g}s, "
        f"offered load {trace.realized_load()[0]:g}"
    )
    waits = Table(title="Wait per priority class (time not running before the run that counted)")
    for column in ("policy", "class", "jobs", "p50", "p95", "p99", "max", "starved", "preemptions"):
        waits.add_column(column, justify="left" if column in ("policy", "class") else "right")
    for name, m in comparison.metrics.items():
        for class_name in reversed(comparison.class_order):
            c = m.classes[class_name]
            waits.add_row(
                name,
                class_name,
                str(c.jobs),
                duration(c.p50_wait_s),
                duration(c.p95_wait_s),
                duration(c.p99_wait_s),
                duration(c.max_wait_s),
                str(c.starved),
                str(c.preemptions),
            )
        waits.add_section()
    runs = _policy_table("Run-wide", RUN_COLUMNS)
    for name, m in comparison.metrics.items():
        at_horizon = m.outcomes.get("running-at-horizon", 0) + m.outcomes.get("pending-at-horizon", 0)
        runs.add_row(
            name,
            f"{m.preemptions_per_job_mean:.3f}",
            str(m.preemptions_per_job_max),
            str(m.inverted_preemptions),
            f"{m.lost_gpu_hours:.1f}",
            f"{m.gpu_utilization:.1%}",
            f"{m.gpu_goodput:.1%}",
            str(m.bursts),
            f"{m.burst_cost:.0f}",
            str(m.outcomes.get("finished", 0)),
            str(m.outcomes.get("failed", 0)),
            str(at_horizon),
            f"{m.wall_s:.1f}s",
        )
    preempted = _policy_table(
        "Preempted jobs (inflation: completion - first submission, over run time)", PREEMPTED_COLUMNS
    )
    for name, m in comparison.metrics.items():
        preempted.add_row(
            name,
            str(m.preempted_jobs),
            str(m.relaunch_starved),
            f"{m.p50_inflation:.1f}",
            f"{m.p99_inflation:.1f}",
            f"{m.max_inflation:.1f}",
            f"{m.wasted_gpu_hours_per_preempted_job:.2f}",
            str(m.safe.holds),
            str(m.safe.released_safe),
            str(m.safe.released_timeout),
            _causes_cell(m.causes.top),
        )
    parts: list[Any] = [header, waits, runs, preempted]
    if comparison.targets:
        targets = _policy_table(f"Targets against {comparison.reference} (same trace, same seed)", TARGET_COLUMNS)
        for name, t in comparison.targets.items():
            change = "-" if t.high_p95_increase is None else f"{t.high_p95_increase:+.1%}"
            targets.add_row(
                name,
                Text(str(t.starved), style="green" if t.no_starvation_met else "red"),
                f"{duration(t.low_max_wait_s)} (was {duration(t.reference_low_max_wait_s)})",
                Text(
                    "inf" if math.isinf(t.low_max_wait_reduction) else f"{t.low_max_wait_reduction:.2f}",
                    style="green" if t.low_max_wait_met else "red",
                ),
                f"{duration(t.high_p95_wait_s)} (was {duration(t.reference_high_p95_wait_s)})",
                Text(change, style="green" if t.high_p95_met else "red"),
                Text(f"{t.utilization_delta_points:+.2f} pt", style="green" if t.utilization_met else "red"),
                _mark(t.met),
            )
        parts.append(targets)
    if comparison.bursting:
        parts.append(_bursting_table(comparison))
    with_eta = {name: m.eta for name, m in comparison.metrics.items() if m.eta is not None}
    if with_eta:
        eta_table = Table(title="ETA at submission against the actual wait until first admission")
        for column in ("policy", "jobs", "admitted", "model MAE", "naive MAE", "model within T", "naive within T"):
            eta_table.add_column(column, justify="left" if column == "policy" else "right")
        for name, e in with_eta.items():
            assert e is not None
            eta_table.add_row(
                name,
                str(e.jobs),
                str(e.admitted),
                f"{duration(e.model_mae_s)} (n={e.model_covered})",
                f"{duration(e.naive_mae_s)} (n={e.naive_covered})",
                "-" if e.model_within_accuracy is None else f"{e.model_within_accuracy:.0%}",
                "-" if e.naive_within_accuracy is None else f"{e.naive_within_accuracy:.0%}",
            )
        parts.append(eta_table)
    return Group(*parts)


def _bursting_table(comparison: Comparison) -> Table:
    config = comparison.config
    capacity = "unlimited" if config.cloud_capacity_gpus is None else f"{config.cloud_capacity_gpus} GPUs"
    jitter = f" + up to {duration(config.cloud_startup_jitter_s)}" if config.cloud_startup_jitter_s > 0 else ""
    table = _policy_table(
        f"Bursting: what it cost (cloud start-up {duration(config.cloud_startup_s)}{jitter}, capacity {capacity}, "
        f"${config.burst_cost_per_gpu_hour:g}/GPU-h)",
        BURST_COLUMNS,
    )
    for name, b in comparison.bursting.items():
        delta = b.onprem_goodput_delta_points
        table.add_row(
            name,
            str(b.bursts),
            f"{b.cloud_gpu_hours:.1f}",
            f"{b.cloud_usd:.0f}",
            "-" if delta is None else f"{delta:+.2f} pt",
            "-" if b.starved_jobs_avoided is None else str(b.starved_jobs_avoided),
            "-" if b.usd_per_starved_job_avoided is None else f"{b.usd_per_starved_job_avoided:.0f}",
        )
    return table


#: Width of the tables when stdout is not a terminal (a file or a pipe has no width).
NON_TERMINAL_WIDTH_COLUMNS = 160


def print_text(comparison: Comparison, console: Console | None = None) -> None:
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=NON_TERMINAL_WIDTH_COLUMNS)
    console.print(render(comparison))

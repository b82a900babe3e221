"""``sky-kueue simulate --clusters N``: placement by prediction against three baselines.

Every strategy replays the same jobs, with the same seed, on the same N clusters (the
trace's cluster cut into N parts, :mod:`sky_kueue.sim.multicluster`): SkyPilot's fixed
order, a load-blind round-robin, a MultiKueue-like copy in every cluster (first admission
wins), and sky-kueue's predicted placement with the run times its estimator knows
(:mod:`sky_kueue.sim.runtime_knowledge`), or, with ``--oracle-runtimes``, every true run
time: the old figure, an upper bound. Ratios are within the run (baseline over predicted).
"""

from __future__ import annotations

import json
import sys

import click

from sky_kueue.sim import multicluster
from sky_kueue.sim.policies import ResubmissionPolicy
from sky_kueue.sim.runtime_knowledge import DeclarationModel
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import Trace

#: The runs without prediction, in report order.
BASELINES = (
    multicluster.PlacementStrategy.FIXED_ORDER,
    multicluster.PlacementStrategy.ROUND_ROBIN,
    multicluster.PlacementStrategy.MULTIKUEUE,
)


def comparison(
    trace: Trace,
    policy: ResubmissionPolicy,
    clusters: int,
    config: SimConfig,
    failover_after: float | None,
    *,
    oracle_runtimes: tuple[bool, ...] = (False,),
    declarations: DeclarationModel | None = None,
) -> dict[str, object]:
    """The baselines' and predicted runs, and baseline / predicted wait ratios, as JSON-ready data.

    Args:
        oracle_runtimes: one predicted run per value (False: the estimator's run times;
            True: every true run time, an upper bound); ratios use the first.
        declarations: which jobs declare a run time, and how wrong (estimator runs).
    """
    timeout = failover_after if failover_after is not None else multicluster.SKYPILOT_ADMISSION_TIMEOUT_SECONDS
    model = declarations or DeclarationModel()
    runs = [
        multicluster.run_placement(trace, policy, clusters, strategy, config, failover_timeout_s=timeout)
        for strategy in BASELINES
    ]
    predicted_runs = [
        multicluster.run_placement(
            trace,
            policy,
            clusters,
            multicluster.PlacementStrategy.PREDICTED,
            config,
            failover_timeout_s=timeout,
            oracle_runtimes=oracle,
            declarations=model,
        )
        for oracle in oracle_runtimes
    ]
    predicted = predicted_runs[0]

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b > 0 else None

    load, _ = trace.realized_load()
    return {
        "trace": trace.description,
        "realized_load": load,
        "policy": policy.name,
        "clusters": clusters,
        "failover_after_s": timeout,
        "declared_runtimes": {"fraction": model.fraction, "factor": model.factor},
        "runs": [r.to_json() for r in runs + predicted_runs],
        "over_predicted": {
            run.label: {
                "p50_wait": ratio(run.p50_wait_s, predicted.p50_wait_s),
                "p95_wait": ratio(run.p95_wait_s, predicted.p95_wait_s),
                "p99_wait": ratio(run.p99_wait_s, predicted.p99_wait_s),
                "max_wait": ratio(run.max_wait_s, predicted.max_wait_s),
            }
            for run in runs
        },
    }


def _seconds(value: object) -> str:
    return "-" if value is None else f"{value:.0f}s"


def run(
    trace: Trace,
    policy: ResubmissionPolicy,
    clusters: int,
    config: SimConfig,
    failover_after: float | None,
    output: str,
    *,
    oracle_runtimes: bool = False,
    declarations: DeclarationModel | None = None,
) -> None:
    """Print the comparison as text or JSON."""
    data = comparison(
        trace,
        policy,
        clusters,
        config,
        failover_after,
        oracle_runtimes=(oracle_runtimes,),
        declarations=declarations,
    )
    if output == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    click.echo(f"{data['trace']} (realised load {data['realized_load']})")
    click.echo(
        f"{clusters} clusters, policy {data['policy']}, failover after {data['failover_after_s']:.0f}s in one queue"
    )
    click.echo(
        f"{'placement':<17} {'p50 wait':>10} {'p95 wait':>10} {'p99 wait':>10} {'max wait':>10} {'makespan':>10} "
        f"{'goodput':>8} {'preempt':>8}  utilisation per cluster"
    )
    runs: list[dict[str, object]] = data["runs"]  # type: ignore[assignment]
    for row in runs:
        util = " / ".join(f"{u:.1%}" for u in row["utilisation"])  # type: ignore[attr-defined]
        click.echo(
            f"{row['label']:<17} {row['p50_wait_s']:>9.0f}s {row['p95_wait_s']:>9.0f}s {row['p99_wait_s']:>9.0f}s "
            f"{row['max_wait_s']:>9.0f}s {row['makespan_s']:>9.0f}s {row['goodput']:>8.1%} {row['preemptions']:>8}  "
            f"{util}"
        )
    for row in runs:
        error: dict[str, object] | None = row["eta_error"]  # type: ignore[assignment]
        pending: dict[str, object] | None = row["eta_error_pending"]  # type: ignore[assignment]
        if error is None or pending is None:
            continue
        bound = ", an upper bound" if row["label"] == "predicted-oracle" else ""
        declared: dict[str, float] = data["declared_runtimes"]  # type: ignore[assignment]
        source = (
            "true run times"
            if bound
            else f"estimator: {declared['fraction']:.0%} declare (x{declared['factor']:g}, rounded up), else history"
        )
        click.echo(
            f"{row['label']} ETA error ({source}{bound}): {error['placements']} placements, "
            f"median {_seconds(error['median_abs_error_s'])}, p90 {_seconds(error['p90_abs_error_s'])}; "
            f"{pending['placements']} had to wait: median {_seconds(pending['median_abs_error_s'])}, "
            f"p90 {_seconds(pending['p90_abs_error_s'])}, no estimate "
            f"{(pending['no_estimate_fraction'] or 0.0):.0%}"
        )
    click.echo(f"baseline / predicted: {data['over_predicted']}")

"""``sky-kueue simulate --clusters N``: placement by prediction vs SkyPilot's fixed order.

Both strategies replay the same jobs, with the same seed, on the same N clusters (the
trace's cluster cut into N parts, :mod:`sky_kueue.sim.multicluster`); ratios are within the
run (fixed order over predicted).
"""

from __future__ import annotations

import json
import sys

import click

from sky_kueue.sim import multicluster
from sky_kueue.sim.policies import ResubmissionPolicy
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import Trace


def comparison(
    trace: Trace, policy: ResubmissionPolicy, clusters: int, config: SimConfig, failover_after: float | None
) -> dict[str, object]:
    """Both strategies' runs and the fixed-order / predicted wait ratios, as JSON-ready data."""
    timeout = failover_after if failover_after is not None else multicluster.SKYPILOT_ADMISSION_TIMEOUT_SECONDS
    runs = {
        strategy: multicluster.run_placement(trace, policy, clusters, strategy, config, failover_timeout_s=timeout)
        for strategy in multicluster.PlacementStrategy
    }
    fixed = runs[multicluster.PlacementStrategy.FIXED_ORDER]
    predicted = runs[multicluster.PlacementStrategy.PREDICTED]

    def ratio(a: float, b: float) -> float | None:
        return round(a / b, 2) if b > 0 else None

    return {
        "trace": trace.description,
        "policy": policy.name,
        "clusters": clusters,
        "failover_after_s": timeout,
        "runs": [r.to_json() for r in runs.values()],
        "fixed_over_predicted": {
            "p50_wait": ratio(fixed.p50_wait_s, predicted.p50_wait_s),
            "p95_wait": ratio(fixed.p95_wait_s, predicted.p95_wait_s),
            "max_wait": ratio(fixed.max_wait_s, predicted.max_wait_s),
        },
    }


def run(
    trace: Trace,
    policy: ResubmissionPolicy,
    clusters: int,
    config: SimConfig,
    failover_after: float | None,
    output: str,
) -> None:
    """Print the comparison as text or JSON."""
    data = comparison(trace, policy, clusters, config, failover_after)
    if output == "json":
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    click.echo(f"{data['trace']}")
    click.echo(
        f"{clusters} clusters, policy {data['policy']}, failover after {data['failover_after_s']:.0f}s in one queue"
    )
    click.echo(
        f"{'placement':<12} {'p50 wait':>10} {'p95 wait':>10} {'max wait':>10} {'goodput':>8} {'preempt':>8}  "
        "utilisation per cluster"
    )
    for row in data["runs"]:  # type: ignore[attr-defined]
        util = " / ".join(f"{u:.1%}" for u in row["utilisation"])
        click.echo(
            f"{row['strategy']:<12} {row['p50_wait_s']:>9.0f}s {row['p95_wait_s']:>9.0f}s {row['max_wait_s']:>9.0f}s "
            f"{row['goodput']:>8.1%} {row['preemptions']:>8}  {util}"
        )
    ratios = data["fixed_over_predicted"]
    click.echo(f"fixed order / predicted: {ratios}")

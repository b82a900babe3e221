"""Benchmark: placement by predicted admission against three baselines over several clusters.

The synthetic trace (:data:`JOBS` jobs, 6 teams x 32 GPUs, load :data:`LOAD`) is split over
:data:`CLUSTERS` clusters of a third of the quota each (``sky_kueue.sim.multicluster``). For
each seed of :data:`SEEDS` and each admission timeout of :data:`FAILOVER_SECONDS` (SkyPilot's
default 24 h, and a team limit of 15 min), five placements replay the same jobs with the
baseline resubmission policy (SkyPilot today): fixed order (SkyPilot alone), round-robin
(load-blind), MultiKueue-like (a copy in every cluster, first admission wins), predicted with
the run times the plugin's estimator knows (30 % of users declare, rounded up; else the team's
history; else none), and predicted with every true run time (an upper bound). Reported per run:
p50/p95/p99/max wait, makespan, utilisation per cluster, goodput, preemptions, the predicted
placements' ETA error, and the trace's realised load; ``--markdown`` prints the table of
``benchmarks/README.md``.

Run: ``.venv/bin/python benchmarks/multicluster.py [--quick] [--workers N] [--output FILE] [--markdown]``.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from sky_kueue.cli.simulate_clusters import comparison
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import policies, synthetic
from sky_kueue.sim.simulator import SimConfig

JOBS = 2_000
QUICK_JOBS = 300
LOAD = 0.85
CLUSTERS = 3
SEEDS = (0, 1, 2, 3, 4)
#: Seconds a launch waits in one cluster's queue before SkyPilot tries the next context.
FAILOVER_SECONDS = (86_400.0, 900.0)
#: Report order and names of the placements.
PLACEMENTS = (
    ("fixed-order", "fixed order"),
    ("round-robin", "round-robin"),
    ("multikueue", "MultiKueue-like"),
    ("predicted", "predicted (estimator)"),
    ("predicted-oracle", "predicted (true run times, upper bound)"),
)


def one_run(jobs: int, failover: float, seed: int) -> dict[str, Any]:
    """Every placement on one seed and admission timeout."""
    baseline = policies.resolve("baseline", AgingSettings())
    trace = synthetic.generate(synthetic.SyntheticParams(jobs=jobs, load=LOAD), random.Random(seed))
    data = comparison(trace, baseline, CLUSTERS, SimConfig(seed=seed), failover, oracle_runtimes=(False, True))
    data["seed"] = seed
    return data


def _seeds(values: list[float]) -> str:
    return " / ".join(f"{v:,.0f}" for v in values)


def _range(values: list[float], unit: str = "") -> str:
    low, high = min(values), max(values)
    return f"{low:,.0f}{unit}" if round(low) == round(high) else f"{low:,.0f}-{high:,.0f}{unit}"


def markdown(runs: list[dict[str, Any]]) -> str:
    """The README table: one row per admission timeout and placement, seeds in order."""
    lines = [
        "| admission timeout | placement | p50 wait s | p99 wait s | max wait s | makespan h | goodput % "
        "| ETA error, waiting jobs: median / p90 s (no estimate) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for failover in FAILOVER_SECONDS:
        group = sorted((r for r in runs if r["failover_after_s"] == failover), key=lambda r: r["seed"])
        for index, (label, name) in enumerate(PLACEMENTS):
            rows = [next(x for x in r["runs"] if x["label"] == label) for r in group]
            timeout = ("24 h (SkyPilot's default)" if failover == 86_400.0 else "15 min") if index == 0 else ""
            errors = [row["eta_error_pending"] for row in rows]
            if all(e is None for e in errors):
                eta = "-"
            else:
                medians = [e["median_abs_error_s"] for e in errors if e["median_abs_error_s"] is not None]
                p90s = [e["p90_abs_error_s"] for e in errors if e["p90_abs_error_s"] is not None]
                missing = [100 * (e["no_estimate_fraction"] or 0.0) for e in errors]
                waiting = [e["placements"] for e in errors]
                eta = (
                    f"{_range(medians)} / {_range(p90s)} ({_range(missing, ' %')} of {_range(waiting)})"
                    if medians
                    else f"- ({_range(missing, ' %')} of {_range(waiting)})"
                )
            lines.append(
                f"| {timeout} | {name} | {_range([row['p50_wait_s'] for row in rows])} "
                f"| {_seeds([row['p99_wait_s'] for row in rows])} | {_seeds([row['max_wait_s'] for row in rows])} "
                f"| {_range([row['makespan_s'] / 3600 for row in rows])} "
                f"| {_seeds([100 * row['goodput'] for row in rows])} | {eta} |"
            )
    loads = [r["realized_load"] for r in runs if r["failover_after_s"] == FAILOVER_SECONDS[0]]
    lines.append("")
    lines.append(
        f"Realised load per seed: {' / '.join(f'{v:.2f}' for v in loads)} (median {statistics.median(loads):.2f})."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_JOBS} jobs instead of {JOBS}")
    parser.add_argument("--workers", type=int, default=2, help="processes (default 2)")
    parser.add_argument("--output", type=Path, default=None)
    parser.add_argument("--markdown", action="store_true", help="print the README table instead of JSON")
    args = parser.parse_args(argv)
    jobs = QUICK_JOBS if args.quick else JOBS
    cases = [(jobs, failover, seed) for failover in FAILOVER_SECONDS for seed in SEEDS]
    runs: list[dict[str, Any]] = []
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = [pool.submit(one_run, *case) for case in cases]
        for future in as_completed(futures):
            data = future.result()
            runs.append(data)
            rows = {row["label"]: row for row in data["runs"]}
            print(
                f"failover {data['failover_after_s']:>7.0f}s seed {data['seed']} (load {data['realized_load']}): p99 "
                + ", ".join(f"{label} {row['p99_wait_s']:.0f}s" for label, row in rows.items()),
                file=sys.stderr,
                flush=True,
            )
    runs.sort(key=lambda r: (-r["failover_after_s"], r["seed"]))
    document = {"jobs": jobs, "load": LOAD, "clusters": CLUSTERS, "runs": runs}
    text = json.dumps(document, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n")
    if args.markdown:
        print(markdown(runs))
    elif args.output is None:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

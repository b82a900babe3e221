"""Benchmark of the starvation simulator: throughput, and baseline vs aging in one run.

Two parts, one JSON document on stdout (or ``--output FILE``):

* ``throughput``: simulated jobs per second for :data:`THROUGHPUT_JOBS` synthetic jobs on
  30 ClusterQueues (5 cohorts of 6 teams x 32 GPUs) at each offered load of
  :data:`THROUGHPUT_LOADS`, against the target of :data:`THROUGHPUT_TARGET_SECONDS` wall
  seconds, with the ratio to the run at the lowest load.
* ``comparisons``: the issue's acceptance experiment. On the Kueue performance-test mix
  and on a contended synthetic trace, every policy of :data:`COMPARE_POLICIES` replays the
  same jobs with the same seed; each is checked against the ``baseline`` of the same run
  (no starved job, low class's max wait >= 5x lower, high class's p95 <= 5 % higher,
  utilisation within 1 point). ``ladder`` and ``age`` are the registry's alternatives: one
  counts preemptions only, the other waiting time only, so the table shows which part of
  the boost formula moves which figure; ``rank`` is the ordering policy to opt in to (the
  default, ``none``, takes SkyPilot's own decisions).
* ``anti_starvation``: issue 13's comparisons, the same rows as
  ``benchmarks/anti_starvation.py`` (reclaim storms and the calibrated synthetic trace,
  seeds :data:`ANTI_STARVATION_SEEDS`, every policy in-cluster, with bursting, with
  checkpoints and with reservations, each run's criteria met), so one run reports both.

Run: ``.venv/bin/python benchmarks/simulate.py [--quick] [--output FILE]``
(``--quick`` uses about a tenth of the jobs, for a smoke test).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from sky_kueue.kueue import compiled
from sky_kueue.sim import compare, kueue_perf, policies, report, synthetic
from sky_kueue.sim.simulator import SimConfig, Simulator
from sky_kueue.sim.traces import Trace

THROUGHPUT_JOBS = 100_000
THROUGHPUT_TEAMS = 30
THROUGHPUT_COHORTS = 5
#: Offered loads of the throughput runs. The cost of a simulation is the cost of Kueue's
#: scheduling, which grows with the number of waiting Workloads (every completion returns a
#: cohort's parked Workloads to be evaluated again), so it is measured at a moderate load
#: and at one where the diurnal peak builds queues of 1,000+ Workloads.
THROUGHPUT_LOADS = (0.5, 0.7)
THROUGHPUT_TARGET_SECONDS = 300.0
#: The exact model's own speed: ``aging`` re-queues every waiting Workload whose boost
#: changes (a spec.priority update sends a parked Workload back to Kueue's heap), so its
#: cost depends on the policy's tunables; the comparisons report each policy's wall time.
THROUGHPUT_POLICIES = ("baseline",)
#: Jobs of the contended synthetic comparison (6 teams x 32 GPUs in one cohort). At load
#: 0.85 the diurnal peak exceeds capacity and large jobs queue for hours, yet the cluster
#: drains at night; above 1 the backlog grows for the whole trace and every policy's max
#: wait measures the trace's length rather than the policy.
SYNTHETIC_COMPARE_JOBS = 2_000
SYNTHETIC_COMPARE_QUICK_JOBS = 1_000
SYNTHETIC_COMPARE_LOAD = 0.85
#: The boost policies (the band policies, ``rank`` the default among them, are compared over
#: several seeds by ``benchmarks/anti_starvation.py``).
COMPARE_POLICIES = ("baseline", "bounded", "ladder", "age", "rank")
#: Seeds of the anti-starvation comparisons (``--quick``: ``--seed`` only).
ANTI_STARVATION_SEEDS = (0, 1, 2)
QUICK_FACTOR = 10


def _throughput(trace: Trace, name: str, seed: int) -> dict[str, Any]:
    started = time.perf_counter()
    cpu_started = time.process_time()
    run = Simulator(trace, policies.resolve(name), SimConfig(seed=seed)).run()
    wall = time.perf_counter() - started
    return {
        "jobs": len(trace.jobs),
        "wall_s": round(wall, 2),
        # CPU seconds of this process: on a machine shared with other work, the wall time
        # also counts the time the run waited for a core.
        "cpu_s": round(time.process_time() - cpu_started, 2),
        "jobs_per_s": round(len(trace.jobs) / wall, 1),
        "simulated_days": round(run.end_s / 86_400.0, 2),
        "speedup_vs_real_time": round(run.end_s / wall, 1),
        "cycles": run.cycles,
        "preemptions": sum(j.preemptions for j in run.jobs),
        "under_target": wall < THROUGHPUT_TARGET_SECONDS,
    }


def _comparison(trace: Trace, seed: int, eta_sample: int) -> dict[str, Any]:
    started = time.perf_counter()
    result = compare.compare(trace, list(COMPARE_POLICIES), SimConfig(seed=seed), eta_sample=eta_sample)
    data = report.to_json(result)
    data["wall_s"] = round(time.perf_counter() - started, 2)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="about a tenth of the jobs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help="write the JSON here instead of stdout")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-comparisons", action="store_true")
    parser.add_argument("--skip-anti-starvation", action="store_true")
    parser.add_argument(
        "--eta-sample", type=int, default=0, help="jobs graded for ETA accuracy per policy (slow: one projection each)"
    )
    args = parser.parse_args(argv)
    factor = QUICK_FACTOR if args.quick else 1
    # Which model ran: the mypyc build or the pure-Python modules (SKY_KUEUE_PURE=1 forces
    # the pure ones; sky_kueue/kueue/compiled.py).
    out: dict[str, Any] = {"seed": args.seed, "quick": args.quick, "model": "compiled" if compiled.in_use() else "pure"}
    if not args.skip_throughput:
        out["throughput"] = {"target_wall_s": THROUGHPUT_TARGET_SECONDS, "by_load": {}}
        reference: float | None = None
        for load in THROUGHPUT_LOADS:
            params = synthetic.SyntheticParams(
                jobs=THROUGHPUT_JOBS // factor,
                teams=THROUGHPUT_TEAMS,
                cohorts=THROUGHPUT_COHORTS,
                load=load,
            )
            trace = synthetic.generate(params, random.Random(args.seed))
            runs = {name: _throughput(trace, name, args.seed) for name in THROUGHPUT_POLICIES}
            if reference is None:
                reference = runs["baseline"]["wall_s"]
            for figures in runs.values():
                figures["wall_vs_lowest_load"] = round(figures["wall_s"] / reference, 2) if reference else None
            out["throughput"]["by_load"][str(load)] = {
                "trace": trace.description,
                "cluster_queues": len(trace.cluster.state.cluster_queues),
                "policies": runs,
            }
            print(f"throughput at load {load}: {json.dumps(runs)}", file=sys.stderr)
    if not args.skip_comparisons:
        perf = kueue_perf.KueuePerfParams()
        perf_trace = kueue_perf.generate(perf.scaled_to(perf.total_jobs // factor) if factor > 1 else perf)
        contended = synthetic.generate(
            replace(
                synthetic.SyntheticParams(),
                jobs=SYNTHETIC_COMPARE_QUICK_JOBS if args.quick else SYNTHETIC_COMPARE_JOBS,
                load=SYNTHETIC_COMPARE_LOAD,
            ),
            random.Random(args.seed),
        )
        out["comparisons"] = {}
        for label, trace in (("kueue-perf", perf_trace), ("synthetic", contended)):
            out["comparisons"][label] = _comparison(trace, args.seed, args.eta_sample // factor)
            targets = out["comparisons"][label]["targets"]
            print(f"{label}: {json.dumps({k: v['met'] for k, v in targets.items()})}", file=sys.stderr)
    if not args.skip_anti_starvation:
        import anti_starvation  # benchmarks/ is the script's directory, first on sys.path

        seeds = [args.seed] if args.quick else list(ANTI_STARVATION_SEEDS)
        out["anti_starvation"] = anti_starvation.report(seeds, anti_starvation.run(seeds))
    text = json.dumps(out, indent=2)
    if args.output is not None:
        args.output.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

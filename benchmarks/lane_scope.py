"""One relaunch lane per team or one per cohort, at the same carved quota (issue 39, item 1).

Why: ``anti_starvation.py`` compares each scope at the size the sweep chose for it, so the two
scopes differ in how much nominal quota they take as well as in how they share it. Here both
come from the same ``sky-kueue simulate --lane-sweep`` run (sizes 2-32 GPUs x k 1-2) on every
trace and seed, and a per-team lane is paired with the cohort lane that carves the same total
GPUs with the same k (for a cohort of n teams, n lanes of g GPUs against one of n x g). Each
pair is judged on issue 39's figures: the p99 wait after a preemption, relaunch-starved jobs,
max preemptions per job, the high class's p95 wait and goodput; lower is better except goodput.
Pairs where either lane empties its donor are left out (never recommended).

Kueue's perf mix is left out: one sweep there is 28 runs of 45 s each per seed.

Run: ``.venv/bin/python benchmarks/lane_scope.py [--seeds 0,1,2,3,4] [--jobs N] [--markdown]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from anti_starvation import DEFAULT_SEEDS, PERF_TRACE, TRACES, _spec, seeds_argument  # benchmarks/ is first on sys.path

from sky_kueue.sim import lane_sizing
from sky_kueue.sim.lane import LaneScope
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.sweep import START_METHOD, usable_cores

#: The figures compared, and whether a higher value is better.
FIGURES: tuple[tuple[str, bool], ...] = (
    ("p99_wait_after_preemption_s", False),
    ("relaunch_starved", False),
    ("max_preemptions", False),
    ("high_p95_wait_s", False),
    ("goodput_pct", True),
)


def _sweep(label: str, seed: int) -> dict[str, Any]:
    trace = _spec(label, seed).build()
    result = lane_sizing.sweep(trace, SimConfig(seed=seed))
    return {**result.to_json(), "trace": label}


def pairs(sweep: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(per-team point, cohort point) with the same k and the same carved GPUs."""
    cohort = {
        (p["after_preemptions"], p["carved_gpus"]): p
        for p in sweep["points"]
        if p["scope"] == LaneScope.COHORT.value and not p["empties_donor"]
    }
    out = []
    for team in sweep["points"]:
        if team["scope"] != LaneScope.TEAM.value or team["empties_donor"]:
            continue
        match = cohort.get((team["after_preemptions"], team["carved_gpus"]))
        if match is not None:
            out.append((team, match))
    return out


def verdicts(team: dict[str, Any], cohort: dict[str, Any]) -> dict[str, str]:
    """Per figure: ``team``, ``cohort`` (the better one) or ``tie``."""
    out = {}
    for name, higher_is_better in FIGURES:
        a, b = team[name], cohort[name]
        if a == b:
            out[name] = "tie"
        elif (a > b) == higher_is_better:
            out[name] = "team"
        else:
            out[name] = "cohort"
    return out


def summary(sweeps: list[dict[str, Any]]) -> dict[str, Any]:
    by_trace: dict[str, dict[str, Any]] = {}
    for sweep in sweeps:
        entry = by_trace.setdefault(
            sweep["trace"],
            {"pairs": 0, "better": {name: Counter() for name, _ in FIGURES}, "met": Counter(), "examples": []},
        )
        for team, cohort in pairs(sweep):
            entry["pairs"] += 1
            for name, who in verdicts(team, cohort).items():
                entry["better"][name][who] += 1
            entry["met"]["team"] += sum(team["met"].values())
            entry["met"]["cohort"] += sum(cohort["met"].values())
            if sweep["seed"] == 0:
                entry["examples"].append(
                    {
                        "k": team["after_preemptions"],
                        "carved": team["carved_gpus"],
                        "team_gpus": team["gpus"],
                        "team": {n: team[n] for n, _ in FIGURES},
                        "cohort": {n: cohort[n] for n, _ in FIGURES},
                    }
                )
    return {
        trace: {
            "pairs": e["pairs"],
            "better": {name: dict(c) for name, c in e["better"].items()},
            "targets_met": dict(e["met"]),
            "seed0_pairs": e["examples"],
        }
        for trace, e in by_trace.items()
    }


def markdown(result: dict[str, Any]) -> str:
    names = [name for name, _ in FIGURES]
    lines = [
        "| trace | equal-quota pairs | "
        + " | ".join(f"{n}: team / cohort / tie" for n in names)
        + " | targets met: team / cohort |",
        "| --- | --- | " + " | ".join("---" for _ in names) + " | --- |",
    ]
    for trace, e in result.items():
        cells = [
            f"{e['better'][n].get('team', 0)} / {e['better'][n].get('cohort', 0)} / {e['better'][n].get('tie', 0)}"
            for n in names
        ]
        met = e["targets_met"]
        lines.append(
            f"| {trace} | {e['pairs']} | " + " | ".join(cells) + f" | {met.get('team', 0)} / {met.get('cohort', 0)} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds_argument, default=DEFAULT_SEEDS, help="comma-separated seeds")
    parser.add_argument("--jobs", type=int, default=None, help=f"processes (default: {usable_cores()})")
    parser.add_argument("--markdown", action="store_true", help="a table instead of JSON")
    args = parser.parse_args(argv)
    seeds: list[int] = args.seeds
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs: expected at least 1, got {args.jobs}")
    workers = args.jobs or usable_cores()
    started = time.perf_counter()
    jobs = [(label, seed) for label, _, _ in TRACES if label != PERF_TRACE for seed in seeds]
    # spawned, as every sweep of the simulator's (sky_kueue.sim.sweep): no forked threads or locks
    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context(START_METHOD)) as pool:
        sweeps = list(pool.map(_sweep, *zip(*jobs, strict=True)))
    result = summary(sweeps)
    wall = time.perf_counter() - started
    if args.markdown:
        print(markdown(result))
        print(f"\n{len(sweeps)} sweeps, wall time {wall:.0f} s, {workers} workers", file=sys.stderr)
    else:
        print(json.dumps({"seeds": seeds, "by_trace": result, "wall_s": round(wall, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

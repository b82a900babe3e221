"""Anti-starvation benchmark: every policy against baseline, several seeds, the issue's criteria.

For each trace (the reclaim storms and the contended synthetic trace at load 0.85) and each
seed, one run per policy on the same jobs; every figure below is a policy against the
``baseline`` of the *same* trace and seed (SkyPilot without sky-kueue). Three settings:

* ``in-cluster``: no bursting. Criteria (issue 13): ``relaunch_starved`` at least 3x fewer
  (0 where baseline has at most 2), ``max_preemptions`` at most half of baseline's, high
  class p95 wait at most +5 %, ``in_queue_preemptions`` and ``inverted_preemptions`` no
  more than baseline, goodput at least baseline's minus one point, total starved no more
  than baseline. On the synthetic trace the issue asks only for the no-harm criteria (all but
  the first two) and the starved count (:data:`NO_HARM_ONLY_TRACES`).
* ``burst``: ``--allow-burst`` for the policies (baseline keeps SkyPilot's behaviour), with
  the default ``burst_after_preemptions`` (1) and, as ``<policy>@2``, with 2.
  Criteria: ``relaunch_starved`` 0, no job preempted more than 3 times, p99 wait after
  preemption at least 5x lower; burst GPU-hours and cost reported.
* ``checkpoint``: jobs checkpoint every :data:`CHECKPOINT_EVERY_SECONDS` (for every policy,
  baseline included): what resuming changes, reported without criteria.
* ``reserve``: a Workload waiting :data:`RESERVE_AFTER_SECONDS` reserves its cohort (the work
  Kueue would admit after it is deactivated until it runs), judged on the in-cluster criteria
  against the plain baseline (SkyPilot alone, no reservation).

Run: ``.venv/bin/python benchmarks/anti_starvation.py [--seeds 0,1,2] [--markdown]``
(JSON on stdout; ``--markdown`` prints the README's tables instead). About 2 minutes for
three seeds on one core.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

from sky_kueue.controller.aging import AgingSettings, get_policy
from sky_kueue.sim import compare, policies
from sky_kueue.sim.metrics import IN_QUEUE_REASON, PolicyMetrics
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import Trace, load_trace

TRACES = ("reclaim-storm", "reclaim-storm-hot", "synthetic")
SYNTHETIC_JOBS = 2_000
SYNTHETIC_LOAD = 0.85
IN_CLUSTER_POLICIES = ("baseline", "bounded", "rank", "protect", "keep-place")
BURST_POLICIES = ("baseline", "rank", "keep-place")
#: Burst settings shown beside the default: the policy bursts after this many preemptions.
BURST_ALTERNATIVE_PREEMPTIONS = 2
#: Traces judged on the no-harm criteria and the starved count only (issue 13's Done means).
NO_HARM_ONLY_TRACES = frozenset({"synthetic"})
#: The in-cluster criteria that ask for an improvement (the others ask for no harm).
IMPROVEMENT_CRITERIA = ("relaunch_starved", "max_preemptions")
CHECKPOINT_POLICIES = ("baseline", "rank")
CHECKPOINT_EVERY_SECONDS = 1_800.0
#: The reservation lever (``simulate --reserve-after``): policies and waits measured.
RESERVE_POLICIES = ("baseline", "rank")
RESERVE_AFTER_SECONDS = (3_600.0, 14_400.0)
RELAUNCH_STARVED_REDUCTION = 3.0
MAX_PREEMPTIONS_FRACTION = 0.5
HIGH_P95_MAX_INCREASE = 0.05
#: A p95 of 1 s (one Kueue cycle) is "no wait"; below this slack an increase is not a regression.
HIGH_P95_SLACK_SECONDS = 60.0
GOODPUT_MAX_LOSS_POINTS = 1.0
BURST_MAX_PREEMPTIONS = 3
BURST_WAIT_AFTER_PREEMPTION_REDUCTION = 5.0


@dataclass(frozen=True)
class Row:
    trace: str
    seed: int
    mode: str
    policy: str
    figures: dict[str, Any]
    met: dict[str, bool]


def _figures(m: PolicyMetrics, high: str) -> dict[str, Any]:
    return {
        "starved": m.starved,
        "relaunch_starved": m.relaunch_starved,
        "max_preemptions": m.preemptions_per_job_max,
        "in_queue_preemptions": m.preemptions_by_reason.get(IN_QUEUE_REASON, 0),
        "inverted_preemptions": m.inverted_preemptions,
        "goodput_pct": round(100 * m.gpu_goodput, 1),
        "high_p95_wait_s": round(m.classes[high].p95_wait_s),
        "lost_gpu_hours": round(m.lost_gpu_hours),
        "p99_wait_after_preemption_s": round(m.p99_wait_after_preemption_s),
        "bursts": m.bursts,
        "burst_gpu_hours": round(m.burst_gpu_hours),
        "burst_cost_usd": round(m.burst_cost),
    }


def _in_cluster(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    rs_ok = (
        f["relaunch_starved"] == 0
        if b["relaunch_starved"] <= 2
        else (f["relaunch_starved"] * RELAUNCH_STARVED_REDUCTION <= b["relaunch_starved"])
    )
    high_limit = max(b["high_p95_wait_s"] * (1 + HIGH_P95_MAX_INCREASE), b["high_p95_wait_s"] + HIGH_P95_SLACK_SECONDS)
    return {
        "relaunch_starved": rs_ok,
        "max_preemptions": f["max_preemptions"] <= MAX_PREEMPTIONS_FRACTION * b["max_preemptions"],
        "high_p95": f["high_p95_wait_s"] <= high_limit,
        "in_queue_preemptions": f["in_queue_preemptions"] <= b["in_queue_preemptions"],
        "inverted_preemptions": f["inverted_preemptions"] <= b["inverted_preemptions"],
        "goodput": f["goodput_pct"] >= b["goodput_pct"] - GOODPUT_MAX_LOSS_POINTS,
        "starved": f["starved"] <= b["starved"],
    }


def _judged_in_cluster(trace: str, f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """The in-cluster criteria the issue applies to ``trace`` (:data:`NO_HARM_ONLY_TRACES`)."""
    met = _in_cluster(f, b)
    if trace in NO_HARM_ONLY_TRACES:
        met = {k: v for k, v in met.items() if k not in IMPROVEMENT_CRITERIA}
    return met


def _burst(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    return {
        "relaunch_starved": f["relaunch_starved"] == 0,
        "max_preemptions": f["max_preemptions"] <= BURST_MAX_PREEMPTIONS,
        "p99_wait_after_preemption": f["p99_wait_after_preemption_s"] * BURST_WAIT_AFTER_PREEMPTION_REDUCTION
        <= b["p99_wait_after_preemption_s"],
    }


def _burst_policies() -> list[str | policies.ResubmissionPolicy]:
    """The burst setting's policies: defaults, then each at the alternative preemption count."""
    alternative = policies.with_burst_defaults(AgingSettings(burst_after_preemptions=BURST_ALTERNATIVE_PREEMPTIONS))
    named: list[str | policies.ResubmissionPolicy] = list(BURST_POLICIES)
    for name in BURST_POLICIES:
        if name != policies.BASELINE:
            named.append(
                policies.RegistryPolicy(
                    name=f"{name}@{BURST_ALTERNATIVE_PREEMPTIONS}", policy=get_policy(name), settings=alternative
                )
            )
    return named


def run(seeds: list[int]) -> list[Row]:
    rows: list[Row] = []
    burst_settings = policies.with_burst_defaults(AgingSettings())
    modes: tuple[tuple[str, list[str | policies.ResubmissionPolicy], dict[str, Any], AgingSettings], ...] = (
        ("in-cluster", list(IN_CLUSTER_POLICIES), {}, AgingSettings()),
        ("burst", _burst_policies(), {"allow_burst": True}, burst_settings),
        ("checkpoint", list(CHECKPOINT_POLICIES), {"checkpoint_every_s": CHECKPOINT_EVERY_SECONDS}, AgingSettings()),
    )
    for name in TRACES:
        for seed in seeds:
            if name == "synthetic":
                trace = load_trace(name, seed=seed, jobs=SYNTHETIC_JOBS, load=SYNTHETIC_LOAD)
            else:
                trace = load_trace(name, seed=seed)
            high = trace.class_order()[-1]
            for mode, names, config_changes, settings in modes:
                config = replace(SimConfig(seed=seed), **config_changes)
                result = compare.compare(trace, names, config, settings=settings)
                base = _figures(result.metrics["baseline"], high)
                if mode == "in-cluster":
                    plain_base = base  # SkyPilot alone: what the reservation rows are judged against
                for policy, metrics in result.metrics.items():
                    figures = _figures(metrics, high)
                    met: dict[str, bool] = {}
                    if policy != "baseline" and mode == "in-cluster":
                        met = _judged_in_cluster(name, figures, base)
                    elif policy != "baseline" and mode == "burst":
                        met = _burst(figures, base)
                    rows.append(Row(name, seed, mode, policy, figures, met))
                print(f"{name} seed {seed} {mode}: done", file=sys.stderr)
            rows.extend(_reserve_rows(trace, name, seed, high, plain_base=plain_base))
    return rows


def _reserve_rows(trace: Trace, name: str, seed: int, high: str, *, plain_base: dict[str, Any]) -> list[Row]:
    """The reservation lever, one run per limit, judged against SkyPilot alone (no reservation)."""
    rows: list[Row] = []
    for policy in RESERVE_POLICIES:
        for after in RESERVE_AFTER_SECONDS:
            config = replace(SimConfig(seed=seed), reserve_after_s=after)
            metrics = compare.compare(trace, [policy], config).metrics[policy]
            figures = _figures(metrics, high) | {"reservations": metrics.reservations}
            met = _judged_in_cluster(name, figures, plain_base)
            rows.append(Row(name, seed, "reserve", f"{policy}, reserve after {after / 3600:g} h", figures, met))
    print(f"{name} seed {seed} reserve: done", file=sys.stderr)
    return rows


def _spread(rows: list[Row], key: str) -> str:
    return " / ".join(f"{r.figures[key]:,}" for r in rows)


def _met_cell(row: Row) -> str:
    """``6/7`` and, when some failed, which (``6/7 no max_preemptions``)."""
    if not row.met:
        return "-"
    failed = [name for name, ok in row.met.items() if not ok]
    cell = f"{len(row.met) - len(failed)}/{len(row.met)}"
    return f"{cell} no {', '.join(failed)}" if failed else cell


def markdown(rows: list[Row]) -> str:
    """One table per mode: each cell lists the seeds' values, separated by slashes."""
    out: list[str] = []
    in_cluster = (
        "starved",
        "relaunch_starved",
        "max_preemptions",
        "in_queue_preemptions",
        "inverted_preemptions",
        "goodput_pct",
        "high_p95_wait_s",
        "lost_gpu_hours",
        "p99_wait_after_preemption_s",
    )
    columns = {
        "in-cluster": in_cluster,
        "burst": (
            "relaunch_starved",
            "max_preemptions",
            "p99_wait_after_preemption_s",
            "bursts",
            "burst_gpu_hours",
            "burst_cost_usd",
            "goodput_pct",
        ),
        "checkpoint": ("starved", "max_preemptions", "lost_gpu_hours", "goodput_pct", "p99_wait_after_preemption_s"),
        # The in-cluster columns the criteria judge, after how many reservations were taken.
        "reserve": (
            "reservations",
            *(k for k in in_cluster if k not in ("lost_gpu_hours", "p99_wait_after_preemption_s")),
        ),
    }
    for mode, keys in columns.items():
        out.append(f"\n{mode}:\n")
        out.append("| trace | policy | " + " | ".join(keys) + " | criteria met (per seed) |")
        out.append("| --- | --- | " + " | ".join("---" for _ in keys) + " | --- |")
        for trace in TRACES:
            policies_seen: list[str] = []
            for r in rows:
                if r.mode == mode and r.trace == trace and r.policy not in policies_seen:
                    policies_seen.append(r.policy)
            for policy in policies_seen:
                mine = [r for r in rows if r.mode == mode and r.trace == trace and r.policy == policy]
                met = " / ".join(_met_cell(r) for r in mine)
                cells = " | ".join(_spread(mine, k) for k in keys)
                out.append(f"| {trace} | {policy} | {cells} | {met} |")
    return "\n".join(out)


def report(seeds: list[int], rows: list[Row]) -> dict[str, Any]:
    """The JSON document of a run (also ``benchmarks/simulate.py``'s ``anti_starvation`` part)."""
    return {
        "seeds": seeds,
        "rows": [r.__dict__ for r in rows],
        "all_criteria_met": {f"{r.trace}/{r.seed}/{r.mode}/{r.policy}": all(r.met.values()) for r in rows if r.met},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    parser.add_argument("--markdown", action="store_true", help="print the README's tables instead of JSON")
    args = parser.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        parser.error(f"--seeds: expected comma-separated integers, got {args.seeds!r}")
    started = time.perf_counter()
    rows = run(seeds)
    if args.markdown:
        print(markdown(rows))
    else:
        print(json.dumps({**report(seeds, rows), "wall_s": round(time.perf_counter() - started, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

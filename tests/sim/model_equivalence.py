"""The Kueue model's answers on the benchmark traces, as digests recorded before a speed-up.

Why: issue 38 makes the model faster "without changing one decision". The oracle sets check
every cycle against Kueue on small scenarios; this checks that the simulator's whole record
(every job's admissions, preemptions with their causes, waits, the timeline, the summary JSON)
and the ETA projection are byte-identical to what the model gave before, on every benchmark
trace (the synthetic trace at both shapes the benchmarks use, Kueue's perf mix, both reclaim
storms, ``dev-starvation``), several seeds and the policies that reach every part of the model
(boosts, bands, protected places, the safe-relaunch hold, the predicted-wait burst gate, the
relaunch lane, bursting, checkpoints, reservations, ETA sampling).

A case's digest is the SHA-256 of the canonical JSON of its output (wall times removed). The
digests of :data:`DIGESTS_FILE` were recorded by this module from the model before its first
speed-up (commit message says which); ``tests/sim/test_model_equivalence.py`` compares. Tiers:
``fast`` (the inner loop, a few seconds), ``slow`` (marked slow in the suite), ``full``
(this module only: ``python -m tests.sim.model_equivalence --check --tier full``, minutes).

Run ``python -m tests.sim.model_equivalence --record`` only when a change is *meant* to change
the model's answers, and say so in the commit.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import importlib.util
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.kueue import eta
from sky_kueue.sim import compare, policies, synthetic, traces
from sky_kueue.sim.lane import LaneScope, LaneSettings
from sky_kueue.sim.simulator import SimConfig

DIGESTS_FILE = Path(__file__).resolve().parent / "model_equivalence_digests.json"
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
TIERS = ("fast", "slow", "full")


@dataclass(frozen=True)
class SimCase:
    """One simulator run: a trace (by generator arguments), a policy and settings."""

    name: str
    tier: str
    trace: str
    seed: int
    policy: str
    jobs: int | None = None
    load: float | None = None
    #: The throughput benchmark's shape (30 teams in 5 cohorts) instead of the default 6 in 1.
    wide: bool = False
    burst: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    lane: tuple[LaneScope, int, int] | None = None
    eta_sample: int = 0


@dataclass(frozen=True)
class EtaCase:
    """The ETA projection of every pending Workload of the predictor benchmark's cluster at a scale."""

    name: str
    tier: str
    cluster_queues: int
    cohorts: int
    admitted: int
    pending: int


Case = SimCase | EtaCase


def _trace(case: SimCase) -> traces.Trace:
    if case.wide:
        params = synthetic.SyntheticParams(jobs=case.jobs, teams=30, cohorts=5, load=case.load or 0.7)
        return synthetic.generate(params, random.Random(case.seed))
    return traces.load_trace(case.trace, seed=case.seed, jobs=case.jobs, load=case.load)


def _policy(case: SimCase) -> policies.ResubmissionPolicy:
    settings = policies.with_burst_defaults(AgingSettings()) if case.burst else AgingSettings()
    if case.lane is not None:
        scope, gpus, after = case.lane
        suffix = policies.LANE_SUFFIX if scope is LaneScope.TEAM else policies.COHORT_LANE_SUFFIX
        return policies.resolve(case.policy + suffix, lane=LaneSettings(gpus=gpus, after_preemptions=after))
    return policies.resolve(case.policy, settings)


def _without_wall(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_wall(v) for k, v in value.items() if k != "wall_s"}
    if isinstance(value, list | tuple):
        return [_without_wall(v) for v in value]
    return value


def canonical(value: Any) -> str:
    """The JSON every digest is taken of: sorted keys, wall times dropped, enums by value."""
    return json.dumps(_without_wall(value), sort_keys=True, default=str, separators=(",", ":"))


def sim_output(case: SimCase) -> dict[str, Any]:
    """Everything the run produced: each job's record and the policy's summary."""
    config = replace(SimConfig(seed=case.seed), allow_burst=case.burst, **case.config)
    run, metrics = compare.run_policy(_trace(case), _policy(case), config, eta_sample=case.eta_sample)
    return {"run": dataclasses.asdict(run), "metrics": metrics.to_json()}


def _predictor_benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("predictor_benchmark", BENCHMARKS / "predictor.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def eta_output(case: EtaCase) -> dict[str, Any]:
    """Each pending Workload's ETA (seconds, what it waits for and preempts) with the
    benchmark's run times: the projection the burst gate and ``predict`` share."""
    bench = _predictor_benchmark()
    state = bench.large_state(case.cluster_queues, case.cohorts, case.admitted, case.pending)
    now = bench.predictor.DEFAULT_NOW
    runs = bench.large_run_seconds(state, now)
    wanted = sorted(key for key, wl in state.workloads.items() if wl.admission is None)
    found = eta.estimate(state, wanted, lambda wl: runs[wl.key], now)
    return {key: dataclasses.asdict(value) for key, value in sorted(found.items())}


def output(case: Case) -> dict[str, Any]:
    return sim_output(case) if isinstance(case, SimCase) else eta_output(case)


def digest(case: Case) -> str:
    return hashlib.sha256(canonical(output(case)).encode()).hexdigest()


def _cases() -> list[Case]:
    out: list[Case] = []

    def sim(tier: str, trace: str, seed: int, policy: str, **kwargs: Any) -> None:
        label = kwargs.pop("label", "")
        size = "".join(f"@{key}={kwargs[key]}" for key in ("jobs", "load") if key in kwargs)
        name = f"{trace}{'-wide' if kwargs.get('wide') else ''}{size}/s{seed}/{policy}{label}"
        out.append(SimCase(name=name, tier=tier, trace=trace, seed=seed, policy=policy, **kwargs))

    # fast: every trace once, small, with policies that reach most of the model
    sim("fast", "reclaim-storm", 0, "baseline", jobs=300)
    sim("fast", "reclaim-storm", 0, "safe-place", jobs=300)
    sim("fast", "reclaim-storm-hot", 1, "rank+predicted", jobs=300, burst=True, label="/burst")
    sim("fast", "dev-starvation", 0, "rank+safe", jobs=300)
    sim("fast", "dev-starvation", 0, "rank", jobs=300, lane=(LaneScope.TEAM, 4, 2), label="+lane")
    sim("fast", "kueue-perf", 0, "bounded", jobs=500)
    sim("fast", "synthetic", 0, "baseline", jobs=800, load=0.85, eta_sample=10, label="/eta")
    sim("fast", "synthetic", 0, "baseline", jobs=3000, load=0.7, wide=True)
    out.append(EtaCase("eta/10cq", "fast", 10, 2, 1000, 100))
    # slow: the anti-starvation benchmark's traces, seeds 0-1, its policies, smaller
    anti = {
        "reclaim-storm": {},
        "reclaim-storm-hot": {},
        "dev-starvation": {},
        "synthetic": {"jobs": 1000, "load": 0.85},
    }
    for trace, kwargs in anti.items():
        for seed in (0, 1):
            for policy in ("baseline", "rank", "keep-place", "rank+safe", "safe-place"):
                sim("slow" if seed == 0 else "full", trace, seed, policy, **kwargs)
            for policy in ("baseline", "rank", "rank+safe", "rank+predicted", "safe-place"):
                sim("slow" if seed == 0 else "full", trace, seed, policy, burst=True, label="/burst", **kwargs)
            sim("full", trace, seed, "rank", lane=(LaneScope.COHORT, 4, 1), label="+cohort-lane", **kwargs)
            sim("full", trace, seed, "rank", config={"checkpoint_every_s": 1800.0}, label="/checkpoint", **kwargs)
            sim("full", trace, seed, "rank", config={"reserve_after_s": 3600.0}, label="/reserve", **kwargs)
    for policy in ("baseline", "bounded", "ladder", "age", "rank"):
        sim("slow", "kueue-perf", 0, policy, jobs=1500)
        sim("full", "synthetic", 1, policy, jobs=2000, load=0.85)
    sim("slow", "synthetic", 0, "baseline", jobs=4000, load=0.7, wide=True)
    sim("full", "synthetic", 1, "baseline", jobs=10000, load=0.7, wide=True)
    sim("full", "synthetic", 0, "baseline", jobs=10000, load=0.5, wide=True)
    sim("full", "kueue-perf", 0, "rank", eta_sample=20, label="/eta")
    out.append(EtaCase("eta/20cq", "slow", 20, 4, 2000, 200))
    out.append(EtaCase("eta/100cq", "full", 100, 10, 10000, 1000))
    return out


CASES: list[Case] = _cases()


def cases(tier: str) -> list[Case]:
    """The cases of ``tier`` alone."""
    return [case for case in CASES if case.tier == tier]


def recorded() -> dict[str, str]:
    return dict(json.loads(DIGESTS_FILE.read_text())["digests"])


def _each(selected: list[Case], report: Callable[[Case, str, float], None]) -> None:
    for case in selected:
        started = time.process_time()
        value = digest(case)
        report(case, value, time.process_time() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--record", action="store_true", help="write every tier's digests (changes the reference)")
    action.add_argument("--check", action="store_true", help="compare against the recorded digests")
    parser.add_argument("--tier", choices=TIERS, action="append", help="with --check: these tiers (default: all)")
    parser.add_argument("--note", default="", help="with --record: where the digests come from")
    args = parser.parse_args(argv)
    if args.record:
        digests: dict[str, str] = {}

        def keep(case: Case, value: str, seconds: float) -> None:
            digests[case.name] = value
            print(f"{seconds:7.2f}s {case.tier:4} {case.name}", flush=True)

        _each(CASES, keep)
        DIGESTS_FILE.write_text(json.dumps({"note": args.note, "digests": digests}, indent=1, sort_keys=True) + "\n")
        return 0
    want = recorded()
    selected = [c for c in CASES if c.tier in (args.tier or TIERS)]
    failed: list[str] = []

    def check(case: Case, value: str, seconds: float) -> None:
        same = want.get(case.name) == value
        if not same:
            failed.append(case.name)
        print(f"{seconds:7.2f}s {case.tier:4} {'same' if same else 'DIFFERENT'} {case.name}", flush=True)

    _each(selected, check)
    print(f"{len(selected) - len(failed)}/{len(selected)} identical", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

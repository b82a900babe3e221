"""Sweeps on several processes give the serial run's results, in the described order."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.aging import AgingSettings, get_policy
from sky_kueue.sim import policies, report, sweep
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import TraceError

#: Small traces that still preempt: a dev team on borrowed quota, a contended synthetic mix.
TRACES = (
    sweep.TraceSpec("dev-starvation", seed=0, hours=6),
    sweep.TraceSpec("synthetic", seed=1, jobs=150, load=1.4),
)


def measured_time_dropped(document: Any) -> Any:
    """``document`` without ``wall_s``, the one figure that is the host's, not the model's."""
    if isinstance(document, dict):
        return {key: measured_time_dropped(value) for key, value in document.items() if key != "wall_s"}
    if isinstance(document, list):
        return [measured_time_dropped(value) for value in document]
    return document


def small_sweep() -> list[sweep.SweepRun]:
    """Policies x traces, with a policy described by tuned parameters (as a lane size would be)."""
    burst = policies.with_burst_defaults(AgingSettings())
    tuned = policies.RegistryPolicy(
        name="rank@2", policy=get_policy("rank"), settings=replace(burst, burst_after_preemptions=2)
    )
    runs = []
    for spec in TRACES:
        for name in ("baseline", "rank+safe", "keep-place"):
            runs.append(sweep.SweepRun(spec, policies.resolve(name), SimConfig(seed=spec.seed)))
        runs.append(sweep.SweepRun(spec, tuned, SimConfig(seed=spec.seed, allow_burst=True)))
    return runs


def test_parallel_sweep_gives_the_serial_results_in_order() -> None:
    runs = small_sweep()
    serial = sweep.run_sweep(runs, workers=1)
    arrived: list[str] = []
    # Heaviest first reverses the start order, so completion order differs from the input's.
    parallel = sweep.run_sweep(
        runs,
        workers=2,
        weight=lambda run: -runs.index(run),
        on_done=lambda r: arrived.append(f"{r.run.trace.source}/{r.run.policy.name}"),
    )
    assert [f"{r.run.trace.source}/{r.run.policy.name}" for r in parallel] == [
        f"{r.trace.source}/{r.policy.name}" for r in runs
    ]
    assert sorted(arrived) == sorted(f"{r.trace.source}/{r.policy.name}" for r in runs)
    assert sum(m.metrics.preempted_jobs for m in serial) > 0, "the sweep must exercise preemptions"
    for one, other in zip(serial, parallel, strict=True):
        assert replace(one.metrics, wall_s=0) == replace(other.metrics, wall_s=0)
        assert one.records is not None and other.records is not None
        assert replace(one.records, wall_s=0) == replace(other.records, wall_s=0)
    for spec in TRACES:
        trace = spec.build()
        mine = [i for i, run in enumerate(runs) if run.trace == spec and not run.config.allow_burst]
        as_json = [
            json.dumps(measured_time_dropped(report.to_json(sweep.comparison(trace, [results[i] for i in mine]))))
            for results in (serial, parallel)
        ]
        assert as_json[0] == as_json[1]


def test_a_failing_run_fails_the_sweep_with_its_error(tmp_path: Path) -> None:
    missing = sweep.TraceSpec(str(tmp_path / "missing.csv"), seed=0)
    runs = [sweep.SweepRun(spec, policies.resolve("baseline"), SimConfig()) for spec in (TRACES[0], missing)]
    with pytest.raises(TraceError, match=r"missing\.csv"):
        sweep.run_sweep(runs, workers=2)
    with pytest.raises(ValueError, match="workers: expected at least 1, got 0"):
        sweep.run_sweep(runs, workers=0)


def test_comparison_refuses_results_it_cannot_assemble() -> None:
    run = sweep.SweepRun(TRACES[1], policies.resolve("baseline"), SimConfig(seed=1), keep_records=False)
    (result,) = sweep.run_sweep([run])
    assert result.records is None
    with pytest.raises(ValueError, match="without keep_records"):
        sweep.comparison(TRACES[1].build(), [result])


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux's")
def test_the_default_workers_are_the_cores_this_process_may_use() -> None:
    assert sweep.usable_cores() == len(os.sched_getaffinity(0))


def simulate(*args: str) -> str:
    result = CliRunner().invoke(cli, ["simulate", "--trace", "dev-starvation", "--hours", "6", "--quiet", *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_simulate_seeds_on_two_workers_print_the_serial_json() -> None:
    common = ("--policies", "baseline,rank+safe", "--seeds", "0,3", "--output", "json")
    outputs = [measured_time_dropped(json.loads(simulate(*common, "--workers", w))) for w in ("2", "1")]
    assert json.dumps(outputs[0]) == json.dumps(outputs[1])  # key order too
    document = outputs[0]
    assert [run["config"]["seed"] for run in document["runs"]] == [0, 3]
    assert document["seeds"] == [0, 3]
    # One seed prints the single comparison exactly as --seed does.
    one = simulate("--policies", "baseline,rank+safe", "--seeds", "3", "--output", "json", "--workers", "2")
    assert measured_time_dropped(json.loads(one)) == document["runs"][1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--seeds", "0,x"), "--seeds: expected comma-separated integers, got '0,x'"),
        (("--seeds", "1,1"), "--seeds: a seed is listed twice: 1,1"),
        (("--seeds", "0,1", "--plot", "p.png"), "--plot draws one seed's runs"),
        (("--seeds", "0,1", "--clusters", "2"), "--seeds is modelled for one cluster"),
        (("--workers", "0"), "Invalid value for '--workers'"),
    ],
)
def test_bad_sweep_options_are_one_line(args: tuple[str, ...], message: str) -> None:
    result = CliRunner().invoke(cli, ["simulate", "--trace", "reclaim-storm", "--hours", "1", "--quiet", *args])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output

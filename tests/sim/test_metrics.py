"""Metric definitions on hand-made records."""

from __future__ import annotations

import math
from collections.abc import Iterable

from sky_kueue.sim import metrics
from sky_kueue.sim.results import JobOutcome, JobResult, RunResult


def job(
    job_id: str,
    klass: str,
    wait: float,
    run: float = 100.0,
    preemptions: int = 0,
    outcome: JobOutcome = JobOutcome.FINISHED,
    gpus: int = 1,
) -> JobResult:
    return JobResult(
        job_id=job_id,
        team="a",
        cluster_queue="a-cq",
        priority_class=klass,
        base_priority={"low": 50, "high": 200}[klass],
        gpus=gpus,
        submit_s=0.0,
        duration_s=run,
        outcome=outcome,
        wait_s=wait,
        first_admission_wait_s=wait,
        preemptions=preemptions,
        lost_gpu_s=preemptions * 10.0 * gpus,
        max_boost=0,
        launches=preemptions + 1,
    )


def run_of(policy: str, jobs: Iterable[JobResult], busy: float = 500.0) -> RunResult:
    return RunResult(
        policy=policy,
        jobs=tuple(jobs),
        window_s=100.0,
        end_s=1000.0,
        gpu_capacity=10,
        busy_gpu_s=busy,
        useful_gpu_s=busy - 10.0,
        cycles=1,
    )


def test_nearest_rank_percentiles() -> None:
    values = [float(v) for v in range(1, 101)]
    assert metrics.percentile(values, 50) == 50
    assert metrics.percentile(values, 95) == 95
    assert metrics.percentile(values, 99) == 99
    assert metrics.percentile([7.0], 99) == 7
    assert metrics.percentile([], 50) == 0


def test_starved_needs_both_the_runtime_multiple_and_the_floor() -> None:
    rule = metrics.StarvationRule(runtime_multiple=10, min_wait_s=3600)
    assert rule.starved(job("a", "low", wait=4000, run=100))
    assert not rule.starved(job("b", "low", wait=3000, run=100))  # under the floor
    assert not rule.starved(job("c", "low", wait=4000, run=1000))  # under 10x its run time


def test_summary_per_class_and_run_wide() -> None:
    jobs = [job(f"l{i}", "low", wait=float(i * 1000), preemptions=i % 3) for i in range(10)]
    jobs += [job("h", "high", wait=5.0, outcome=JobOutcome.PENDING_AT_HORIZON)]
    m = metrics.summarize(run_of("x", jobs), ["low", "high"])
    assert m.classes["low"].max_wait_s == 9000
    assert m.classes["low"].p50_wait_s == 4000
    assert m.classes["low"].starved == 6  # waits 4000..9000 > max(3600, 10 x 100)
    assert m.classes["high"].jobs == 1
    assert m.outcomes["pending-at-horizon"] == 1
    assert m.preemptions_per_job_max == 2
    assert math.isclose(m.preemptions_per_job_mean, 9 / 11)
    assert math.isclose(m.lost_gpu_hours, 90.0 / 3600)
    assert math.isclose(m.gpu_utilization, 0.5)
    data = m.to_json()
    classes = data["classes"]
    assert isinstance(classes, dict)
    for key in ("p50_wait_s", "p95_wait_s", "p99_wait_s", "max_wait_s", "starved"):
        assert key in classes["low"]
    for key in ("preemptions_per_job_mean", "preemptions_per_job_max", "lost_gpu_hours", "gpu_utilization", "bursts"):
        assert key in data


def test_targets_against_the_baseline() -> None:
    base = metrics.summarize(
        run_of("baseline", [job("l", "low", wait=50_000), job("h", "high", wait=100)], busy=500), ["low", "high"]
    )
    good = metrics.summarize(
        run_of("aging", [job("l", "low", wait=9_000, run=1000), job("h", "high", wait=104)], busy=505),
        ["low", "high"],
    )
    check = metrics.check_targets(good, base, ["low", "high"])
    assert math.isclose(check.low_max_wait_reduction, 50_000 / 9_000)
    assert math.isclose(check.high_p95_increase or 0, 0.04)
    assert math.isclose(check.utilization_delta_points, 0.5)
    assert check.met
    bad = metrics.summarize(
        run_of("ladder", [job("l", "low", wait=20_000), job("h", "high", wait=400)], busy=400), ["low", "high"]
    )
    check = metrics.check_targets(bad, base, ["low", "high"])
    assert not check.no_starvation_met and not check.low_max_wait_met
    assert not check.high_p95_met and not check.utilization_met and not check.met

"""Bursting as it really costs (issue 27): cloud start-up, cloud capacity, and the report."""

from __future__ import annotations

from dataclasses import replace

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.sim import policies
from sky_kueue.sim.burst_cost import burst_cost
from sky_kueue.sim.metrics import PolicyMetrics, summarize
from sky_kueue.sim.results import JobOutcome
from sky_kueue.sim.simulator import (
    DEFAULT_CLOUD_STARTUP_JITTER_SECONDS,
    DEFAULT_CLOUD_STARTUP_SECONDS,
    SimConfig,
    simulate,
)
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id


def blocked_team(jobs: int, gpus: int = 1) -> Trace:
    """One GPU of quota held for 10 h by ``hog``; ``jobs`` more jobs that burst after 60 s."""
    builder = TraceBuilder().team("a", gpus=gpus, wait_limit=60).job("hog", at=0, gpus=gpus, run=36_000)
    for i in range(jobs):
        builder.job(f"j{i}", at=1 + i, gpus=gpus, run=1_000)
    return builder.trace()


def test_defaults_are_a_ten_minute_start_up_without_jitter_and_unlimited_capacity() -> None:
    config = SimConfig()
    assert DEFAULT_CLOUD_STARTUP_SECONDS == 600.0
    assert DEFAULT_CLOUD_STARTUP_JITTER_SECONDS == 0.0
    assert (config.cloud_startup_s, config.cloud_startup_jitter_s, config.cloud_capacity_gpus) == (600.0, 0.0, None)


@pytest.mark.parametrize("startup", [0.0, 600.0, 1_800.0])
def test_a_burst_with_start_up_s_starts_s_later_and_waits_and_pays_for_it(startup: float) -> None:
    config = replace(NO_DELAY, cloud_startup_s=startup, burst_cost_per_gpu_hour=3.6)
    job = by_id(simulate(blocked_team(1), policies.resolve("baseline"), config))["j0"]
    assert job.outcome is JobOutcome.BURST
    decided = 1 + 60  # submitted at t=1, burst at its 60 s wait limit
    assert job.last_admission_s == decided + startup
    assert job.wait_s == 60 + startup
    assert job.end_s == decided + startup + 1_000
    assert job.cloud_startup_s == startup
    assert job.burst_cost == pytest.approx((startup + 1_000) / 3600 * 3.6)  # the start-up is billed


def test_start_up_jitter_is_seeded_and_within_its_bound() -> None:
    def startups(seed: int) -> list[float]:
        config = replace(NO_DELAY, seed=seed, cloud_startup_s=600.0, cloud_startup_jitter_s=300.0)
        run = simulate(blocked_team(5), policies.resolve("baseline"), config)
        return [j.cloud_startup_s for j in run.jobs if j.outcome is JobOutcome.BURST]

    first = startups(3)
    assert len(first) == 5
    assert all(600.0 <= s <= 900.0 for s in first)
    assert len(set(first)) == 5  # drawn per burst
    assert startups(3) == first  # reproducible for a seed
    assert startups(4) != first


def test_capacity_n_makes_the_next_concurrent_burst_wait_for_a_cloud_run_to_end() -> None:
    config = replace(NO_DELAY, cloud_startup_s=100.0, cloud_capacity_gpus=2)
    jobs = by_id(simulate(blocked_team(3), policies.resolve("baseline"), config))
    # j0 and j1 burst at t=61 and t=62 and get the two cloud GPUs at once.
    assert jobs["j0"].last_admission_s == 61 + 100
    assert jobs["j1"].last_admission_s == 62 + 100
    # j2 (the third concurrent burst, at t=63) waits until j0's cloud run ends at 161 + 1000.
    third = jobs["j2"]
    assert third.outcome is JobOutcome.BURST
    freed = 61 + 100 + 1_000
    assert third.last_admission_s == freed + 100
    assert third.wait_s == freed + 100 - 3  # counted as waiting from its submission at t=3
    assert third.end_s == freed + 100 + 1_000


def test_a_burst_waiting_for_capacity_counts_as_starved() -> None:
    # Capacity 1 and 20 bursts of 1,000 s: the last waits about 19 x 1,100 s > 10 x its run time.
    config = replace(NO_DELAY, cloud_startup_s=100.0, cloud_capacity_gpus=1)
    run = simulate(blocked_team(20), policies.resolve("baseline"), config)
    last = by_id(run)["j19"]
    assert last.wait_s == pytest.approx(60 + 19 * 1_100 + 100 - 19, abs=20)
    assert summarize(run, ["low", "high"]).starved > 0
    unlimited = simulate(blocked_team(20), policies.resolve("baseline"), replace(config, cloud_capacity_gpus=None))
    assert summarize(unlimited, ["low", "high"]).starved == 0


def test_a_burst_larger_than_the_cloud_never_starts_and_is_pending_at_the_horizon() -> None:
    config = replace(NO_DELAY, cloud_startup_s=100.0, cloud_capacity_gpus=1)
    run = simulate(blocked_team(1, gpus=2), policies.resolve("baseline"), config)
    job = by_id(run)["j0"]
    assert job.outcome is JobOutcome.PENDING_AT_HORIZON
    assert job.last_admission_s is None
    assert job.wait_s == run.end_s - 1  # waited from its submission to the end of the run


def metrics(name: str, *, starved: int, goodput: float, bursts: int = 0, usd: float = 0.0) -> PolicyMetrics:
    run_metrics = summarize(simulate(blocked_team(0), policies.resolve("baseline"), NO_DELAY), ["low", "high"])
    return replace(
        run_metrics,
        policy=name,
        starved=starved,
        gpu_goodput=goodput,
        bursts=bursts,
        burst_cost=usd,
        burst_gpu_hours=usd / 4.0,
    )


def test_spend_per_starved_job_avoided_is_the_cloud_bill_over_the_starved_jobs_fewer_than_baseline() -> None:
    baseline = metrics("baseline", starved=7, goodput=0.80)
    policy = metrics("rank", starved=2, goodput=0.75, bursts=9, usd=1_000.0)
    cost = burst_cost(policy, baseline)
    assert cost.starved_jobs_avoided == 5
    assert cost.usd_per_starved_job_avoided == pytest.approx(200.0)
    assert cost.onprem_goodput_delta_points == pytest.approx(-5.0)
    assert (cost.cloud_usd, cost.cloud_gpu_hours) == (1_000.0, 250.0)
    # No starved job avoided (or more starved): the spend bought none, so no ratio.
    assert burst_cost(replace(policy, starved=7), baseline).usd_per_starved_job_avoided is None
    assert burst_cost(replace(policy, starved=9), baseline).starved_jobs_avoided == -2
    alone = burst_cost(policy, None)
    assert (alone.reference, alone.onprem_goodput_delta_points, alone.usd_per_starved_job_avoided) == (None, None, None)


def test_simulate_reports_the_bursting_cost_in_json_and_text() -> None:
    import json

    runner = CliRunner()
    args = ["simulate", "--trace", "reclaim-storm", "--hours", "3", "--policies", "baseline,rank", "--allow-burst"]
    args += ["--cloud-startup", "600", "--cloud-capacity", "64", "-q"]
    result = runner.invoke(cli, [*args, "--output", "json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["config"]["cloud_startup_s"] == 600.0
    assert out["config"]["cloud_capacity_gpus"] == 64
    rank = out["bursting"]["rank"]
    assert rank["bursts"] == out["policies"]["rank"]["bursts"] > 0
    assert rank["reference"] == "baseline"
    goodput_delta = (out["policies"]["rank"]["gpu_goodput"] - out["policies"]["baseline"]["gpu_goodput"]) * 100
    assert rank["onprem_goodput_delta_points"] == pytest.approx(goodput_delta, abs=0.02)
    text = runner.invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "Bursting: what it cost (cloud start-up 10m00s, capacity 64 GPUs" in text.output
    bad = runner.invoke(cli, ["simulate", "--cloud-capacity", "-1", "-q"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output

"""A trace small enough to check by hand, end to end through Kueue's model."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import policies
from sky_kueue.sim.relaunch import RelaunchModel
from sky_kueue.sim.results import JobOutcome
from sky_kueue.sim.simulator import SimConfig, simulate
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id


def preempted_low_job() -> Trace:
    # One team, 4 GPUs. A low job takes them all at t=0; a high job arrives at t=10 and
    # preempts it (InClusterQueue, LowerPriority); the low job is relaunched as a new
    # Workload and runs again from scratch when the high job ends at t=60.
    return (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=100, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .trace()
    )


def test_preempted_job_is_relaunched_at_the_back_and_reruns_from_scratch() -> None:
    run = simulate(preempted_low_job(), policies.resolve("baseline"), NO_DELAY)
    jobs = by_id(run)
    low, high = jobs["low-1"], jobs["high-1"]
    assert high.outcome is JobOutcome.FINISHED
    assert high.wait_s == 0
    assert high.end_s == 60
    assert low.outcome is JobOutcome.FINISHED
    assert low.preemptions == 1
    assert low.launches == 2
    assert low.first_admission_wait_s == 0
    assert low.wait_s == 50  # preempted at 10, readmitted at 60
    assert low.lost_gpu_s == 4 * 10
    assert low.end_s == 160
    assert run.preemptions_by_reason == {"InClusterQueue": 1}
    # Loaded period [0, 10]: the low job held all 4 GPUs, and that work was lost.
    assert run.window_s == 10
    assert run.busy_gpu_s == 40
    assert run.useful_gpu_s == 0


def test_recovery_backoff_delays_the_relaunch_within_skypilot_bounds() -> None:
    config = SimConfig(seed=7, relaunch=RelaunchModel(detection_gap_s=0.0))
    low = by_id(simulate(preempted_low_job(), policies.resolve("baseline"), config))["low-1"]
    # Relaunched 60 s +-40 % after the preemption at t=10, admitted no earlier than t=60.
    assert 10 + 50 <= 10 + low.wait_s <= 10 + 84 + 1
    assert low.wait_s >= 50


def test_job_that_fails_ends_failed_and_frees_its_quota() -> None:
    trace = (
        TraceBuilder()
        .team("a", gpus=2)
        .job("crash", at=0, gpus=2, run=30, fails=True)
        .job("next", at=5, gpus=2, run=10)
        .trace()
    )
    jobs = by_id(simulate(trace, policies.resolve("baseline"), NO_DELAY))
    assert jobs["crash"].outcome is JobOutcome.FAILED
    assert jobs["crash"].end_s == 30
    assert jobs["next"].wait_s == 25
    assert jobs["next"].outcome is JobOutcome.FINISHED


def test_borrowed_quota_is_reclaimed_by_its_owner() -> None:
    # Team a borrows b's idle GPUs; b's job reclaims them (InCohortReclamation).
    trace = (
        TraceBuilder()
        .team("a", gpus=2, cohort="org")
        .team("b", gpus=2, cohort="org")
        .job("a-big", at=0, gpus=4, run=100, team="a")
        .job("b-own", at=20, gpus=2, run=30, team="b")
        .trace()
    )
    run = simulate(trace, policies.resolve("baseline"), NO_DELAY)
    jobs = by_id(run)
    assert run.preemptions_by_reason == {"InCohortReclamation": 1}
    assert jobs["b-own"].wait_s == 0
    assert jobs["a-big"].preemptions == 1
    assert jobs["a-big"].wait_s == 30  # waits from t=20 until b-own ends at t=50


def test_burst_after_the_team_wait_limit_costs_gpu_hours() -> None:
    trace = (
        TraceBuilder()
        .team("a", gpus=1, wait_limit=600)
        .job("first", at=0, gpus=1, run=3600)
        .job("second", at=0.5, gpus=1, run=1800)
        .trace()
    )
    config = SimConfig(burst_cost_per_gpu_hour=3.0, cloud_startup_s=0.0)  # instant cloud: the limit's time
    jobs = by_id(simulate(trace, policies.resolve("baseline"), config))
    second = jobs["second"]
    assert second.outcome is JobOutcome.BURST
    assert second.wait_s == pytest.approx(600)
    assert second.burst_cost == pytest.approx(1.5)
    assert jobs["first"].outcome is JobOutcome.FINISHED


def test_aging_raises_the_relaunched_workload_of_a_repeatedly_preempted_job() -> None:
    # Two preemptions of the same low job by high jobs: the bounded policy gives
    # one step (+100) after two counted preemptions, capped at the preemptor's class (200).
    trace = (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=1000, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .job("high-2", at=70, gpus=4, run=50, klass="high")
        .trace()
    )
    jobs = by_id(simulate(trace, policies.resolve("aging", AgingSettings(policy="bounded")), NO_DELAY))
    assert jobs["low-1"].preemptions == 2
    assert jobs["low-1"].max_boost == 100
    baseline = by_id(simulate(trace, policies.resolve("baseline"), NO_DELAY))
    assert baseline["low-1"].max_boost == 0


def test_model_eta_at_submission_matches_the_wait_when_nothing_else_arrives() -> None:
    # Two jobs hold the 4 GPUs until t=100 and t=130; "late" (4 GPUs) arrives at t=20 and
    # waits for both: the predictor's estimate at submission is 110 s, as happens.
    from sky_kueue.sim.eta import EtaProbe
    from sky_kueue.sim.simulator import Simulator

    trace = (
        TraceBuilder()
        .team("a", gpus=4)
        .job("first", at=0, gpus=2, run=100)
        .job("second", at=0, gpus=2, run=130)
        .job("late", at=20, gpus=4, run=10)
        .trace()
    )
    index = next(i for i, job in enumerate(trace.jobs) if job.job_id == "late")
    probe = EtaProbe({index})
    run = Simulator(trace, policies.resolve("baseline"), NO_DELAY, on_arrival=probe).run()
    assert [(e.job_id, e.model_s) for e in probe.estimates] == [("late", 110.0)]
    assert by_id(run)["late"].wait_s == 110


def aged_low_job_behind_a_running_medium() -> Trace:
    # One team, 4 GPUs. A medium job holds them all from t=0 for a long time; a low job
    # arrives at t=1 and only waits (never preempted). Age alone is its only claim.
    return (
        TraceBuilder()
        .team("a", gpus=4)
        .job("medium-1", at=0, gpus=4, run=20_000, klass="medium")
        .job("low-1", at=1, gpus=4, run=100, klass="low")
        .trace()
    )


def test_age_alone_crossing_a_class_is_counted_as_an_inverted_preemption() -> None:
    # Age worth 100 points after 1000 s lifts low (50) above medium (100) once the class
    # cap is off: the low job preempts the running medium, an inverted preemption.
    uncapped = AgingSettings(
        policy="age", age_weight=100, max_age_seconds=1_000.0, max_boost=1_000, cap_at_preemptor_priority=False
    )
    run = simulate(aged_low_job_behind_a_running_medium(), policies.resolve("aging", uncapped), NO_DELAY)
    assert by_id(run)["medium-1"].preemptions == 1
    assert run.inverted_preemptions == 1
    # With the class cap (the default), a never-preempted job's age cannot cross medium.
    capped = replace(uncapped, cap_at_preemptor_priority=True)
    run = simulate(aged_low_job_behind_a_running_medium(), policies.resolve("aging", capped), NO_DELAY)
    assert by_id(run)["medium-1"].preemptions == 0
    assert run.inverted_preemptions == 0
    assert by_id(run)["low-1"].max_boost == 0

"""Every job ends in exactly one place, and the books balance."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from sky_kueue.sim import kueue_perf, policies, synthetic
from sky_kueue.sim.results import JobOutcome
from sky_kueue.sim.simulator import SimConfig, simulate


@pytest.mark.parametrize("policy", ["baseline", "rank", "ladder"])
def test_every_job_finishes_fails_or_is_still_there_at_the_horizon(policy: str) -> None:
    trace = synthetic.generate(
        synthetic.SyntheticParams(jobs=150, teams=3, gpus_per_team=8, load=1.5), random.Random(2)
    )
    run = simulate(trace, policies.resolve(policy), SimConfig(seed=1, drain_s=2 * 3600.0))
    assert len(run.jobs) == len(trace.jobs)
    assert {j.job_id for j in run.jobs} == {j.job_id for j in trace.jobs}
    outcomes = Counter(j.outcome for j in run.jobs)
    assert sum(outcomes.values()) == len(trace.jobs)
    assert outcomes[JobOutcome.PENDING_AT_HORIZON] + outcomes[JobOutcome.RUNNING_AT_HORIZON] > 0, (
        "a short drain must leave some jobs behind"
    )
    for job in run.jobs:
        if job.outcome in (JobOutcome.FINISHED, JobOutcome.FAILED):
            assert job.end_s is not None and job.first_admission_wait_s is not None
            assert job.end_s == pytest.approx(job.submit_s + job.wait_s + job.duration_s + job.lost_gpu_s / job.gpus)
        if job.outcome is JobOutcome.PENDING_AT_HORIZON:
            assert job.end_s is None
        assert job.wait_s >= 0
        assert job.launches == job.preemptions + 1 or job.outcome is JobOutcome.PENDING_AT_HORIZON
    failed = {j.job_id for j in trace.jobs if j.fails}
    assert all(j.job_id in failed for j in run.jobs if j.outcome is JobOutcome.FAILED)
    assert 0 <= run.useful_gpu_s <= run.busy_gpu_s <= run.gpu_capacity * run.window_s + 1e-6


def test_without_a_drain_limit_everything_ends() -> None:
    trace = kueue_perf.generate(kueue_perf.KueuePerfParams(cohorts=1, queues_per_cohort=2).scaled_to(60))
    run = simulate(trace, policies.resolve("rank"), SimConfig(seed=0))
    assert Counter(j.outcome for j in run.jobs) == {JobOutcome.FINISHED: len(trace.jobs)}

"""The closed loop: why `rank` preempts one job of Kueue's perf mix 49 times where SkyPilot alone
preempts at most 8 (README step 7's example, `sky-kueue simulate --trace kueue-perf`).

The mechanism, on the smallest trace that shows it: a team's higher class takes its whole quota
back at fixed intervals and leaves gaps shorter than a lower-class job's run. Every admission of
a lower-class job into a gap is doomed: the next higher-class arrival preempts it (Kueue's
``withinClusterQueue: LowerPriority``) before it finishes. SkyPilot alone relaunches the victim
as a new Workload at the back of its class (Kueue's FIFO by queue-order time), so the gaps go to
each waiting job in turn and the doomed admissions are spread over all of them. `rank` puts the
relaunch ahead of its class's fresh arrivals, so the jobs admitted into the first gap are the
ones readmitted into every later gap: no fresh job ever gets in, the set of victims is closed,
and each of its jobs is preempted once per gap. The total number of preemptions is the same (one
per job in each gap); `rank` only concentrates them. On the perf mix each ClusterQueue's 4
medium jobs that fill the first 200-s gap are preempted by its 49 later large jobs (48 or 49
times each, 120 jobs in all against SkyPilot alone's 2,250 preempted at most 8 times; 5,850
preemptions either way).

``rank_max_preemptions`` breaks the loop: a job preempted more often than that waits again in
arrival order, so fresh jobs reach the gaps.
"""

from __future__ import annotations

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import policies
from sky_kueue.sim.results import JobResult
from sky_kueue.sim.simulator import simulate
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id

MEDIUM_JOBS = 6
HIGH_JOBS = 5
#: Higher-class jobs take the whole 10-GPU quota for 250 s every 300 s: 50-s gaps, shorter than
#: a medium job's 120-s run.
HIGH_EVERY_SECONDS = 300.0
HIGH_RUN_SECONDS = 250.0
MEDIUM_RUN_SECONDS = 120.0


def gaps_trace() -> Trace:
    builder = TraceBuilder().team("a", gpus=10)
    for i in range(MEDIUM_JOBS):
        builder.job(f"medium-{i + 1}", at=float(i), gpus=5, run=MEDIUM_RUN_SECONDS, klass="medium")
    for i in range(HIGH_JOBS):
        builder.job(f"high-{i + 1}", at=100.0 + HIGH_EVERY_SECONDS * i, gpus=10, run=HIGH_RUN_SECONDS, klass="high")
    return builder.trace()


def mediums(name: str, settings: AgingSettings | None = None) -> dict[str, JobResult]:
    run = by_id(simulate(gaps_trace(), policies.resolve(name, settings), NO_DELAY))
    return {job_id: job for job_id, job in run.items() if job_id.startswith("medium")}


def test_rank_readmits_the_same_jobs_into_every_doomed_gap() -> None:
    alone = mediums("baseline")
    ranked = mediums("rank")
    # Each high arrival preempts the two mediums filling the quota: 5 x 2 preemptions either way.
    assert sum(j.preemptions for j in alone.values()) == sum(j.preemptions for j in ranked.values()) == 10
    # SkyPilot alone: each gap goes to the two jobs at the head of the FIFO, and a victim goes
    # to its back, so no job is preempted more than twice.
    assert max(j.preemptions for j in alone.values()) == 2
    # rank: the first gap's jobs are readmitted ahead of the fresh ones into every gap.
    assert {k: j.preemptions for k, j in ranked.items()} == {
        "medium-1": HIGH_JOBS,
        "medium-2": HIGH_JOBS,
        "medium-3": 0,
        "medium-4": 0,
        "medium-5": 0,
        "medium-6": 0,
    }
    # Nothing is gained for it: every medium finishes only after the high stream, at the same
    # three end times in both runs.
    assert sorted(j.end_s or 0.0 for j in alone.values()) == sorted(j.end_s or 0.0 for j in ranked.values())


def test_a_rank_cap_sends_a_looping_job_back_to_arrival_order() -> None:
    capped = mediums("rank", AgingSettings(rank_max_preemptions=1))
    assert max(j.preemptions for j in capped.values()) == 2
    assert {k: j.preemptions for k, j in capped.items()} == {k: j.preemptions for k, j in mediums("baseline").items()}

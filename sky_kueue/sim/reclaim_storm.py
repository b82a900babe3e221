"""Seed-shaped reclaim storms: the starvation SkyPilot users meet on a shared Kueue cluster.

Why this trace: the synthetic mix mostly measures queueing (most of its starved jobs were
never preempted); the failure the resubmission controller exists for is a *relaunch* that
goes to the back of the line and is preempted again and again. It happens when a team lives
on borrowed quota and the owners reclaim it in waves - the seed scenario (team-b's dev job
borrowing cohort quota, team-a's prod job reclaiming it), scaled up:

* one cohort of three ClusterQueues: team-a 32 GPUs, team-b 16, team-c 16; every queue
  ``withinClusterQueue: LowerPriority``, ``reclaimWithinCohort: Any``,
  ``borrowWithinCohort: {policy: LowerPriority, maxPriorityThreshold: 100}`` (the
  medium class's value: borrowing may preempt low and medium work, never high);
* team-a's prod jobs (class high) arrive in bursts of 2-5 jobs of 8 GPUs about every
  ``burst_every_hours`` (+- 30 min) and run 1-2 h: each burst reclaims what was lent;
* team-b's dev work (low:medium 60:40, 1-4 GPUs, lognormal run time with a median of 1.5 h)
  is offered at ``team_b_load`` times its quota, so it borrows and is reclaimed;
* team-c is light (``team_c_load`` of its quota, 1-2 GPUs, median 1 h), lending most of
  its quota.

``reclaim-storm``: team-b at 1.6x, bursts every 4 h; ``reclaim-storm-hot``: team-b at 2.0x,
bursts every 3 h. Offered loads are calibrated like the synthetic trace's (work drawn first,
arrivals spread over the window), so ``Trace.realized_load`` shows them exactly.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from sky_kueue.kueue import objects as o
from sky_kueue.sim.cluster import (
    ClusterSpec,
    TeamSpec,
    build_cluster,
)
from sky_kueue.sim.traces import RECLAIM_STORM, RECLAIM_STORM_HOT, JobDraft, Trace, TraceError, jobs_from_drafts

#: Class value up to which borrowing may preempt (the medium class's value).
BORROW_MAX_PRIORITY_THRESHOLD = 100
TEAM_A_GPUS = 32
TEAM_B_GPUS = 16
TEAM_C_GPUS = 16
PROD_JOB_GPUS = 8
PROD_BURST_JOBS = (2, 5)
PROD_RUN_SECONDS = (3600.0, 7200.0)
#: How far a burst may land from its nominal time.
BURST_JITTER_SECONDS = 1800.0
#: team-b: (GPUs, weight); lognormal run time with this median and log-sd, clipped.
DEV_GPU_WEIGHTS: tuple[tuple[int, float], ...] = ((1, 0.4), (2, 0.3), (3, 0.15), (4, 0.15))
DEV_MEDIAN_RUN_SECONDS = 5400.0
DEV_RUN_LOG_SD = 0.6
DEV_CLASS_MIX: tuple[tuple[str, float], ...] = (("low", 0.6), ("medium", 0.4))
LIGHT_GPU_WEIGHTS: tuple[tuple[int, float], ...] = ((1, 0.6), (2, 0.4))
LIGHT_MEDIAN_RUN_SECONDS = 3600.0
LIGHT_CLASS_MIX: tuple[tuple[str, float], ...] = (("low", 0.5), ("medium", 0.5))
MIN_RUN_SECONDS = 600.0
MAX_RUN_SECONDS = 8 * 3600.0
DEFAULT_HOURS = 72.0


@dataclass(frozen=True)
class StormParams:
    hours: float = DEFAULT_HOURS
    team_b_load: float = 1.6
    team_c_load: float = 0.3
    burst_every_hours: float = 4.0
    name: str = RECLAIM_STORM


STORMS = {
    RECLAIM_STORM: StormParams(),
    RECLAIM_STORM_HOT: StormParams(team_b_load=2.0, burst_every_hours=3.0, name=RECLAIM_STORM_HOT),
}


def generate(params: StormParams, rng: random.Random) -> Trace:
    """A reclaim storm; deterministic for a given ``rng`` state.

    Raises:
        TraceError: invalid parameters.
    """
    if params.hours <= 0 or params.team_b_load <= 0 or params.team_c_load < 0 or params.burst_every_hours <= 0:
        raise TraceError(f"{params.name}: hours, loads and burst period must be positive")
    cluster = build_cluster(
        ClusterSpec(
            teams=(
                TeamSpec("team-a", TEAM_A_GPUS),
                TeamSpec("team-b", TEAM_B_GPUS),
                TeamSpec("team-c", TEAM_C_GPUS),
            ),
            within_cluster_queue=o.PreemptionPolicy.LOWER_PRIORITY,
            reclaim_within_cohort=o.PreemptionPolicy.ANY,
            borrow_within_cohort=o.BorrowWithinCohortPolicy.LOWER_PRIORITY,
            max_priority_threshold=BORROW_MAX_PRIORITY_THRESHOLD,
        )
    )
    window = params.hours * 3600.0
    drafts: list[JobDraft] = []
    burst_at = params.burst_every_hours * 3600.0 / 2
    while burst_at < window:
        start = min(max(0.0, burst_at + rng.uniform(-BURST_JITTER_SECONDS, BURST_JITTER_SECONDS)), window)
        for i in range(rng.randint(*PROD_BURST_JOBS)):
            drafts.append((start + 10.0 * i, PROD_JOB_GPUS, rng.uniform(*PROD_RUN_SECONDS), "high", "team-a"))
        burst_at += params.burst_every_hours * 3600.0
    drafts += _steady(
        rng,
        "team-b",
        TEAM_B_GPUS * params.team_b_load * window,
        window,
        DEV_GPU_WEIGHTS,
        DEV_MEDIAN_RUN_SECONDS,
        DEV_CLASS_MIX,
    )
    drafts += _steady(
        rng,
        "team-c",
        TEAM_C_GPUS * params.team_c_load * window,
        window,
        LIGHT_GPU_WEIGHTS,
        LIGHT_MEDIAN_RUN_SECONDS,
        LIGHT_CLASS_MIX,
    )
    jobs = jobs_from_drafts(drafts)
    description = (
        f"{params.name}: {len(jobs)} jobs over {params.hours:g} h; team-a {TEAM_A_GPUS} GPUs with prod bursts every "
        f"{params.burst_every_hours:g} h, team-b {TEAM_B_GPUS} GPUs offered {params.team_b_load:g}x, team-c "
        f"{TEAM_C_GPUS} GPUs offered {params.team_c_load:g}x; borrowWithinCohort LowerPriority (threshold "
        f"{BORROW_MAX_PRIORITY_THRESHOLD})"
    )
    return Trace(name=params.name, jobs=jobs, cluster=cluster, description=description)


def _steady(
    rng: random.Random,
    team: str,
    work_gpu_seconds: float,
    window: float,
    gpu_weights: tuple[tuple[int, float], ...],
    median_run_s: float,
    class_mix: tuple[tuple[str, float], ...],
) -> list[JobDraft]:
    """Jobs bringing ``work_gpu_seconds`` in total, arriving uniformly over the window."""
    sizes = [g for g, _ in gpu_weights]
    weights = [w for _, w in gpu_weights]
    classes = [c for c, _ in class_mix]
    class_weights = [w for _, w in class_mix]
    out: list[JobDraft] = []
    work = 0.0
    while work < work_gpu_seconds:
        gpus = rng.choices(sizes, weights)[0]
        run = min(max(math.exp(rng.gauss(math.log(median_run_s), DEV_RUN_LOG_SD)), MIN_RUN_SECONDS), MAX_RUN_SECONDS)
        out.append((rng.random() * window, gpus, run, rng.choices(classes, class_weights)[0], team))
        work += gpus * run
    return out

"""``dev-starvation``: a low-class team living on borrowed quota whose owners keep returning.

Why a third storm: on the reclaim storms the baseline itself starves almost nothing by
relaunches (relaunch-starved 0-1 per run), so they cannot show a cure. The seed scenario
(team-b's dev job borrowing, team-a's prod job reclaiming) at scale is a *dev* team whose
work is short and mostly borrowed, and owners whose work comes back every few minutes to
tens of minutes: each return reclaims the newest borrowed admissions (Kueue picks victims
lowest priority first, then most recently admitted; ``pkg/scheduler/preemption``), which is
exactly where a SkyPilot relaunch lands, so the same dev jobs are reclaimed again and again.

The shape (every figure a named constant below):

* one cohort: ``owners`` :data:`OWNER_GPUS` GPUs, ``dev`` :data:`DEV_GPUS` GPUs; every
  ClusterQueue ``withinClusterQueue: LowerPriority``, ``reclaimWithinCohort: Any``,
  ``borrowWithinCohort: Never`` (borrowing never preempts: only the owners' return does);
* the owners (class high) return in waves :data:`OWNER_WAVE_GAP_SECONDS` apart (uniform,
  5-40 min), each wave 2-4 jobs of 8 GPUs running 5-30 min, so their quota keeps coming back;
* the dev team's work (class low, 1-4 GPUs, lognormal run time with a median of
  :data:`DEV_MEDIAN_RUN_SECONDS`) is offered at :data:`DEV_LOAD` times its quota, so most of it
  runs on borrowed GPUs.

Offered loads are drawn as work first, then spread uniformly over the window (as the other
storms), so ``Trace.realized_load`` shows them. The parameters were tuned for the trace's
*shape* only (the baseline's relaunch-starved count at least 5 on seeds 0-4), never against a
policy.
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
from sky_kueue.sim.traces import DEV_STARVATION, JobDraft, Trace, TraceError, jobs_from_drafts

OWNER_GPUS = 32
DEV_GPUS = 8
#: Gap between two owner waves: uniform in this range (a few minutes to tens of minutes).
OWNER_WAVE_GAP_SECONDS = (300.0, 2400.0)
OWNER_WAVE_JOBS = (2, 4)
OWNER_JOB_GPUS = 8
OWNER_RUN_SECONDS = (300.0, 1800.0)
#: The dev team's offered load over its own quota.
DEV_LOAD = 1.8
DEV_GPU_WEIGHTS: tuple[tuple[int, float], ...] = ((1, 0.4), (2, 0.3), (4, 0.3))
DEV_MEDIAN_RUN_SECONDS = 1200.0
DEV_RUN_LOG_SD = 0.7
MIN_RUN_SECONDS = 120.0
MAX_RUN_SECONDS = 4 * 3600.0
DEFAULT_HOURS = 48.0


@dataclass(frozen=True)
class DevStarvationParams:
    hours: float = DEFAULT_HOURS
    dev_load: float = DEV_LOAD
    owner_wave_gap_s: tuple[float, float] = OWNER_WAVE_GAP_SECONDS


def generate(params: DevStarvationParams, rng: random.Random) -> Trace:
    """The trace; deterministic for a given ``rng`` state.

    Raises:
        TraceError: invalid parameters.
    """
    low_gap, high_gap = params.owner_wave_gap_s
    if params.hours <= 0 or params.dev_load <= 0 or not 0 < low_gap <= high_gap:
        raise TraceError(f"{DEV_STARVATION}: hours, load and wave gap must be positive")
    cluster = build_cluster(
        ClusterSpec(
            teams=(TeamSpec("owners", OWNER_GPUS), TeamSpec("dev", DEV_GPUS)),
            within_cluster_queue=o.PreemptionPolicy.LOWER_PRIORITY,
            reclaim_within_cohort=o.PreemptionPolicy.ANY,
            borrow_within_cohort=o.BorrowWithinCohortPolicy.NEVER,
        )
    )
    window = params.hours * 3600.0
    drafts: list[JobDraft] = []
    at = rng.uniform(low_gap, high_gap)
    while at < window:
        for i in range(rng.randint(*OWNER_WAVE_JOBS)):
            drafts.append((at + 5.0 * i, OWNER_JOB_GPUS, rng.uniform(*OWNER_RUN_SECONDS), "high", "owners"))
        at += rng.uniform(low_gap, high_gap)
    sizes = [g for g, _ in DEV_GPU_WEIGHTS]
    weights = [w for _, w in DEV_GPU_WEIGHTS]
    work = 0.0
    while work < DEV_GPUS * params.dev_load * window:
        gpus = rng.choices(sizes, weights)[0]
        run = min(
            max(math.exp(rng.gauss(math.log(DEV_MEDIAN_RUN_SECONDS), DEV_RUN_LOG_SD)), MIN_RUN_SECONDS),
            MAX_RUN_SECONDS,
        )
        drafts.append((rng.random() * window, gpus, run, "low", "dev"))
        work += gpus * run
    jobs = jobs_from_drafts(drafts)
    description = (
        f"{DEV_STARVATION}: {len(jobs)} jobs over {params.hours:g} h; owners {OWNER_GPUS} GPUs returning every "
        f"{low_gap / 60:g}-{high_gap / 60:g} min (high), dev {DEV_GPUS} GPUs offered "
        f"{params.dev_load:g}x (low, median run {DEV_MEDIAN_RUN_SECONDS / 60:g} min); borrowWithinCohort Never"
    )
    return Trace(name=DEV_STARVATION, jobs=jobs, cluster=cluster, description=description)

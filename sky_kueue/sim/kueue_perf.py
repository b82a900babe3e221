"""The job mix of Kueue's scheduler performance test, as a trace.

Why this mix: it is Kueue's own yardstick for scheduling under contention
(``test/performance/scheduler/configs/baseline/generator.yaml`` in kubernetes-sigs/kueue),
and it already shows the problem aging addresses: with it, Kueue's published run has the
low class waiting on average about 215 s against about 16.5 s for the high class (13x).
Its shape: 5 cohorts of 6 ClusterQueues, each with a nominal quota of 20 units and a
borrowing limit of 100, ``reclaimWithinCohort: Any`` and ``withinClusterQueue:
LowerPriority``; into every ClusterQueue go 350 small (1 unit, 200 ms, priority 50, one
every 100 ms), 100 medium (5 units, 500 ms, priority 100, every 500 ms) and 50 large
(20 units, 1000 ms, priority 200, every 1200 ms) workloads.

Two adaptations, both parameters:

* **Units are GPUs**, so the GPU metrics (utilisation, lost GPU-hours) apply.
* **Time is scaled** by :data:`DEFAULT_TIME_SCALE` (1000: the test's milliseconds become
  seconds). Kueue's test measures the scheduler's throughput, so its jobs last
  milliseconds; SkyPilot jobs last minutes, and SkyPilot's relaunch after a preemption
  takes a minute or more (SkyPilot 0.14.1 ``sky/jobs/recovery_strategy.py``). Scaling arrivals and run times
  together keeps the offered load (about 118 % of nominal quota while all three streams
  run) and makes the relaunch delay comparable to a small job's run time, as in practice.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from sky_kueue.kueue import objects as o
from sky_kueue.sim.cluster import ClusterSpec, TeamSpec, build_cluster
from sky_kueue.sim.traces import KUEUE_PERF, JobSpec, Trace

DEFAULT_COHORTS = 5
DEFAULT_QUEUES_PER_COHORT = 6
DEFAULT_NOMINAL_QUOTA_GPUS = 20
DEFAULT_BORROWING_LIMIT_GPUS = 100
#: Multiplier from the test's milliseconds to simulated seconds (1000: ms read as s).
DEFAULT_TIME_SCALE = 1000.0


@dataclass(frozen=True)
class WorkloadClass:
    """One ``workloadsSets`` entry of the generator config."""

    name: str
    count: int
    creation_interval_ms: float
    runtime_ms: float
    priority_class: str
    gpus: int


#: small/medium/large at 350:100:50 per ClusterQueue, priorities 50/100/200 ("low",
#: "medium", "high" in :data:`sky_kueue.sim.cluster.DEFAULT_PRIORITY_CLASSES`).
DEFAULT_CLASSES = (
    WorkloadClass("small", 350, 100.0, 200.0, "low", 1),
    WorkloadClass("medium", 100, 500.0, 500.0, "medium", 5),
    WorkloadClass("large", 50, 1200.0, 1000.0, "high", 20),
)


@dataclass(frozen=True)
class KueuePerfParams:
    cohorts: int = DEFAULT_COHORTS
    queues_per_cohort: int = DEFAULT_QUEUES_PER_COHORT
    nominal_quota_gpus: int = DEFAULT_NOMINAL_QUOTA_GPUS
    borrowing_limit_gpus: int = DEFAULT_BORROWING_LIMIT_GPUS
    time_scale: float = DEFAULT_TIME_SCALE
    classes: tuple[WorkloadClass, ...] = DEFAULT_CLASSES
    #: Keep only the first this many jobs (after scaling); None keeps all.
    limit: int | None = None
    wait_limit_seconds: float | None = None

    @property
    def total_jobs(self) -> int:
        return self.cohorts * self.queues_per_cohort * sum(c.count for c in self.classes)

    def scaled_to(self, jobs: int) -> KueuePerfParams:
        """The same mix and topology with per-queue counts scaled to about ``jobs`` jobs.

        Arrival intervals and run times are kept, so the load is unchanged; only the
        length of the loaded period changes.
        """
        factor = jobs / self.total_jobs
        classes = tuple(replace(c, count=max(1, math.ceil(c.count * factor))) for c in self.classes)
        return replace(self, classes=classes, limit=jobs)


def generate(params: KueuePerfParams) -> Trace:
    """The performance-test mix as a trace (deterministic: no randomness in the test)."""
    teams: list[TeamSpec] = []
    jobs: list[JobSpec] = []
    scale = params.time_scale / 1000.0  # from milliseconds to simulated seconds
    for c in range(params.cohorts):
        for q in range(params.queues_per_cohort):
            team = f"cohort-{c}-cq-{q}"
            teams.append(
                TeamSpec(
                    name=team,
                    gpus=params.nominal_quota_gpus,
                    cohort=f"cohort-{c}",
                    borrowing_limit_gpus=params.borrowing_limit_gpus,
                    wait_limit_seconds=params.wait_limit_seconds,
                )
            )
            for wc in params.classes:
                for i in range(wc.count):
                    jobs.append(
                        JobSpec(
                            job_id=f"{team}-{wc.name}-{i:04d}",
                            submit_s=round(i * wc.creation_interval_ms * scale, 6),
                            duration_s=wc.runtime_ms * scale,
                            gpus=wc.gpus,
                            cpu_milli=0,
                            memory_bytes=0,
                            priority_class=wc.priority_class,
                            team=team,
                        )
                    )
    cluster = build_cluster(
        ClusterSpec(
            teams=tuple(teams),
            within_cluster_queue=o.PreemptionPolicy.LOWER_PRIORITY,
            reclaim_within_cohort=o.PreemptionPolicy.ANY,
            cpu_and_memory=False,
        )
    )
    jobs.sort(key=lambda j: (j.submit_s, j.job_id))
    if params.limit is not None:
        jobs = jobs[: params.limit]
    description = (
        f"kueue-perf: {params.cohorts} cohorts x {params.queues_per_cohort} ClusterQueues "
        f"(nominal {params.nominal_quota_gpus}, borrowing limit {params.borrowing_limit_gpus} GPUs), "
        + ", ".join(f"{c.name} x{c.count}" for c in params.classes)
        + f" per queue, time x{params.time_scale:g}"
    )
    return Trace(name=KUEUE_PERF, jobs=tuple(jobs), cluster=cluster, description=description)

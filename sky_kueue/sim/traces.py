"""Traces: the jobs a simulation replays, and the cluster they run on.

Why a trace is jobs *and* a cluster: whether a job starves depends as much on the quota
it competes for as on the jobs around it, and a comparison of policies is only fair when
every policy replays exactly the same jobs on exactly the same ClusterQueues. A
:class:`Trace` is therefore immutable and built once per run; the simulator derives every
Workload from it.

Three sources, one module each:

* :mod:`sky_kueue.sim.synthetic`: a generator calibrated to published GPU-cluster traces;
* :mod:`sky_kueue.sim.kueue_perf`: the job mix of Kueue's own scheduler performance test;
* :mod:`sky_kueue.sim.csv_trace`: a user's own trace as CSV.

:func:`load_trace` picks one from the ``--trace`` argument.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from sky_kueue.sim.cluster import DEFAULT_CPU_PER_GPU_MILLI, DEFAULT_MEMORY_PER_GPU_BYTES, SimCluster


class TraceError(ValueError):
    """A trace cannot be built or read; the message is one line naming file, row and column."""


@dataclass(frozen=True)
class JobSpec:
    """One job as submitted: what it asks for and how long it would run on-prem."""

    job_id: str
    #: Submission time, simulated seconds from the trace's start.
    submit_s: float
    #: Run time until the job exits (completion, or failure when ``fails``).
    duration_s: float
    gpus: int
    cpu_milli: int
    memory_bytes: int
    priority_class: str
    team: str
    #: The job's code fails after ``duration_s``; SkyPilot does not recover user failures.
    fails: bool = False


#: A storm generator's job before it has an id: (submit s, GPUs, run s, priority class, team).
JobDraft = tuple[float, int, float, str, str]


def jobs_from_drafts(drafts: list[JobDraft]) -> tuple[JobSpec, ...]:
    """Jobs numbered in submission order, sized with the default CPU and memory per GPU.

    Why one function: the storm generators (:mod:`sky_kueue.sim.reclaim_storm`,
    :mod:`sky_kueue.sim.dev_starvation`) draw their jobs from several streams and in any
    order; they all hand the drafts here, so ids, rounding and sizing stay the same.
    """
    ordered = sorted(drafts, key=lambda draft: draft[0])
    return tuple(
        JobSpec(
            job_id=f"job-{index:05d}",
            submit_s=round(submit, 3),
            duration_s=round(run, 3),
            gpus=gpus,
            cpu_milli=gpus * DEFAULT_CPU_PER_GPU_MILLI,
            memory_bytes=gpus * DEFAULT_MEMORY_PER_GPU_BYTES,
            priority_class=priority_class,
            team=team,
        )
        for index, (submit, gpus, run, priority_class, team) in enumerate(ordered)
    )


@dataclass(frozen=True)
class Trace:
    """Jobs sorted by submission time, and the cluster they share."""

    name: str
    jobs: tuple[JobSpec, ...]
    cluster: SimCluster
    #: Free-form provenance (generator parameters, file name) shown in reports.
    description: str = ""

    @property
    def arrival_end_s(self) -> float:
        """When the last job is submitted: the end of the loaded period."""
        return self.jobs[-1].submit_s if self.jobs else 0.0

    def spread_to_load(self, load: float) -> Trace:
        """The same jobs with arrivals spread out in time so the offered load is ``load``.

        Raises:
            TraceError: ``load`` is above what the trace offers (spreading only lowers it).
        """
        offered, _ = self.realized_load()
        if load > offered:
            raise TraceError(f"--load {load:g}: trace {self.name!r} offers {offered:g}; it can only be lowered")
        stretch = offered / load
        jobs = tuple(replace(job, submit_s=round(job.submit_s * stretch, 6)) for job in self.jobs)
        return replace(self, jobs=jobs, description=f"{self.description}, arrivals spread to load {load:g}")

    def realized_load(self) -> tuple[float, dict[str, float]]:
        """Offered load as it came out: GPU-seconds submitted over GPU-seconds of capacity in
        the arrival period ``[0, arrival_end_s]``, for the cluster and per team (team demand
        over the team's own nominal GPUs). What a trace's ``load`` parameter promised is a
        mean; this is what the run actually offered, and what claims must be made against.
        """
        window = self.arrival_end_s
        if window <= 0 or self.cluster.gpu_capacity <= 0:
            return 0.0, {}
        demand: dict[str, float] = {}
        for job in self.jobs:
            demand[job.team] = demand.get(job.team, 0.0) + job.gpus * job.duration_s
        quotas = self.cluster.team_gpus
        total = sum(demand.values()) / (self.cluster.gpu_capacity * window)
        per_team = {
            team: round(demand.get(team, 0.0) / (quotas[team] * window), 4) for team in sorted(quotas) if quotas[team]
        }
        return round(total, 4), per_team

    def class_order(self) -> list[str]:
        """Priority classes used by the jobs, lowest priority first."""
        used = {job.priority_class for job in self.jobs}
        classes = self.cluster.state.priority_classes
        return sorted(used, key=lambda name: (classes[name].value if name in classes else 0, name))

    def head(self, count: int) -> Trace:
        """The first ``count`` jobs (by submission time)."""
        return replace(self, jobs=self.jobs[:count])

    def until(self, seconds: float) -> Trace:
        """The jobs submitted before ``seconds``."""
        return replace(self, jobs=tuple(j for j in self.jobs if j.submit_s < seconds))


SYNTHETIC = "synthetic"
KUEUE_PERF = "kueue-perf"
RECLAIM_STORM = "reclaim-storm"
RECLAIM_STORM_HOT = "reclaim-storm-hot"
DEV_STARVATION = "dev-starvation"
BUILTIN_TRACES = (SYNTHETIC, KUEUE_PERF, RECLAIM_STORM, RECLAIM_STORM_HOT, DEV_STARVATION)


def load_trace(
    source: str,
    *,
    seed: int,
    jobs: int | None = None,
    hours: float | None = None,
    load: float | None = None,
    cluster_yaml: Path | None = None,
) -> Trace:
    """Builds the trace named by ``--trace``: ``synthetic``, ``kueue-perf`` or a CSV path.

    Args:
        source: a built-in trace name or a CSV file path.
        seed: seeds the synthetic generator (other sources are deterministic).
        jobs: keep (or generate) this many jobs.
        hours: keep (or generate) the jobs submitted in the first ``hours`` hours.
        load: the offered load: the synthetic generator draws exactly this much work; the
            Kueue perf mix is spread out in time to it (it can only be lowered); not for CSV.
        cluster_yaml: Kueue objects to run a CSV trace on (default: generated per team).

    Raises:
        TraceError: unknown trace, unreadable or invalid CSV, or invalid cluster.
    """
    from sky_kueue.sim import csv_trace, kueue_perf, synthetic

    if jobs is not None and jobs < 1:
        raise TraceError(f"--jobs must be at least 1, got {jobs}")
    if hours is not None and hours <= 0:
        raise TraceError(f"--hours must be positive, got {hours}")
    if load is not None and load <= 0:
        raise TraceError(f"--load must be positive, got {load}")
    if source == SYNTHETIC:
        params = synthetic.SyntheticParams()
        if load is not None:
            params = replace(params, load=load)
        if jobs is not None:
            params = replace(params, jobs=jobs, hours=None)
        elif hours is not None:
            params = replace(params, jobs=None, hours=hours)
        return synthetic.generate(params, random.Random(seed))
    if source in (RECLAIM_STORM, RECLAIM_STORM_HOT):
        from sky_kueue.sim import reclaim_storm

        if load is not None:
            raise TraceError(f"--load: {source} fixes its own loads (team-b 1.6x or 2.0x of its quota)")
        storm = reclaim_storm.STORMS[source]
        if hours is not None:
            storm = replace(storm, hours=hours)
        trace = reclaim_storm.generate(storm, random.Random(seed))
        if jobs is not None:
            trace = trace.head(jobs)
    elif source == DEV_STARVATION:
        from sky_kueue.sim import dev_starvation

        if load is not None:
            raise TraceError(f"--load: {source} fixes its own load (dev team {dev_starvation.DEV_LOAD:g}x its quota)")
        dev = dev_starvation.DevStarvationParams()
        if hours is not None:
            dev = replace(dev, hours=hours)
        trace = dev_starvation.generate(dev, random.Random(seed))
        if jobs is not None:
            trace = trace.head(jobs)
    elif source == KUEUE_PERF:
        perf = kueue_perf.KueuePerfParams()
        trace = kueue_perf.generate(perf.scaled_to(jobs) if jobs is not None else perf)
        if load is not None:
            trace = trace.spread_to_load(load)
    else:
        if load is not None:
            raise TraceError("--load applies to the synthetic and kueue-perf traces, not to a CSV trace")
        path = Path(source)
        if path.suffix.lower() != ".csv" and not path.exists():
            raise TraceError(f"--trace {source!r}: expected {', '.join(BUILTIN_TRACES)} or a CSV file path")
        trace = csv_trace.load(path, cluster_yaml=cluster_yaml)
        if jobs is not None:
            trace = trace.head(jobs)
    if hours is not None:
        trace = trace.until(hours * 3600.0)
    if not trace.jobs:
        raise TraceError(f"trace {trace.name!r} has no jobs in the selected range")
    return trace

"""ETA accuracy: what a user would have been told at submission, against what happened.

Why measure it here: the admission predictor promises "your job starts in about N
minutes"; a simulation knows the truth, so it can grade the promise. For a sample of jobs,
at the moment each is submitted, two estimates of its wait until first admission are made:

* **model**: Kueue's exact scheduler run forward on a copy of the cluster as it is at that
  moment: the running jobs end at their (known) end times, nothing new arrives and no
  preempted job comes back; the estimate is when the job is first admitted. This is the
  predictor's approach (:mod:`sky_kueue.kueue.predictor`) extended over time with
  runtimes, so it is an optimistic bound on what a runtime-aware predictor can do: its
  only errors come from the future (arrivals of higher priority, relaunches, aging).
* **naive**: the job's position in its ClusterQueue (Workloads ahead of it by priority,
  then creation time) divided by the ClusterQueue's admission rate over the last
  :data:`ETA_RATE_WINDOW_SECONDS`.

:func:`summarize` reports each estimate's mean absolute error and how often it answered
"admitted within T?" correctly. The projection applies completions in windows of
:data:`ETA_PROJECTION_STEP_SECONDS` (so estimates are that coarse) and gives no estimate
if the job is not admitted within :data:`ETA_MAX_PROJECTION_STEPS` windows (counted as
"not within T").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.workload import WorkloadInfo
from sky_kueue.sim.cluster import at

if TYPE_CHECKING:
    from sky_kueue.sim.simulator import Simulator

#: Trailing window over which the naive estimate measures a queue's admission rate.
ETA_RATE_WINDOW_SECONDS = 3_600.0
#: A model projection gives up after this many steps without admitting the job.
ETA_MAX_PROJECTION_STEPS = 300
#: Completions within this window are applied together (one scheduling step per window).
ETA_PROJECTION_STEP_SECONDS = 60.0
#: Threshold of the "admitted within T" question.
DEFAULT_ETA_WITHIN_SECONDS = 600.0
#: Safety stop for cycles at one projected instant.
_MAX_CYCLES_PER_INSTANT = 10_000


@dataclass(frozen=True)
class Estimate:
    job_id: str
    model_s: float | None
    naive_s: float | None


@dataclass(frozen=True)
class EtaSummary:
    jobs: int
    #: Jobs admitted in the run (the others have no actual wait to compare with).
    admitted: int
    model_mae_s: float | None
    naive_mae_s: float | None
    #: Jobs each estimator gave a number for (and that were admitted).
    model_covered: int
    naive_covered: int
    within_s: float
    model_within_accuracy: float | None
    naive_within_accuracy: float | None


class EtaProbe:
    """Makes both estimates for sampled jobs at their submission (an ``on_arrival`` hook)."""

    def __init__(self, sample: set[int]) -> None:
        self.sample = sample
        self.estimates: list[Estimate] = []

    def __call__(self, sim: Simulator, index: int) -> None:
        if index not in self.sample:
            return
        job = sim.jobs[index]
        assert job.workload is not None
        self.estimates.append(
            Estimate(job.spec.job_id, model_estimate(sim, job.workload.key), naive_estimate(sim, job.workload.key))
        )


def sample_indices(total: int, sample: int) -> set[int]:
    """About ``sample`` job indices spread evenly over the trace."""
    if sample <= 0 or total == 0:
        return set()
    step = max(1, total // sample)
    return set(range(0, total, step)[:sample])


def naive_estimate(sim: Simulator, key: str) -> float | None:
    """Position in the ClusterQueue divided by its recent admission rate (None: no rate)."""
    engine = sim.engine
    info = engine.pending[key]
    cq = info.cluster_queue
    mine = (-info.priority, info.qts)
    ahead = sum(
        1
        for other in engine.pending.values()
        if other.cluster_queue == cq and other.key != key and (-other.priority, other.qts) < mine
    )
    now = sim.now
    window = min(ETA_RATE_WINDOW_SECONDS, now)
    if window <= 0:
        return None
    times = sim.admission_times[cq]
    recent = 0
    for t in reversed(times):
        if t < now - window:
            break
        recent += 1
    if recent == 0:
        return None
    return (ahead + 1) / (recent / window)


def _admitted_workload(info: WorkloadInfo) -> o.Workload:
    admission = o.Admission(
        cluster_queue=info.cluster_queue,
        pod_set_assignments=tuple(
            o.PodSetAssignment(name=ps.name, count=ps.count, flavors=dict(ps.flavors), resource_usage=dict(ps.requests))
            for ps in info.total_requests
        ),
    )
    reserved = o.Condition("QuotaReserved", "True", last_transition_time=info.reserved_at)
    return o.Workload(
        namespace=info.obj.namespace,
        name=info.obj.name,
        uid=info.obj.uid,
        creation_timestamp=info.obj.creation_timestamp,
        queue_name=info.obj.queue_name,
        pod_sets=info.obj.pod_sets,
        priority=info.priority,
        priority_class_name=info.obj.priority_class_name,
        priority_class_source=info.obj.priority_class_source,
        admission=admission,
        conditions=(reserved,),
    )


def model_estimate(sim: Simulator, key: str) -> float | None:
    """Runs Kueue forward from now with known end times and no arrivals (None: not admitted)."""
    base = sim.trace.cluster.state
    workloads: dict[str, o.Workload] = {}
    ends: dict[str, float] = {}
    for holder_key, info in sim.engine.holders.items():
        workloads[holder_key] = _admitted_workload(info)
        job = sim.by_workload[holder_key]
        ends[holder_key] = job.run_start + job.spec.duration_s
    for pending_key, info in sim.engine.pending.items():
        workloads[pending_key] = info.obj
    state = o.ClusterState(
        namespaces=base.namespaces,
        resource_flavors=base.resource_flavors,
        priority_classes=base.priority_classes,
        cohorts=base.cohorts,
        cluster_queues=base.cluster_queues,
        local_queues=base.local_queues,
        workloads=workloads,
        config=base.config,
    )
    start = sim.now
    engine = Engine(state, at(start))
    now = start
    for _ in range(ETA_MAX_PROJECTION_STEPS):
        _settle(engine, now)
        if key in engine.holders:
            return now - start
        if key not in engine.pending:
            return None
        for k in engine.holders:
            if k not in ends:  # admitted during the projection: runs its full time
                ends[k] = now + sim.by_workload[k].spec.duration_s
        running = list(engine.holders)
        if not running:
            return None
        now = max(min(ends[k] for k in running), now) + ETA_PROJECTION_STEP_SECONDS
        for k in running:
            if ends[k] <= now:
                engine.delete_workload(k)
    return None


def _settle(engine: Engine, instant: float) -> None:
    engine.now = at(instant)
    tried: set[str] = set()
    for _ in range(_MAX_CYCLES_PER_INSTANT):
        if not engine.has_active_heads():
            return
        result = engine.cycle()
        engine.settle_events(result)
        if result.changed:
            tried.clear()
            continue
        heads = {entry.info.key for entry in result.entries}
        if heads <= tried:
            return
        tried |= heads


def summarize(
    estimates: list[Estimate], actual: dict[str, float | None], within_s: float = DEFAULT_ETA_WITHIN_SECONDS
) -> EtaSummary:
    """MAE and "within T" accuracy of both estimators against the actual first-admission waits."""
    model_errors: list[float] = []
    naive_errors: list[float] = []
    model_hits = naive_hits = judged = 0
    for estimate in estimates:
        truth = actual.get(estimate.job_id)
        if truth is None:
            continue
        judged += 1
        if estimate.model_s is not None:
            model_errors.append(abs(estimate.model_s - truth))
        if estimate.naive_s is not None:
            naive_errors.append(abs(estimate.naive_s - truth))
        really = truth <= within_s
        model_hits += (estimate.model_s is not None and estimate.model_s <= within_s) == really
        naive_hits += (estimate.naive_s is not None and estimate.naive_s <= within_s) == really
    return EtaSummary(
        jobs=len(estimates),
        admitted=judged,
        model_mae_s=sum(model_errors) / len(model_errors) if model_errors else None,
        naive_mae_s=sum(naive_errors) / len(naive_errors) if naive_errors else None,
        model_covered=len(model_errors),
        naive_covered=len(naive_errors),
        within_s=within_s,
        model_within_accuracy=model_hits / judged if judged else None,
        naive_within_accuracy=naive_hits / judged if judged else None,
    )

"""ETA accuracy: what a user would have been told at submission, against what happened.

Why measure it here: the admission predictor promises "your job starts in about N
minutes"; a simulation knows the truth, so it can grade the promise. For a sample of jobs,
at the moment each is submitted, two estimates of its wait until first admission are made:

* **model**: the predictor's own estimate (:func:`sky_kueue.kueue.eta.estimate`, the one
  the admin policy reports) on a copy of the cluster as it is at that moment, with every
  job's run time known: running jobs end at their end times, nothing new arrives and no
  preempted job comes back. It is therefore an optimistic bound on what a runtime-aware
  predictor can do: its only errors come from the future (arrivals of higher priority,
  relaunches, aging).
* **naive**: the job's position in its ClusterQueue (Workloads ahead of it by priority,
  then creation time) divided by the ClusterQueue's admission rate over the last
  :data:`ETA_RATE_WINDOW_SECONDS`.

:func:`summarize` reports each estimate's mean absolute error and how often it answered
"admitted within T?" correctly. A job the projection does not admit within
:data:`ETA_HORIZON_SECONDS` has no estimate (counted as "not within T").
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sky_kueue.controller.predicted_burst import PredictedWaitKind
from sky_kueue.controller.safety_probe import without_borrowing
from sky_kueue.kueue import eta as kueue_eta
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.workload import WorkloadInfo
from sky_kueue.sim.cluster import at

if TYPE_CHECKING:
    from sky_kueue.sim.simulator import Simulator

#: Trailing window over which the naive estimate measures a queue's admission rate.
ETA_RATE_WINDOW_SECONDS = 3_600.0
#: A model projection gives up when the job is not admitted within this long.
ETA_HORIZON_SECONDS = 2 * 86_400.0
#: Threshold of the "admitted within T" question.
DEFAULT_ETA_WITHIN_SECONDS = 600.0


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


def _current_state(sim: Simulator, extra: o.Workload | None = None) -> o.ClusterState:
    """The simulated cluster as the predictor would read it now (``extra``: a Workload about to
    enter Kueue, added as pending)."""
    base = sim.trace.cluster.state
    workloads: dict[str, o.Workload] = {holder: _admitted_workload(info) for holder, info in sim.engine.holders.items()}
    for pending_key, info in sim.engine.pending.items():
        workloads[pending_key] = info.obj
    if extra is not None:
        workloads[extra.key] = extra
    return o.ClusterState(
        namespaces=base.namespaces,
        resource_flavors=base.resource_flavors,
        priority_classes=base.priority_classes,
        cohorts=base.cohorts,
        cluster_queues=base.cluster_queues,
        local_queues=base.local_queues,
        workloads=workloads,
        config=base.config,
    )


def _runtime(sim: Simulator) -> kueue_eta.RuntimeFn:
    def runtime(wl: o.Workload) -> float | None:
        job = sim.by_workload.get(wl.key)
        return None if job is None else job.spec.duration_s

    return runtime


def model_estimate(sim: Simulator, key: str) -> float | None:
    """The predictor's ETA with every run time known (None: not admitted within the horizon)."""
    state = _current_state(sim)
    projected = kueue_eta.estimate(state, [key], _runtime(sim), now=at(sim.now), horizon_seconds=ETA_HORIZON_SECONDS)
    return projected[key].seconds


def relaunch_wait(sim: Simulator, workload: o.Workload, kind: PredictedWaitKind, horizon_s: float) -> float:
    """The predicted on-prem wait of a relaunch about to enter Kueue, for the burst gate.

    The controller's predictor on the simulator's cluster, every run time known (as
    :func:`model_estimate`): with ``kind`` ``safe`` on a copy whose ClusterQueue may not borrow
    (:func:`sky_kueue.controller.safety_probe.without_borrowing`, what the controller's probe
    asks), so the admission it predicts is within nominal quota. Returns ``math.inf`` when the
    relaunch is not admitted within ``horizon_s`` (the gate only asks whether the wait exceeds
    its threshold, so a short horizon keeps the projection cheap).
    """
    state = _current_state(sim, workload)
    if kind is PredictedWaitKind.SAFE:
        cq = sim.engine.cq_for(workload)
        if cq is not None and state.cluster_queues[cq].cohort:  # without a cohort it cannot borrow anyway
            state = without_borrowing(state, cq)
    projected = kueue_eta.estimate(state, [workload.key], _runtime(sim), now=at(sim.now), horizon_seconds=horizon_s)
    seconds = projected[workload.key].seconds
    return math.inf if seconds is None else seconds


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


#: Percentile of the absolute placement-ETA error reported beside the median.
PLACEMENT_ERROR_PERCENTILE = 90.0


@dataclass(frozen=True)
class PlacementEta:
    """What placement predicted for a job's wait on the cluster it put first.

    Attributes:
        job_id: the job.
        predicted_s: the expected wait (0 when admitted at once or after preempting; None:
            pending with no estimate, so the placement fell back to the admin's order).
        pending: the first cluster's verdict was "pending" (a wait had to be estimated).
        realised_s: submission to first admission (None: never admitted).
    """

    job_id: str
    predicted_s: float | None
    pending: bool
    realised_s: float | None


@dataclass(frozen=True)
class PlacementEtaError:
    """The placement's ETA graded against the realised waits.

    Attributes:
        placements: placements graded (admitted jobs).
        no_estimate_fraction: share of them with no estimate (0..1).
        median_abs_error_s / p90_abs_error_s: absolute error over those with an estimate
            (None: none had one).
    """

    placements: int
    no_estimate_fraction: float | None
    median_abs_error_s: float | None
    p90_abs_error_s: float | None

    def to_json(self) -> dict[str, object]:
        def rounded(value: float | None, digits: int) -> float | None:
            return None if value is None else round(value, digits)

        return {
            "placements": self.placements,
            "no_estimate_fraction": rounded(self.no_estimate_fraction, 4),
            "median_abs_error_s": rounded(self.median_abs_error_s, 1),
            "p90_abs_error_s": rounded(self.p90_abs_error_s, 1),
        }


def placement_error(records: list[PlacementEta]) -> PlacementEtaError:
    """Median and p90 absolute error of the predicted waits, and the share with no estimate."""
    from sky_kueue.sim.metrics import percentile  # metrics imports this module

    graded = [r for r in records if r.realised_s is not None]
    errors = sorted(
        abs(r.predicted_s - r.realised_s) for r in graded if r.predicted_s is not None and r.realised_s is not None
    )
    missing = sum(1 for r in graded if r.predicted_s is None)
    return PlacementEtaError(
        placements=len(graded),
        no_estimate_fraction=missing / len(graded) if graded else None,
        median_abs_error_s=statistics.median(errors) if errors else None,
        p90_abs_error_s=percentile(errors, PLACEMENT_ERROR_PERCENTILE) if errors else None,
    )

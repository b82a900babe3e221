"""Metrics of a run, per policy and per priority class, and the issue's targets.

Definitions (the numbers mean exactly this):

* **wait** of a job: time it was not running between submission and the run that counted
  (its completing or failing run, or its burst): time queued in Kueue plus time between a
  preemption and SkyPilot's relaunch. A job still waiting when the simulation stops counts
  with its wait so far (a lower bound), so a job that starves to the end is never hidden.
  Work lost to preemption is not wait; it is reported as **lost GPU-hours**.
* **percentiles**: nearest rank (the smallest wait with at least p % of the class at or
  below it).
* **starved**: wait > ``runtime_multiple`` x the job's run time *and* wait >
  ``min_wait_s`` (both configurable; defaults :data:`DEFAULT_STARVATION_RUNTIME_MULTIPLE`
  and :data:`DEFAULT_STARVATION_MIN_WAIT_SECONDS`).
* **GPU utilisation**: GPU-seconds held on the cluster during the loaded period (submission
  of the first job to submission of the last) over capacity x that period; **goodput**
  counts only runs that were not preempted.
* **preemptions per job**: over all jobs of the trace.
* **completion-time inflation** of a preempted job (the user's measure): (completion -
  first submission) / run time, over the preempted jobs that completed (finished, failed
  or burst; a burst job completes when its cloud run ends); 1.0 means it ran at once and
  was never held up. Nearest-rank p50 / p99 and max. **Wasted GPU-hours per preempted
  job**: the GPU-hours of preempted runs (thrown away) over the jobs preempted at least once.
* **causes of a job's preemptions** (:func:`preemption_cause`): (a) *reclaim*, Kueue's
  ``InCohortReclamation`` by another ClusterQueue of the cohort (the job ran on borrowed
  quota and its owner took it back, any priority under ``reclaimWithinCohort: Any``);
  (b) *higher class*, ``InClusterQueue`` by a Workload of the job's own ClusterQueue whose
  class priority is above the job's (what the admin's classes license under
  ``withinClusterQueue: LowerPriority``); (c) *own class or lower*, ``InClusterQueue`` by a
  Workload of the same or a lower class (only a boost or a band level makes that possible);
  (d) *other*: any other reason (fair sharing, reclaim while borrowing) or a preemptor that
  is not one of the trace's jobs. Reported for the **most-preempted job** (ties go to the
  job earliest in the trace) and summed over the jobs preempted at least
  :data:`REPEAT_PREEMPTED_MIN` times.

:func:`check_targets` compares a policy with the baseline of the same run against the
issue's targets: no starved job, the low class's max wait at least
:data:`TARGET_LOW_MAX_WAIT_REDUCTION` x lower, the high class's p95 wait at most
:data:`TARGET_HIGH_P95_MAX_INCREASE` higher (plus :data:`TARGET_HIGH_P95_SLACK_SECONDS`, so
that a baseline p95 of 0 s is not failed by a single relaunch delay), and GPU utilisation
within :data:`TARGET_UTILIZATION_MAX_DELTA_POINTS` points.
"""

from __future__ import annotations

import enum
import math
from collections import Counter
from dataclasses import dataclass, field

from sky_kueue.sim.eta import EtaSummary
from sky_kueue.sim.results import JobOutcome, JobResult, PreemptionEvent, RunResult, SafeHoldCounts

DEFAULT_STARVATION_RUNTIME_MULTIPLE = 10.0
DEFAULT_STARVATION_MIN_WAIT_SECONDS = 3_600.0
TARGET_LOW_MAX_WAIT_REDUCTION = 5.0
TARGET_HIGH_P95_MAX_INCREASE = 0.05
TARGET_HIGH_P95_SLACK_SECONDS = 60.0
TARGET_UTILIZATION_MAX_DELTA_POINTS = 1.0


#: Kueue's reason for a preemption by a higher-priority Workload of the same ClusterQueue.
IN_QUEUE_REASON = "InClusterQueue"
#: Kueue's reason for a preemption by another ClusterQueue taking back its nominal quota.
RECLAIM_REASON = "InCohortReclamation"
#: Jobs preempted at least this often are the "repeatedly preempted" whose causes are summed.
REPEAT_PREEMPTED_MIN = 3
#: A starved job preempted at least this often counts as starved by relaunches.
RELAUNCH_STARVED_MIN_PREEMPTIONS = 2


class PreemptionCause(str, enum.Enum):
    """Where one preemption of a job came from (module docstring, (a)-(d))."""

    RECLAIM = "reclaim"
    HIGHER_CLASS = "higher_class"
    OWN_CLASS_OR_LOWER = "own_class_or_lower"
    OTHER = "other"


def preemption_cause(job: JobResult, event: PreemptionEvent) -> PreemptionCause:
    """The cause of one of ``job``'s preemptions, from Kueue's reason and the preemptor's
    ClusterQueue and class priority; a reason that contradicts the queues is OTHER, not guessed."""
    if event.preemptor_cluster_queue is None or event.preemptor_priority is None:
        return PreemptionCause.OTHER
    same_queue = event.preemptor_cluster_queue == job.cluster_queue
    if event.reason == IN_QUEUE_REASON and same_queue:
        if event.preemptor_priority > job.base_priority:
            return PreemptionCause.HIGHER_CLASS
        return PreemptionCause.OWN_CLASS_OR_LOWER
    if event.reason == RECLAIM_REASON and not same_queue:
        return PreemptionCause.RECLAIM
    return PreemptionCause.OTHER


@dataclass(frozen=True)
class CauseSplit:
    """Preemptions counted by cause, (a)-(d)."""

    reclaim: int = 0
    higher_class: int = 0
    own_class_or_lower: int = 0
    other: int = 0

    @property
    def total(self) -> int:
        return self.reclaim + self.higher_class + self.own_class_or_lower + self.other

    def __add__(self, other: CauseSplit) -> CauseSplit:
        return CauseSplit(
            self.reclaim + other.reclaim,
            self.higher_class + other.higher_class,
            self.own_class_or_lower + other.own_class_or_lower,
            self.other + other.other,
        )

    def to_json(self) -> dict[str, int]:
        return {
            PreemptionCause.RECLAIM.value: self.reclaim,
            PreemptionCause.HIGHER_CLASS.value: self.higher_class,
            PreemptionCause.OWN_CLASS_OR_LOWER.value: self.own_class_or_lower,
            PreemptionCause.OTHER.value: self.other,
        }


def cause_split(job: JobResult) -> CauseSplit:
    """``job``'s preemptions by cause."""
    counts = Counter(preemption_cause(job, e) for e in job.preemption_events)
    return CauseSplit(
        reclaim=counts[PreemptionCause.RECLAIM],
        higher_class=counts[PreemptionCause.HIGHER_CLASS],
        own_class_or_lower=counts[PreemptionCause.OWN_CLASS_OR_LOWER],
        other=counts[PreemptionCause.OTHER],
    )


@dataclass(frozen=True)
class PreemptionCauses:
    """Where the most-preempted job's preemptions, and the repeatedly preempted jobs', came from."""

    #: The most-preempted job (ties: the earliest in the trace); None when no job was preempted.
    top_job_id: str | None = None
    top: CauseSplit = field(default_factory=CauseSplit)
    #: Jobs preempted as often as the top job.
    top_tied_jobs: int = 0
    #: The most higher-class preemptions of any one job (the top job's or another's).
    max_higher_class: int = 0
    #: Jobs preempted at least :data:`REPEAT_PREEMPTED_MIN` times, and their preemptions by cause.
    repeat_jobs: int = 0
    repeat: CauseSplit = field(default_factory=CauseSplit)

    def to_json(self) -> dict[str, object]:
        return {
            "top_job": self.top_job_id,
            "top_job_preemptions": self.top.total,
            "top_job_by_cause": self.top.to_json(),
            "top_tied_jobs": self.top_tied_jobs,
            "max_higher_class_per_job": self.max_higher_class,
            "repeat_min_preemptions": REPEAT_PREEMPTED_MIN,
            "repeat_jobs": self.repeat_jobs,
            "repeat_by_cause": self.repeat.to_json(),
        }


def preemption_causes(jobs: tuple[JobResult, ...] | list[JobResult]) -> PreemptionCauses:
    """The cause splits of a run's jobs (see :class:`PreemptionCauses`)."""
    top: JobResult | None = None
    for job in jobs:  # strict > keeps the earliest of tied jobs
        if job.preemptions > 0 and (top is None or job.preemptions > top.preemptions):
            top = job
    if top is None:
        return PreemptionCauses()
    splits = {job.job_id: cause_split(job) for job in jobs if job.preemptions > 0}
    repeat = [job for job in jobs if job.preemptions >= REPEAT_PREEMPTED_MIN]
    repeat_split = CauseSplit()
    for job in repeat:
        repeat_split = repeat_split + splits[job.job_id]
    return PreemptionCauses(
        top_job_id=top.job_id,
        top=splits[top.job_id],
        top_tied_jobs=sum(1 for job in jobs if job.preemptions == top.preemptions),
        max_higher_class=max(s.higher_class for s in splits.values()),
        repeat_jobs=len(repeat),
        repeat=repeat_split,
    )


@dataclass(frozen=True)
class StarvationRule:
    runtime_multiple: float = DEFAULT_STARVATION_RUNTIME_MULTIPLE
    min_wait_s: float = DEFAULT_STARVATION_MIN_WAIT_SECONDS

    def starved(self, job: JobResult) -> bool:
        return self.starved_after(job.wait_s, job.duration_s)

    def starved_after(self, wait_s: float, duration_s: float) -> bool:
        """Whether a wait of ``wait_s`` starves a job that runs ``duration_s`` (the one rule the
        simulator's reports and the controller's ``starving_jobs`` gauge both apply)."""
        return wait_s > self.runtime_multiple * duration_s and wait_s > self.min_wait_s


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty list)."""
    if not sorted_values:
        return 0.0
    rank = max(1, math.ceil(p / 100.0 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass(frozen=True)
class ClassMetrics:
    jobs: int
    p50_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    mean_wait_s: float
    starved: int
    preemptions: int

    def to_json(self) -> dict[str, float | int]:
        return {
            "jobs": self.jobs,
            "p50_wait_s": round(self.p50_wait_s, 3),
            "p95_wait_s": round(self.p95_wait_s, 3),
            "p99_wait_s": round(self.p99_wait_s, 3),
            "max_wait_s": round(self.max_wait_s, 3),
            "mean_wait_s": round(self.mean_wait_s, 3),
            "starved": self.starved,
            "preemptions": self.preemptions,
        }


@dataclass(frozen=True)
class PolicyMetrics:
    policy: str
    classes: dict[str, ClassMetrics]
    jobs: int
    outcomes: dict[str, int]
    starved: int
    preemptions_per_job_mean: float
    preemptions_per_job_max: int
    lost_gpu_hours: float
    gpu_utilization: float
    gpu_goodput: float
    bursts: int
    burst_cost: float
    max_boost: int
    cycles: int
    sim_end_s: float
    wall_s: float
    eta: EtaSummary | None = None
    #: Reservations for starved jobs (``--reserve-after``) and the Workloads they held back.
    reservations: int = 0
    held_back_workloads: int = 0
    preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    #: Preemptions of Workloads at a protected band level, per reason (``RunResult``).
    protected_preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    #: Starved jobs that were never preempted (they only queued) and that were.
    starved_never_preempted: int = 0
    starved_preempted: int = 0
    #: Starved jobs preempted at least twice: the relaunch starvation aging exists to end.
    relaunch_starved: int = 0
    #: Jobs preempted at least once.
    preempted_jobs: int = 0
    #: Preemptions of a job whose class is above the preemptor's class: boosts, plus owners
    #: reclaiming borrowed quota under ``reclaimWithinCohort: Any`` (the baseline's count).
    inverted_preemptions: int = 0
    #: First preemption to the capacity the job kept (final admission or burst), over the
    #: preempted jobs that got one: nearest-rank p50 / p99 and max (0 with none).
    p50_wait_after_preemption_s: float = 0.0
    p99_wait_after_preemption_s: float = 0.0
    max_wait_after_preemption_s: float = 0.0
    #: GPU-hours billed in the cloud for jobs that burst: their start-up plus their remaining run time.
    burst_gpu_hours: float = 0.0
    #: Completion-time inflation of preempted jobs that completed (module doc): p50, p99, max,
    #: and how many such jobs there were.
    p50_inflation: float = 0.0
    p99_inflation: float = 0.0
    max_inflation: float = 0.0
    inflation_jobs: int = 0
    #: Lost GPU-hours over the jobs preempted at least once (0 with none).
    wasted_gpu_hours_per_preempted_job: float = 0.0
    #: What the safe-relaunch rule did (all zero without it).
    safe: SafeHoldCounts = field(default_factory=SafeHoldCounts)
    #: Where the most-preempted job's preemptions came from (module doc, (a)-(d)).
    causes: PreemptionCauses = field(default_factory=PreemptionCauses)

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "classes": {name: c.to_json() for name, c in self.classes.items()},
            "jobs": self.jobs,
            "outcomes": dict(self.outcomes),
            "starved": self.starved,
            "preemptions_per_job_mean": round(self.preemptions_per_job_mean, 4),
            "preemptions_per_job_max": self.preemptions_per_job_max,
            "preemptions_by_reason": dict(self.preemptions_by_reason),
            "in_queue_preemptions": self.preemptions_by_reason.get(IN_QUEUE_REASON, 0),
            "protected_preemptions_by_reason": dict(self.protected_preemptions_by_reason),
            "inverted_preemptions": self.inverted_preemptions,
            "starved_never_preempted": self.starved_never_preempted,
            "starved_preempted": self.starved_preempted,
            "preempted_jobs": {
                "count": self.preempted_jobs,
                "p50_wait_after_preemption_s": round(self.p50_wait_after_preemption_s, 3),
                "p99_wait_after_preemption_s": round(self.p99_wait_after_preemption_s, 3),
                "max_wait_after_preemption_s": round(self.max_wait_after_preemption_s, 3),
                "max_preemptions": self.preemptions_per_job_max,
                "relaunch_starved": self.relaunch_starved,
                "completed": self.inflation_jobs,
                "p50_completion_inflation": round(self.p50_inflation, 3),
                "p99_completion_inflation": round(self.p99_inflation, 3),
                "max_completion_inflation": round(self.max_inflation, 3),
                "wasted_gpu_hours_per_preempted_job": round(self.wasted_gpu_hours_per_preempted_job, 3),
                "causes": self.causes.to_json(),
            },
            "safe_relaunch": self.safe.to_json(),
            "lost_gpu_hours": round(self.lost_gpu_hours, 3),
            "gpu_utilization": round(self.gpu_utilization, 4),
            "gpu_goodput": round(self.gpu_goodput, 4),
            "bursts": self.bursts,
            "burst_cost": round(self.burst_cost, 2),
            "burst_cost_usd": round(self.burst_cost, 2),
            "burst_gpu_hours": round(self.burst_gpu_hours, 3),
            "reservations": self.reservations,
            "held_back_workloads": self.held_back_workloads,
            "max_boost": self.max_boost,
            "cycles": self.cycles,
            "sim_end_s": round(self.sim_end_s, 3),
            "wall_s": round(self.wall_s, 3),
        }
        if self.eta is not None:
            e = self.eta
            out["eta"] = {
                "jobs": e.jobs,
                "admitted": e.admitted,
                "model_mae_s": None if e.model_mae_s is None else round(e.model_mae_s, 1),
                "naive_mae_s": None if e.naive_mae_s is None else round(e.naive_mae_s, 1),
                "model_covered": e.model_covered,
                "naive_covered": e.naive_covered,
                "within_s": e.within_s,
                "model_within_accuracy": e.model_within_accuracy,
                "naive_within_accuracy": e.naive_within_accuracy,
            }
        return out


def summarize(
    run: RunResult,
    class_order: list[str],
    rule: StarvationRule | None = None,
    eta: EtaSummary | None = None,
) -> PolicyMetrics:
    """The metrics of one run; classes in ``class_order`` (lowest priority first)."""
    rule = rule if rule is not None else StarvationRule()
    by_class: dict[str, list[JobResult]] = {name: [] for name in class_order}
    for job in run.jobs:
        by_class.setdefault(job.priority_class, []).append(job)
    classes: dict[str, ClassMetrics] = {}
    for name, jobs in by_class.items():
        waits = sorted(j.wait_s for j in jobs)
        classes[name] = ClassMetrics(
            jobs=len(jobs),
            p50_wait_s=percentile(waits, 50),
            p95_wait_s=percentile(waits, 95),
            p99_wait_s=percentile(waits, 99),
            max_wait_s=waits[-1] if waits else 0.0,
            mean_wait_s=sum(waits) / len(waits) if waits else 0.0,
            starved=sum(1 for j in jobs if rule.starved(j)),
            preemptions=sum(j.preemptions for j in jobs),
        )
    denominator = run.gpu_capacity * run.window_s
    preemptions = [j.preemptions for j in run.jobs]
    starved_jobs = [j for j in run.jobs if rule.starved(j)]
    outcomes = Counter(j.outcome.value for j in run.jobs)
    after = sorted(w for j in run.jobs if (w := j.wait_after_preemption_s) is not None)
    inflation = sorted(i for j in run.jobs if (i := completion_inflation(j)) is not None)
    preempted_jobs = sum(1 for p in preemptions if p > 0)
    lost_gpu_hours = sum(j.lost_gpu_s for j in run.jobs) / 3600.0
    return PolicyMetrics(
        policy=run.policy,
        classes=classes,
        jobs=len(run.jobs),
        outcomes={o.value: outcomes.get(o.value, 0) for o in JobOutcome},
        starved=sum(c.starved for c in classes.values()),
        preemptions_per_job_mean=sum(preemptions) / len(preemptions) if preemptions else 0.0,
        preemptions_per_job_max=max(preemptions, default=0),
        lost_gpu_hours=lost_gpu_hours,
        gpu_utilization=run.busy_gpu_s / denominator if denominator > 0 else 0.0,
        gpu_goodput=run.useful_gpu_s / denominator if denominator > 0 else 0.0,
        bursts=outcomes.get(JobOutcome.BURST.value, 0),
        burst_cost=sum(j.burst_cost for j in run.jobs),
        max_boost=max((j.max_boost for j in run.jobs), default=0),
        cycles=run.cycles,
        sim_end_s=run.end_s,
        wall_s=run.wall_s,
        eta=eta,
        reservations=run.reservations,
        held_back_workloads=run.held_back_workloads,
        preemptions_by_reason=dict(run.preemptions_by_reason),
        protected_preemptions_by_reason=dict(run.protected_preemptions_by_reason),
        starved_never_preempted=sum(1 for j in starved_jobs if j.preemptions == 0),
        starved_preempted=sum(1 for j in starved_jobs if j.preemptions > 0),
        relaunch_starved=sum(1 for j in starved_jobs if j.preemptions >= RELAUNCH_STARVED_MIN_PREEMPTIONS),
        preempted_jobs=preempted_jobs,
        inverted_preemptions=run.inverted_preemptions,
        p50_wait_after_preemption_s=percentile(after, 50),
        p99_wait_after_preemption_s=percentile(after, 99),
        max_wait_after_preemption_s=after[-1] if after else 0.0,
        burst_gpu_hours=sum(
            j.gpus * (j.cloud_startup_s + j.remaining_s) for j in run.jobs if j.outcome is JobOutcome.BURST
        )
        / 3600.0,
        p50_inflation=percentile(inflation, 50),
        p99_inflation=percentile(inflation, 99),
        max_inflation=inflation[-1] if inflation else 0.0,
        inflation_jobs=len(inflation),
        wasted_gpu_hours_per_preempted_job=lost_gpu_hours / preempted_jobs if preempted_jobs else 0.0,
        safe=run.safe,
        causes=preemption_causes(run.jobs),
    )


#: Outcomes at which a job has completed (its completion time is known).
_COMPLETED = frozenset({JobOutcome.FINISHED, JobOutcome.FAILED, JobOutcome.BURST})


def completion_inflation(job: JobResult) -> float | None:
    """(completion - first submission) / run time of a preempted job that completed, else None."""
    if job.preemptions == 0 or job.outcome not in _COMPLETED or job.end_s is None or job.duration_s <= 0:
        return None
    return (job.end_s - job.submit_s) / job.duration_s


@dataclass(frozen=True)
class TargetCheck:
    """One policy against the baseline of the same run (see the module docstring)."""

    policy: str
    reference: str
    low_class: str
    high_class: str
    starved: int
    low_max_wait_s: float
    reference_low_max_wait_s: float
    #: reference max / policy max (inf when the policy's max wait is 0).
    low_max_wait_reduction: float
    high_p95_wait_s: float
    reference_high_p95_wait_s: float
    #: policy p95 / reference p95 - 1 (None when the reference p95 is 0).
    high_p95_increase: float | None
    utilization_delta_points: float
    no_starvation_met: bool
    low_max_wait_met: bool
    high_p95_met: bool
    utilization_met: bool

    @property
    def met(self) -> bool:
        return self.no_starvation_met and self.low_max_wait_met and self.high_p95_met and self.utilization_met

    def to_json(self) -> dict[str, object]:
        def num(value: float | None) -> float | str | None:
            if value is None:
                return None
            return "inf" if math.isinf(value) else round(value, 4)

        return {
            "reference": self.reference,
            "low_class": self.low_class,
            "high_class": self.high_class,
            "starved": self.starved,
            "low_max_wait_s": round(self.low_max_wait_s, 3),
            "reference_low_max_wait_s": round(self.reference_low_max_wait_s, 3),
            "low_max_wait_reduction": num(self.low_max_wait_reduction),
            "high_p95_wait_s": round(self.high_p95_wait_s, 3),
            "reference_high_p95_wait_s": round(self.reference_high_p95_wait_s, 3),
            "high_p95_increase": num(self.high_p95_increase),
            "utilization_delta_points": round(self.utilization_delta_points, 3),
            "met": {
                "no_starved_job": self.no_starvation_met,
                "low_max_wait_5x_lower": self.low_max_wait_met,
                "high_p95_within_5pct": self.high_p95_met,
                "utilization_within_1pt": self.utilization_met,
                "all": self.met,
            },
        }


def check_targets(policy: PolicyMetrics, reference: PolicyMetrics, class_order: list[str]) -> TargetCheck:
    """The issue's targets for ``policy`` against ``reference`` (the baseline)."""
    low, high = class_order[0], class_order[-1]
    mine_low, ref_low = policy.classes[low], reference.classes[low]
    mine_high, ref_high = policy.classes[high], reference.classes[high]
    if mine_low.max_wait_s > 0:
        reduction = ref_low.max_wait_s / mine_low.max_wait_s
    else:
        reduction = math.inf if ref_low.max_wait_s > 0 else 1.0
    increase = mine_high.p95_wait_s / ref_high.p95_wait_s - 1 if ref_high.p95_wait_s > 0 else None
    allowed_p95 = ref_high.p95_wait_s * (1 + TARGET_HIGH_P95_MAX_INCREASE) + TARGET_HIGH_P95_SLACK_SECONDS
    delta = (policy.gpu_utilization - reference.gpu_utilization) * 100.0
    return TargetCheck(
        policy=policy.policy,
        reference=reference.policy,
        low_class=low,
        high_class=high,
        starved=policy.starved,
        low_max_wait_s=mine_low.max_wait_s,
        reference_low_max_wait_s=ref_low.max_wait_s,
        low_max_wait_reduction=reduction,
        high_p95_wait_s=mine_high.p95_wait_s,
        reference_high_p95_wait_s=ref_high.p95_wait_s,
        high_p95_increase=increase,
        utilization_delta_points=delta,
        no_starvation_met=policy.starved == 0,
        low_max_wait_met=reduction >= TARGET_LOW_MAX_WAIT_REDUCTION,
        high_p95_met=mine_high.p95_wait_s <= allowed_p95,
        utilization_met=abs(delta) <= TARGET_UTILIZATION_MAX_DELTA_POINTS,
    )

"""What one simulated run produced: one record per job, plus run-wide counters.

Kept apart from the simulator so that metrics, reports and plots read plain immutable
records and never depend on the event loop.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class JobOutcome(str, enum.Enum):
    """Where a job ended. Every job ends in exactly one (conservation)."""

    #: Admitted by Kueue and ran to completion on the cluster.
    FINISHED = "finished"
    #: Admitted and ran, then exited with an error (not relaunched, as in SkyPilot).
    FAILED = "failed"
    #: Waited past its team's limit and ran in a public cloud instead.
    BURST = "burst"
    #: Holding quota when the simulation stopped.
    RUNNING_AT_HORIZON = "running-at-horizon"
    #: Waiting in Kueue, or in SkyPilot's relaunch backoff, when the simulation stopped.
    PENDING_AT_HORIZON = "pending-at-horizon"


@dataclass(frozen=True)
class PreemptionEvent:
    """One preemption of a job as Kueue's model decided it, kept so metrics can split a job's
    preemptions by cause (:func:`sky_kueue.sim.metrics.preemption_cause`).

    The preemptor's fields are None when it is not one of the trace's jobs (then the cause is
    unknown rather than guessed).
    """

    at: float
    #: Kueue's ``Preempted`` reason (``InClusterQueue``, ``InCohortReclamation``, ...).
    reason: str
    #: The ClusterQueue of the Workload that preempted the job.
    preemptor_cluster_queue: str | None
    #: The preemptor's class priority (its PriorityClass value, without boosts or levels).
    preemptor_priority: int | None


@dataclass(frozen=True)
class JobResult:
    job_id: str
    team: str
    cluster_queue: str
    priority_class: str
    base_priority: int
    gpus: int
    submit_s: float
    duration_s: float
    outcome: JobOutcome
    #: Time not running: queued in Kueue or in relaunch backoff, until the run that counted
    #: (the completing or failing run, the burst, or the horizon).
    wait_s: float
    #: Submission to the first admission (None: never admitted).
    first_admission_wait_s: float | None
    preemptions: int
    #: GPU-seconds of runs that were preempted (their work is redone).
    lost_gpu_s: float
    #: The highest boost any of the job's Workloads carried.
    max_boost: int
    launches: int
    burst_cost: float = 0.0
    #: A burst job's cloud start-up (decision or capacity to running), billed but not running.
    cloud_startup_s: float = 0.0
    end_s: float | None = None
    #: Run time still needed when the job ended or the simulation stopped (checkpoints
    #: shorten it; the duration otherwise). A burst job ran this much in the cloud.
    remaining_s: float = 0.0
    #: When Kueue first preempted the job (None: never preempted).
    first_preempted_s: float | None = None
    #: When the job last got capacity: its last admission, or its burst (None: never).
    last_admission_s: float | None = None
    #: Every preemption of the job, in order (``preemptions`` of them).
    preemption_events: tuple[PreemptionEvent, ...] = ()

    @property
    def wait_after_preemption_s(self) -> float | None:
        """First preemption to the capacity the job kept (its final admission or its burst).

        None for a job never preempted, and for a preempted job that got no capacity after its
        first preemption (still waiting at the horizon): metrics leave it out.
        """
        if self.first_preempted_s is None:
            return None
        if self.last_admission_s is not None and self.last_admission_s >= self.first_preempted_s:
            return self.last_admission_s - self.first_preempted_s
        return None


@dataclass(frozen=True)
class TimelinePoint:
    at: float
    used_gpus: int
    pending: int


@dataclass(frozen=True)
class RunResult:
    """One policy's run over one trace."""

    policy: str
    jobs: tuple[JobResult, ...]
    #: End of the loaded period (last submission): the utilisation window is [0, this].
    window_s: float
    #: When the simulation stopped (all jobs ended, or the drain limit).
    end_s: float
    gpu_capacity: int
    #: GPU-seconds on the cluster within the window, all runs / runs that were not lost.
    busy_gpu_s: float
    useful_gpu_s: float
    cycles: int
    preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    #: Preemptions whose victim's class priority was above the preemptor's class priority
    #: (a boost, or a lower-class owner reclaiming borrowed quota under reclaimWithinCohort: Any).
    inverted_preemptions: int = 0
    #: Preemptions of Workloads at a protected band level (admitted above their class's plain
    #: level), per Kueue reason. With ``protect_within_nominal`` no reclaim is among them: the
    #: check that a protected place is out of every reclaim's reach.
    protected_preemptions_by_reason: dict[str, int] = field(default_factory=dict)
    #: Reservations taken (``SimConfig.reserve_after_s``) and Workloads they held back.
    reservations: int = 0
    held_back_workloads: int = 0
    timeline_cq: str = ""
    timeline: tuple[TimelinePoint, ...] = ()
    wall_s: float = 0.0
    #: ETA checks: (job id, actual wait, model estimate or None, naive estimate or None).
    eta: tuple[tuple[str, float | None, float | None, float | None], ...] = ()
    #: Safe relaunch (:mod:`sky_kueue.sim.safe_hold`): what the holds did.
    safe: SafeHoldCounts = field(default_factory=lambda: SafeHoldCounts())
    #: The relaunch lane (:mod:`sky_kueue.sim.lane`): relaunches created in a lane, relaunches due
    #: the lane that could never fit it (left in their team's queue), preemptions of Workloads
    #: admitted in a lane (zero by construction), the lanes' nominal GPUs, and whether a lane
    #: took all of its donor's GPUs.
    lane_entries: int = 0
    lane_misfits: int = 0
    lane_preempted: int = 0
    lane_gpus: int = 0
    lane_empties_donor: bool = False


@dataclass
class SafeHoldCounts:
    """What the safe-relaunch rule did in one run (all zero without it).

    ``holds``: relaunches held out of Kueue; ``released_safe``: held ones released because
    Kueue would admit them without borrowing; ``moved``: relaunches (held or not) sent to
    another cluster of the team where they fit nominal quota;
    ``released_timeout``: released after ``safe_max_hold_seconds``; ``bursts``: sent to a
    cloud from a hold; ``run_now_safe``: relaunches that fitted nominal quota at once;
    ``hold_s``: seconds held in all; ``team_reservations`` / ``team_held_back``: see the fields.
    """

    holds: int = 0
    released_safe: int = 0
    moved: int = 0
    released_timeout: int = 0
    bursts: int = 0
    run_now_safe: int = 0
    hold_s: float = 0.0
    #: Team-scoped reservations taken by starved relaunches, and the team Workloads they held back.
    team_reservations: int = 0
    team_held_back: int = 0

    def to_json(self) -> dict[str, float | int]:
        return {
            "holds": self.holds,
            "released_safe": self.released_safe,
            "moved": self.moved,
            "released_timeout": self.released_timeout,
            "bursts": self.bursts,
            "run_now_safe": self.run_now_safe,
            "hold_hours": round(self.hold_s / 3600.0, 3),
            "team_reservations": self.team_reservations,
            "team_held_back": self.team_held_back,
        }

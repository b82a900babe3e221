"""The discrete-event simulator: a trace, Kueue's exact scheduler, SkyPilot's relaunches.

Why discrete events over the exact model: starvation is a property of *sequences* of
decisions (admitted by borrowing, reclaimed, relaunched at the back, admitted, reclaimed
again...), so the scheduling core must be Kueue's own rules, not an approximation. The
simulator therefore drives :class:`sky_kueue.kueue.scheduler.Engine` and adds only what
happens around Kueue:

* **arrivals**: a job's first Workload is created at its submission time;
* **Kueue cycles** run at multiples of :attr:`SimConfig.cycle_interval_s` whenever something
  changed and some ClusterQueue has an active head; at one instant they repeat, as
  Kueue's loop does, until nothing more can happen (:func:`_settle`);
* **admissions** start a run; **completions and failures** end it and free the quota;
* **preemptions** (decided by the model) delete the victim's pod group; SkyPilot
  relaunches the job after :mod:`sky_kueue.sim.relaunch`'s delay as a *new* Workload, so
  it sorts behind every Workload of its priority created meanwhile;
* the **resubmission policy** (:mod:`sky_kueue.sim.policies`) sets the priority of each
  new Workload and re-ages waiting ones, as the controller would;
* **safe relaunch** (a ``+safe`` policy): after its ``k``-th preemption a job's relaunch is
  held out of Kueue (the controller's ``spec.active: false``) until the model says Kueue
  would admit it without borrowing, then released; the rule is the controller's
  (:mod:`sky_kueue.controller.aging.safe_relaunch`), its input is built by
  :mod:`sky_kueue.sim.safe_hold`, and held jobs are reviewed whenever quota is freed;
  with the rule's team reservation (a ``+team`` policy) a starved relaunch also holds back
  its own team's newer work in its ClusterQueue until it is admitted (the rule's
  :func:`~sky_kueue.controller.aging.safe_relaunch.team_work_to_hold` says which);
* **relaunch lane** (a ``+lane`` or ``+cohort-lane`` policy): the cluster gets its lane
  ClusterQueues and LocalQueues (:mod:`sky_kueue.sim.lane`), and after ``after_preemptions``
  preemptions a job's relaunch is created in its lane's LocalQueue (SkyPilot's relaunch with
  the queue the controller chose) unless it could never fit there (a *misfit*: it stays in
  its team's queue);
* **burst**: a launch attempt that waited in Kueue longer than its team's limit gives up
  and runs in a public cloud (SkyPilot's ``admission_timeout`` with ``ordered:``
  resources, SkyPilot 0.14.1 ``sky/backends/cloud_vm_ray_backend.py`` failover and ``kueue.admission_timeout``), at a
  cost per GPU-hour.

Time is simulated (floats, seconds from the trace's start; Kueue objects get
``EPOCH + t``), never slept. Randomness (relaunch delays) is drawn from an RNG derived
from ``(seed, job, preemption number)``, so a run is deterministic for a seed and two
policies see the same delay for the same preemption of the same job.

Simplifications, stated: the controller's reaction and pod start-up take no time; a
preempted run restarts from scratch (no checkpoints); a victim releases its quota at
once (no termination grace period).

**The cloud** is not instant: a job sent there starts :attr:`SimConfig.cloud_startup_s`
(plus a seeded jitter up to :attr:`SimConfig.cloud_startup_jitter_s`) after the burst
decision, and the cloud holds at most :attr:`SimConfig.cloud_capacity_gpus` GPUs (None:
unlimited). A burst that finds no capacity waits, first come first served, until a cloud
run ends; the job is not running meanwhile, so that time (and the start-up) counts as
wait. The start-up is billed, as a provisioned node is (:mod:`sky_kueue.sim.burst_cost`).
"""

from __future__ import annotations

import enum
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sky_kueue.controller.aging.protected_slot import protected_offset
from sky_kueue.controller.aging.safe_relaunch import (
    Placement,
    SafeRelaunchDecision,
    SafeRelaunchInput,
    SafeRelaunchKind,
    TeamReservationScope,
    TeamWorkload,
    decide_safe_relaunch,
    team_work_to_hold,
)
from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.predicted_burst import PredictedBurstSettings
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import CycleResult, Engine
from sky_kueue.sim import eta, safe_hold
from sky_kueue.sim.cluster import QueueRef, at, fresh_state, make_workload
from sky_kueue.sim.events import EventKind, EventQueue
from sky_kueue.sim.lane import LanePlan, LaneSettings, add_lanes, requests_of
from sky_kueue.sim.policies import Decision, ResubmissionPolicy
from sky_kueue.sim.relaunch import RelaunchModel
from sky_kueue.sim.reservation import QueueOrder, Reservations
from sky_kueue.sim.results import (
    JobOutcome,
    JobResult,
    PreemptionEvent,
    RunResult,
    SafeHoldCounts,
    TimelinePoint,
)
from sky_kueue.sim.traces import JobSpec, Trace

#: Kueue runs cycles back to back; the simulator batches what happens within this window.
DEFAULT_CYCLE_INTERVAL_SECONDS = 1.0
#: After the last submission, keep simulating at most this long for queues to drain.
DEFAULT_DRAIN_SECONDS = 7 * 86_400.0
#: Price of a GPU-hour in the public cloud a job bursts to (on-demand, USD).
DEFAULT_BURST_COST_PER_GPU_HOUR = 4.0
#: Seconds from the burst decision to the job running on a fresh cloud GPU node. Ten minutes:
#: SkyPilot itself waits up to 90 s (AWS, Azure) to 300 s (Lambda, Kubernetes) for a new node
#: to make progress before failing over (SkyPilot 0.14.1
#: ``sky/backends/cloud_vm_ray_backend.py`` ``_NODES_LAUNCHING_PROGRESS_TIMEOUT``), then
#: installs its runtime on the node and runs the task's setup, and a GPU training image
#: (CUDA + framework) is several GB to pull. Capacity errors and failover make it longer;
#: ``simulate --cloud-startup-jitter`` models that spread.
DEFAULT_CLOUD_STARTUP_SECONDS = 600.0
#: Extra start-up drawn uniformly in [0, this] per burst (0: every burst takes the same time).
DEFAULT_CLOUD_STARTUP_JITTER_SECONDS = 0.0
#: Safety stop for cycles at one instant (each cycle pops one head per ClusterQueue).
MAX_CYCLES_PER_INSTANT = 100_000
#: Call the progress callback after this many event-loop steps.
PROGRESS_EVERY_STEPS = 500

#: The one cloud a simulated team bursts to (its name only labels the decision).
SIM_BURST_CLOUD = "cloud"
#: The name of the simulator's single cluster in safe-relaunch decisions.
SIM_CLUSTER_NAME = "cluster"

#: The burst gate's projection looks this far past its threshold, then reports "beyond".
_PREDICTION_HORIZON_SLACK_SECONDS = 1.0

#: Tolerance when placing resync ticks (float rounding of created_at + k * interval).
_TICK_EPSILON_S = 1e-6

#: progress(jobs ended, jobs in the trace, simulated seconds)
ProgressFn = Callable[[int, int, float], None]


@dataclass(frozen=True)
class SimConfig:
    """Everything that changes a run except the trace and the policy."""

    seed: int = 0
    cycle_interval_s: float = DEFAULT_CYCLE_INTERVAL_SECONDS
    drain_s: float = DEFAULT_DRAIN_SECONDS
    relaunch: RelaunchModel = field(default_factory=RelaunchModel)
    burst_cost_per_gpu_hour: float = DEFAULT_BURST_COST_PER_GPU_HOUR
    #: Burst decision to the job running in the cloud (module docstring).
    cloud_startup_s: float = DEFAULT_CLOUD_STARTUP_SECONDS
    #: Each burst's start-up gets a seeded uniform extra in [0, this].
    cloud_startup_jitter_s: float = DEFAULT_CLOUD_STARTUP_JITTER_SECONDS
    #: GPUs the cloud grants at once (None: unlimited); a burst beyond them waits.
    cloud_capacity_gpus: int | None = None
    #: Burst after this many seconds in Kueue per launch attempt, for every team
    #: (overrides the trace's per-team limits; None keeps them).
    wait_limit_s: float | None = None
    #: ClusterQueue whose usage is recorded as a timeline ("" = the busiest team's).
    timeline_cq: str = ""
    #: Let the resubmission policy send a preempted job to a cloud (its burst settings:
    #: ``burst_after_preemptions``, and ``burst_max_predicted_wait_seconds`` as the relaunch's
    #: admission timeout). The baseline never bursts this way.
    allow_burst: bool = False
    #: Jobs checkpoint every this many seconds of run time and resume from the last
    #: checkpoint after a preemption (None: a relaunch starts from scratch).
    checkpoint_every_s: float | None = None
    #: A Workload waiting this long takes its cohort's reservation: the controller deactivates
    #: (``spec.active: false``) the pending Workloads Kueue would admit after it, until it is
    #: admitted (:mod:`sky_kueue.sim.reservation`; None: no reservations).
    reserve_after_s: float | None = None


class _State(enum.Enum):
    UNSUBMITTED = "unsubmitted"
    QUEUED = "queued"
    RUNNING = "running"
    RELAUNCHING = "relaunching"
    #: Sent to the cloud, waiting for cloud capacity (``SimConfig.cloud_capacity_gpus``).
    CLOUD_WAITING = "cloud-waiting"
    DONE = "done"


@dataclass
class _Job:
    """A job's mutable state during one run."""

    index: int
    spec: JobSpec
    #: Where the current Workload is queued: the team's queue, or its relaunch lane.
    queue: QueueRef
    base_priority: int
    alloc_gpus: int
    state: _State = _State.UNSUBMITTED
    launches: int = 0
    workload: o.Workload | None = None
    #: When the current Workload was created (resync ticks count from here).
    created_at: float = 0.0
    priority: int = 0
    max_boost: int = 0
    waiting_since: float = 0.0
    wait_s: float = 0.0
    run_start: float = 0.0
    first_admission: float | None = None
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    last_backoff: float | None = None
    history: JobHistory | None = None
    #: The policy's decision for the current Workload (what it gets once admitted).
    decision: Decision | None = None
    first_preempted_s: float | None = None
    last_admission_s: float | None = None
    preemption_events: list[PreemptionEvent] = field(default_factory=list)
    #: Run time still needed (less than the job's duration once a checkpoint was kept).
    remaining_s: float = 0.0
    outcome: JobOutcome | None = None
    end_s: float | None = None
    burst_cost: float = 0.0
    #: Start-up of the job's cloud run (billed, not running).
    cloud_startup_s: float = 0.0
    #: Deactivated by another job's reservation: the Workload is not in Kueue's queues.
    held_back: bool = False
    #: Held by the safe-relaunch rule since this time (None: not held; the Workload is in Kueue).
    safe_held_since: float | None = None
    #: Deactivated by a starved relaunch of its own team (the rule's team reservation).
    team_held: bool = False
    #: This relaunch holds its team's newer work back since this time (None: it does not).
    reserving_since: float | None = None

    @property
    def in_kueue(self) -> bool:
        """Whether the current pending Workload is in Kueue's queues (not deactivated)."""
        return not self.held_back and self.safe_held_since is None and not self.team_held


def _rng(seed: int, job_id: str, preemption: int) -> random.Random:
    return random.Random(f"{seed}/{job_id}/{preemption}")


def _cloud_rng(seed: int, job_id: str) -> random.Random:
    """The RNG of a job's cloud start-up jitter (a job bursts at most once)."""
    return random.Random(f"{seed}/{job_id}/cloud")


class Simulator:
    """One policy over one trace. Create, then :meth:`run` once."""

    def __init__(
        self,
        trace: Trace,
        policy: ResubmissionPolicy,
        config: SimConfig | None = None,
        *,
        progress: ProgressFn | None = None,
        on_arrival: Callable[[Simulator, int], None] | None = None,
    ) -> None:
        self.trace = trace
        self.policy = policy
        self.config = config if config is not None else SimConfig()
        self.progress = progress
        self.on_arrival = on_arrival
        cluster = trace.cluster
        #: The relaunch lane's settings and objects (None: relaunches stay in the team's queue).
        self.lane: LaneSettings | None = getattr(policy, "lane", None)
        self.lane_plan: LanePlan | None = None
        if self.lane is not None:
            self.lane_plan = add_lanes(cluster.state, cluster.queues, self.lane)
            state = fresh_state(self.lane_plan.state)
        else:
            state = fresh_state(cluster.state)
        #: Relaunches created in a lane, and relaunches due the lane that could never fit it.
        self.lane_entries = 0
        self.lane_misfits = 0
        #: Preemptions of Workloads admitted in a lane: zero by construction (the lane's check).
        self.lane_preempted = 0
        self.now = 0.0
        self.engine = Engine(state, at(0.0))
        self.events = EventQueue()
        self.jobs: list[_Job] = []
        for index, spec in enumerate(trace.jobs):
            queue = cluster.queues[spec.team]
            self.jobs.append(
                _Job(
                    index=index,
                    spec=spec,
                    queue=queue,
                    base_priority=cluster.priority_value(spec.priority_class),
                    alloc_gpus=spec.gpus,
                    remaining_s=spec.duration_s,
                )
            )
        self.by_workload: dict[str, _Job] = {}
        self.ended = 0
        self.cycles = 0
        self.window_s = trace.arrival_end_s
        self.busy_gpu_s = 0.0
        self.useful_gpu_s = 0.0
        self.preemptions_by_reason: dict[str, int] = {}
        self.inverted_preemptions = 0
        #: Preemptions of Workloads at a protected band level, per reason (RunResult doc).
        self.protected_preemptions: dict[str, int] = {}
        self.used_gpus: dict[str, int] = {name: 0 for name in state.cluster_queues}
        self.pending_count: dict[str, int] = {name: 0 for name in state.cluster_queues}
        #: admissions per ClusterQueue, in time order (for rate estimates)
        self.admission_times: dict[str, list[float]] = {name: [] for name in state.cluster_queues}
        self.timeline_cq = self.config.timeline_cq or self._busiest_cq()
        self.timeline: list[TimelinePoint] = []
        self.eta: list[tuple[str, float | None, float | None, float | None]] = []
        self.reservations = Reservations()
        self.safe = policy.safe_relaunch
        if self.safe is not None and self.config.reserve_after_s is not None:
            raise ValueError("the safe-relaunch rule and reservations are not modelled together")
        if self.lane is not None and (self.safe is not None or self.config.reserve_after_s is not None):
            raise ValueError("the relaunch lane is not modelled with the safe-relaunch rule or reservations")
        self.safe_counts = SafeHoldCounts()
        #: The predicted-wait burst gate's verdicts on relaunches due a burst: (bursts, stays).
        self.gate_bursts = 0
        self.gate_stays = 0
        self.team_reserves = self.safe is not None and self.safe.team_reservation is not TeamReservationScope.OFF
        #: Per ClusterQueue: its queued jobs (for the team reservation), and the reserving relaunches.
        self.queued: dict[str, dict[int, None]] = {name: {} for name in state.cluster_queues}
        self.reservers: dict[str, dict[int, None]] = {name: {} for name in state.cluster_queues}
        #: Jobs whose relaunch the safe-relaunch rule holds, in the order they were held.
        self.safe_held: dict[int, None] = {}
        self._quota_freed = False
        self._ran = False
        if self.config.cloud_startup_s < 0 or self.config.cloud_startup_jitter_s < 0:
            raise ValueError("the cloud start-up and its jitter are seconds >= 0")
        if self.config.cloud_capacity_gpus is not None and self.config.cloud_capacity_gpus < 0:
            raise ValueError("the cloud capacity is a number of GPUs >= 0")
        #: GPUs the cloud has granted (starting or running), and bursts waiting for capacity.
        self.cloud_used_gpus = 0
        self.cloud_waiting: dict[int, None] = {}

    # --- setup ------------------------------------------------------------------------

    def _busiest_cq(self) -> str:
        demand: dict[str, float] = {}
        for job in self.jobs:
            cq = job.queue.cluster_queue
            demand[cq] = demand.get(cq, 0.0) + job.alloc_gpus * job.spec.duration_s
        return max(sorted(demand), key=lambda cq: demand[cq]) if demand else ""

    def wait_limit(self, job: _Job) -> float | None:
        """Seconds this launch attempt may wait in Kueue before SkyPilot fails over to a cloud."""
        limit = self.config.wait_limit_s
        if limit is None:
            limit = self.trace.cluster.wait_limits.get(job.spec.team)
        relaunch = self.policy.relaunch_wait_limit_s if self.config.allow_burst and job.preemptions > 0 else None
        if relaunch is not None:
            limit = relaunch if limit is None else min(limit, relaunch)
        return limit

    # --- the loop ---------------------------------------------------------------------

    def run(self) -> RunResult:
        """Simulates until every job ended or the drain limit; returns the records."""
        if self._ran:
            raise RuntimeError("a Simulator runs once; create a new one")
        self._ran = True
        started = time.perf_counter()
        for job in self.jobs:
            self.events.push(job.spec.submit_s, EventKind.ARRIVAL, job.index)
        horizon = self.trace.arrival_end_s + self.config.drain_s
        interval = self.config.cycle_interval_s
        steps = 0
        total = len(self.jobs)
        while self.ended < total:
            next_at = self.events.peek_time()
            if next_at is None or next_at > horizon:
                break
            instant = math.ceil(next_at / interval) * interval if interval > 0 else next_at
            instant = min(max(instant, next_at), horizon)
            while True:
                peek = self.events.peek_time()
                if peek is None or peek > instant:
                    break
                event = self.events.pop()
                self.now = event.at
                self._handle(event.kind, self.jobs[event.job], event.token)
            self.now = instant
            self._review_holds()
            while self.engine.has_active_heads():
                self._settle(instant)
                if not self._review_holds():
                    break
            steps += 1
            if self.progress is not None and steps % PROGRESS_EVERY_STEPS == 0:
                self.progress(self.ended, total, self.now)
        end = min(max(self.now, self.trace.arrival_end_s), horizon)
        self._stop(end)
        if self.progress is not None:
            self.progress(self.ended, total, self.now)
        return RunResult(
            policy=self.policy.name,
            jobs=tuple(self._result(job) for job in self.jobs),
            window_s=self.window_s,
            end_s=end,
            gpu_capacity=self.trace.cluster.gpu_capacity,
            busy_gpu_s=self.busy_gpu_s,
            useful_gpu_s=self.useful_gpu_s,
            cycles=self.cycles,
            preemptions_by_reason=dict(sorted(self.preemptions_by_reason.items())),
            inverted_preemptions=self.inverted_preemptions,
            protected_preemptions_by_reason=dict(sorted(self.protected_preemptions.items())),
            reservations=self.reservations.taken,
            held_back_workloads=self.reservations.held_back,
            timeline_cq=self.timeline_cq,
            timeline=tuple(self.timeline),
            wall_s=time.perf_counter() - started,
            eta=tuple(self.eta),
            safe=self.safe_counts,
            lane_entries=self.lane_entries,
            lane_misfits=self.lane_misfits,
            lane_preempted=self.lane_preempted,
            lane_gpus=0 if self.lane_plan is None else self.lane_plan.carved_gpus,
            lane_empties_donor=self.lane_plan is not None and self.lane_plan.empties_a_donor,
        )

    def _handle(self, kind: EventKind, job: _Job, token: int) -> None:
        if kind is EventKind.ARRIVAL:
            self._launch(job)
            if self.on_arrival is not None:
                self.on_arrival(self, job.index)
        elif kind is EventKind.FINISH:
            if job.state is _State.RUNNING and job.launches == token:
                self._finish(job)
        elif kind is EventKind.RELAUNCH:
            if job.state is _State.RELAUNCHING and job.launches == token:
                self._launch(job)
        elif kind is EventKind.BURST_CHECK:
            if job.state is _State.QUEUED and job.launches == token:
                self._burst(job)
        elif kind is EventKind.CLOUD_RELAUNCH:
            if job.state is _State.RELAUNCHING and job.launches == token:
                self._to_cloud(job)  # marked for the cloud after a preemption: never back in Kueue
        elif kind is EventKind.RESYNC and job.state is _State.QUEUED and job.launches == token:
            self._reage(job)
        elif kind is EventKind.RELEASE and job.state is _State.RUNNING and job.launches == token:
            self._release(job)
        elif kind is EventKind.RESERVE and job.state is _State.QUEUED and job.launches == token:
            self._reserve(job)
        elif kind is EventKind.SAFE_TIMEOUT and job.state is _State.QUEUED and job.launches == token:
            if job.safe_held_since is not None:
                self._apply_safe(job, self._safe_decision(job))
            elif job.reserving_since is not None:
                self._end_team_reservation(job)  # released into Kueue but not admitted within the bound
        elif kind is EventKind.TEAM_RELEASE:
            self._sync_team_holds(job.queue.cluster_queue)
        elif kind is EventKind.CLOUD_FREE:
            self.cloud_used_gpus -= job.alloc_gpus
            self._grant_cloud()

    def _settle(self, instant: float) -> None:
        """Runs Kueue cycles at one instant until no head can change anything."""
        self.engine.now = at(instant)
        tried: set[str] = set()
        for _ in range(MAX_CYCLES_PER_INSTANT):
            if not self.engine.has_active_heads():
                return
            result = self.engine.cycle()
            self.cycles += 1
            self.engine.settle_events(result)
            self._apply(result, instant)
            if result.changed:
                tried.clear()
                continue
            heads = {entry.info.key for entry in result.entries}
            if heads <= tried:
                return
            tried |= heads

    def _apply(self, result: CycleResult, instant: float) -> None:
        for entry in result.admitted:
            self._admitted(self.by_workload[entry.info.key], entry.cq, instant)
        for p in result.preempted:
            preemptor = self.by_workload.get(p.preemptor.key)
            self._preempted(
                self.by_workload[p.victim.key],
                instant,
                p.reason,
                p.preemptor.uid,
                preemptor.base_priority if preemptor is not None else None,
                preemptor.queue.cluster_queue if preemptor is not None else None,
            )

    # --- job transitions --------------------------------------------------------------

    def _launch(self, job: _Job) -> None:
        """SkyPilot creates the job's pod group: a new pending Workload."""
        now = self.now
        job.launches += 1
        name = f"{job.spec.job_id}-{job.launches}"
        if job.state is _State.UNSUBMITTED:
            job.waiting_since = now
            if self.policy.keeps_history:
                job.history = JobHistory(key=job.spec.job_id, base_priority=job.base_priority)
        if job.history is not None:
            job.history = job.history.queued(name, now)
        decision = self.policy.decide(job.history, now)
        job.decision = decision
        self._route(job)
        # A band policy's levels sit below the class value (negative); a boost policy's are >= 0.
        boost = decision.boost
        job.priority = job.base_priority + boost
        job.max_boost = max(job.max_boost, boost)
        job.workload = make_workload(
            name=name,
            queue=job.queue,
            created_at=now,
            priority=job.priority,
            priority_class=job.spec.priority_class,
            gpus=job.spec.gpus,
            cpu_milli=job.spec.cpu_milli,
            memory_bytes=job.spec.memory_bytes,
        )
        job.state = _State.QUEUED
        job.created_at = now
        self.by_workload[job.workload.key] = job
        if self._predicted_burst(job):
            job.state = _State.RELAUNCHING
            self._to_cloud(job)  # the controller marks the job; SkyPilot sends it to the cloud
            return
        safe = self._safe_decision(job) if self._safe_applies(job) else None
        if self.config.reserve_after_s is not None and self.reservations.holds_back(
            self._cohort(job), self._queue_order(job)
        ):
            self._hold_back(job)
        elif safe is not None and safe.kind is SafeRelaunchKind.HOLD:
            self._safe_hold(job)
            if safe.reserves_team_quota:
                self._start_team_reservation(job)
        elif safe is not None and safe.kind is SafeRelaunchKind.BURST:
            self.safe_counts.bursts += 1
            job.state = _State.RELAUNCHING
            self._to_cloud(job)  # the controller marks the job; SkyPilot sends it to the cloud
            return
        else:
            if safe is not None and safe.cluster is not None and safe.cluster != self._own_cluster(job):
                self.safe_counts.moved += 1  # fits nominal quota in another cluster of the team
            elif safe is not None and safe.predicted_wait_seconds == 0.0:
                self.safe_counts.run_now_safe += 1
            if safe is not None and safe.reserves_team_quota:
                self._start_team_reservation(job)
                self.events.push(now + self.safe_max_hold_s, EventKind.SAFE_TIMEOUT, job.index, job.launches)
            self._enter_kueue(job, safe.cluster if safe is not None else None)
        self._pending_delta(job, +1)
        if self.reservers.get(job.queue.cluster_queue):
            self._sync_team_holds(job.queue.cluster_queue)  # a new arrival behind a starved relaunch
        limit = self.wait_limit(job)
        if limit is not None:
            self.events.push(now + limit, EventKind.BURST_CHECK, job.index, job.launches)
        if self.config.reserve_after_s is not None:
            self.events.push(now + self.config.reserve_after_s, EventKind.RESERVE, job.index, job.launches)
        self._schedule_resync(job, decision.next_change_s)

    def _route(self, job: _Job) -> None:
        """The queue of the job's new Workload: its lane once it was preempted ``after_preemptions``
        times and its request fits the lane's nominal quota, else its team's."""
        plan = self.lane_plan
        home = self.trace.cluster.queues[job.spec.team]
        job.queue = home
        if plan is None or self.lane is None or job.preemptions < self.lane.after_preemptions:
            return
        if not plan.fits(job.spec.team, requests_of(job.spec)):
            self.lane_misfits += 1
            return
        job.queue = plan.queues[job.spec.team]
        self.lane_entries += 1

    def _schedule_resync(self, job: _Job, next_change_s: float | None) -> None:
        """The first of the controller's resync ticks at which the boost can change."""
        resync = self.policy.resync_seconds
        if resync is None or next_change_s is None:
            return
        ticks = max(math.ceil((next_change_s - job.created_at) / resync - _TICK_EPSILON_S), 1)
        while job.created_at + ticks * resync <= self.now + _TICK_EPSILON_S:
            ticks += 1  # strictly after now, whatever the float rounding
        self.events.push(job.created_at + ticks * resync, EventKind.RESYNC, job.index, job.launches)

    def _reage(self, job: _Job) -> None:
        """The controller re-ages a waiting Workload; the boost only goes up."""
        assert job.workload is not None
        decision = self.policy.decide(job.history, self.now)
        job.decision = decision
        if job.base_priority + decision.boost > job.priority:
            job.priority = job.base_priority + decision.boost
            job.max_boost = max(job.max_boost, decision.boost)
            job.workload = _with_priority(job.workload, job.priority)
            if job.in_kueue:
                self.engine.update_pending_workload(job.workload)
        self._schedule_resync(job, decision.next_change_s)

    # --- the predicted-wait burst gate (policy.predicted_burst) -------------------------

    def _predicted_burst(self, job: _Job) -> bool:
        """A relaunch due a burst goes to the cloud only when the predictor's on-prem wait
        exceeds the cloud start-up plus the margin, or once the gate kept the job ``max_stays``
        times (:mod:`sky_kueue.controller.predicted_burst`; the policy then skips the model)."""
        # A policy written against the protocol before the gate existed has no gate.
        gate: PredictedBurstSettings | None = getattr(self.policy, "predicted_burst", None)
        if not self.config.allow_burst or gate is None or job.preemptions == 0 or job.workload is None:
            return False
        workload = job.workload
        horizon = gate.threshold_seconds + _PREDICTION_HORIZON_SLACK_SECONDS

        def wait() -> float | None:
            return eta.relaunch_wait(self, workload, gate.wait_kind, horizon)

        verdict = self.policy.predicted_burst_verdict(job.history, self.now, wait)
        if verdict is None:
            return False
        if verdict.bursts:
            self.gate_bursts += 1
        else:
            self.gate_stays += 1
        return verdict.bursts

    # --- safe relaunch (policy.safe_relaunch) ------------------------------------------

    def _safe_applies(self, job: _Job) -> bool:
        """A relaunch the rule may hold: the policy has it and the job reached its count."""
        if self.safe is None or job.preemptions == 0:
            return False
        after = self.safe.after_preemptions(job.spec.team)
        return after is not None and job.preemptions >= after

    def _safe_decision(self, job: _Job) -> SafeRelaunchDecision:
        assert self.safe is not None
        own, others = self._safe_placements(job)
        held = None if job.safe_held_since is None else self.now - job.safe_held_since
        clouds = (SIM_BURST_CLOUD,) if self.config.allow_burst else ()
        reserved = None
        if self.team_reserves and not own.safe_now and not own.safe_when_admitted:
            assert job.workload is not None
            reserved = self._placement_in(
                SIM_CLUSTER_NAME,
                self.engine,
                job,
                excluded=frozenset(self._team_hold_keys(job)),
                claims=self._claims(job),
            )
        return decide_safe_relaunch(
            SafeRelaunchInput(job.preemptions, held, own, others, clouds, team=job.spec.team, own_reserved=reserved),
            self.safe,
        )

    @property
    def safe_max_hold_s(self) -> float:
        assert self.safe is not None
        return self.safe.safe_max_hold_seconds

    # --- the rule's team reservation (SafeRelaunchSettings.team_reservation) -----------

    @staticmethod
    def _team_workload(job: _Job) -> TeamWorkload:
        assert job.workload is not None
        return TeamWorkload(job.workload.key, job.base_priority, job.created_at)

    def _team_hold_keys(self, reserver: _Job) -> tuple[str, ...]:
        """The team work ``reserver``'s reservation holds back (the rule's choice, Kueue's order)."""
        assert self.safe is not None
        candidates = [
            self.jobs[i]
            for i in self.queued[reserver.queue.cluster_queue]
            if i != reserver.index
            and self.jobs[i].safe_held_since is None
            and self.jobs[i].reserving_since is None
            and not self.jobs[i].held_back
        ]
        candidates.sort(key=lambda j: (-j.priority, j.created_at, j.index))
        return team_work_to_hold(self._team_workload(reserver), [self._team_workload(j) for j in candidates], self.safe)

    def _start_team_reservation(self, job: _Job) -> None:
        if job.reserving_since is None:
            job.reserving_since = self.now
            self.reservers[job.queue.cluster_queue][job.index] = None
            self.safe_counts.team_reservations += 1

    def _end_team_reservation(self, job: _Job) -> None:
        """``job`` no longer reserves: the team work only it held back returns to Kueue."""
        if job.reserving_since is None:
            return
        job.reserving_since = None
        cq = job.queue.cluster_queue
        self.reservers[cq].pop(job.index, None)
        self._sync_team_holds(cq)

    def _sync_team_holds(self, cq: str) -> None:
        """Deactivates what the ClusterQueue's reservations hold back, reactivates the rest."""
        wanted: set[str] = set()
        for index in self.reservers[cq]:
            wanted.update(self._team_hold_keys(self.jobs[index]))
        for index in list(self.queued[cq]):
            other = self.jobs[index]
            if other.safe_held_since is not None or other.reserving_since is not None or other.held_back:
                continue
            assert other.workload is not None
            hold = other.workload.key in wanted
            if hold and not other.team_held:
                self.engine.delete_workload(other.workload.key)
                other.team_held = True
                self.safe_counts.team_held_back += 1
            elif not hold and other.team_held:
                other.team_held = False
                self.engine.add_workload(other.workload)  # reactivated: back at its creation time

    def _safe_placements(self, job: _Job) -> tuple[Placement, tuple[Placement, ...]]:
        """The predictor's answer for the job's own cluster and the team's others (none here)."""
        assert job.workload is not None
        return self._placement_in(SIM_CLUSTER_NAME, self.engine, job, claims=self._claims(job)), ()

    def _claims(self, job: _Job) -> frozenset[str]:
        """With the team reservation: the team's other reserving relaunches already in Kueue."""
        if not self.team_reserves:
            return frozenset()
        return frozenset(
            other.workload.key
            for index in self.reservers[job.queue.cluster_queue]
            if index != job.index
            and (other := self.jobs[index]).in_kueue
            and other.state is _State.QUEUED
            and other.workload is not None
        )

    def _placement_in(
        self,
        cluster: str,
        engine: Engine,
        job: _Job,
        *,
        excluded: frozenset[str] = frozenset(),
        claims: frozenset[str] = frozenset(),
    ) -> Placement:
        assert job.workload is not None
        decision = job.decision
        admitted = (
            job.base_priority + decision.admitted_boost
            if decision is not None and decision.admitted_boost is not None
            else job.priority
        )
        return safe_hold.placement(
            cluster,
            engine,
            job.workload,
            gpus=job.alloc_gpus,
            admitted_priority=admitted,
            holder=self._holder,
            now=self.now,
            excluded=excluded,
            claims=claims,
        )

    def _holder(self, key: str) -> safe_hold.Running | None:
        other = self.by_workload.get(key)
        if other is None:
            return None
        return safe_hold.Running(other.alloc_gpus, other.run_start + other.remaining_s)

    def _enter_kueue(self, job: _Job, cluster: str | None) -> None:
        """The Workload enters Kueue's queues (in ``cluster`` where there are several)."""
        assert job.workload is not None
        self.engine.add_workload(job.workload)

    def _safe_hold(self, job: _Job) -> None:
        assert self.safe is not None
        job.safe_held_since = self.now
        self.safe_held[job.index] = None
        self.safe_counts.holds += 1
        self.events.push(self.now + self.safe.safe_max_hold_seconds, EventKind.SAFE_TIMEOUT, job.index, job.launches)

    def _unhold(self, job: _Job) -> None:
        if job.safe_held_since is not None:
            self.safe_counts.hold_s += self.now - job.safe_held_since
            job.safe_held_since = None
            self.safe_held.pop(job.index, None)

    def _apply_safe(self, job: _Job, decision: SafeRelaunchDecision) -> bool:
        """Applies a decision on a held job; whether it left the hold."""
        if decision.reserves_team_quota:
            self._start_team_reservation(job)
            self._sync_team_holds(job.queue.cluster_queue)
        if decision.kind is SafeRelaunchKind.HOLD:
            return False
        self._unhold(job)
        if decision.kind is SafeRelaunchKind.BURST:
            self.safe_counts.bursts += 1
            self._pending_delta(job, -1)
            self._to_cloud(job)
            self._end_team_reservation(job)
            return True
        if decision.kind is SafeRelaunchKind.RELEASE_TIMEOUT:
            self.safe_counts.released_timeout += 1
            self._end_team_reservation(job)
        else:
            self.safe_counts.released_safe += 1
            if decision.cluster is not None and decision.cluster != self._own_cluster(job):
                self.safe_counts.moved += 1
        self._enter_kueue(job, decision.cluster)
        return True

    def _own_cluster(self, job: _Job) -> str:
        return SIM_CLUSTER_NAME

    def _review_holds(self) -> bool:
        """Re-decides held relaunches after quota was freed; whether any entered Kueue."""
        if not self.safe_held or not self._quota_freed:
            return False
        self._quota_freed = False
        moved = False
        for index in list(self.safe_held):
            job = self.jobs[index]
            moved |= self._apply_safe(job, self._safe_decision(job))
        return moved

    # --- reservations (SimConfig.reserve_after_s) --------------------------------------

    def _cohort(self, job: _Job) -> str:
        cq = job.queue.cluster_queue
        spec = self.trace.cluster.state.cluster_queues.get(cq)
        cohort = spec.cohort if spec is not None else None
        return cohort if cohort else f"clusterqueue/{cq}"

    @staticmethod
    def _queue_order(job: _Job) -> QueueOrder:
        return QueueOrder(job.priority, job.created_at)

    def _hold_back(self, job: _Job) -> None:
        job.held_back = True
        self.reservations.of(self._cohort(job)).held.add(job.index)
        self.reservations.held_back += 1

    def _reserve(self, job: _Job) -> None:
        """The Workload waited ``reserve_after_s``: it holds its cohort's reservation, or queues for it."""
        state = self.reservations.of(self._cohort(job))
        if state.holder is None and not job.held_back:
            self._take_reservation(job)
        else:
            state.line.append((job.index, job.launches))

    def _take_reservation(self, job: _Job) -> None:
        cohort = self._cohort(job)
        state = self.reservations.of(cohort)
        state.holder = (job.index, job.launches)
        state.holder_order = self._queue_order(job)
        self.reservations.taken += 1
        for other in self.jobs:
            if (
                other.state is _State.QUEUED
                and other is not job
                and other.in_kueue
                and self._cohort(other) == cohort
                and self._queue_order(other).behind(state.holder_order)
            ):
                assert other.workload is not None
                self.engine.delete_workload(other.workload.key)
                self._hold_back(other)

    def _end_reservation(self, job: _Job) -> None:
        """``job`` left the queue: if it held its cohort's reservation, the held work returns."""
        if job.held_back:
            job.held_back = False
            self.reservations.of(self._cohort(job)).held.discard(job.index)
            return
        state = self.reservations.cohorts.get(self._cohort(job))
        if state is None or state.holder is None or state.holder[0] != job.index:
            return
        state.holder = None
        state.holder_order = None
        for index in sorted(state.held):
            other = self.jobs[index]
            other.held_back = False
            assert other.workload is not None
            self.engine.add_workload(other.workload)  # reactivated: back at its creation time
        state.held.clear()
        while state.line:
            index, launch = state.line.popleft()
            candidate = self.jobs[index]
            if candidate.state is _State.QUEUED and candidate.launches == launch:
                self._take_reservation(candidate)
                break

    def _admitted(self, job: _Job, cq: str, instant: float) -> None:
        assert job.workload is not None
        self._pending_delta(job, -1)
        job.state = _State.RUNNING
        self._end_reservation(job)
        if job.reserving_since is not None:
            # The controller reactivates the held work once it has seen the admission, a cycle
            # later: the relaunch is then admitted strictly before that work, so Kueue's reclaim
            # (newest admission first) takes the work that borrows, not the relaunch.
            job.reserving_since = None
            self.reservers[job.queue.cluster_queue].pop(job.index, None)
            self.events.push(instant + self.config.cycle_interval_s, EventKind.TEAM_RELEASE, job.index)
        job.wait_s += instant - job.waiting_since
        job.run_start = instant
        if job.first_admission is None:
            job.first_admission = instant
        job.last_admission_s = instant
        if job.history is not None:
            job.history = job.history.admitted(job.workload.uid, instant)
        decision = job.decision
        if decision is not None and not self._grants_protection(job, decision):
            decision = replace(decision, admitted_boost=decision.released_boost, protect_s=None)
        if decision is not None and decision.admitted_boost is not None:
            # The controller's actuator for admitted Workloads (zero latency, as every reaction).
            self._set_admitted_priority(job, job.base_priority + decision.admitted_boost)
            if decision.protect_s is not None and decision.released_boost is not None:
                self.events.push(instant + decision.protect_s, EventKind.RELEASE, job.index, job.launches)
        self._usage_delta(job, +job.alloc_gpus, instant)
        self.admission_times[job.queue.cluster_queue].append(instant)
        self.events.push(instant + job.remaining_s, EventKind.FINISH, job.index, job.launches)

    @staticmethod
    def _at_protected_level(job: _Job) -> bool:
        """Whether the admitted job sits at its band policy's protected level."""
        decision = job.decision
        offset = None if decision is None else protected_offset(decision.admitted_boost, decision.released_boost)
        return offset is not None and job.priority == job.base_priority + offset

    def _grants_protection(self, job: _Job, decision: Decision) -> bool:
        """Whether the admitted job keeps the decision's protected level: always, unless the
        policy protects only within nominal quota and the job would not fit there with the
        ClusterQueue's admitted Workloads at that level or above (decided once, at admission,
        as the controller keeps a granted level for the run)."""
        offset = protected_offset(decision.admitted_boost, decision.released_boost)
        if not decision.protect_within_nominal or offset is None:
            return True
        assert job.workload is not None
        return safe_hold.fits_protected_gpus(
            self.engine,
            job.queue.cluster_queue,
            job.workload.key,
            level=job.base_priority + offset,
            gpus=job.alloc_gpus,
            holder=self._holder,
        )

    def _set_admitted_priority(self, job: _Job, priority: int) -> None:
        assert job.workload is not None
        if priority == job.priority:
            return
        job.priority = priority
        job.workload = _with_priority(job.workload, priority)
        self.engine.update_admitted_priority(job.workload.key, priority)

    def _release(self, job: _Job) -> None:
        """The readmitted job's protection is over: back to its class's plain level."""
        decision = job.decision
        if decision is not None and decision.released_boost is not None:
            self._set_admitted_priority(job, job.base_priority + decision.released_boost)

    def _finish(self, job: _Job) -> None:
        assert job.workload is not None
        now = self.now
        self.engine.delete_workload(job.workload.key)
        busy = self._window_overlap(job.run_start, now) * job.alloc_gpus
        self.busy_gpu_s += busy
        self.useful_gpu_s += busy
        self._usage_delta(job, -job.alloc_gpus, now)
        self._end(job, JobOutcome.FAILED if job.spec.fails else JobOutcome.FINISHED, now)

    def _preempted(
        self,
        job: _Job,
        instant: float,
        reason: str,
        preemptor_uid: str,
        preemptor_priority: int | None,
        preemptor_cluster_queue: str | None,
    ) -> None:
        assert job.workload is not None
        busy = self._window_overlap(job.run_start, instant) * job.alloc_gpus
        self.busy_gpu_s += busy
        ran = instant - job.run_start
        kept = self._checkpointed(ran, job.remaining_s)
        job.remaining_s -= kept
        self.useful_gpu_s += self._window_overlap(job.run_start, job.run_start + kept) * job.alloc_gpus
        job.lost_gpu_s += (ran - kept) * job.alloc_gpus
        self._usage_delta(job, -job.alloc_gpus, instant)
        job.preemptions += 1
        if self.lane_plan is not None and job.queue != self.trace.cluster.queues[job.spec.team]:
            self.lane_preempted += 1
        if job.first_preempted_s is None:
            job.first_preempted_s = instant
        self.preemptions_by_reason[reason] = self.preemptions_by_reason.get(reason, 0) + 1
        if self._at_protected_level(job):
            self.protected_preemptions[reason] = self.protected_preemptions.get(reason, 0) + 1
        job.preemption_events.append(PreemptionEvent(instant, reason, preemptor_cluster_queue, preemptor_priority))
        if preemptor_priority is not None and preemptor_priority < job.base_priority:
            # The preemptor's class is below the victim's: a boost did this, or an owner
            # reclaiming borrowed quota under reclaimWithinCohort: Any (baseline shows that part).
            self.inverted_preemptions += 1
        if job.history is not None:
            job.history = job.history.with_preemption(
                PreemptionRecord(
                    key=EpisodeKey(job.workload.uid, 1),
                    at=instant,
                    workload_name=job.workload.name,
                    reason=reason,
                    preemptor_uid=preemptor_uid,
                    preemptor_priority=preemptor_priority,
                )
            )
        job.state = _State.RELAUNCHING
        job.waiting_since = instant
        delay = self.config.relaunch.delay(job.last_backoff, _rng(self.config.seed, job.spec.job_id, job.preemptions))
        if self.config.relaunch.backoff:
            job.last_backoff = delay.backoff_s
        if self.config.allow_burst and self.policy.bursts_after_preemption(job.history, instant):
            # The controller marks the job; SkyPilot's relaunch goes to the cloud, not to Kueue.
            self.events.push(instant + delay.total_s, EventKind.CLOUD_RELAUNCH, job.index, job.launches)
            return
        self.events.push(instant + delay.total_s, EventKind.RELAUNCH, job.index, job.launches)

    def _burst(self, job: _Job) -> None:
        """The launch attempt hit the team's wait limit: SkyPilot fails over to a cloud."""
        assert job.workload is not None
        if job.in_kueue:
            self.engine.delete_workload(job.workload.key)
        self._unhold(job)
        self._pending_delta(job, -1)
        job.team_held = False
        self._to_cloud(job)
        self._end_reservation(job)  # ended, no longer queued: a reservation it held passes on
        self._end_team_reservation(job)

    def _to_cloud(self, job: _Job) -> None:
        """SkyPilot sends the job's remaining work to a public cloud: it starts once the cloud
        has capacity for it and a node came up (module docstring); it waits until then."""
        job.state = _State.CLOUD_WAITING
        self.cloud_waiting[job.index] = None
        self._grant_cloud()

    def _cloud_fits(self, job: _Job) -> bool:
        capacity = self.config.cloud_capacity_gpus
        return capacity is None or self.cloud_used_gpus + job.alloc_gpus <= capacity

    def _grant_cloud(self) -> None:
        """Starts waiting bursts in the order they were sent, while the head fits (first come,
        first served: a large burst is not overtaken forever by small ones)."""
        while self.cloud_waiting:
            job = self.jobs[next(iter(self.cloud_waiting))]
            if not self._cloud_fits(job):
                return
            del self.cloud_waiting[job.index]
            self._start_in_cloud(job)

    def _start_in_cloud(self, job: _Job) -> None:
        config = self.config
        startup = config.cloud_startup_s
        if config.cloud_startup_jitter_s > 0:
            startup += _cloud_rng(config.seed, job.spec.job_id).uniform(0.0, config.cloud_startup_jitter_s)
        start = self.now + startup
        job.wait_s += start - job.waiting_since
        job.last_admission_s = start
        job.cloud_startup_s = startup
        billed_s = startup + job.remaining_s
        job.burst_cost = job.alloc_gpus * billed_s / 3600.0 * config.burst_cost_per_gpu_hour
        self.cloud_used_gpus += job.alloc_gpus
        self.events.push(self.now + billed_s, EventKind.CLOUD_FREE, job.index, job.launches)
        self._end(job, JobOutcome.BURST, start + job.remaining_s)

    def _checkpointed(self, ran_s: float, remaining_s: float) -> float:
        """Run time a preempted run keeps: whole checkpoint intervals, never more than remained."""
        every = self.config.checkpoint_every_s
        if every is None or every <= 0:
            return 0.0
        return min(math.floor(ran_s / every) * every, remaining_s)

    def _end(self, job: _Job, outcome: JobOutcome, end_s: float) -> None:
        job.state = _State.DONE
        job.outcome = outcome
        job.end_s = end_s
        job.history = None  # no further decisions; free the memory
        self.ended += 1

    def _stop(self, end: float) -> None:
        """Closes the books at the horizon for jobs that have not ended."""
        for job in self.jobs:
            if job.state is _State.RUNNING:
                self.busy_gpu_s += self._window_overlap(job.run_start, end) * job.alloc_gpus
                self.useful_gpu_s += self._window_overlap(job.run_start, end) * job.alloc_gpus
                job.outcome = JobOutcome.RUNNING_AT_HORIZON
            elif job.state in (_State.QUEUED, _State.RELAUNCHING, _State.CLOUD_WAITING, _State.UNSUBMITTED):
                if job.state is not _State.UNSUBMITTED:
                    job.wait_s += max(end - job.waiting_since, 0.0)
                job.outcome = JobOutcome.PENDING_AT_HORIZON

    # --- bookkeeping ------------------------------------------------------------------

    def _window_overlap(self, start: float, end: float) -> float:
        return max(min(end, self.window_s) - max(start, 0.0), 0.0)

    def _usage_delta(self, job: _Job, gpus: int, when: float) -> None:
        cq = job.queue.cluster_queue
        self.used_gpus[cq] += gpus
        if gpus < 0:
            self._quota_freed = True
        if cq == self.timeline_cq:
            self._timeline_point(when)

    def _pending_delta(self, job: _Job, delta: int) -> None:
        cq = job.queue.cluster_queue
        self.pending_count[cq] += delta
        if delta > 0:
            self.queued[cq][job.index] = None
        else:
            self.queued[cq].pop(job.index, None)
        if cq == self.timeline_cq:
            self._timeline_point(self.now)

    def _timeline_point(self, when: float) -> None:
        point = TimelinePoint(when, self.used_gpus[self.timeline_cq], self.pending_count[self.timeline_cq])
        if self.timeline and self.timeline[-1].at == when:
            self.timeline[-1] = point
        else:
            self.timeline.append(point)

    def _result(self, job: _Job) -> JobResult:
        outcome = job.outcome if job.outcome is not None else JobOutcome.PENDING_AT_HORIZON
        return JobResult(
            job_id=job.spec.job_id,
            team=job.spec.team,
            cluster_queue=self.trace.cluster.queues[job.spec.team].cluster_queue,
            priority_class=job.spec.priority_class,
            base_priority=job.base_priority,
            gpus=job.alloc_gpus,
            submit_s=job.spec.submit_s,
            duration_s=job.spec.duration_s,
            outcome=outcome,
            wait_s=job.wait_s,
            first_admission_wait_s=(None if job.first_admission is None else job.first_admission - job.spec.submit_s),
            preemptions=job.preemptions,
            lost_gpu_s=job.lost_gpu_s,
            max_boost=job.max_boost,
            launches=job.launches,
            burst_cost=job.burst_cost,
            cloud_startup_s=job.cloud_startup_s,
            end_s=job.end_s,
            remaining_s=job.remaining_s,
            first_preempted_s=job.first_preempted_s,
            last_admission_s=job.last_admission_s,
            preemption_events=tuple(job.preemption_events),
        )


def _with_priority(wl: o.Workload, priority: int) -> o.Workload:
    return replace(wl, priority=priority)


def simulate(
    trace: Trace,
    policy: ResubmissionPolicy,
    config: SimConfig | None = None,
    *,
    progress: ProgressFn | None = None,
) -> RunResult:
    """Runs ``policy`` over ``trace`` (see :class:`Simulator`)."""
    return Simulator(trace, policy, config, progress=progress).run()

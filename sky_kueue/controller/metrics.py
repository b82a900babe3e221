"""The controller's Prometheus metrics: what it saw, what it did, and whether it keeps up.

Names follow Kueue's conventions (``pkg/metrics/metrics.go``: a subsystem prefix, base
units, ``_total`` counters, ``reason`` labels with Kueue's own reason strings), under
``sky_kueue_controller_``. Each :class:`ControllerMetrics` owns its registry (see
:mod:`sky_kueue.metrics_http`).

Two sources, so that the reconcile path pays for nothing it does not already compute:

* :meth:`ControllerMetrics.observe` is a controller observer: it reads the
  :class:`~sky_kueue.controller.events.ControllerEvent` of every reconcile (the facts
  recorded, the patch applied, the burst decided, the aging decision with its wait and run
  totals) and increments counters.
* A collector reads the controller's own counters when Prometheus scrapes (work-queue depth
  and the age of its oldest item, Lease, watch requests, store writes and conflicts), the
  starving jobs and the relaunches held now (safe relaunch, :mod:`sky_kueue.controller.hold`).

**Jobs currently starving** uses the project's definition (docs/anti-starvation.md, the
simulator's :data:`~sky_kueue.sim.metrics.DEFAULT_STARVATION_RUNTIME_MULTIPLE` and
:data:`~sky_kueue.sim.metrics.DEFAULT_STARVATION_MIN_WAIT_SECONDS`): a job waits more than
10x its run time and more than an hour. The simulator judges a finished job; here a job
counts while it waits, from the wait and run totals of its history as of the controller's
last aging decision for it (every change of its Workload and every re-age pass), its wait
extrapolated to the scrape. A job leaves the count when a Workload of it holds quota or
finishes. Only jobs this process has aged since it started are known (no store scan per
scrape).

**Labels**, bounded as Kueue bounds its own: ``namespace`` (a team's namespace) and
``cluster_queue`` (where the Workload holds quota, else its LocalQueue's ClusterQueue, from the
controller's mirror of LocalQueues; :data:`UNKNOWN_CLUSTER_QUEUE` when neither is known) on the
counters of what happened to Workloads, as Kueue labels ``kueue_evicted_workloads_total``;
``team`` (``teams.<t>`` of ``sky-kueue.yaml`` owning the namespace, the namespace itself when no
team does; :mod:`sky_kueue.controller.metric_teams`) on the safe-relaunch, burst-cost and
wait-after-preemption series; ``reason`` from fixed sets.

**Wait after preemption** is the time from a job's preemption (its Evicted condition) until
a Workload of that job is admitted again (its relaunch, or the same Workload requeued by
Kueue), observed once per preemption with Kueue's admission-wait buckets
(``kueue_admission_wait_time_seconds``). Only preemptions this process recorded are known.

**Burst spend** is predicted when a burst is decided (:mod:`sky_kueue.controller.burst_cost`):
GPUs x expected run time x the price per GPU-hour of the team's first burst target.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sky_kueue.controller.burst_cost import expected_runtime_seconds, predict, workload_gpus
from sky_kueue.controller.clock import Clock, system_clock
from sky_kueue.controller.engine import FactKind, ReconcileOutcome
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind, outcome_applied
from sky_kueue.controller.history import StoreWriteStats
from sky_kueue.controller.hold import HoldAction
from sky_kueue.controller.lane_moves import LaneEntries
from sky_kueue.controller.lane_route import Lanes
from sky_kueue.controller.metric_teams import MetricTeams
from sky_kueue.sim.metrics import StarvationRule

PREFIX = "sky_kueue_controller"
#: Kueue's wait-time buckets (``generateExponentialBuckets(14)``: 1, then 2.5 doubling), in seconds.
KUEUE_WAIT_BUCKETS_SECONDS: tuple[float, ...] = (1.0, *(2.5 * 2**i for i in range(13)))
#: Eviction-to-action buckets: sub-second steps (the controller reacts within one watch event),
#: then Kueue's wait buckets for a controller that was down or behind.
EVICTION_TO_ACTION_BUCKETS_SECONDS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, *KUEUE_WAIT_BUCKETS_SECONDS)
#: Jobs whose starvation is tracked (the oldest is forgotten first), as the engine bounds its own.
MAX_TRACKED_JOBS = 10_000
#: The label value for a preemption whose Kueue reason is not known.
UNKNOWN_REASON = "Unknown"
#: The ``cluster_queue`` label of a Workload whose ClusterQueue is not known (no admission,
#: and its LocalQueue is not, or not yet, mirrored).
UNKNOWN_CLUSTER_QUEUE = "unknown"


@dataclass(frozen=True)
class WatchRequests:
    """Lists and watches the controller's mirrors issued, over every session, and how many
    of them were each session's first per kind (the rest are relists and restarts)."""

    lists: int
    watches: int
    initial: int


class ControllerProbe(Protocol):
    """What the collector reads from a running controller at scrape time."""

    leader_transitions: int

    def is_leader(self) -> bool: ...

    def queue_depth(self) -> int: ...

    def queue_oldest_age_seconds(self) -> float: ...

    def watch_requests(self) -> WatchRequests: ...

    def store_write_stats(self) -> StoreWriteStats | None: ...


@dataclass(frozen=True)
class _Waiting:
    wait_seconds: float
    run_seconds: float
    at: float


class StarvationTracker:
    """Waiting jobs and their wait and run totals; counts the starving ones (pure, thread-safe)."""

    def __init__(self, *, rule: StarvationRule | None = None, max_jobs: int = MAX_TRACKED_JOBS) -> None:
        self.rule = rule or StarvationRule()
        self._max_jobs = max_jobs
        self._jobs: OrderedDict[str, _Waiting] = OrderedDict()
        self._lock = threading.Lock()

    def waiting(self, job_key: str, wait_seconds: float, run_seconds: float, at: float) -> None:
        with self._lock:
            self._jobs.pop(job_key, None)
            self._jobs[job_key] = _Waiting(wait_seconds, run_seconds, at)
            while len(self._jobs) > self._max_jobs:
                self._jobs.popitem(last=False)

    def done_waiting(self, job_key: str) -> None:
        with self._lock:
            self._jobs.pop(job_key, None)

    def starving(self, now: float) -> int:
        """Waiting jobs starved by the simulator's rule, their waits extended to ``now``."""
        with self._lock:
            jobs = list(self._jobs.values())
        return sum(
            1 for job in jobs if self.rule.starved_after(job.wait_seconds + max(0.0, now - job.at), job.run_seconds)
        )


class ControllerMetrics:
    """The controller's metrics and their registry; pass :meth:`observe` as an observer and
    :meth:`bind` the controller once it is built."""

    def __init__(
        self,
        clock: Clock = system_clock,
        registry: CollectorRegistry | None = None,
        teams: MetricTeams | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self._lane_entries = LaneEntries(lanes) if lanes is not None and lanes.enabled else None
        self._clock = clock
        self.teams = teams or MetricTeams()
        self.starvation = StarvationTracker()
        self.preempted_at = PreemptedJobs()
        self.preemptions = Counter(
            f"{PREFIX}_preemptions_total",
            "Kueue preemptions of SkyPilot Workloads recorded (once each), per namespace, ClusterQueue "
            "and Kueue preemption reason",
            ["namespace", "cluster_queue", "reason"],
            registry=self.registry,
        )
        self.evictions = Counter(
            f"{PREFIX}_evictions_total",
            "Other evictions of SkyPilot Workloads recorded (not counted toward aging), per namespace, "
            "ClusterQueue and Kueue reason",
            ["namespace", "cluster_queue", "reason"],
            registry=self.registry,
        )
        self.relaunches = Counter(
            f"{PREFIX}_relaunches_total",
            "Relaunches recorded: a new Workload of a job already preempted, queued and aged, per namespace "
            "and ClusterQueue",
            ["namespace", "cluster_queue"],
            registry=self.registry,
        )
        self.aging_steps = Counter(
            f"{PREFIX}_aging_steps_total",
            "Aging patches (a boost step or a band level) that reached a Workload, per namespace, "
            "ClusterQueue and mechanism",
            ["namespace", "cluster_queue", "mechanism"],
            registry=self.registry,
        )
        self.bursts = Counter(
            f"{PREFIX}_bursts_total",
            "Cloud bursts decided (once per job), per namespace, ClusterQueue and rule",
            ["namespace", "cluster_queue", "reason"],
            registry=self.registry,
        )
        self.burst_cost = Counter(
            f"{PREFIX}_burst_predicted_cost_usd",
            "Predicted spend of the bursts decided, in US dollars: GPUs x expected run time x the price "
            "per GPU-hour of the team's first burst target (teams.<t>.burst.price_per_gpu_hour_usd)",
            ["team", "cloud"],
            registry=self.registry,
        )
        self.burst_gpu_hours = Counter(
            f"{PREFIX}_burst_predicted_gpu_hours",
            "Predicted GPU-hours of the bursts decided with a known expected run time, per team and first target",
            ["team", "cloud"],
            registry=self.registry,
        )
        self.burst_unpriced = Counter(
            f"{PREFIX}_burst_unpriced",
            "Bursts decided without a predicted cost, per team and why: no-runtime (no expected run "
            "time), no-price (the target has no price), no-team (no team's burst settings)",
            ["team", "reason"],
            registry=self.registry,
        )
        self.wait_after_preemption = Histogram(
            f"{PREFIX}_wait_after_preemption_seconds",
            "Seconds from a job's first preemption to the capacity it kept (the admission it finished "
            "in, or its burst), observed when it finishes or bursts, per team and the ClusterQueue of "
            "that admission (Kueue's admission-wait buckets); the simulator's wait after preemption",
            ["team", "cluster_queue"],
            buckets=KUEUE_WAIT_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.lane_entries = Counter(
            f"{PREFIX}_lane_entries_total",
            "Relaunches queued in a relaunch lane (teams.<t>.lane; once per Workload), per team and the "
            "lane's ClusterQueue",
            ["team", "cluster_queue"],
            registry=self.registry,
        )
        self.stale_deleted = Counter(
            f"{PREFIX}_stale_workloads_deleted_total",
            "Finished Workloads deleted because they held back a relaunch's pods (the relaunch race)",
            registry=self.registry,
        )
        self.eviction_to_action = Histogram(
            f"{PREFIX}_eviction_to_action_seconds",
            "Seconds from a Workload's eviction (its Evicted condition) until the controller recorded it",
            ["reason"],
            buckets=EVICTION_TO_ACTION_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.holds = Counter(
            f"{PREFIX}_holds_total",
            "Relaunches held out of Kueue until they would not borrow (safe relaunch), per team and why: "
            "Kueue would admit them into borrowed quota, or not at all yet",
            ["team", "reason"],
            registry=self.registry,
        )
        self.releases = Counter(
            f"{PREFIX}_releases_total",
            "Held relaunches let into Kueue, per team and why: safe (fits nominal quota), timeout "
            "(safe_max_hold_seconds), burst, disabled, reactivated (by someone else)",
            ["team", "reason"],
            registry=self.registry,
        )
        self.held = HeldJobs()
        self.reconciles = Counter(
            f"{PREFIX}_reconciles_total",
            "Workload snapshots reconciled, live or replayed after a restart",
            ["replay"],
            registry=self.registry,
        )
        self.state_resets = Counter(
            f"{PREFIX}_state_resets_total",
            "Times the API server's state went back under the controller (an etcd restore, another cluster), "
            "per reason: resource-version (a list older than a version handled) or cluster (another "
            "kube-system UID); every Workload was reconciled from a full list",
            ["reason"],
            registry=self.registry,
        )
        self.unobserved_ends = Counter(
            f"{PREFIX}_unobserved_ends_total",
            "Workloads that vanished while the API server's state went back, per what remained of their end: "
            "preempted or evicted (a pod's TerminationTarget), unknown (nothing; recorded, not counted toward aging)",
            ["outcome"],
            registry=self.registry,
        )
        self._probe: ControllerProbe | None = None
        self.registry.register(_ProbeCollector(self))

    def bind(self, probe: ControllerProbe) -> None:
        """Reads ``probe``'s queue, Lease, watches and store at every scrape."""
        self._probe = probe

    @property
    def probe(self) -> ControllerProbe | None:
        return self._probe

    def now(self) -> float:
        return self._clock()

    def observe(self, event: ControllerEvent) -> None:
        """The observer: counts what one reconcile (or stale deletion) did."""
        if event.kind is ControllerEventKind.STALE_DELETED:
            self.stale_deleted.inc()
            return
        if event.kind is ControllerEventKind.STATE_WENT_BACK:
            self.state_resets.labels(reason=event.detail).inc()
            return
        if event.kind is ControllerEventKind.UNOBSERVED_END:
            self.unobserved_ends.labels(outcome=event.detail).inc()
            return
        outcome, detection = event.outcome, event.detection
        if event.kind is not ControllerEventKind.RECONCILED or outcome is None or detection is None:
            return
        self.reconciles.labels(replay="true" if event.replay else "false").inc()
        namespace = detection.workload.namespace
        queue = event.cluster_queue or UNKNOWN_CLUSTER_QUEUE
        entered = self._lane_entries.entry(event) if self._lane_entries is not None else None
        if entered is not None:
            self.lane_entries.labels(team=entered.lane.team, cluster_queue=entered.lane.cluster_queue or queue).inc()
        eviction = detection.eviction
        if eviction is not None and outcome.recorded_any(FactKind.PREEMPTION):
            reason = eviction.preemption_reason.value if eviction.preemption_reason else UNKNOWN_REASON
            self.preemptions.labels(namespace=namespace, cluster_queue=queue, reason=reason).inc()
            if eviction.at is not None:
                self.eviction_to_action.labels(reason=reason).observe(max(0.0, event.at - eviction.at))
            if outcome.job_key is not None:
                self.preempted_at.preempted(outcome.job_key, eviction.at if eviction.at is not None else event.at)
        if eviction is not None and outcome.recorded_any(FactKind.EVICTION):
            self.evictions.labels(
                namespace=namespace, cluster_queue=queue, reason=eviction.reason or UNKNOWN_REASON
            ).inc()
        if outcome.job_key is not None and outcome.recorded_any(FactKind.ADMITTED):
            self.preempted_at.admitted(outcome.job_key, detection.workload.running_since or event.at, queue)
        if outcome.job_key is not None and outcome.recorded_any(FactKind.FINISHED):
            self._observe_kept(outcome.job_key, namespace, None)
        decision = outcome.decision
        queued_fresh = any(
            fact.kind is FactKind.QUEUED and fact.key is not None and fact.key.evictions == 0
            for fact in outcome.recorded
        )
        if queued_fresh and decision is not None and decision.preemptions > 0:
            self.relaunches.labels(namespace=namespace, cluster_queue=queue).inc()
        if outcome_applied(outcome) and outcome.patch is not None:
            self.aging_steps.labels(
                namespace=namespace, cluster_queue=queue, mechanism=outcome.patch.mechanism.value
            ).inc()
        if outcome.burst is not None:
            self.bursts.labels(namespace=namespace, cluster_queue=queue, reason=outcome.burst.reason).inc()
            self._count_burst_cost(event, namespace)
            if outcome.job_key is not None:
                self._observe_kept(outcome.job_key, namespace, event.at)
        self._count_hold(outcome)
        job = outcome.job_key
        if job is None:
            return
        if detection.is_pending and decision is not None:
            self.starvation.waiting(job, decision.wait_seconds, decision.run_seconds, decision.now)
        elif detection.workload.holds_quota or outcome.recorded_any(FactKind.FINISHED):
            self.starvation.done_waiting(job)

    def _observe_kept(self, job_key: str, namespace: str, burst_at: float | None) -> None:
        kept = self.preempted_at.kept(job_key, burst_at)
        if kept is not None:
            wait, queue = kept
            self.wait_after_preemption.labels(team=self.teams.team_name(namespace), cluster_queue=queue).observe(wait)

    def _count_burst_cost(self, event: ControllerEvent, namespace: str) -> None:
        team = self.teams.team(namespace)
        team_name = self.teams.team_name(namespace)
        workload = event.workload or {}
        cost = predict(
            workload_gpus(workload, self.teams.gpu_resource),
            expected_runtime_seconds(workload, event.pods),
            None if team is None else team.pricing,
        )
        if cost.gpu_hours is not None:
            self.burst_gpu_hours.labels(team=team_name, cloud=cost.cloud).inc(float(cost.gpu_hours))
        if cost.unpriced is not None:
            self.burst_unpriced.labels(team=team_name, reason=cost.unpriced.value).inc()
        elif cost.cost_usd is not None:
            self.burst_cost.labels(team=team_name, cloud=cost.cloud).inc(float(cost.cost_usd))

    def _count_hold(self, outcome: ReconcileOutcome) -> None:
        hold = outcome.hold
        if hold is None or hold.record is None:
            return
        uid = hold.record.workload_uid
        if hold.action is HoldAction.HELD and hold.hold_reason is not None:
            self.holds.labels(team=hold.team, reason=hold.hold_reason.value).inc()
        elif hold.action is HoldAction.RELEASED and hold.release_kind is not None:
            self.releases.labels(team=hold.team, reason=hold.release_kind.value).inc()
        if hold.is_held:
            self.held.held(uid, hold.team)
        else:
            self.held.released(uid)


@dataclass
class _PreemptedJob:
    first_preempted_at: float
    last_preempted_at: float
    last_admitted_at: float | None = None
    cluster_queue: str = UNKNOWN_CLUSTER_QUEUE


class PreemptedJobs:
    """Per preempted job: its first and last preemption and its last admission since, until the
    job keeps capacity (bounded and thread-safe; the oldest job is forgotten first).

    Why this shape: the figure is the simulator's (``JobResult.wait_after_preemption_s``): the
    first preemption to the capacity the job *kept*, its final admission or its burst. A
    readmission that is preempted again is not capacity kept, so the wait is known only when
    the job finishes in an admission made after its last preemption, or bursts.
    """

    def __init__(self, max_jobs: int = MAX_TRACKED_JOBS) -> None:
        self._max_jobs = max_jobs
        self._jobs: OrderedDict[str, _PreemptedJob] = OrderedDict()
        self._lock = threading.Lock()

    def preempted(self, job_key: str, at: float) -> None:
        with self._lock:
            job = self._jobs.pop(job_key, None)
            if job is None:
                job = _PreemptedJob(at, at)
            else:
                job.last_preempted_at = max(job.last_preempted_at, at)
            self._jobs[job_key] = job
            while len(self._jobs) > self._max_jobs:
                self._jobs.popitem(last=False)

    def admitted(self, job_key: str, at: float, cluster_queue: str) -> None:
        """A Workload of the job was admitted at ``at`` (ignored for a job never preempted)."""
        with self._lock:
            job = self._jobs.get(job_key)
            if job is not None and at >= job.last_preempted_at:
                job.last_admitted_at, job.cluster_queue = at, cluster_queue

    def kept(self, job_key: str, at: float | None = None) -> tuple[float, str] | None:
        """The job kept capacity: its wait after preemption and the admitting ClusterQueue, and
        the job is forgotten. ``at`` is a burst's time; without it, the job finished, which
        counts only when its last admission came after its last preemption (else: None, and
        the job is still remembered)."""
        with self._lock:
            job = self._jobs.get(job_key)
            if job is None:
                return None
            if at is None:
                if job.last_admitted_at is None or job.last_admitted_at < job.last_preempted_at:
                    return None
                at = job.last_admitted_at
            del self._jobs[job_key]
            return max(0.0, at - job.first_preempted_at), job.cluster_queue


class HeldJobs:
    """Relaunches held now, per team (thread-safe): every reconcile of a held Workload says
    so, so a restarted controller counts the holds it inherited once it has seen them."""

    def __init__(self) -> None:
        self._teams: dict[str, str] = {}
        self._known: set[str] = set()
        self._lock = threading.Lock()

    def held(self, workload_uid: str, team: str) -> None:
        with self._lock:
            self._teams[workload_uid] = team
            self._known.add(team)

    def released(self, workload_uid: str) -> None:
        with self._lock:
            self._teams.pop(workload_uid, None)

    def per_team(self) -> dict[str, int]:
        """Held relaunches per team; a team that held one before shows 0 once none is held."""
        with self._lock:
            counts = dict.fromkeys(self._known, 0)
            for team in self._teams.values():
                counts[team] += 1
        return counts


class _ProbeCollector(Collector):
    """Reads the bound controller at scrape time (nothing on the reconcile path)."""

    def __init__(self, metrics: ControllerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        starving = GaugeMetricFamily(
            f"{PREFIX}_starving_jobs",
            "Jobs waiting now that have waited more than 10x their run time and more than an hour "
            "(docs/anti-starvation.md); jobs this process aged since it started",
        )
        starving.add_metric([], metrics.starvation.starving(metrics.now()))
        yield starving
        held = GaugeMetricFamily(
            f"{PREFIX}_held_jobs",
            "Relaunches held out of Kueue now until they would not borrow (safe relaunch), per team",
            labels=["team"],
        )
        for team, count in sorted(metrics.held.per_team().items()):
            held.add_metric([team], count)
        yield held
        probe = metrics.probe
        if probe is None:
            return
        leader = GaugeMetricFamily(f"{PREFIX}_leader", "1 while this replica holds the Lease, else 0")
        leader.add_metric([], 1.0 if probe.is_leader() else 0.0)
        yield leader
        transitions = CounterMetricFamily(f"{PREFIX}_leader_transitions", "Times this replica gained or lost the Lease")
        transitions.add_metric([], probe.leader_transitions)
        yield transitions
        depth = GaugeMetricFamily(f"{PREFIX}_work_queue_depth", "Work items queued and not yet taken by the reconciler")
        depth.add_metric([], probe.queue_depth())
        yield depth
        age = GaugeMetricFamily(
            f"{PREFIX}_work_queue_oldest_item_age_seconds",
            "Seconds the oldest work item not yet taken by the reconciler has been queued (0 when none is)",
        )
        age.add_metric([], probe.queue_oldest_age_seconds())
        yield age
        requests = probe.watch_requests()
        relists = CounterMetricFamily(
            f"{PREFIX}_watch_relists", "Lists after each session's first per kind (a watch gap: changes were lost)"
        )
        relists.add_metric([], max(0, requests.lists - requests.initial))
        yield relists
        restarts = CounterMetricFamily(
            f"{PREFIX}_watch_restarts", "Watch requests after each session's first per kind (resumed or relisted)"
        )
        restarts.add_metric([], max(0, requests.watches - requests.initial))
        yield restarts
        stats = probe.store_write_stats()
        if stats is not None:
            writes = CounterMetricFamily(
                f"{PREFIX}_store_writes", "Write requests (Kubernetes) or transactions (SQLite) of the history store"
            )
            writes.add_metric([], stats.writes)
            yield writes
            conflicts = CounterMetricFamily(
                f"{PREFIX}_store_conflicts", "History store writes refused as stale (HTTP 409) and retried"
            )
            conflicts.add_metric([], stats.conflicts)
            yield conflicts
            mismatches = CounterMetricFamily(
                f"{PREFIX}_history_identity_mismatches",
                "Pod groups that claimed a managed job whose history belongs to another namespace, team or user "
                "(given a history of their own, inheriting nothing)",
            )
            mismatches.add_metric([], stats.identity_mismatches)
            yield mismatches

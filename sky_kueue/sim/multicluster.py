"""Several Kueue clusters: the same trace split over N clusters, placed four ways.

Why: issue #16 places each SkyPilot task on the cluster where Kueue is predicted to admit it
soonest, where SkyPilot alone walks its ``allowed_contexts`` in a fixed order. This module
measures what that is worth on the simulator's exact Kueue model:

* **the clusters**: the trace's cluster cut into N equal parts, every quota (nominal,
  borrowing and lending limits) divided with the remainders spread over the first parts, so
  the N clusters hold exactly the original capacity;
* **fixed order** (SkyPilot 0.14.1 alone): every job's ``ordered`` list is the contexts in
  their configured order; a launch waits in the first cluster's queue and fails over to the
  next only when ``kubernetes.kueue.admission_timeout`` expires while Kueue still gates the
  pods (``sky/provision/kubernetes/instance.py``), 24 h by default;
* **round-robin** (load-blind): job *k*'s list starts at cluster *k mod N* and goes round;
  failover as in fixed order. It spreads work without looking at any queue;
* **MultiKueue-like**: Kueue's MultiKueue admission check puts a copy of the Workload in every
  worker cluster and keeps the first that reserves quota, deleting the other copies
  (KEP-693, ``pkg/controller/admissionchecks/multikueue/workload.go``; the default
  ``AllAtOnce`` dispatcher nominates every worker at once, the ``Incremental`` one in
  ``pkg/controller/workloaddispatcher/incrementaldispatcher.go`` nominates 3 more every 5
  minutes, so with 3 clusters they agree). Here a launch enters every cluster's queue and runs
  on whichever admits it first; no SkyPilot failover (one entry point). A relaunch after a
  preemption is dispatched to every cluster again;
* **predicted** (sky-kueue): at submission the clusters are ranked as
  ``sky_kueue.skypilot.placement`` ranks them - admitted now, then after preempting (fewest
  victims), then pending by expected wait, then pending with no estimate (admin's order) -
  and that order is frozen into the job (the admin policy runs once per managed job;
  SkyPilot's recoveries walk the frozen list from its head, as do failovers after the same
  timeout). Run times come from the plugin's estimator (:mod:`sky_kueue.sim.runtime_knowledge`:
  declared, else the team's history, else none); with ``oracle_runtimes`` every job's true
  run time is known instead, an upper bound on what the plugin can do.

Stated simplification: a pending cluster's expected wait is the GPU-seconds of work Kueue
will consider before the job in its ClusterQueue (the Workloads ahead of it, from
``whatif.quick_verdict``) plus the work running in that ClusterQueue, over the
ClusterQueue's nominal GPUs - a cheap stand-in for the ETA model, which replays Kueue's
cycles and would be run once per arrival and cluster. A wait is unknown when any job it
counts has no run-time estimate (the ETA model cannot say when such a holder ends). Each
placement's predicted wait is kept and graded against the realised one
(:func:`sky_kueue.sim.eta.placement_error`).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from sky_kueue.controller.aging.safe_relaunch import Placement
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.predictor import VerdictKind
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.whatif import quick_verdict
from sky_kueue.sim.cluster import GPU_RESOURCE, SimCluster, at, fresh_state, make_workload
from sky_kueue.sim.eta import PlacementEta, PlacementEtaError, placement_error
from sky_kueue.sim.metrics import percentile
from sky_kueue.sim.policies import ResubmissionPolicy
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.runtime_knowledge import DeclarationModel, RuntimeKnowledge
from sky_kueue.sim.simulator import SimConfig, Simulator, _Job, _State
from sky_kueue.sim.traces import Trace

#: SkyPilot 0.14.1's default ``kubernetes.kueue.admission_timeout`` (seconds): a launch
#: waits this long in one cluster's queue before SkyPilot tries the next context.
SKYPILOT_ADMISSION_TIMEOUT_SECONDS = 24 * 3600.0


class PlacementStrategy(enum.Enum):
    """How a job's list of clusters is ordered."""

    FIXED_ORDER = "fixed-order"
    ROUND_ROBIN = "round-robin"
    MULTIKUEUE = "multikueue"
    PREDICTED = "predicted"


#: Rank tiers of a cluster for one job (lower first), as ``sky_kueue.skypilot.placement``.
_TIER_ADMIT_NOW = 0
_TIER_ADMIT_AFTER_PREEMPTION = 1
_TIER_WAIT_ESTIMATED = 2
_TIER_WAIT_UNKNOWN = 3
_TIER_NEVER_FITS = 4


def split_cluster(cluster: SimCluster, parts: int) -> list[SimCluster]:
    """The cluster cut into ``parts`` clusters holding exactly its quotas together.

    Raises:
        ValueError: ``parts`` is below 1.
    """
    if parts < 1:
        raise ValueError(f"cannot split a cluster into {parts} parts")
    out = []
    for index in range(parts):

        def share(value: int | None, index: int = index) -> int | None:
            if value is None:
                return None
            return value // parts + (1 if index < value % parts else 0)

        queues = {}
        for name, cq in cluster.state.cluster_queues.items():
            groups = tuple(
                replace(
                    group,
                    flavors=tuple(
                        replace(
                            flavor,
                            resources={
                                resource: o.ResourceQuota(
                                    nominal=share(quota.nominal) or 0,
                                    borrowing_limit=share(quota.borrowing_limit),
                                    lending_limit=share(quota.lending_limit),
                                )
                                for resource, quota in flavor.resources.items()
                            },
                        )
                        for flavor in group.flavors
                    ),
                )
                for group in cq.resource_groups
            )
            queues[name] = replace(cq, resource_groups=groups)
        state = fresh_state(cluster.state, cluster_queues=queues)
        team_gpus = {team: share(gpus) or 0 for team, gpus in cluster.team_gpus.items()}
        out.append(
            replace(
                cluster,
                state=state,
                gpu_capacity=sum(_nominal_gpus(cq) for cq in queues.values()),
                team_gpus=team_gpus,
            )
        )
    return out


def _nominal_gpus(cq: o.ClusterQueue) -> int:
    return sum(
        flavor.resources[GPU_RESOURCE].nominal
        for group in cq.resource_groups
        for flavor in group.flavors
        if GPU_RESOURCE in flavor.resources
    )


class _Engines:
    """The N engines behind the one ``engine`` the base simulator talks to: each call goes
    to the engine that holds the Workload."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines
        self.of_workload: dict[str, int] = {}
        #: Workloads with a copy in every cluster (MultiKueue) until one admits: their clusters.
        self.copies: dict[str, list[int]] = {}
        self.next_cluster = 0
        #: The next Workload goes to every cluster (MultiKueue) instead of ``next_cluster``.
        self.broadcast = False
        self.now = at(0.0)

    def has_active_heads(self) -> bool:
        return any(engine.has_active_heads() for engine in self.engines)

    def add_workload(self, wl: o.Workload) -> object:
        if self.broadcast:
            self.copies[wl.key] = list(range(len(self.engines)))
            self.of_workload[wl.key] = 0
            for engine in self.engines:
                engine.add_workload(wl)
            return None
        self.of_workload[wl.key] = self.next_cluster
        return self.engines[self.next_cluster].add_workload(wl)

    def update_pending_workload(self, wl: o.Workload) -> object:
        copies = self.copies.get(wl.key)
        if copies is not None:
            for index in copies:
                self.engines[index].update_pending_workload(wl)
            return None
        return self.engines[self.of_workload[wl.key]].update_pending_workload(wl)

    def delete_workload(self, key: str) -> None:
        copies = self.copies.pop(key, None)
        if copies is not None:
            for index in copies:
                self.engines[index].delete_workload(key)
            return
        self.engines[self.of_workload[key]].delete_workload(key)

    def keep_copy(self, key: str, winner: int) -> None:
        """The copy in ``winner`` was admitted: the others are withdrawn (MultiKueue)."""
        copies = self.copies.pop(key, None)
        if copies is None:
            return
        self.of_workload[key] = winner
        for index in copies:
            if index != winner:
                self.engines[index].delete_workload(key)

    def update_admitted_priority(self, key: str, priority: int) -> bool:
        return self.engines[self.of_workload[key]].update_admitted_priority(key, priority)


@dataclass
class _Placement:
    """A job's frozen list of clusters and where in it the current launch is."""

    order: list[int]
    position: int = 0

    @property
    def cluster(self) -> int:
        return self.order[self.position % len(self.order)]


class MultiClusterSimulator(Simulator):
    """The simulator over N clusters, with a placement strategy; create, then :meth:`run` once."""

    def __init__(
        self,
        trace: Trace,
        policy: ResubmissionPolicy,
        clusters: list[SimCluster],
        strategy: PlacementStrategy,
        config: SimConfig | None = None,
        *,
        failover_timeout_s: float = SKYPILOT_ADMISSION_TIMEOUT_SECONDS,
        oracle_runtimes: bool = False,
        declarations: DeclarationModel | None = None,
    ) -> None:
        super().__init__(trace, policy, config)
        if self.team_reserves:
            raise ValueError("the safe-relaunch rule's team reservation is modelled in one cluster only")
        if strategy is PlacementStrategy.MULTIKUEUE and self.safe is not None:
            raise ValueError("the safe-relaunch rule is not modelled with MultiKueue-like placement")
        self.clusters = clusters
        self.strategy = strategy
        self.failover_timeout_s = failover_timeout_s
        self.oracle_runtimes = oracle_runtimes
        self.knowledge = RuntimeKnowledge(declarations or DeclarationModel(), self.config.seed)
        #: Expected run time per job index, frozen at its first placement (None: no estimate).
        self.expected_s: dict[int, float | None] = {}
        #: Per placed job (predicted placement): the wait predicted on its first cluster.
        self.predicted_wait: dict[int, tuple[float | None, bool]] = {}
        self._round_robin = 0
        self._settling = 0
        self.engine_set = _Engines([Engine(fresh_state(c.state), at(0.0)) for c in clusters])
        self.engine = self.engine_set  # type: ignore[assignment]  # routes by Workload
        self.placements: dict[int, _Placement] = {}
        self.failovers = 0
        self.first_choice = [0] * len(clusters)
        self._used = [0] * len(clusters)
        self._area = [0.0] * len(clusters)
        self._last = [0.0] * len(clusters)

    # --- placement ---------------------------------------------------------------------

    def _order(self, job: _Job) -> list[int]:
        indices = list(range(len(self.clusters)))
        if self.strategy in (PlacementStrategy.FIXED_ORDER, PlacementStrategy.MULTIKUEUE):
            return indices
        if self.strategy is PlacementStrategy.ROUND_ROBIN:
            start = self._round_robin % len(indices)
            self._round_robin += 1
            return indices[start:] + indices[:start]
        self.expected_s[job.index] = (
            job.spec.duration_s if self.oracle_runtimes else self.knowledge.estimate(job.spec).seconds
        )
        probe = make_workload(
            name=f"{job.spec.job_id}-probe",
            queue=job.queue,
            created_at=self.now,
            priority=job.base_priority,
            priority_class=job.spec.priority_class,
            gpus=job.spec.gpus,
            cpu_milli=job.spec.cpu_milli,
            memory_bytes=job.spec.memory_bytes,
        )
        keys = {i: self._rank_key(i, probe) for i in indices}
        order = sorted(indices, key=lambda i: keys[i])  # stable: ties keep the admin's order
        tier, wait = keys[order[0]]
        if tier in (_TIER_ADMIT_NOW, _TIER_ADMIT_AFTER_PREEMPTION):
            self.predicted_wait[job.index] = (0.0, False)
        elif tier == _TIER_WAIT_ESTIMATED:
            self.predicted_wait[job.index] = (wait, True)
        elif tier == _TIER_WAIT_UNKNOWN:
            self.predicted_wait[job.index] = (None, True)
        return order

    def _rank_key(self, index: int, probe: o.Workload) -> tuple[int, float]:
        engine = self.engine_set.engines[index]
        engine.now = at(self.now)
        verdict = quick_verdict(engine, probe)
        if verdict.kind is VerdictKind.ADMITTED:
            return (_TIER_ADMIT_NOW, 0.0)
        if verdict.kind is VerdictKind.ADMITTED_AFTER_PREEMPTION:
            return (_TIER_ADMIT_AFTER_PREEMPTION, float(len(verdict.victims)))
        if verdict.never_fits:
            return (_TIER_NEVER_FITS, 0.0)
        wait = self._expected_wait(index, verdict.cluster_queue, verdict.ahead)
        if wait is None:
            return (_TIER_WAIT_UNKNOWN, 0.0)
        return (_TIER_WAIT_ESTIMATED, wait)

    def _runtime(self, job: _Job) -> float | None:
        """The run time placement believes for ``job`` (its true one with oracle run times)."""
        if self.oracle_runtimes:
            return job.spec.duration_s
        if job.index not in self.expected_s:
            # Placed before run times were tracked for it (a baseline's job): as the plugin
            # would have estimated it at its submission.
            self.expected_s[job.index] = self.knowledge.estimate(job.spec).seconds
        return self.expected_s[job.index]

    def _expected_wait(self, index: int, cluster_queue: str, ahead: list[str]) -> float | None:
        """GPU-seconds queued ahead plus running in the ClusterQueue, over its nominal GPUs
        (None: a job it counts has no run-time estimate)."""
        engine = self.engine_set.engines[index]
        work = 0.0
        for key in ahead:
            job = self.by_workload.get(key)
            if job is not None:
                runtime = self._runtime(job)
                if runtime is None:
                    return None
                work += job.alloc_gpus * runtime
        for key, info in engine.holders.items():
            job = self.by_workload.get(key)
            if job is not None and info.cluster_queue == cluster_queue:
                runtime = self._runtime(job)
                if runtime is None:
                    return None
                work += job.alloc_gpus * max(job.run_start + runtime - self.now, 0.0)
        nominal = _nominal_gpus(engine.state.cluster_queues[cluster_queue])
        return work / max(nominal, 1)

    def _launch(self, job: _Job) -> None:
        placement = self.placements.get(job.index)
        if placement is None:
            placement = _Placement(self._order(job))
            self.placements[job.index] = placement
            if self.strategy is not PlacementStrategy.MULTIKUEUE:
                self.first_choice[placement.cluster] += 1
        elif job.state is _State.RELAUNCHING:
            placement.position = 0  # a recovery walks the frozen list from its head
        self.engine_set.next_cluster = placement.cluster
        self.engine_set.broadcast = self.strategy is PlacementStrategy.MULTIKUEUE
        try:
            super()._launch(job)
        finally:
            self.engine_set.broadcast = False

    def wait_limit(self, job: _Job) -> float | None:
        if self.strategy is PlacementStrategy.MULTIKUEUE:
            return None  # one entry point (the manager): SkyPilot has no other context to try
        return self.failover_timeout_s

    def _admitted(self, job: _Job, cq: str, instant: float) -> None:
        assert job.workload is not None
        if job.workload.key in self.engine_set.copies:
            self.engine_set.keep_copy(job.workload.key, self._settling)
            if job.first_admission is None:
                self.first_choice[self._settling] += 1  # MultiKueue: where the first copy won
        super()._admitted(job, cq, instant)

    def _finish(self, job: _Job) -> None:
        if not job.spec.fails:
            self.knowledge.record_finished(job.spec, self.now - job.run_start, self.now)
        super()._finish(job)

    def placement_etas(self) -> list[PlacementEta]:
        """Each predicted placement's expected wait beside the realised one (after :meth:`run`)."""
        out = []
        for index, (predicted, pending) in sorted(self.predicted_wait.items()):
            job = self.jobs[index]
            realised = None if job.first_admission is None else job.first_admission - job.spec.submit_s
            out.append(PlacementEta(job.spec.job_id, predicted, pending, realised))
        return out

    # --- safe relaunch: the team's other clusters count -------------------------------

    @staticmethod
    def cluster_name(index: int) -> str:
        return f"cluster-{index}"

    def _own_cluster(self, job: _Job) -> str:
        return self.cluster_name(self.placements[job.index].cluster)

    def _safe_placements(self, job: _Job) -> tuple[Placement, tuple[Placement, ...]]:
        """Own cluster first, then the others in the job's frozen order."""
        placement = self.placements[job.index]
        own = placement.cluster
        engines = self.engine_set.engines
        others = tuple(self._placement_in(self.cluster_name(i), engines[i], job) for i in placement.order if i != own)
        return self._placement_in(self.cluster_name(own), engines[own], job), others

    def _enter_kueue(self, job: _Job, cluster: str | None) -> None:
        if cluster is not None:
            self.engine_set.next_cluster = int(cluster.rsplit("-", 1)[1])
        super()._enter_kueue(job, cluster)

    def _burst(self, job: _Job) -> None:
        """The admission timeout expired: SkyPilot tries the next context of the list."""
        assert job.workload is not None
        if job.in_kueue:
            self.engine.delete_workload(job.workload.key)
        self._unhold(job)
        self._pending_delta(job, -1)
        self.placements[job.index].position += 1
        self.failovers += 1
        self._launch(job)

    # --- the clusters' cycles and usage -----------------------------------------------

    def _settle(self, instant: float) -> None:
        facade = self.engine
        try:
            for index, engine in enumerate(self.engine_set.engines):
                if engine.has_active_heads():
                    self.engine = engine
                    self._settling = index
                    super()._settle(instant)
        finally:
            self.engine = facade

    def _usage_delta(self, job: _Job, gpus: int, when: float) -> None:
        assert job.workload is not None
        index = self.engine_set.of_workload[job.workload.key]
        self._account(index, when)
        self._used[index] += gpus
        super()._usage_delta(job, gpus, when)

    def _account(self, index: int, when: float) -> None:
        self._area[index] += self._used[index] * self._window_overlap(self._last[index], when)
        self._last[index] = max(self._last[index], min(when, self.window_s))

    def utilisation(self) -> list[float]:
        """GPU utilisation per cluster over the loaded period (after :meth:`run`)."""
        for index in range(len(self.clusters)):
            self._account(index, self.window_s)
        return [
            self._area[i] / (c.gpu_capacity * self.window_s) if c.gpu_capacity and self.window_s else 0.0
            for i, c in enumerate(self.clusters)
        ]


@dataclass(frozen=True)
class PlacementRun:
    """One strategy's run over the split clusters.

    Attributes:
        strategy: the placement strategy.
        oracle_runtimes: predicted placement knew every true run time (an upper bound).
        p50_wait_s / p95_wait_s / p99_wait_s / max_wait_s: waits over every job (nearest rank).
        makespan_s: from the first submission to the end of the last job.
        utilisation: GPU utilisation per cluster over the loaded period (0..1).
        first_choice: jobs whose first choice was each cluster.
        failovers: launches moved to the next cluster after the admission timeout.
        goodput: GPU-seconds of runs that were not preempted over the fleet's capacity in the
            loaded period (utilisation counts preempted runs too, which are thrown away).
        preemptions: preemptions over all jobs.
        eta_error: predicted placement's expected waits against the realised ones (None for
            the other strategies, which predict nothing).
        run: the underlying run.
    """

    strategy: PlacementStrategy
    oracle_runtimes: bool
    p50_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    makespan_s: float
    utilisation: tuple[float, ...]
    first_choice: tuple[int, ...]
    failovers: int
    goodput: float
    preemptions: int
    eta_error: PlacementEtaError | None
    eta_error_pending: PlacementEtaError | None
    run: RunResult = field(repr=False)

    @property
    def label(self) -> str:
        """The strategy's name in reports; the oracle run is marked as an upper bound."""
        if self.strategy is PlacementStrategy.PREDICTED:
            return "predicted-oracle" if self.oracle_runtimes else "predicted"
        return self.strategy.value

    def to_json(self) -> dict[str, object]:
        return {
            "strategy": self.strategy.value,
            "label": self.label,
            "runtimes": (
                ("oracle (upper bound)" if self.oracle_runtimes else "estimator")
                if self.strategy is PlacementStrategy.PREDICTED
                else None
            ),
            "p50_wait_s": round(self.p50_wait_s, 1),
            "p95_wait_s": round(self.p95_wait_s, 1),
            "p99_wait_s": round(self.p99_wait_s, 1),
            "max_wait_s": round(self.max_wait_s, 1),
            "makespan_s": round(self.makespan_s, 1),
            "utilisation": [round(u, 4) for u in self.utilisation],
            "first_choice": list(self.first_choice),
            "failovers": self.failovers,
            "goodput": round(self.goodput, 4),
            "preemptions": self.preemptions,
            "eta_error": None if self.eta_error is None else self.eta_error.to_json(),
            "eta_error_pending": None if self.eta_error_pending is None else self.eta_error_pending.to_json(),
            "safe_relaunch": self.run.safe.to_json(),
            "wall_s": round(self.run.wall_s, 2),
        }


def run_placement(
    trace: Trace,
    policy: ResubmissionPolicy,
    clusters: int,
    strategy: PlacementStrategy,
    config: SimConfig | None = None,
    *,
    failover_timeout_s: float = SKYPILOT_ADMISSION_TIMEOUT_SECONDS,
    progress: Callable[[int, int, float], None] | None = None,
    oracle_runtimes: bool = False,
    declarations: DeclarationModel | None = None,
) -> PlacementRun:
    """Run ``trace`` over ``clusters`` parts of its cluster with one placement strategy.

    Args:
        oracle_runtimes: predicted placement knows every true run time (the upper bound)
            instead of what the plugin's estimator knows.
        declarations: which jobs declare a run time, and how wrong (default
            :class:`DeclarationModel`).
    """
    sim = MultiClusterSimulator(
        trace,
        policy,
        split_cluster(trace.cluster, clusters),
        strategy,
        config,
        failover_timeout_s=failover_timeout_s,
        oracle_runtimes=oracle_runtimes,
        declarations=declarations,
    )
    sim.progress = progress
    result = sim.run()
    waits = sorted(job.wait_s for job in result.jobs)
    ends = [job.end_s for job in result.jobs if job.end_s is not None]
    first_submit = min((job.submit_s for job in result.jobs), default=0.0)
    predicted = strategy is PlacementStrategy.PREDICTED
    etas = sim.placement_etas()
    return PlacementRun(
        strategy=strategy,
        oracle_runtimes=oracle_runtimes and predicted,
        p50_wait_s=percentile(waits, 50),
        p95_wait_s=percentile(waits, 95),
        p99_wait_s=percentile(waits, 99),
        max_wait_s=waits[-1] if waits else 0.0,
        makespan_s=max(max(ends, default=result.end_s), result.end_s) - first_submit,
        utilisation=tuple(sim.utilisation()),
        first_choice=tuple(sim.first_choice),
        failovers=sim.failovers,
        goodput=(
            result.useful_gpu_s / (result.gpu_capacity * result.window_s)
            if result.gpu_capacity and result.window_s
            else 0.0
        ),
        preemptions=sum(job.preemptions for job in result.jobs),
        eta_error=placement_error(etas) if predicted else None,
        eta_error_pending=placement_error([e for e in etas if e.pending]) if predicted else None,
        run=result,
    )

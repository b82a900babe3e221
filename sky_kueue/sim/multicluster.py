"""Several Kueue clusters: the same trace split over N clusters, placed two ways.

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
* **predicted** (sky-kueue): at submission the clusters are ranked as
  ``sky_kueue.skypilot.placement`` ranks them - admitted now, then after preempting (fewest
  victims), then pending by expected wait - and that order is frozen into the job (the
  admin policy runs once per managed job; SkyPilot's recoveries walk the frozen list from
  its head, as do failovers after the same timeout).

Stated simplification: a pending cluster's expected wait is the GPU-seconds of work Kueue
will consider before the job in its ClusterQueue (the Workloads ahead of it, from
``whatif.quick_verdict``) plus the work running in that ClusterQueue, over the
ClusterQueue's nominal GPUs - a cheap stand-in for the ETA model, which replays Kueue's
cycles and would be run once per arrival and cluster.
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
from sky_kueue.sim.metrics import percentile
from sky_kueue.sim.policies import ResubmissionPolicy
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.simulator import SimConfig, Simulator, _Job, _State
from sky_kueue.sim.traces import Trace

#: SkyPilot 0.14.1's default ``kubernetes.kueue.admission_timeout`` (seconds): a launch
#: waits this long in one cluster's queue before SkyPilot tries the next context.
SKYPILOT_ADMISSION_TIMEOUT_SECONDS = 24 * 3600.0


class PlacementStrategy(enum.Enum):
    """How a job's list of clusters is ordered."""

    FIXED_ORDER = "fixed-order"
    PREDICTED = "predicted"


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
        self.next_cluster = 0
        self.now = at(0.0)

    def has_active_heads(self) -> bool:
        return any(engine.has_active_heads() for engine in self.engines)

    def add_workload(self, wl: o.Workload) -> object:
        self.of_workload[wl.key] = self.next_cluster
        return self.engines[self.next_cluster].add_workload(wl)

    def update_pending_workload(self, wl: o.Workload) -> object:
        return self.engines[self.of_workload[wl.key]].update_pending_workload(wl)

    def delete_workload(self, key: str) -> None:
        self.engines[self.of_workload[key]].delete_workload(key)

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
    ) -> None:
        super().__init__(trace, policy, config)
        if self.team_reserves:
            raise ValueError("the safe-relaunch rule's team reservation is modelled in one cluster only")
        self.clusters = clusters
        self.strategy = strategy
        self.failover_timeout_s = failover_timeout_s
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
        if self.strategy is PlacementStrategy.FIXED_ORDER:
            return indices
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
        return sorted(indices, key=lambda i: keys[i])

    def _rank_key(self, index: int, probe: o.Workload) -> tuple[int, float]:
        engine = self.engine_set.engines[index]
        engine.now = at(self.now)
        verdict = quick_verdict(engine, probe)
        if verdict.kind is VerdictKind.ADMITTED:
            return (0, 0.0)
        if verdict.kind is VerdictKind.ADMITTED_AFTER_PREEMPTION:
            return (1, float(len(verdict.victims)))
        if verdict.never_fits:
            return (3, 0.0)
        return (2, self._expected_wait(index, verdict.cluster_queue, verdict.ahead))

    def _expected_wait(self, index: int, cluster_queue: str, ahead: list[str]) -> float:
        """GPU-seconds queued ahead plus running in the ClusterQueue, over its nominal GPUs."""
        engine = self.engine_set.engines[index]
        work = 0.0
        for key in ahead:
            job = self.by_workload.get(key)
            if job is not None:
                work += job.alloc_gpus * job.spec.duration_s
        for key, info in engine.holders.items():
            job = self.by_workload.get(key)
            if job is not None and info.cluster_queue == cluster_queue:
                work += job.alloc_gpus * max(job.run_start + job.spec.duration_s - self.now, 0.0)
        nominal = _nominal_gpus(engine.state.cluster_queues[cluster_queue])
        return work / max(nominal, 1)

    def _launch(self, job: _Job) -> None:
        placement = self.placements.get(job.index)
        if placement is None:
            placement = _Placement(self._order(job))
            self.placements[job.index] = placement
            self.first_choice[placement.cluster] += 1
        elif job.state is _State.RELAUNCHING:
            placement.position = 0  # a recovery walks the frozen list from its head
        self.engine_set.next_cluster = placement.cluster
        super()._launch(job)

    def wait_limit(self, job: _Job) -> float | None:
        return self.failover_timeout_s

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
            for engine in self.engine_set.engines:
                if engine.has_active_heads():
                    self.engine = engine
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
        p50_wait_s / p95_wait_s / max_wait_s: waits over every job (nearest rank).
        utilisation: GPU utilisation per cluster over the loaded period (0..1).
        first_choice: jobs whose first choice was each cluster.
        failovers: launches moved to the next cluster after the admission timeout.
        goodput: GPU-seconds of runs that were not preempted over the fleet's capacity in the
            loaded period (utilisation counts preempted runs too, which are thrown away).
        preemptions: preemptions over all jobs.
        run: the underlying run.
    """

    strategy: PlacementStrategy
    p50_wait_s: float
    p95_wait_s: float
    max_wait_s: float
    utilisation: tuple[float, ...]
    first_choice: tuple[int, ...]
    failovers: int
    goodput: float
    preemptions: int
    run: RunResult = field(repr=False)

    def to_json(self) -> dict[str, object]:
        return {
            "strategy": self.strategy.value,
            "p50_wait_s": round(self.p50_wait_s, 1),
            "p95_wait_s": round(self.p95_wait_s, 1),
            "max_wait_s": round(self.max_wait_s, 1),
            "utilisation": [round(u, 4) for u in self.utilisation],
            "first_choice": list(self.first_choice),
            "failovers": self.failovers,
            "goodput": round(self.goodput, 4),
            "preemptions": self.preemptions,
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
) -> PlacementRun:
    """Run ``trace`` over ``clusters`` parts of its cluster with one placement strategy."""
    sim = MultiClusterSimulator(
        trace,
        policy,
        split_cluster(trace.cluster, clusters),
        strategy,
        config,
        failover_timeout_s=failover_timeout_s,
    )
    sim.progress = progress
    result = sim.run()
    waits = sorted(job.wait_s for job in result.jobs)
    return PlacementRun(
        strategy=strategy,
        p50_wait_s=percentile(waits, 50),
        p95_wait_s=percentile(waits, 95),
        max_wait_s=waits[-1] if waits else 0.0,
        utilisation=tuple(sim.utilisation()),
        first_choice=tuple(sim.first_choice),
        failovers=sim.failovers,
        goodput=(
            result.useful_gpu_s / (result.gpu_capacity * result.window_s)
            if result.gpu_capacity and result.window_s
            else 0.0
        ),
        preemptions=sum(job.preemptions for job in result.jobs),
        run=result,
    )

"""The simulator's predictor for the safe-relaunch rule: would Kueue admit it without borrowing?

The rule itself (hold, release, time out, burst) is the controller's
(:mod:`sky_kueue.controller.aging.safe_relaunch`); the simulator only builds its input, the
way the controller does from its mirror: one :class:`Placement` per cluster the job may run
in.

How a placement is read, per cluster, for the job's relaunch Workload:

1. **GPUs first** (cheap, and exact for the simulator's clusters, where GPUs bind): the
   ClusterQueue's admitted GPUs that Kueue's reclaim would take *after* this Workload (at
   its admitted priority or above: reclaim takes lower priorities first, then the newest
   admission, which the relaunch would be), plus the GPUs of the Workloads Kueue would
   consider before this one, plus the job's own, must fit in the ClusterQueue's nominal
   GPUs. Otherwise the admission would be borrowed from the relaunch's point of view, and
   Kueue's reclaim (``reclaimWithinCohort``) would take it back when the lenders return.
   With every Workload of the team at one priority this is "usage + request <= nominal".
2. **Then the model** (:func:`sky_kueue.kueue.whatif.quick_verdict`): Kueue's own flavor
   assignment for the Workload as the head of its queue, which reports whether it is
   admitted now (possibly after reclaiming lent quota). Its ``borrowing`` flag (the flavor
   assigner's borrowing height, Kueue ``pkg/scheduler/flavorassigner/flavorassigner.go``)
   counts every Workload of the ClusterQueue alike; step 1 already judged what the reclaim
   would take, so with a band policy that admits relaunches above their peers a Kueue-borrowed
   admission can still be safe. (The controller, without a band, may use the flag as is:
   :func:`~sky_kueue.controller.aging.safe_relaunch.placement_from_verdict`.)

The predicted wait for a safe place assumes the ClusterQueue's running jobs end after their
remaining run time (the simulator knows it, as the controller knows an expected-runtime
annotation) and that nothing new is admitted meanwhile: the first instant at which enough of
them have ended for the job (and the work ahead of it) to fit in nominal quota. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal

from sky_kueue.controller.aging.protected_slot import AdmittedWorkload, fits_protected
from sky_kueue.controller.aging.safe_relaunch import Placement, placement_from_verdict
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.whatif import quick_verdict
from sky_kueue.kueue.workload import new_info
from sky_kueue.sim.cluster import GPU_RESOURCE, at


@dataclass(frozen=True)
class Running:
    """A quota holder of the ClusterQueue: its GPUs and when it is expected to end."""

    gpus: int
    ends_at_s: float


def nominal_gpus(cq: o.ClusterQueue) -> int:
    """The ClusterQueue's nominal GPUs over all its flavors."""
    return sum(
        flavor.resources[GPU_RESOURCE].nominal
        for group in cq.resource_groups
        for flavor in group.flavors
        if GPU_RESOURCE in flavor.resources
    )


#: The one quantity the simulator's protected-slot check compares (GPUs bind in its clusters).
_GPUS = ("", GPU_RESOURCE)


def fits_protected_gpus(
    engine: Engine, cluster_queue: str, key: str, *, level: int, gpus: int, holder: Callable[[str], Running | None]
) -> bool:
    """Whether the admitted Workload ``key`` may take the protected ``level``: its GPUs and those
    of the ClusterQueue's other admitted Workloads at ``level`` or above fit its nominal GPUs
    (:func:`sky_kueue.controller.aging.protected_slot.fits_protected`, on GPUs alone)."""
    admitted = [
        AdmittedWorkload(info.priority, {_GPUS: Decimal(r.gpus)})
        for other, info in engine.holders.items()
        if other != key and info.cluster_queue == cluster_queue and (r := holder(other)) is not None
    ]
    nominal = {_GPUS: Decimal(nominal_gpus(engine.state.cluster_queues[cluster_queue]))}
    return fits_protected(nominal, admitted, level, {_GPUS: Decimal(gpus)})


def predicted_safe_wait(excess_gpus: int, running: Iterable[Running], now: float) -> float | None:
    """Seconds until ``excess_gpus`` of the running jobs have ended (None: they never free that many)."""
    if excess_gpus <= 0:
        return 0.0
    freed = 0
    for holder in sorted(running, key=lambda r: r.ends_at_s):
        freed += holder.gpus
        if freed >= excess_gpus:
            return max(holder.ends_at_s - now, 0.0)
    return None


def placement(
    cluster: str,
    engine: Engine,
    workload: o.Workload,
    *,
    gpus: int,
    admitted_priority: int,
    holder: Callable[[str], Running | None],
    now: float,
    excluded: frozenset[str] = frozenset(),
    claims: frozenset[str] = frozenset(),
) -> Placement:
    """Where Kueue would admit ``workload`` now in ``cluster``, borrowed or nominal (module doc).

    Args:
        gpus: the job's GPUs.
        admitted_priority: the priority the Workload will hold once admitted (a band policy
            may set it apart from its pending priority).
        holder: a Workload key of ``engine`` to its GPUs and expected end (None: not a
            simulated job; counted as 0 GPUs). Pending Workloads use the same function: their
            ``ends_at_s`` is ignored.
        excluded: pending Workloads to read as inactive (the team reservation would hold
            them back), so they are not ahead of the relaunch.
        claims: pending Workloads counted ahead whatever their place in Kueue's order: other
            starved relaunches already released for nominal quota and not yet admitted (two
            relaunches that each fit alone would otherwise both be released, and the one Kueue
            admits second would borrow).
    """
    cq_name = engine.cq_for(workload)
    queue = engine.queues.get(cq_name) if cq_name is not None else None
    if cq_name is None or queue is None:
        return Placement(cluster, admits_now=False, borrows=False)
    # Kueue reclaims a borrowing ClusterQueue's Workloads lowest priority first, then newest
    # admission first, and stops once the ClusterQueue no longer borrows (``CandidatesOrdering``,
    # :func:`sky_kueue.kueue.preemption.default_candidate_cmp`). The relaunch, admitted now, is
    # the newest: only what would be reclaimed after it (priority at least its own) competes
    # with it for the nominal quota.
    running = [
        r
        for key, info in engine.holders.items()
        if info.cluster_queue == cq_name and info.priority >= admitted_priority and (r := holder(key))
    ]
    mine = queue.order_key(new_info(workload, cq_name))
    ahead = 0
    for pending in (queue.active, queue.inadmissible):
        for key, info in pending.items():
            if (
                key != workload.key
                and key not in excluded
                and (key in claims or queue.order_key(info) < mine)
                and (r := holder(key)) is not None
            ):
                ahead += r.gpus
    nominal = nominal_gpus(engine.state.cluster_queues[cq_name])
    excess = sum(r.gpus for r in running) + ahead + gpus - nominal
    if excess > 0:
        # Any admission now would use quota beyond nominal: reclaimable, so not safe.
        return Placement(
            cluster,
            admits_now=False,
            borrows=True,
            predicted_safe_wait_seconds=predicted_safe_wait(excess, running, now),
        )
    engine.now = at(now)
    verdict = quick_verdict(engine, workload)
    found = placement_from_verdict(cluster, verdict, predicted_safe_wait_seconds=None)
    # Kueue's own borrowing flag counts every Workload of the ClusterQueue; what the reclaim
    # would take back first (lower priorities) does not endanger this one (step 1 above).
    return Placement(cluster, admits_now=found.admits_now, borrows=False, predicted_safe_wait_seconds=None)

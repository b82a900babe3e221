"""Fast what-if: where would one more workload land, given the cluster as it is now?

A full prediction (:func:`sky_kueue.kueue.predictor.predict`) replays Kueue's cycles until
the cluster settles, which on a large cluster takes seconds. A user about to launch a job
(or the admin policy deciding whether to burst to a cloud) needs an answer in
milliseconds. :func:`quick_verdict` evaluates the new workload as the head of its
ClusterQueue against the current snapshot, exactly as Kueue's nomination would (flavor
assignment and preemption targets), and reports its position in the queue: the workloads
ahead of it will be considered first.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.flavorassigner import Mode
from sky_kueue.kueue.predictor import VerdictKind
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.workload import new_info


@dataclass
class QuickVerdict:
    workload: str
    kind: VerdictKind
    cluster_queue: str
    #: pending workloads of the same ClusterQueue that Kueue will consider first
    ahead: list[str] = field(default_factory=list)
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    victims: list[tuple[str, str]] = field(default_factory=list)
    message: str = ""
    borrowing: bool = False
    never_fits: bool = False


def quick_verdict(engine: Engine, wl: o.Workload) -> QuickVerdict:
    """Nominate ``wl`` against ``engine``'s current state without changing it.

    Raises:
        ModelError: if the workload's LocalQueue or ClusterQueue does not exist.
    """
    cq_name = engine.cq_for(wl)
    if cq_name is None or cq_name not in engine.queues:
        raise ModelError(f"Workload {wl.key}: spec.queueName: LocalQueue {wl.namespace}/{wl.queue_name} not found")
    info = new_info(wl, cq_name)
    queue = engine.queues[cq_name]
    mine = queue.order_key(info)
    ahead = sorted(
        (k for k, other in queue.active.items() if k != info.key and queue.order_key(other) < mine),
        key=lambda k: queue.order_key(queue.active[k]),
    )
    verdict = QuickVerdict(workload=wl.key, kind=VerdictKind.PENDING, cluster_queue=cq_name, ahead=ahead)
    if cq_name in engine.inactive:
        verdict.message = f"ClusterQueue {cq_name} is inactive"
        return verdict
    spec = engine.state.cluster_queues[cq_name]
    from sky_kueue.kueue import queue as q

    if not q.namespace_selected(spec, engine.state.namespaces.get(wl.namespace)):
        verdict.message = "workload namespace doesn't match ClusterQueue selector"
        verdict.never_fits = True
        return verdict
    saved = engine.snapshot.checkpoint()
    try:
        assignment, targets = engine.get_assignments(info, cq_name)
    finally:
        engine.snapshot.restore(saved)
    verdict.message = assignment.message()
    verdict.borrowing = assignment.borrowing > 0
    mode = assignment.representative_mode()
    flavors = {ps.name: {r: fa.name for r, fa in ps.flavors.items()} for ps in assignment.pod_sets}
    if mode is Mode.FIT:
        verdict.kind = VerdictKind.ADMITTED
        verdict.flavors = flavors
    elif mode is Mode.PREEMPT and targets:
        verdict.kind = VerdictKind.ADMITTED_AFTER_PREEMPTION
        verdict.flavors = flavors
        verdict.victims = [(t.info.key, t.reason) for t in targets]
    else:
        verdict.never_fits = "maximum capacity" in verdict.message or "unavailable in ClusterQueue" in verdict.message
    return verdict

"""Workload information the scheduler works with (Kueue's ``pkg/workload``).

A :class:`WorkloadInfo` wraps a parsed :class:`~sky_kueue.kueue.objects.Workload` with what
the scheduling cycle derives from it: total requests per pod set, the usage it holds when
admitted, its effective priority, the queue-order timestamp, and the scheduler's memory of
it between cycles (the last pending message and the saved flavor-scan position).
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.objects import FR


@dataclass
class PodSetRequests:
    """Total requests of one pod set (per-pod amount x count), and its flavors if admitted."""

    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, str] = field(default_factory=dict)


@dataclass
class ScanState:
    """Kueue's ``AssignmentClusterQueueState``: where the flavor scan of each pod set stopped.

    ``last_tried[i][resource]`` is the index of the last flavor tried for pod set ``i``, or
    -1 when the scan reached the last flavor; the next attempt resumes after it.
    """

    last_tried: list[dict[str, int]]
    cq_generation: int
    scheduling_cycle: int
    scheduling_hash: str

    def pending_flavors(self) -> bool:
        return any(idx != -1 for ps in self.last_tried for idx in ps.values())

    def next_flavor(self, pod_set_index: int, resource: str) -> int:
        if pod_set_index >= len(self.last_tried):
            return 0
        idx = self.last_tried[pod_set_index].get(resource)
        return 0 if idx is None else idx + 1

    def key(self) -> tuple[tuple[tuple[str, int], ...], ...]:
        return tuple(tuple(sorted(ps.items())) for ps in self.last_tried)


def priority_of(wl: o.Workload) -> int:
    """Effective priority: ``spec.priority`` (0 when unset). PriorityBoost is off by default."""
    return wl.priority


def queue_order_timestamp(wl: o.Workload) -> datetime:
    """Kueue's ``GetQueueOrderTimestamp`` with default settings.

    An eviction by ``PodsReadyTimeout`` or by an admission check re-queues the workload at
    the eviction time; otherwise (PrioritySortingWithinCohort is on) the creation time.
    """
    evicted = wl.condition("Evicted")
    if (
        evicted is not None
        and evicted.status == "True"
        and evicted.reason in ("PodsReadyTimeout", "AdmissionCheck")
        and evicted.last_transition_time is not None
    ):
        return evicted.last_transition_time
    return wl.creation_timestamp


#: (evicted last, priority, minus the admission time in seconds, UID): see
#: :meth:`WorkloadInfo.candidate_order`.
CandidateOrder = tuple[int, int, float, str]
#: (minus priority, queue-order time in integer microseconds, UID): see
#: :meth:`WorkloadInfo.queue_order`.
QueueOrder = tuple[int, int, str]
_UTC_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)
_MICROSECOND = timedelta(microseconds=1)
#: Scheduling shapes whose hash is kept (a cluster has few distinct ones).
SCHEDULING_SHAPES_CACHED = 4096
#: One pod set's part of a scheduling shape: name, template shape, count, sorted requests, minCount.
PodSetShape = tuple[str, object, int, tuple[tuple[str, int], ...], "int | None"]


def scheduling_hash(wl: o.Workload, total: list[PodSetRequests]) -> str:
    """Equivalence hash of a workload's scheduling shape (``computeSchedulingHash``).

    Workloads with the same pod sets (template shape, counts, requests) and the same
    effective priority are interchangeable for the scheduler, so a BestEffortFIFO queue
    parks them together when one does not fit.
    """
    pod_sets = tuple(
        (
            ps.name,
            ps.shape,
            total[i].count if i < len(total) else ps.count,
            tuple(sorted((total[i].requests if i < len(total) else ps.requests).items())),
            ps.min_count,
        )
        for i, ps in enumerate(wl.pod_sets)
    )
    return _shape_hash(priority_of(wl), pod_sets)


@functools.lru_cache(maxsize=SCHEDULING_SHAPES_CACHED)
def _shape_hash(priority: int, pod_sets: tuple[PodSetShape, ...]) -> str:
    """The hash of one shape (a cluster has few distinct ones, and every workload's is asked)."""
    shape = {
        "priority": priority,
        "podSets": [
            {"name": name, "spec": spec, "count": count, "requests": list(requests), "minCount": min_count}
            for name, spec, count, requests, min_count in pod_sets
        ],
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True).encode()).hexdigest()[:16]


@dataclass
class WorkloadInfo:
    """A workload as the scheduler sees it (Kueue's ``workload.Info``)."""

    obj: o.Workload
    cluster_queue: str
    total_requests: list[PodSetRequests]
    priority: int
    qts: datetime
    #: when QuotaReserved became True (None: pending, or unknown -> "now" in ordering)
    reserved_at: datetime | None = None
    evicted: bool = False
    #: usage per flavor/resource while holding quota
    usage: dict[FR, int] = field(default_factory=dict)
    # --- scheduler memory between cycles ---
    last_assignment: ScanState | None = None
    #: message of the QuotaReserved=False condition; None until first evaluated
    message: str | None = None
    #: reason of the QuotaReserved=False condition (WaitingForQuota, ExceedsMaxQuota, ...)
    reason: str = ""
    #: the flavors of the nomination, kept for an overlap recompute within one cycle
    nomination_mapping: dict[str, dict[str, str]] | None = None
    _assigned_frs: tuple[list[PodSetRequests], frozenset[FR]] | None = field(default=None, repr=False, compare=False)
    #: the workload as it was when this info was built: :attr:`hash` is of its shape then
    _hash_of: o.Workload | None = field(default=None, repr=False, compare=False)
    _hash: str | None = field(default=None, repr=False, compare=False)
    #: :meth:`candidate_order` as last computed, with the priority and admission time it is of
    _candidate_order: tuple[int, datetime, CandidateOrder] | None = field(default=None, repr=False, compare=False)
    #: :meth:`queue_order` as last computed, with the priority it is of
    _queue_order: tuple[int, QueueOrder] | None = field(default=None, repr=False, compare=False)

    @property
    def hash(self) -> str:
        """The scheduling-shape hash of the workload as built (:func:`scheduling_hash`).

        Computed on first use: only pending workloads are ever compared by it (parking,
        the saved flavor-scan position), and building it for every quota holder of a large
        snapshot was a few percent of a prediction. It is of the workload as this info was
        built, as when it was computed eagerly, even if ``obj`` is replaced later.
        """
        cached = self._hash
        if cached is None:
            wl = self._hash_of if self._hash_of is not None else self.obj
            cached = self._hash = scheduling_hash(wl, pending_requests(wl))
        return cached

    @property
    def key(self) -> str:
        return self.obj.key

    @property
    def uid(self) -> str:
        return self.obj.uid

    def assigned_frs(self) -> frozenset[FR]:
        """The flavor/resource pairs the admission assigned (cached per ``total_requests``).

        Preemption asks this of every admitted workload for every preemptor, so it is
        computed once per admission; the cache is keyed by the identity of the
        ``total_requests`` list, which an admission replaces rather than mutates.
        """
        cached = self._assigned_frs
        if cached is not None and cached[0] is self.total_requests:
            return cached[1]
        frs = frozenset((flavor, res) for ps in self.total_requests for res, flavor in ps.flavors.items())
        self._assigned_frs = (self.total_requests, frs)
        return frs

    def candidate_order(self, now: datetime) -> CandidateOrder:
        """Kueue's order of preemption candidates within one ClusterQueue
        (``CandidatesOrdering`` without the queue and LocalQueue terms): evicted first, lower
        priority, most recently admitted, UID; ``now`` stands in for an unknown admission time.

        Kept per priority and admission time: the search sorts every candidate of a cohort
        tree for every preemptor, and the key's parts do not change while the workload holds
        quota.
        """
        reserved = self.reserved_at
        if reserved is None:
            return (0 if self.evicted else 1, self.priority, -now.timestamp(), self.uid)
        cached = self._candidate_order
        if cached is not None and cached[0] == self.priority and cached[1] is reserved:
            return cached[2]
        order = (0 if self.evicted else 1, self.priority, -reserved.timestamp(), self.uid)
        self._candidate_order = (self.priority, reserved, order)
        return order

    def queue_order(self) -> QueueOrder:
        """Kueue's order within a ClusterQueue's heap, without the sticky flag: higher
        priority, then earlier queue-order time, then UID.

        The time as integer microseconds since the epoch (exact, and ordered as the datetimes
        are), so that the heaps compare integers rather than datetimes; kept per priority, as
        a queue pushes a Workload again each time it comes back from the parked set.
        """
        cached = self._queue_order
        if cached is not None and cached[0] == self.priority:
            return cached[1]
        qts = self.qts
        since = qts - (_UTC_EPOCH if qts.tzinfo is not None else _NAIVE_EPOCH)
        order = (-self.priority, since // _MICROSECOND, self.uid)
        self._queue_order = (self.priority, order)
        return order

    def uses_any(self, frs: set[FR] | frozenset[FR]) -> bool:
        """Whether the admitted workload uses any of ``frs`` (``WorkloadUsesResources``)."""
        return not self.assigned_frs().isdisjoint(frs)


def usage_from(total: Iterable[PodSetRequests]) -> dict[FR, int]:
    """Quota used per flavor/resource by pod sets with their flavors assigned (a resource
    without a flavor uses none)."""
    usage: dict[FR, int] = {}
    for ps in total:
        for res, amount in ps.requests.items():
            flavor = ps.flavors.get(res)
            if flavor:
                fr = (flavor, res)
                usage[fr] = usage.get(fr, 0) + amount
    return usage


def pending_requests(wl: o.Workload) -> list[PodSetRequests]:
    return [
        PodSetRequests(name=ps.name, count=ps.count, requests={r: v * ps.count for r, v in ps.requests.items()})
        for ps in wl.pod_sets
    ]


def admitted_requests(wl: o.Workload) -> list[PodSetRequests]:
    assert wl.admission is not None
    counts = {ps.name: ps.count for ps in wl.pod_sets}
    result = []
    for psa in wl.admission.pod_set_assignments:
        count = psa.count if psa.count >= 0 else counts.get(psa.name, 0)
        result.append(
            PodSetRequests(name=psa.name, count=count, requests=dict(psa.resource_usage), flavors=dict(psa.flavors))
        )
    return result


def new_info(wl: o.Workload, cluster_queue: str) -> WorkloadInfo:
    """Build the scheduler's view of ``wl``; an admitted workload's usage comes from its admission."""
    holds_quota = wl.admission is not None and wl.has_quota_reservation
    total = admitted_requests(wl) if holds_quota else pending_requests(wl)
    reserved = wl.condition("QuotaReserved")
    info = WorkloadInfo(
        obj=wl,
        cluster_queue=wl.admission.cluster_queue if holds_quota and wl.admission else cluster_queue,
        total_requests=total,
        priority=priority_of(wl),
        qts=queue_order_timestamp(wl),
        _hash_of=wl,
        reserved_at=reserved.last_transition_time if reserved is not None and reserved.status == "True" else None,
        evicted=wl.is_evicted,
    )
    if holds_quota:
        info.usage = usage_from(total)
    return info


def admit_info(info: WorkloadInfo, cluster_queue: str, pod_sets: list[PodSetRequests], now: datetime) -> None:
    """Turn a pending info into a quota holder with the given assignment."""
    info.cluster_queue = cluster_queue
    info.total_requests = pod_sets
    info.usage = usage_from(pod_sets)
    info.reserved_at = now

"""Per-ClusterQueue pending queues (``pkg/cache/queue/cluster_queue.go``).

Each ClusterQueue keeps an *active* set ordered like Kueue's heap and an *inadmissible*
set of parked workloads. Every cycle pops one head per queue. What happens to a head that
was not admitted decides the queueing strategy:

* StrictFIFO puts it straight back, so the whole queue waits behind it;
* BestEffortFIFO parks it (unless it is waiting for its preemptions, or its flavor scan
  still has flavors to try), so the next workload becomes the head. Parked workloads
  return only when something in the cohort tree frees quota (a deletion or eviction), and
  a NoFit head takes every queued workload of the same shape with it.

A preemptor that is waiting for its victims becomes the queue's *sticky* head
(BestEffortFIFO only) and is popped first until it is admitted or deleted.

The active set is a dict (the rest of the model reads and writes it as one) that also
keeps a heap in Kueue's order, as Kueue's own queue does: a simulation pops heads from
queues thousands of Workloads long millions of times, and a linear scan per pop dominated
long runs. Under admission fair sharing the order depends on LocalQueue usage, which
changes between cycles without the Workloads changing, so those queues scan instead.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.workload import WorkloadInfo

# Requeue reasons (``RequeueReason``).
REQUEUE_FAILED_AFTER_NOMINATION = "FailedAfterNomination"
REQUEUE_NAMESPACE_MISMATCH = "NamespaceMismatch"
REQUEUE_GENERIC = ""
REQUEUE_PENDING_PREEMPTION = "PendingPreemption"
REQUEUE_PREEMPTION_FAILED = "PreemptionFailed"
REQUEUE_NO_FIT = "NoFit"
REQUEUE_PREEMPTION_NO_CANDIDATES = "PreemptionNoCandidates"

_IMMEDIATE_BEST_EFFORT = frozenset(
    {REQUEUE_FAILED_AFTER_NOMINATION, REQUEUE_PENDING_PREEMPTION, REQUEUE_PREEMPTION_FAILED}
)

#: A function giving an extra leading sort key (admission fair sharing's LocalQueue usage).
UsageKeyFn = Callable[[WorkloadInfo], float]

#: Rebuild the heap when stale entries exceed twice the live ones plus this many.
HEAP_COMPACT_SLACK_ENTRIES = 64

#: (order without the sticky flag, key, insertion number, info). The insertion number
#: keeps the tuples of a re-inserted Workload distinct, so the heap never compares infos.
_HeapEntry = tuple[tuple[int, Any, str], str, int, WorkloadInfo]


def _heap_order(info: WorkloadInfo) -> tuple[int, Any, str]:
    return (-info.priority, info.qts, info.uid)


class ActiveSet(dict[str, WorkloadInfo]):
    """The active Workloads by key, plus a lazily pruned heap of them in queue order.

    A heap entry is live while the dict still maps its key to the very same info object;
    deletions leave stale entries behind, dropped when they surface or by :meth:`compact`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.heap: list[_HeapEntry] = []
        self.inserted = 0

    def __setitem__(self, key: str, info: WorkloadInfo) -> None:
        super().__setitem__(key, info)
        self.inserted += 1
        heapq.heappush(self.heap, (_heap_order(info), key, self.inserted, info))

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, info in dict(*args, **kwargs).items():
            self[key] = info

    def first(self) -> WorkloadInfo | None:
        """The live entry first in queue order (stale entries are dropped on the way)."""
        heap = self.heap
        while heap:
            _, key, _, info = heap[0]
            if self.get(key) is info:
                return info
            heapq.heappop(heap)
        return None

    def compact(self) -> None:
        """Rebuilds the heap when stale entries outnumber live ones."""
        if len(self.heap) > 2 * len(self) + HEAP_COMPACT_SLACK_ENTRIES:
            start = self.inserted + 1
            self.heap = [(_heap_order(info), key, start + i, info) for i, (key, info) in enumerate(self.items())]
            self.inserted += len(self)
            heapq.heapify(self.heap)


@dataclass
class PendingQueue:
    """The pending workloads of one ClusterQueue."""

    spec: o.ClusterQueue
    active: ActiveSet = field(default_factory=ActiveSet)
    inadmissible: dict[str, WorkloadInfo] = field(default_factory=dict)
    sticky: str | None = None
    bulk_moved_hashes: set[str] = field(default_factory=set)
    pop_cycle: int = 0
    inadmissible_flush_cycle: int = -1
    usage_key: UsageKeyFn | None = None

    @property
    def best_effort(self) -> bool:
        return self.spec.queueing_strategy is o.QueueingStrategy.BEST_EFFORT_FIFO

    def order_key(self, info: WorkloadInfo) -> tuple[object, ...]:
        """Kueue's heap order (smaller first): sticky preemptor, priority, timestamp, UID."""
        sticky = 0 if (self.best_effort and self.sticky == info.key) else 1
        base = (sticky, -info.priority, info.qts, info.uid)
        if self.usage_key is not None:
            return (self.usage_key(info), *base)
        return base

    def push(self, info: WorkloadInfo) -> None:
        """Add a newly created (or re-created) pending workload (``PushOrUpdate``)."""
        if info.key in self.inadmissible:
            self.inadmissible[info.key] = info
            return
        if self.best_effort and info.key not in self.active and info.hash in self.bulk_moved_hashes:
            self.inadmissible[info.key] = info
            return
        self.active[info.key] = info

    def pop(self) -> WorkloadInfo | None:
        self.pop_cycle += 1
        active = self.active
        if not active:
            return None
        head: WorkloadInfo | None
        if self.usage_key is not None:
            head = min(active.values(), key=self.order_key)
        elif self.best_effort and self.sticky is not None and self.sticky in active:
            head = active[self.sticky]
        else:
            head = active.first()
        assert head is not None
        del active[head.key]
        active.compact()
        return head

    def delete(self, key: str) -> None:
        self.active.pop(key, None)
        self.inadmissible.pop(key, None)
        if self.sticky == key:
            self.sticky = None

    def requeue(self, info: WorkloadInfo, reason: str) -> None:
        """Put a head that was not admitted back (``RequeueIfNotPresent``)."""
        if self.best_effort:
            immediate = reason in _IMMEDIATE_BEST_EFFORT
        else:
            immediate = reason != REQUEUE_NAMESPACE_MISMATCH
        if reason == REQUEUE_PENDING_PREEMPTION:
            self.sticky = info.key
        pending_flavors = info.last_assignment is not None and info.last_assignment.pending_flavors()
        if immediate or self.inadmissible_flush_cycle >= self.pop_cycle or pending_flavors:
            self.inadmissible.pop(info.key, None)
            self.active.setdefault(info.key, info)
            return
        if info.key in self.inadmissible or info.key in self.active:
            return
        self.inadmissible[info.key] = info
        if reason in (REQUEUE_NO_FIT, REQUEUE_PREEMPTION_NO_CANDIDATES) and self.best_effort:
            self.bulk_moved_hashes.add(info.hash)
            shape = info.hash
            for key in [k for k, other in self.active.items() if other.hash == shape]:
                self.inadmissible[key] = self.active.pop(key)

    def flush_inadmissible(self, namespace_ok: Callable[[WorkloadInfo], bool]) -> int:
        """Move parked workloads back to the active set (``queueInadmissibleWorkloads``)."""
        self.inadmissible_flush_cycle = self.pop_cycle
        self.bulk_moved_hashes.clear()
        moved = 0
        selected: dict[str, bool] = {}  # the answer depends only on the namespace
        for key, info in list(self.inadmissible.items()):
            namespace = info.obj.namespace
            ok = selected.get(namespace)
            if ok is None:
                ok = selected[namespace] = namespace_ok(info)
            if not ok:
                continue
            del self.inadmissible[key]
            self.active[key] = info
            moved += 1
        return moved

    def state_key(self) -> tuple[object, ...]:
        """The queue's state for the settle rule: members, parking and scan positions."""
        return (
            tuple(sorted((k, v.last_assignment.key() if v.last_assignment else None) for k, v in self.active.items())),
            tuple(sorted(self.inadmissible)),
            self.sticky,
        )


def namespace_selected(spec: o.ClusterQueue, namespace: o.Namespace | None) -> bool:
    """Whether ``spec``'s namespaceSelector selects ``namespace`` (a missing selector selects none)."""
    if namespace is None or spec.namespace_selector is None:
        return False
    return spec.namespace_selector.matches(namespace.labels)

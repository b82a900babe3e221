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
from sky_kueue.kueue.workload import QueueOrder, WorkloadInfo

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

#: Rebuild the heaps when stale entries exceed twice the live ones plus this many.
HEAP_COMPACT_SLACK_ENTRIES = 64

#: A heap entry: (order, key, insertion number, info). The insertion number keeps the tuples
#: of a re-inserted Workload distinct, so the heap never compares infos.
_HeapEntry = tuple[QueueOrder, str, int, WorkloadInfo]


class ActiveSet(dict[str, WorkloadInfo]):
    """The active Workloads by key, plus lazily pruned heaps of them in queue order, one per
    scheduling shape (:attr:`WorkloadInfo.hash`).

    A heap entry is live while the dict still maps its key to the very same info object;
    deletions leave stale entries behind, dropped when they surface or by :meth:`compact`.

    Why one heap per shape: a BestEffortFIFO queue parks a whole shape at once when one of
    its Workloads does not fit, and every deletion in the cohort tree brings every parked
    Workload back (``queueInadmissibleWorkloads``). At the throughput benchmark's peaks that
    moved 1,000+ Workloads through one heap per completion (issue 38: a quarter of the run).
    Here a parked shape's heap is kept aside (:meth:`park_shape`) and put back whole when its
    Workloads return (:meth:`restore`): the dict moves stay per Workload, the heap work is per
    shape. The head is the first live entry over the shapes' heaps, the same Workload one heap
    would give (the order is total: no two live entries share a key or a UID).
    """

    def __init__(self) -> None:
        super().__init__()
        self.heaps: dict[str, list[_HeapEntry]] = {}
        #: Parked shapes: their heaps as they were, and the Workloads parked with them.
        self.parked: dict[str, tuple[list[_HeapEntry], dict[str, WorkloadInfo]]] = {}
        #: Entries in :attr:`heaps` (live or stale).
        self.entries = 0
        self.inserted = 0

    def _push(self, key: str, info: WorkloadInfo) -> None:
        self.inserted += 1
        self.entries += 1
        heap = self.heaps.get(info.hash)
        if heap is None:
            heap = self.heaps[info.hash] = []
        heapq.heappush(heap, (info.queue_order(), key, self.inserted, info))

    def __setitem__(self, key: str, info: WorkloadInfo) -> None:
        super().__setitem__(key, info)
        self._push(key, info)

    def setdefault(self, key: str, default: Any = None) -> Any:
        if key not in self:
            self[key] = default
        return self[key]

    def update(self, *args: Any, **kwargs: Any) -> None:
        for key, info in dict(*args, **kwargs).items():
            self[key] = info

    def first(self) -> WorkloadInfo | None:
        """The live entry first in queue order (stale entries are dropped on the way)."""
        best: _HeapEntry | None = None
        emptied: list[str] = []
        for shape, heap in self.heaps.items():
            while heap:
                entry = heap[0]
                if self.get(entry[1]) is entry[3]:
                    if best is None or entry < best:
                        best = entry
                    break
                heapq.heappop(heap)
                self.entries -= 1
            if not heap:
                emptied.append(shape)
        for shape in emptied:
            del self.heaps[shape]
        return best[3] if best is not None else None

    def park_shape(self, shape: str) -> list[tuple[str, WorkloadInfo]]:
        """Remove the active Workloads of ``shape`` and keep their heap aside; returns them."""
        heap = self.heaps.pop(shape, None)
        if heap is None:
            return []
        self.entries -= len(heap)
        moved: dict[str, WorkloadInfo] = {}
        for _, key, _, info in heap:
            if key not in moved and self.get(key) is info:
                moved[key] = info
        for key in moved:
            super().__delitem__(key)
        kept = self.parked.get(shape)
        if kept is None:
            self.parked[shape] = (heap, dict(moved))
        else:
            merged = kept[0] + heap
            heapq.heapify(merged)
            self.parked[shape] = (merged, {**kept[1], **moved})
        return list(moved.items())

    def restore(self, items: list[tuple[str, WorkloadInfo]]) -> None:
        """Make ``items`` (parked Workloads) active again: the heaps kept for their shapes come
        back whole, and only a Workload parked on its own gets a new entry."""
        returning: set[str] = set()
        for key, info in items:
            super().__setitem__(key, info)
            kept = self.parked.get(info.hash)
            if kept is not None and kept[1].get(key) is info:
                returning.add(info.hash)
            else:
                self._push(key, info)
        for shape in returning:
            heap, _ = self.parked.pop(shape)
            self.entries += len(heap)
            current = self.heaps.get(shape)
            if current is None:
                self.heaps[shape] = heap
            else:
                current.extend(heap)
                heapq.heapify(current)
        # A flush returns every parked Workload its queue selects; the rest get new entries
        # when they return, so the heaps still kept would only hold stale entries.
        self.parked.clear()

    def compact(self) -> None:
        """Rebuilds the heaps when stale entries outnumber live ones."""
        if self.entries > 2 * len(self) + HEAP_COMPACT_SLACK_ENTRIES:
            start = self.inserted + 1
            self.heaps = {}
            for i, (key, info) in enumerate(self.items()):
                self.heaps.setdefault(info.hash, []).append((info.queue_order(), key, start + i, info))
            for heap in self.heaps.values():
                heapq.heapify(heap)
            self.inserted += len(self)
            self.entries = len(self)


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
            for key, other in self.active.park_shape(info.hash):
                self.inadmissible[key] = other

    def flush_inadmissible(self, namespace_ok: Callable[[WorkloadInfo], bool]) -> int:
        """Move parked workloads back to the active set (``queueInadmissibleWorkloads``)."""
        self.inadmissible_flush_cycle = self.pop_cycle
        self.bulk_moved_hashes.clear()
        selected: dict[str, bool] = {}  # the answer depends only on the namespace
        returning: list[tuple[str, WorkloadInfo]] = []
        for key, info in list(self.inadmissible.items()):
            namespace = info.obj.namespace
            ok = selected.get(namespace)
            if ok is None:
                ok = selected[namespace] = namespace_ok(info)
            if not ok:
                continue
            del self.inadmissible[key]
            returning.append((key, info))
        self.active.restore(returning)
        return len(returning)

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

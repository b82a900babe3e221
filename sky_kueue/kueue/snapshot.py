"""The scheduler's per-cycle snapshot of quota and quota holders (``pkg/cache/scheduler/snapshot.go``).

The snapshot owns the quota tree with current usage and, per ClusterQueue, the workloads
that hold quota. During a cycle the scheduler mutates it to simulate admissions and
preemptions; :meth:`Snapshot.checkpoint`/:meth:`Snapshot.restore` let the engine start each
cycle from the cache's real state without rebuilding the tree.

Two things keep a large snapshot cheap (issue 38), without changing any answer:

* a checkpoint copies only the tree's usage (a few numbers per node); a ClusterQueue's
  quota holders are copied the first time the cycle changes them (copy on write), so a cycle
  pays for the queues its preemption searches touched, not for every holder of the cluster;
* per ClusterQueue, the holders' usage is also kept summed by (assigned flavor/resources,
  priority) in :class:`Bucket`\\ s, so the preemption search can tell from a handful of sums
  that no set of victims can make room (:meth:`sky_kueue.kueue.preemption._Search.viable_passes`)
  instead of visiting every holder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import tree
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.workload import WorkloadInfo


class Bucket:
    """The quota holders of one ClusterQueue with one set of assigned flavor/resources and one
    priority: how many, and their usage summed per flavor/resource."""

    __slots__ = ("count", "usage")

    def __init__(self) -> None:
        self.count = 0
        self.usage: dict[FR, int] = {}

    def copy(self) -> Bucket:
        other = Bucket()
        other.count = self.count
        other.usage = dict(self.usage)
        return other


#: Per ClusterQueue: assigned flavor/resources -> priority -> :class:`Bucket`.
Buckets = dict[frozenset[FR], dict[int, Bucket]]
#: What :meth:`Snapshot.checkpoint` returns: every node's usage (``cq:NAME`` / ``cohort:NAME``).
Checkpoint = tuple[dict[str, dict[FR, int]], int]


@dataclass
class Snapshot:
    """The quota tree and quota holders one scheduling cycle works on (Kueue's cache snapshot)."""

    shape: tree.TreeShape
    workloads: dict[str, dict[str, WorkloadInfo]]
    resource_flavors: Mapping[str, o.ResourceFlavor]
    namespaces: Mapping[str, o.Namespace]
    #: The holders' usage by ClusterQueue, assigned flavor/resources and priority.
    buckets: dict[str, Buckets] = field(default_factory=dict)
    #: While a checkpoint is open: the holders and buckets of each ClusterQueue changed since,
    #: as they were at the checkpoint (None: the ClusterQueue had no entry then).
    _saved: dict[str, tuple[dict[str, WorkloadInfo] | None, Buckets | None]] | None = field(default=None, repr=False)
    _checkpoints: int = field(default=0, repr=False)

    def cq(self, name: str) -> tree.ClusterQueueNode:
        return self.shape.cqs[name]

    def add_usage(self, cq_name: str, usage: Mapping[FR, int]) -> None:
        node = self.shape.cqs[cq_name]
        for fr, value in usage.items():
            tree.add_usage(node, fr, value)

    def remove_usage(self, cq_name: str, usage: Mapping[FR, int]) -> None:
        node = self.shape.cqs[cq_name]
        for fr, value in usage.items():
            tree.remove_usage(node, fr, value)

    def _touch(self, cq_name: str) -> None:
        """Before the first change to ``cq_name``'s holders since the checkpoint: keep them."""
        saved = self._saved
        if saved is None or cq_name in saved:
            return
        workloads = self.workloads.get(cq_name)
        buckets = self.buckets.get(cq_name)
        saved[cq_name] = (
            dict(workloads) if workloads is not None else None,
            {frs: {p: b.copy() for p, b in by_priority.items()} for frs, by_priority in buckets.items()}
            if buckets is not None
            else None,
        )

    def _count(self, info: WorkloadInfo, sign: int) -> None:
        by_priority = self.buckets.setdefault(info.cluster_queue, {}).setdefault(info.assigned_frs(), {})
        bucket = by_priority.get(info.priority)
        if bucket is None:
            bucket = by_priority[info.priority] = Bucket()
        bucket.count += sign
        if bucket.count == 0:
            del by_priority[info.priority]  # priorities come and go (aging): keep only those held
            return
        usage = bucket.usage
        for fr, value in info.usage.items():
            usage[fr] = usage.get(fr, 0) + sign * value

    def add_workload(self, info: WorkloadInfo) -> None:
        cq_name = info.cluster_queue
        self._touch(cq_name)
        holders = self.workloads.setdefault(cq_name, {})
        previous = holders.get(info.key)
        if previous is not None:
            self._count(previous, -1)
        holders[info.key] = info
        self._count(info, 1)
        self.add_usage(cq_name, info.usage)

    def remove_workload(self, info: WorkloadInfo) -> None:
        cq_name = info.cluster_queue
        self._touch(cq_name)
        removed = self.workloads.get(cq_name, {}).pop(info.key, None)
        if removed is not None:
            self._count(removed, -1)
        self.remove_usage(cq_name, info.usage)

    def reprioritize(self, info: WorkloadInfo, priority: int) -> None:
        """Change a quota holder's priority (its buckets follow)."""
        held = self.workloads.get(info.cluster_queue, {}).get(info.key) is info
        if held:
            self._touch(info.cluster_queue)
            self._count(info, -1)
        info.priority = priority
        if held:
            self._count(info, 1)

    def simulate_usage_removal(self, infos: Iterable[WorkloadInfo]) -> Callable[[], None]:
        removed = list(infos)
        for info in removed:
            self.remove_usage(info.cluster_queue, info.usage)

        def revert() -> None:
            for info in removed:
                self.add_usage(info.cluster_queue, info.usage)

        return revert

    def simulate_workload_removal(self, infos: Iterable[WorkloadInfo]) -> Callable[[], None]:
        removed = list(infos)
        for info in removed:
            self.remove_workload(info)

        def revert() -> None:
            for info in removed:
                self.add_workload(info)

        return revert

    # --- checkpointing ---------------------------------------------------------------

    def checkpoint(self) -> Checkpoint:
        """The state to come back to with :meth:`restore` (one open checkpoint at a time).

        Returns every node's usage (copied now) and the checkpoint's number; the quota holders
        are kept from here on as the cycle changes them.
        """
        usage = {f"cq:{n}": dict(node.usage) for n, node in self.shape.cqs.items()}
        usage.update({f"cohort:{n}": dict(node.usage) for n, node in self.shape.cohorts.items()})
        self._saved = {}
        self._checkpoints += 1
        return usage, self._checkpoints

    def restore(self, saved: Checkpoint) -> None:
        """Back to the state of the checkpoint ``saved`` (the last one taken; used once).

        Raises:
            ValueError: ``saved`` is not the open checkpoint.
        """
        usage, number = saved
        if self._saved is None or number != self._checkpoints:
            raise ValueError("restore: not the open checkpoint")
        for n, node in self.shape.cqs.items():
            node.usage = usage[f"cq:{n}"]
        for n, cohort in self.shape.cohorts.items():
            cohort.usage = usage[f"cohort:{n}"]
        for cq_name, (workloads, buckets) in self._saved.items():
            if workloads is None:
                self.workloads.pop(cq_name, None)
            else:
                self.workloads[cq_name] = workloads
            if buckets is None:
                self.buckets.pop(cq_name, None)
            else:
                self.buckets[cq_name] = buckets
        self._saved = None

"""The scheduler's per-cycle snapshot of quota and quota holders (``pkg/cache/scheduler/snapshot.go``).

The snapshot owns the quota tree with current usage and, per ClusterQueue, the workloads
that hold quota. During a cycle the scheduler mutates it to simulate admissions and
preemptions; :meth:`Snapshot.checkpoint`/:meth:`Snapshot.restore` let the engine start each
cycle from the cache's real state without rebuilding the tree.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import tree
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.workload import WorkloadInfo


@dataclass
class Snapshot:
    """The quota tree and quota holders one scheduling cycle works on (Kueue's cache snapshot)."""

    shape: tree.TreeShape
    workloads: dict[str, dict[str, WorkloadInfo]]
    resource_flavors: Mapping[str, o.ResourceFlavor]
    namespaces: Mapping[str, o.Namespace]

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

    def add_workload(self, info: WorkloadInfo) -> None:
        self.workloads.setdefault(info.cluster_queue, {})[info.key] = info
        self.add_usage(info.cluster_queue, info.usage)

    def remove_workload(self, info: WorkloadInfo) -> None:
        self.workloads.get(info.cluster_queue, {}).pop(info.key, None)
        self.remove_usage(info.cluster_queue, info.usage)

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

    def checkpoint(self) -> tuple[dict[str, dict[FR, int]], dict[str, dict[str, WorkloadInfo]]]:
        usage = {f"cq:{n}": dict(node.usage) for n, node in self.shape.cqs.items()}
        usage.update({f"cohort:{n}": dict(node.usage) for n, node in self.shape.cohorts.items()})
        return usage, {cq: dict(wls) for cq, wls in self.workloads.items()}

    def restore(self, saved: tuple[dict[str, dict[FR, int]], dict[str, dict[str, WorkloadInfo]]]) -> None:
        usage, workloads = saved
        for n, node in self.shape.cqs.items():
            node.usage = dict(usage[f"cq:{n}"])
        for n, cohort in self.shape.cohorts.items():
            cohort.usage = dict(usage[f"cohort:{n}"])
        self.workloads = {cq: dict(wls) for cq, wls in workloads.items()}

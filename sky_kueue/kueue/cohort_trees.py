"""The part of a cluster that decides a Workload's admission: its cohort tree.

Kueue never moves quota across cohort trees. A ClusterQueue borrows from, lends to and
preempts in its own tree only (a ClusterQueue without a cohort is a tree of its own): the
cache's quota arithmetic runs from a ClusterQueue up to the root of its cohort tree and no
further (``pkg/cache/scheduler/resource_node.go``); within a cycle the scheduler checks each
head against the snapshot that earlier heads used up, which only heads of the same tree can
have touched, so the one global sort of heads (``pkg/scheduler/scheduler.go``) orders other
trees' heads without effect on this one's; preemption candidates come from the tree only
(``pkg/scheduler/preemption``); and freed quota returns the parked Workloads of that tree only
(``requeueAndUpdate``, ``pkg/cache/queue/inadmissible_workloads.go``). Neither sharing mode
adds cluster-wide state: fair sharing compares dominant resource shares within a tree
(``pkg/scheduler/fair_sharing_iterator.go`` runs one tournament per root cohort), and
admission fair sharing orders a ClusterQueue by the usage of its own LocalQueues
(``pkg/cache/queue/cluster_queue.go``); topology-aware scheduling is not modelled. So the
objects of the other trees cannot change when a Workload of this one is admitted, and
:func:`restrict_to_trees` drops them.

Cluster-wide objects every tree reads are kept whole: Namespaces (selectors), ResourceFlavors
(a missing flavor makes a ClusterQueue inactive), WorkloadPriorityClasses and Kueue's
configuration.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass

from sky_kueue.kueue import objects as o

#: A tree's identity: ``("cohort", root cohort name)`` or ``("cq", name)`` for a lone ClusterQueue.
TreeId = tuple[str, str]


def _cohort_root(state: o.ClusterState, cohort: str) -> str:
    """The root cohort above ``cohort`` (a parent that is not an object is an implicit root).

    The state must be valid (no cycles): :func:`sky_kueue.kueue.validation.validate_state`.
    """
    name = cohort
    spec = state.cohorts.get(name)
    while spec is not None and spec.parent:
        name = spec.parent
        spec = state.cohorts.get(name)
    return name


def tree_of(state: o.ClusterState, cluster_queue: str) -> TreeId | None:
    """The cohort tree of ``cluster_queue`` (None: no such ClusterQueue)."""
    cq = state.cluster_queues.get(cluster_queue)
    if cq is None:
        return None
    if not cq.cohort:
        return ("cq", cq.name)
    return ("cohort", _cohort_root(state, cq.cohort))


def _home_trees(state: o.ClusterState, wl: o.Workload, trees: dict[str, TreeId | None]) -> set[TreeId]:
    """The trees ``wl`` touches: its admission's ClusterQueue's, and its LocalQueue's."""
    found: set[TreeId] = set()
    names = []
    if wl.admission is not None and wl.has_quota_reservation:
        names.append(wl.admission.cluster_queue)
    queue = state.local_queue_for(wl)
    if queue is not None:
        names.append(queue.cluster_queue)
    for name in names:
        tree = trees.get(name)
        if tree is not None:
            found.add(tree)
    return found


@dataclass
class Restricted:
    """A state cut down to some cohort trees, and the tree of each of its ClusterQueues."""

    state: o.ClusterState
    tree_by_cluster_queue: dict[str, TreeId]


def restrict_to_trees(state: o.ClusterState, workloads: Iterable[str]) -> Restricted:
    """``state`` with only the cohort trees the ``workloads`` (keys ``ns/name``) queue in.

    Kept: those trees' ClusterQueues and Cohorts, the LocalQueues pointing at them, and the
    Workloads in them (pending in their LocalQueue's ClusterQueue, or holding quota in their
    admission's), plus every named Workload itself (so one without a queue is still reported
    as it is). A Workload holding quota in one tree whose LocalQueue now points into another
    ties the two trees together (admission fair sharing charges its eviction to that
    LocalQueue), so both are kept.

    The state must be valid (:func:`sky_kueue.kueue.validation.validate_state`).
    """
    trees: dict[str, TreeId | None] = {name: tree_of(state, name) for name in state.cluster_queues}
    links: dict[TreeId, set[TreeId]] = {}
    for wl in state.workloads.values():
        touched = _home_trees(state, wl, trees)
        if len(touched) > 1:
            for tree in touched:
                links.setdefault(tree, set()).update(touched - {tree})
    wanted = [key for key in workloads if key in state.workloads]
    kept: set[TreeId] = set()
    frontier = [t for key in wanted for t in _home_trees(state, state.workloads[key], trees)]
    while frontier:
        tree = frontier.pop()
        if tree in kept:
            continue
        kept.add(tree)
        frontier.extend(links.get(tree, ()))
    cqs = {name: cq for name, cq in state.cluster_queues.items() if trees[name] in kept}
    kept_roots = {name for kind, name in kept if kind == "cohort"}
    cohorts = {name: c for name, c in state.cohorts.items() if _cohort_root(state, name) in kept_roots}
    local_queues = {key: lq for key, lq in state.local_queues.items() if lq.cluster_queue in cqs}
    wanted_set = set(wanted)
    workloads_kept = {
        key: wl
        for key, wl in state.workloads.items()
        if key in wanted_set or not _home_trees(state, wl, trees).isdisjoint(kept)
    }
    restricted = copy.copy(state)
    restricted.cluster_queues = cqs
    restricted.cohorts = cohorts
    restricted.local_queues = local_queues
    restricted.workloads = workloads_kept
    by_cluster_queue = {name: tree for name, tree in trees.items() if name in cqs and tree is not None}
    return Restricted(restricted, by_cluster_queue)

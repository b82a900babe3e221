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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

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
        _tie(links, _home_trees(state, wl, trees))
    wanted = [key for key in workloads if key in state.workloads]
    kept = _linked_trees([t for key in wanted for t in _home_trees(state, state.workloads[key], trees)], links)
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


#: Kinds every cohort tree reads, kept whole by :func:`documents_of_trees`.
_CLUSTER_WIDE_KINDS = frozenset({"Namespace", "ResourceFlavor", "WorkloadPriorityClass", "AdmissionCheck"})


def _raw_mapping(value: object) -> Mapping[str, Any] | None:
    # ``type(...) is dict`` first: an ABC isinstance check costs more, and this runs per object.
    return value if type(value) is dict or isinstance(value, Mapping) else None


def _raw_text(value: object) -> str | None:
    """A non-empty string field, else None (missing, empty or not a string)."""
    return value if isinstance(value, str) and value else None


def _raw_link(spec: Mapping[str, Any], current: str, legacy: str) -> tuple[bool, str | None]:
    """Whether the link is readable, and the name in ``spec[current]`` (v1beta2) or else
    ``spec[legacy]`` (v1beta1), as the parser reads it (None: a root, a lone ClusterQueue)."""
    value = spec.get(current, spec.get(legacy))
    if not value:
        return True, None
    return (True, value) if isinstance(value, str) else (False, None)


def _raw_quota_reserved(status: Mapping[str, Any]) -> bool:
    """Whether the first ``QuotaReserved`` condition is ``True`` (as the model reads it)."""
    conditions = status.get("conditions")
    if type(conditions) is not list:
        return False
    for cond in conditions:
        if _raw_mapping(cond) is not None and cond.get("type") == "QuotaReserved":
            return str(cond.get("status", "")) == "True"
    return False


@dataclass
class DocumentsCut:
    """The documents :func:`documents_of_trees` keeps, and the Workloads among them (keys ``ns/name``)."""

    documents: list[Mapping[str, Any]]
    workload_keys: set[str]


def documents_of_trees(documents: Iterable[Mapping[str, Any]], workloads: Iterable[str]) -> DocumentsCut:
    """The Kubernetes ``documents`` (already flattened, as the mirror exports them) cut to the
    cohort trees the ``workloads`` (keys ``ns/name``) queue in: :func:`restrict_to_trees`'s rule
    on the raw objects, so that a caller on a large cluster parses only what the answer needs.

    The same tree rule, with the field names of both served API versions: a ClusterQueue's
    ``spec.cohortName`` (v1beta2) or ``spec.cohort`` (v1beta1), a Cohort's ``spec.parentName``
    or ``spec.parent``, a LocalQueue's ``spec.clusterQueue``, a Workload's LocalQueue
    (``spec.queueName`` in its namespace) and, while its ``QuotaReserved`` condition is true,
    its ``status.admission.clusterQueue``. One difference, keeping more, never less:
    everything the rule cannot place is kept, so that the model reports on it as it would on
    the whole cluster (a validation error, rather than an answer that silently ignores it): a
    document without a name or a ``spec`` mapping, a ClusterQueue or Cohort whose link is not
    a name or lies on a cohort cycle, a LocalQueue of an unknown ClusterQueue, a Workload whose
    queue and admission name nothing known, and any kind not listed here. Cluster-wide kinds
    (Namespaces, ResourceFlavors, WorkloadPriorityClasses, AdmissionChecks) are kept whole.

    Keeping more is exact too: the other trees' objects never change this tree's answers.
    """
    # One read of each document's identity; the passes below reuse it.
    rows: list[tuple[Mapping[str, Any], object, str | None, str | None, Mapping[str, Any] | None]] = []
    for doc in documents:
        meta = _raw_mapping(doc.get("metadata"))
        name = namespace = None
        if meta is not None:
            name = _raw_text(meta.get("name"))
            namespace = _raw_text(meta.get("namespace"))
        rows.append((doc, doc.get("kind"), name, namespace, _raw_mapping(doc.get("spec"))))
    parents: dict[str, str | None] = {}
    unplaceable_cohorts: set[str] = set()
    cq_links: dict[str, str | None] = {}
    local_queue_targets: dict[str, str] = {}
    for _doc, kind, name, namespace, spec in rows:
        if name is None or spec is None:
            continue
        if kind == "Cohort":
            readable, parent = _raw_link(spec, "parentName", "parent")
            if readable:
                parents[name] = parent
            else:
                unplaceable_cohorts.add(name)
        elif kind == "ClusterQueue":
            readable, cohort = _raw_link(spec, "cohortName", "cohort")
            if readable:
                cq_links[name] = cohort
        elif kind == "LocalQueue":
            target = _raw_text(spec.get("clusterQueue"))
            if namespace is not None and target is not None:
                local_queue_targets[f"{namespace}/{name}"] = target

    root_cache: dict[str, str | None] = {}

    def root_of(cohort: str) -> str | None:
        """The root cohort above ``cohort``; None: a cycle or a malformed Cohort on the way."""
        if cohort in root_cache:
            return root_cache[cohort]
        seen: list[str] = []
        name: str | None = cohort
        found: str | None = None
        while name is not None:
            if name in root_cache:
                found = root_cache[name]
                break
            if name in unplaceable_cohorts or name in seen:
                found = None
                break
            seen.append(name)
            parent = parents.get(name)
            if parent is None:
                found = name
                break
            name = parent
        for visited in seen:
            root_cache[visited] = found
        return found

    trees: dict[str, TreeId | None] = {}
    for cq_name, cohort in cq_links.items():
        if cohort is None:
            trees[cq_name] = ("cq", cq_name)
        else:
            root = root_of(cohort)
            trees[cq_name] = None if root is None else ("cohort", root)

    def workload_trees(doc: Mapping[str, Any], namespace: str | None, spec: Mapping[str, Any] | None) -> set[TreeId]:
        """The trees a Workload document touches, as :func:`_home_trees` reads the parsed one:
        its admission's ClusterQueue's while it holds quota, and its LocalQueue's."""
        found: set[TreeId] = set()
        status = _raw_mapping(doc.get("status"))
        if status is not None:
            admission = _raw_mapping(status.get("admission"))
            if admission is not None and _raw_quota_reserved(status):
                admitted_in = _raw_text(admission.get("clusterQueue"))
                tree = None if admitted_in is None else trees.get(admitted_in)
                if tree is not None:
                    found.add(tree)
        queue = None if spec is None else _raw_text(spec.get("queueName"))
        if queue is not None:
            target = local_queue_targets.get(f"{namespace or ''}/{queue}")
            tree = None if target is None else trees.get(target)
            if tree is not None:
                found.add(tree)
        return found

    touched_by_row: dict[int, set[TreeId]] = {}
    links: dict[TreeId, set[TreeId]] = {}
    rows_by_key: dict[str, list[int]] = {}
    for index, (doc, kind, name, namespace, spec) in enumerate(rows):
        if kind != "Workload":
            continue
        touched = workload_trees(doc, namespace, spec)
        touched_by_row[index] = touched
        rows_by_key.setdefault(f"{namespace or ''}/{name or ''}", []).append(index)
        _tie(links, touched)
    wanted = set(workloads)
    kept = _linked_trees(
        [tree for key in wanted for index in rows_by_key.get(key, ()) for tree in touched_by_row[index]], links
    )
    kept_roots = {name for kind, name in kept if kind == "cohort"}

    out: list[Mapping[str, Any]] = []
    keys: set[str] = set()
    for index, (doc, kind, name, namespace, spec) in enumerate(rows):
        if kind == "Workload":
            touched = touched_by_row[index]
            key = f"{namespace or ''}/{name or ''}"
            if key in wanted or not touched or not touched.isdisjoint(kept):
                out.append(doc)
                keys.add(key)
        elif kind in _CLUSTER_WIDE_KINDS or name is None or spec is None:
            out.append(doc)
        elif kind == "ClusterQueue":
            cq_tree = trees.get(name)
            if cq_tree is None or cq_tree in kept:
                out.append(doc)
        elif kind == "Cohort":
            root = root_of(name)
            if root is None or root in kept_roots:
                out.append(doc)
        elif kind == "LocalQueue":
            target = _raw_text(spec.get("clusterQueue"))
            lq_tree = None if target is None else trees.get(target)
            if lq_tree is None or lq_tree in kept:
                out.append(doc)
        else:
            out.append(doc)
    return DocumentsCut(out, keys)


def _tie(links: dict[TreeId, set[TreeId]], touched: set[TreeId]) -> None:
    """Record that one Workload touches every tree of ``touched`` (so they are kept together)."""
    if len(touched) > 1:
        for tree in touched:
            links.setdefault(tree, set()).update(touched - {tree})


def _linked_trees(start: list[TreeId], links: dict[TreeId, set[TreeId]]) -> set[TreeId]:
    """``start`` and every tree a Workload holding quota across trees ties to them, transitively."""
    kept: set[TreeId] = set()
    frontier = list(start)
    while frontier:
        tree = frontier.pop()
        if tree in kept:
            continue
        kept.add(tree)
        frontier.extend(links.get(tree, ()))
    return kept

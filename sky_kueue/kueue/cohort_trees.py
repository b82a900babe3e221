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
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sky_kueue.kueue import objects as o

#: A tree's identity: ``("cohort", root cohort name)`` or ``("cq", name)`` for a lone ClusterQueue.
TreeId = tuple[str, str]
#: The caller's names of a :class:`TreeIndex`'s documents: of those that are not Workloads, and of Workloads.
OtherSlot = TypeVar("OtherSlot", bound=Hashable)
WorkloadSlot = TypeVar("WorkloadSlot", bound=Hashable)


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


#: One document as the raw rule reads it: the document, its kind, ``metadata.name`` and
#: ``metadata.namespace`` (None: missing, empty or not a string) and its ``spec`` (None: not a mapping).
_Row = tuple[Mapping[str, Any], object, str | None, str | None, Mapping[str, Any] | None]
#: A Workload's raw links: the ClusterQueue of its admission while ``QuotaReserved`` is true, and
#: its LocalQueue's key (``namespace/queueName``); None where it has none.
_Links = tuple[str | None, str | None]


def _row(doc: Mapping[str, Any]) -> _Row:
    """One read of a document's identity; the passes of the rule reuse it."""
    meta = _raw_mapping(doc.get("metadata"))
    name = namespace = None
    if meta is not None:
        name = _raw_text(meta.get("name"))
        namespace = _raw_text(meta.get("namespace"))
    return (doc, doc.get("kind"), name, namespace, _raw_mapping(doc.get("spec")))


def _row_key(row: _Row) -> str:
    """``namespace/name`` of a Workload row, as the rule matches the wanted keys."""
    return f"{row[3] or ''}/{row[2] or ''}"


def _workload_links(row: _Row) -> _Links:
    """The names a Workload document links to, as :func:`_home_trees` reads the parsed one."""
    doc, _kind, _name, namespace, spec = row
    admitted_in = None
    status = _raw_mapping(doc.get("status"))
    if status is not None:
        admission = _raw_mapping(status.get("admission"))
        if admission is not None and _raw_quota_reserved(status):
            admitted_in = _raw_text(admission.get("clusterQueue"))
    queue = None if spec is None else _raw_text(spec.get("queueName"))
    return admitted_in, None if queue is None else f"{namespace or ''}/{queue}"


class _Queues:
    """The cohort trees the Cohort, ClusterQueue and LocalQueue documents of a set describe."""

    def __init__(self, rows: Iterable[_Row]) -> None:
        self._parents: dict[str, str | None] = {}
        self._unplaceable_cohorts: set[str] = set()
        self._local_queue_targets: dict[str, str] = {}
        self._root_cache: dict[str, str | None] = {}
        cq_links: dict[str, str | None] = {}
        for _doc, kind, name, namespace, spec in rows:
            if name is None or spec is None:
                continue
            if kind == "Cohort":
                readable, parent = _raw_link(spec, "parentName", "parent")
                if readable:
                    self._parents[name] = parent
                else:
                    self._unplaceable_cohorts.add(name)
            elif kind == "ClusterQueue":
                readable, cohort = _raw_link(spec, "cohortName", "cohort")
                if readable:
                    cq_links[name] = cohort
            elif kind == "LocalQueue":
                target = _raw_text(spec.get("clusterQueue"))
                if namespace is not None and target is not None:
                    self._local_queue_targets[f"{namespace}/{name}"] = target
        self.trees: dict[str, TreeId | None] = {}
        for cq_name, cohort in cq_links.items():
            if cohort is None:
                self.trees[cq_name] = ("cq", cq_name)
            else:
                root = self.root_of(cohort)
                self.trees[cq_name] = None if root is None else ("cohort", root)

    def root_of(self, cohort: str) -> str | None:
        """The root cohort above ``cohort``; None: a cycle or a malformed Cohort on the way."""
        root_cache = self._root_cache
        if cohort in root_cache:
            return root_cache[cohort]
        seen: list[str] = []
        name: str | None = cohort
        found: str | None = None
        while name is not None:
            if name in root_cache:
                found = root_cache[name]
                break
            if name in self._unplaceable_cohorts or name in seen:
                found = None
                break
            seen.append(name)
            parent = self._parents.get(name)
            if parent is None:
                found = name
                break
            name = parent
        for visited in seen:
            root_cache[visited] = found
        return found

    def touched(self, links: _Links) -> set[TreeId]:
        """The trees a Workload with these links touches: its admission's ClusterQueue's while
        it holds quota, and its LocalQueue's."""
        found: set[TreeId] = set()
        admitted_in, queue_key = links
        if admitted_in is not None:
            tree = self.trees.get(admitted_in)
            if tree is not None:
                found.add(tree)
        if queue_key is not None:
            target = self._local_queue_targets.get(queue_key)
            tree = None if target is None else self.trees.get(target)
            if tree is not None:
                found.add(tree)
        return found

    def place(self, row: _Row) -> TreeId | None:
        """The tree a document that is not a Workload belongs to (None: kept with every tree)."""
        _doc, kind, name, _namespace, spec = row
        if kind in _CLUSTER_WIDE_KINDS or name is None or spec is None:
            return None
        if kind == "ClusterQueue":
            return self.trees.get(name)
        if kind == "Cohort":
            root = self.root_of(name)
            return None if root is None else ("cohort", root)
        if kind == "LocalQueue":
            target = _raw_text(spec.get("clusterQueue"))
            return None if target is None else self.trees.get(target)
        return None


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
    :class:`TreeIndex` gives the same cut of a set of documents that changes a few at a time.
    """
    rows = [_row(doc) for doc in documents]
    queues = _Queues(rows)
    touched_by_row: dict[int, set[TreeId]] = {}
    links: dict[TreeId, set[TreeId]] = {}
    rows_by_key: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        if row[1] != "Workload":
            continue
        touched = queues.touched(_workload_links(row))
        touched_by_row[index] = touched
        rows_by_key.setdefault(_row_key(row), []).append(index)
        _tie(links, touched)
    wanted = set(workloads)
    kept = _linked_trees(
        [tree for key in wanted for index in rows_by_key.get(key, ()) for tree in touched_by_row[index]], links
    )

    out: list[Mapping[str, Any]] = []
    keys: set[str] = set()
    for index, row in enumerate(rows):
        if row[1] == "Workload":
            touched = touched_by_row[index]
            key = _row_key(row)
            if key in wanted or not touched or not touched.isdisjoint(kept):
                out.append(row[0])
                keys.add(key)
        else:
            place = queues.place(row)
            if place is None or place in kept:
                out.append(row[0])
    return DocumentsCut(out, keys)


@dataclass
class TreeIndexCut(Generic[OtherSlot, WorkloadSlot]):
    """What :meth:`TreeIndex.cut` keeps.

    Attributes:
        others: the slots of the kept documents that are not Workloads, in
            :meth:`TreeIndex.set_others`' order.
        workloads: the slots of the kept Workloads (never the one left out).
        extra_kept: whether the extra Workload document is kept.
        workload_keys: ``namespace/name`` of every kept Workload, the extra one included.
    """

    others: list[OtherSlot]
    workloads: set[WorkloadSlot]
    extra_kept: bool
    workload_keys: set[str]


@dataclass
class _IndexedWorkload:
    """A Workload of a :class:`TreeIndex`: its key, its raw links, and the trees they touch."""

    key: str
    links: _Links
    touched: frozenset[TreeId]


class TreeIndex(Generic[OtherSlot, WorkloadSlot]):
    """:func:`documents_of_trees` for one set of documents that changes a few at a time.

    Why: a caller that asks for the cut of a large, slowly changing set again and again (the
    controller's burst gate asks per preempted job, on its mirror of the cluster) would read
    every document on every question; most of them have not changed since the last one. The
    index keeps what the rule reads from each Workload (its links and the trees they touch),
    the Workloads of each tree, and the few that tie trees together, so a cut costs the kept
    trees' size, not the cluster's; a Workload change costs one document's read. A change of
    any other document (Cohorts, ClusterQueues, LocalQueues: a few hundred on a large cluster)
    rebuilds the trees and places every Workload again.

    The rule is :func:`documents_of_trees`'s own code (:class:`_Queues`), so for the documents
    given in :meth:`set_others`' order and the Workloads put, with ``without`` left out and
    ``extra`` added, :meth:`cut` keeps exactly the documents that function keeps. Workloads
    are named by an opaque ``slot`` (the caller's key), and their order is the caller's.
    """

    def __init__(self) -> None:
        self._queues = _Queues(())
        self._others: list[tuple[OtherSlot, TreeId | None]] = []
        self._workloads: dict[WorkloadSlot, _IndexedWorkload] = {}
        self._by_tree: dict[TreeId, set[WorkloadSlot]] = {}
        self._untouched: set[WorkloadSlot] = set()
        self._crossing: dict[WorkloadSlot, frozenset[TreeId]] = {}
        self._by_key: dict[str, set[WorkloadSlot]] = {}

    def set_others(self, documents: Iterable[tuple[OtherSlot, Mapping[str, Any]]]) -> None:
        """Make ``documents`` (slot and document of everything that is not a Workload, in the
        order the cut returns them) the index's; the trees are rebuilt and every Workload placed
        again.

        Raises:
            ValueError: a Workload among them (those go through :meth:`put_workload`).
        """
        slots: list[OtherSlot] = []
        rows: list[_Row] = []
        for other, doc in documents:
            slots.append(other)
            rows.append(_row(doc))
        if any(row[1] == "Workload" for row in rows):
            raise ValueError("TreeIndex.set_others: Workloads are put one at a time with put_workload")
        self._queues = _Queues(rows)
        self._others = [(other, self._queues.place(row)) for other, row in zip(slots, rows, strict=True)]
        self._by_tree.clear()
        self._untouched.clear()
        self._crossing.clear()
        for slot, entry in self._workloads.items():
            entry.touched = frozenset(self._queues.touched(entry.links))
            self._place(slot, entry)

    def put_workload(self, slot: WorkloadSlot, doc: Mapping[str, Any]) -> None:
        """Add the Workload ``doc`` under ``slot``, or replace the one there."""
        self.remove_workload(slot)
        row = _row(doc)
        links = _workload_links(row)
        entry = _IndexedWorkload(_row_key(row), links, frozenset(self._queues.touched(links)))
        self._workloads[slot] = entry
        self._by_key.setdefault(entry.key, set()).add(slot)
        self._place(slot, entry)

    def remove_workload(self, slot: WorkloadSlot) -> None:
        """Forget the Workload under ``slot`` (nothing when there is none)."""
        entry = self._workloads.pop(slot, None)
        if entry is None:
            return
        _discard(self._by_key, entry.key, slot)
        self._unplace(slot, entry)

    def _place(self, slot: WorkloadSlot, entry: _IndexedWorkload) -> None:
        if not entry.touched:
            self._untouched.add(slot)
            return
        for tree in entry.touched:
            self._by_tree.setdefault(tree, set()).add(slot)
        if len(entry.touched) > 1:
            self._crossing[slot] = entry.touched

    def _unplace(self, slot: WorkloadSlot, entry: _IndexedWorkload) -> None:
        self._untouched.discard(slot)
        self._crossing.pop(slot, None)
        for tree in entry.touched:
            _discard(self._by_tree, tree, slot)

    def cut(
        self, wanted: str, extra: Mapping[str, Any] | None = None, without: WorkloadSlot | None = None
    ) -> TreeIndexCut[OtherSlot, WorkloadSlot]:
        """The cut of :func:`documents_of_trees` for the Workload key ``wanted``, over the
        index's documents with the Workload under ``without`` left out and the Workload
        document ``extra`` added (a question about a Workload as it will be, not as it is)."""
        extra_entry = None
        if extra is not None:
            row = _row(extra)
            links = _workload_links(row)
            extra_entry = _IndexedWorkload(_row_key(row), links, frozenset(self._queues.touched(links)))
        ties: dict[TreeId, set[TreeId]] = {}
        for slot, touched in self._crossing.items():
            if slot != without:
                _tie(ties, set(touched))
        start = [
            tree for slot in self._by_key.get(wanted, ()) if slot != without for tree in self._workloads[slot].touched
        ]
        if extra_entry is not None:
            _tie(ties, set(extra_entry.touched))
            if extra_entry.key == wanted:
                start.extend(extra_entry.touched)
        kept = _linked_trees(start, ties)
        # The wanted Workloads are among these: each touches only kept trees, or none.
        slots = set(self._untouched)
        for tree in kept:
            slots |= self._by_tree.get(tree, set())
        slots.discard(without)
        keys = {self._workloads[slot].key for slot in slots}
        # As the function's rule: untouched, or touching a kept tree (a wanted one touches only kept trees).
        extra_kept = extra_entry is not None and (not extra_entry.touched or not extra_entry.touched.isdisjoint(kept))
        if extra_kept and extra_entry is not None:
            keys.add(extra_entry.key)
        others = [slot for slot, place in self._others if place is None or place in kept]
        return TreeIndexCut(others, slots, extra_kept, keys)


def _discard(index: dict[Any, set[WorkloadSlot]], key: Any, value: WorkloadSlot) -> None:
    members = index.get(key)
    if members is None:
        return
    members.discard(value)
    if not members:
        del index[key]


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

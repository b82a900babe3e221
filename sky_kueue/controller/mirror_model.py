"""The burst gate's Kueue model of a relaunch's cohort tree, kept between questions.

Why: :class:`~sky_kueue.controller.safety_probe.MirrorRelaunchWait` answers "how long would
this relaunch wait on-prem?" on the controller's mirror. Built from nothing, each answer reads
every mirrored document (to cut them to the relaunch's cohort tree), joins the pods' run times
onto the tree's Workloads and parses them into the Kueue model; on a 100-ClusterQueue /
11,000-Workload cluster that was 45 % of a 0.29-s answer (130 ms; the rest the ETA simulation,
benchmarks/README.md "predictor"), and almost none of it depends on the question: between two
questions a few documents change, not the cluster. :class:`MirrorModelCache` keeps it, and
builds a question's state in about 7 ms there:

* a :class:`~sky_kueue.kueue.cohort_trees.TreeIndex` of the mirrored documents (which tree
  each Workload touches, the Workloads of each tree), so a cut costs the tree, not the cluster;
* each document's parse (:func:`~sky_kueue.kueue.parse.parse_object`, and for a Workload
  :func:`~sky_kueue.kueue.parse.parse_workload` after its pods' run-time annotations are joined
  on), so only documents written since the last question are parsed again;
* per pod group, the run-time annotations its pods carry.

Invalidation is by the store's own journal of writes (:meth:`MirrorStore.changes_since`): every
object written since the cache last looked (created, modified, deleted, relisted) is read again
and what was derived from it dropped; a parsed Workload is kept with the annotations joined
onto it and used only while its pods still give the same, in the same order; a change of any
WorkloadPriorityClass drops every parsed Workload (a missing ``spec.priority`` comes from its
class); when the journal does not reach back, everything is rebuilt. The state handed out is
new on every question (the model's objects are frozen; the dictionaries holding them are not
shared), and it is exactly the state the uncached path
(:func:`~sky_kueue.controller.safety_probe.whole_store_state`) parses: the
same documents, in the same order, through the same functions, the same first error raised.
Documents the index cannot place the way the uncached path orders them (a Workload filed under
another key than its namespace and name, an object of another kind than its table's) make the
cache decline (None) and the caller compute the uncached way; so does a store that has not
listed Namespaces yet (the uncached path makes them up from the other objects' namespaces).

What it costs: the first question reads the whole mirror (0.6 s with its answer on that
cluster, twice an uncached one); memory, measured there, about 16 MiB for the index, the
documents' references and the pods' annotations, and 3 MiB per cohort tree parsed (46 MiB
with all ten), the mirror's own size again at most. A parsed object goes when its document
is written or deleted.

Pure over the in-memory store; the Kueue model (:mod:`sky_kueue.kueue`) knows nothing of it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import TreeIndex
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.parse import (
    ParsedObject,
    add_object,
    add_workload,
    check_cohort_depth,
    parse_object,
    parse_workload,
)
from sky_kueue.mirror.identity import pod_group_of
from sky_kueue.mirror.kinds import MODEL_KINDS, KindName
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.skypilot.runtime_annotations import pod_runtime_annotations, with_pod_runtimes

#: The model's kinds in the order the mirror exports them (:func:`sky_kueue.mirror.export.documents`).
_MODEL_KINDS: tuple[KindName, ...] = tuple(kind.name for kind in MODEL_KINDS)
#: What the cache follows: the model's kinds, and pods for their run-time annotations.
_FOLLOWED_KINDS: frozenset[KindName] = frozenset((*_MODEL_KINDS, KindName.POD))
#: A pod group's Workload as :func:`with_pod_runtimes` matches it: (namespace, name).
_JoinKey = tuple[str, str]
Doc = Mapping[str, Any]


def export_key(doc: Doc) -> str:
    """``namespace/name`` of a document, as the relaunch wait finds the relaunch's Workload."""
    meta = doc.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_workload_key(pod: Doc) -> str | None:
    """``namespace/name`` of the pod group's Workload (named after the group), None without one."""
    group = pod_group_of(pod)
    if group is None:
        return None
    return f"{(pod.get('metadata') or {}).get('namespace', '')}/{group}"


def _join_key(doc: Doc) -> _JoinKey:
    """The (namespace, name) :func:`with_pod_runtimes` looks a Workload's pods up by."""
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return str(meta.get("namespace", "")), str(meta.get("name", ""))


class _Failed:
    """A parse that raised :class:`ModelError`, kept to be raised again, as a new exception."""

    __slots__ = ("args",)

    def __init__(self, err: ModelError) -> None:
        self.args = err.args

    def raise_again(self) -> None:
        raise ModelError(*self.args)


def _first_reading(doc: Doc) -> ParsedObject | _Failed:
    try:
        return parse_object(doc)
    except ModelError as err:
        return _Failed(err)


@dataclass
class _ParsedWorkload:
    """A Workload document's parse, as of the run-time annotations joined onto it.

    Attributes:
        carried: the annotations its pods gave when it was joined and parsed.
        doc: the document parsed (the mirrored one, or a copy with ``carried`` joined on).
        first: :func:`parse_object`'s reading of ``doc`` (or its error).
        workload: the parsed Workload (or its error); None until the first state needs it.
    """

    carried: dict[str, str]
    doc: Doc
    first: ParsedObject | _Failed
    workload: o.Workload | _Failed | None = None


@dataclass
class _PodGroup:
    """The pods of one pod group that carry run-time annotations (by store key, in key order),
    the Workload key each pod names, and the annotations they give together (None: not yet)."""

    pods: dict[str, Doc]
    workload_keys: dict[str, str | None]
    carried: dict[str, str] | None = None


class MirrorModelCache:
    """The Kueue model of a mirror store's cohort trees, for one question after another.

    Thread-safe: one lock serialises the reads of the cache (they are short); the caller
    simulates on the state handed out without it.
    """

    def __init__(self, store: MirrorStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._generation: int | None = None
        self._docs: dict[KindName, dict[str, Doc]] = {kind: {} for kind in _MODEL_KINDS}
        self._index: TreeIndex[tuple[KindName, str], str] = TreeIndex()
        #: Objects the index cannot place as the uncached path orders them (the cache declines).
        self._irregular: set[tuple[KindName, str]] = set()
        self._others: dict[tuple[KindName, str], ParsedObject | _Failed] = {}
        self._workloads: dict[str, _ParsedWorkload] = {}
        self._groups: dict[_JoinKey, _PodGroup] = {}
        self._group_of_pod: dict[str, _JoinKey] = {}

    # ---- following the store ------------------------------------------------------------

    def _sync(self) -> None:
        """Read what the store wrote since the last question and drop what it invalidates."""
        changes = self._store.changes_since(self._generation, _FOLLOWED_KINDS)
        if changes.everything:
            self._reset()
        others_changed = classes_changed = False
        for (kind, key), obj in changes.objects.items():
            if kind is KindName.POD:
                self._pod_written(key, obj)
                continue
            table = self._docs[kind]
            if obj is None:
                table.pop(key, None)
            else:
                table[key] = obj
            if obj is None or _regular(kind, key, obj):
                self._irregular.discard((kind, key))
            else:
                self._irregular.add((kind, key))
            if kind is KindName.WORKLOAD:
                self._workloads.pop(key, None)
                if obj is None or obj.get("kind") != "Workload":
                    self._index.remove_workload(key)
                else:
                    self._index.put_workload(key, obj)
            else:
                self._others.pop((kind, key), None)
                others_changed = True
                classes_changed = classes_changed or kind is KindName.WORKLOAD_PRIORITY_CLASS
        if others_changed:
            self._index.set_others(
                ((kind, key), self._docs[kind][key])
                for kind in _MODEL_KINDS
                if kind is not KindName.WORKLOAD
                for key in sorted(self._docs[kind])
                if self._docs[kind][key].get("kind") != "Workload"
            )
        if classes_changed:
            self._workloads.clear()
        self._generation = changes.generation

    def _reset(self) -> None:
        for table in self._docs.values():
            table.clear()
        self._index = TreeIndex()
        self._irregular.clear()
        self._others.clear()
        self._workloads.clear()
        self._groups.clear()
        self._group_of_pod.clear()

    def _pod_written(self, key: str, pod: Doc | None) -> None:
        """Re-file one pod: out of the group it was in, into the one it names now (if it
        carries run-time annotations)."""
        old = self._group_of_pod.pop(key, None)
        if old is not None:
            group = self._groups[old]
            group.pods.pop(key, None)
            group.workload_keys.pop(key, None)
            group.carried = None
            if not group.pods:
                del self._groups[old]
        if pod is None:
            return
        carried = pod_runtime_annotations([pod])
        if not carried:
            return
        (join,) = carried
        group = self._groups.setdefault(join, _PodGroup({}, {}))
        group.pods[key] = pod
        group.pods = dict(sorted(group.pods.items()))
        group.workload_keys[key] = pod_workload_key(pod)
        group.carried = None
        self._group_of_pod[key] = join

    # ---- the state of one question ------------------------------------------------------

    def relaunch_state(
        self, key: str, relaunch: Callable[[Doc | None], Doc | None], now: datetime
    ) -> o.ClusterState | None:
        """The cluster state of the relaunch's cohort tree, as the uncached path parses it.

        Args:
            key: the relaunch's Workload (``namespace/name``).
            relaunch: given the mirrored Workload ``key`` (None: not mirrored), the document
                that enters Kueue in its place, or after every other when it was not mirrored
                (None: none).
            now: the state's fixed ``now``.

        Returns:
            The state; None when the cache cannot build it exactly this way (the caller builds
            it from the whole store instead).

        Raises:
            ModelError: a document of the tree the model cannot read (the first one the
                uncached path would stop at).
        """
        with self._lock:
            self._sync()
            if self._irregular or not self._store.is_synced(KindName.NAMESPACE):
                return None  # unlisted Namespaces: the uncached path makes them up (export.documents)
            current = self._docs[KindName.WORKLOAD].get(key)
            extra = relaunch(current)
            if extra is not None and extra.get("kind") != "Workload":
                return None  # the uncached path files it with the other kinds
            replaced = key if current is not None else None
            cut = self._index.cut(key, extra, replaced)
            order = sorted(cut.workloads | ({replaced} if replaced is not None and cut.extra_kept else set()))
            state = o.ClusterState()
            for other in cut.others:
                parsed = self._others.get(other)
                if parsed is None:
                    kind, name = other
                    parsed = self._others[other] = _first_reading(self._docs[kind][name])
                if isinstance(parsed, _Failed):
                    parsed.raise_again()
                else:
                    add_object(state, parsed)
            readings: list[_ParsedWorkload] = []
            for slot in order:
                readings.append(
                    self._fresh(extra, cut.workload_keys)
                    if slot == replaced and extra is not None
                    else self._parsed_workload(slot, cut.workload_keys)
                )
            if replaced is None and cut.extra_kept and extra is not None:
                readings.append(self._fresh(extra, cut.workload_keys))
            for reading in readings:
                if isinstance(reading.first, _Failed):
                    reading.first.raise_again()
            check_cohort_depth(state)
            for reading in readings:
                workload = reading.workload
                if workload is None:
                    try:
                        workload = reading.workload = parse_workload(reading.doc, state.priority_classes)
                    except ModelError as err:
                        workload = reading.workload = _Failed(err)
                if isinstance(workload, _Failed):
                    workload.raise_again()
                else:
                    add_workload(state, workload, reading.doc)
            state.now = now
            return state

    def _carried(self, doc: Doc, cut_keys: set[str]) -> tuple[dict[str, str], list[Doc]]:
        """The run-time annotations the uncached path joins onto the Workload ``doc``: those of
        its pod group's pods whose Workload is in the cut; and those pods, in key order."""
        join = _join_key(doc)
        group = self._groups.get(join)
        if group is None:
            return {}, []
        if all(workload_key in cut_keys for workload_key in group.workload_keys.values()):
            if group.carried is None:
                group.carried = pod_runtime_annotations(group.pods.values()).get(join, {})
            return group.carried, list(group.pods.values())
        pods = [pod for key, pod in group.pods.items() if group.workload_keys[key] in cut_keys]
        return pod_runtime_annotations(pods).get(join, {}), pods

    def _parsed_workload(self, key: str, cut_keys: set[str]) -> _ParsedWorkload:
        """The mirrored Workload ``key``'s parse, joined with its pods' annotations as they are."""
        doc = self._docs[KindName.WORKLOAD][key]
        carried, pods = self._carried(doc, cut_keys)
        kept = self._workloads.get(key)
        # In order too: the join appends them in this order onto the Workload's annotations.
        if kept is not None and list(kept.carried.items()) == list(carried.items()):
            return kept
        joined = with_pod_runtimes([doc], pods)[0] if pods else doc
        reading = self._workloads[key] = _ParsedWorkload(carried, joined, _first_reading(joined))
        return reading

    def _fresh(self, doc: Doc, cut_keys: set[str]) -> _ParsedWorkload:
        """A question's own Workload document, joined and read anew (never kept)."""
        carried, pods = self._carried(doc, cut_keys)
        joined = with_pod_runtimes([doc], pods)[0] if pods else doc
        return _ParsedWorkload(carried, joined, _first_reading(joined))


def _regular(kind: KindName, key: str, obj: Doc) -> bool:
    """Whether the index places ``obj`` (filed under ``kind``/``key``) where the uncached
    path's documents have it: of its table's kind, and a Workload under its own
    ``namespace/name`` (the relaunch wait finds its Workload by that)."""
    if obj.get("kind") != kind.value:
        return False
    return kind is not KindName.WORKLOAD or export_key(obj) == key

"""The mirror's in-memory copy of a cluster's Kueue state, indexed, with a transition stream.

Why one lock for everything: a reader asking "which workloads are in ClusterQueue X, and who
are they in SkyPilot's terms" must see objects, indexes and identities of one moment, and
subscribers must receive transitions in the order the store changed. Every write (a watch
event or a relist) therefore updates objects and indexes, derives the Workload transitions
and hands them to the :class:`~sky_kueue.mirror.subscriptions.TransitionHub` while holding the
lock; the hub only appends to per-subscriber queues, so a write costs microseconds and a slow
subscriber never slows the reflectors.

Indexes (all kept in step with writes):

* Workloads by UID (to resolve a preemptor from the UID in a preemption message), namespace,
  LocalQueue (``namespace/queueName``) and by the ClusterQueue of ``status.admission``;
  queries by ClusterQueue (admitted there, or queued through a LocalQueue that points there)
  and by cohort compose these at read time, so a LocalQueue or ClusterQueue that changes
  never leaves a stale index entry.
* SkyPilot identity (:mod:`sky_kueue.mirror.identity`) by pod group, managed-job id and
  name, cluster name and user. The identity of a group outlives its pods until its Workload
  is deleted: a preempted group's pods are gone before the Workload finishes.

Deleted Workloads leave their final state behind for a while (:meth:`MirrorStore.deleted_workload`,
by UID): a consumer that runs behind the store (the controller's work queue) may still need the
document of a Workload the store no longer holds, e.g. to project the relaunch of a preempted
pod group that was collected within a second. The record is bounded in count
(:data:`DELETED_WORKLOADS_KEPT`) and age (:data:`DELETED_WORKLOAD_TTL_SECONDS`).

Consumers that keep state derived from the objects (the controller's cache of the Kueue model,
:mod:`sky_kueue.controller.mirror_model`) ask which objects were written since they last looked
(:meth:`MirrorStore.changes_since`): every write is journaled by kind and key with the store
generation it made, a bounded number of them (:data:`CHANGE_JOURNAL_ENTRIES`); a consumer that
fell further behind is handed every object instead.

Objects are stored as the API returned them (minus ``managedFields``; pods trimmed to what
identity needs) and must be treated as read-only by callers.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sky_kueue.mirror import identity as ident
from sky_kueue.mirror import transitions as tr
from sky_kueue.mirror.clock import Clock, SystemClock
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.server_state import ResetReason
from sky_kueue.mirror.subscriptions import Subscription, TransitionHub
from sky_kueue.mirror.transitions import ChangeSource, Transition, TransitionKind

Obj = dict[str, Any]

ADDED = "ADDED"
MODIFIED = "MODIFIED"
DELETED = "DELETED"

#: How many deleted Workloads' final states the store keeps (the oldest deletion goes first):
#: room for a consumer to fall hundreds of collected pod groups behind (a reclaim storm), while
#: at a few KB per Workload document the record stays within a few megabytes.
DELETED_WORKLOADS_KEPT = 512
#: How long, from when the store saw the deletion, its final state is kept. A consumer still
#: behind the store after half an hour has bigger problems than one lost document.
DELETED_WORKLOAD_TTL_SECONDS = 1800.0
#: How many object writes (kind and key) the store remembers for :meth:`MirrorStore.changes_since`.
#: A consumer asks once per question it answers, so between two asks it sees the watch events
#: of seconds, or of a reconcile backlog: far fewer on any cluster. One that falls further
#: behind (a relist of every Workload, a long quiet spell for the consumer on a busy cluster)
#: is handed every object and rebuilds, so this bounds memory (about 100 bytes an entry,
#: under 2 MB), never correctness.
CHANGE_JOURNAL_ENTRIES = 16_384


@dataclass(frozen=True)
class StoreChanges:
    """The answer of :meth:`MirrorStore.changes_since`, read under the store's lock.

    Attributes:
        generation: the store's generation the answer is of (ask from it next time).
        objects: (kind, key) -> the object now (None: deleted) of every object of the asked
            kinds written after the asked generation; with ``everything``, every object of the
            asked kinds the store holds.
        everything: the journal does not reach back to the asked generation (or none was
            given): ``objects`` is the whole store, and what a consumer derived before is stale.
    """

    generation: int
    objects: dict[tuple[KindName, str], Obj | None]
    everything: bool


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def normalize(kind: KindName, api_version: str, obj: Mapping[str, Any]) -> Obj:
    """The form the store keeps: ``kind``/``apiVersion`` set (list items lack them), no
    ``managedFields``, pods trimmed."""
    if kind is KindName.POD:
        trimmed = ident.trim_pod(obj)
        trimmed["apiVersion"] = api_version
        return trimmed
    out = dict(obj)
    out["kind"] = kind.value
    out["apiVersion"] = api_version
    meta = out.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta = dict(meta)
        del meta["managedFields"]
        out["metadata"] = meta
    return out


def cohort_of(cluster_queue: Mapping[str, Any]) -> str | None:
    """A ClusterQueue's cohort (``cohortName`` in v1beta2, ``cohort`` in v1beta1)."""
    spec = _spec(cluster_queue)
    value = spec.get("cohortName") or spec.get("cohort")
    return str(value) if value else None


def admitted_cluster_queue(workload: Mapping[str, Any]) -> str | None:
    status = workload.get("status")
    admission = status.get("admission") if isinstance(status, dict) else None
    cq = admission.get("clusterQueue") if isinstance(admission, dict) else None
    return str(cq) if cq else None


class MirrorStore:
    """Objects of every mirrored kind, indexes, and the Workload transition stream."""

    def __init__(
        self,
        hub: TransitionHub | None = None,
        clock: Clock | None = None,
        *,
        deleted_kept: int = DELETED_WORKLOADS_KEPT,
        deleted_ttl_seconds: float = DELETED_WORKLOAD_TTL_SECONDS,
        change_journal_entries: int = CHANGE_JOURNAL_ENTRIES,
    ) -> None:
        if deleted_kept < 0 or not deleted_ttl_seconds >= 0:
            raise ValueError(
                f"deleted_kept and deleted_ttl_seconds must be >= 0, got {deleted_kept} and {deleted_ttl_seconds}"
            )
        if change_journal_entries < 1:
            raise ValueError(f"change_journal_entries must be >= 1, got {change_journal_entries}")
        self.hub = hub or TransitionHub()
        self._clock: Clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._generation = 0
        self._sequence = 0
        self._objects: dict[KindName, dict[str, Obj]] = {kind: {} for kind in KindName}
        self._synced: set[KindName] = set()
        #: Kinds mirrored one namespace at a time (:meth:`expect_namespaces`): the namespaces
        #: expected, and those listed so far; the kind is synced once every one is.
        self._expected_namespaces: dict[KindName, frozenset[str]] = {}
        self._synced_namespaces: dict[KindName, set[str]] = collections.defaultdict(set)
        self._resource_versions: dict[KindName, str] = {}
        self._cluster_identity: str | None = None
        #: Per kind, the last replayed state of each object while a resumed watch replays.
        self._replayed_states: dict[KindName, dict[str, Obj]] = {}
        # Workload indexes
        self._wl_by_uid: dict[str, str] = {}
        self._wl_by_namespace: dict[str, set[str]] = collections.defaultdict(set)
        self._wl_by_local_queue: dict[str, set[str]] = collections.defaultdict(set)
        self._wl_by_admitted_cq: dict[str, set[str]] = collections.defaultdict(set)
        # SkyPilot identity
        self._pods_by_group: dict[str, set[str]] = collections.defaultdict(set)
        self._identity: dict[str, ident.SkyPilotIdentity] = {}
        self._groups_by_fact: dict[tuple[str, str], set[str]] = collections.defaultdict(set)
        # Deleted Workloads: UID -> (when the store saw the deletion, final state), oldest first.
        self._deleted: collections.OrderedDict[str, tuple[datetime, Obj]] = collections.OrderedDict()
        self._deleted_kept = deleted_kept
        self._deleted_ttl = timedelta(seconds=deleted_ttl_seconds)
        # Writes, oldest first: (the generation the write's commit makes, kind, key). Every write
        # of a generation above _journal_floor is in it (the oldest go first, whole or in part).
        self._journal: collections.deque[tuple[int, KindName, str]] = collections.deque()
        self._journal_entries = change_journal_entries
        self._journal_floor = 0

    # ---- writes (reflectors) ------------------------------------------------------------

    def expect_namespaces(self, kind: KindName, namespaces: Iterable[str]) -> None:
        """``kind`` is listed one namespace at a time (one reflector each, :meth:`replace` with
        ``namespace``): it counts as synced once each of ``namespaces`` has been listed."""
        with self._lock:
            self._expected_namespaces[kind] = frozenset(namespaces)

    def replace(
        self,
        kind: KindName,
        items: Iterable[Obj],
        resource_version: str,
        *,
        gap: bool = False,
        resuming: bool = False,
        reset: ResetReason | None = None,
        cluster: str | None = None,
        namespace: str | None = None,
    ) -> None:
        """Make ``kind`` exactly ``items`` (a list result): objects that vanished are deleted,
        changed ones updated; transitions are derived with source ``list`` (``relist`` with
        ``gap``: a relist after changes were lost), then a ``synced`` marker.

        Args:
            gap: the list follows a lost stretch of the watch (410 Gone, a restarted server).
            resuming: a watch resumed from an older version replays changes next
                (:meth:`replayed`); said by the ``synced`` marker.
            reset: the server's state went back (:mod:`.server_state`); said by the marker.
            cluster: the cluster identity the list came from (None: unknown); kept as
                :attr:`cluster_identity`.
            namespace: the list is of this namespace only: objects of other namespaces stay
                (each is another reflector's; see :meth:`expect_namespaces`).

        An object is unchanged only with the same UID and resourceVersion: after a state that
        went back, another object may carry a version number the store already holds.
        """
        source = ChangeSource.RELIST if gap else ChangeSource.LIST
        with self._lock:
            table = self._objects[kind]
            incoming = {object_key(item): item for item in items}
            out: list[Transition] = []
            gone = [
                k
                for k, obj in table.items()
                if k not in incoming and (namespace is None or _meta(obj).get("namespace") == namespace)
            ]
            for key in gone:
                out.extend(self._remove(kind, key, None, source))
            for key, item in incoming.items():
                old = table.get(key)
                if old is not None and all(_meta(old).get(f) == _meta(item).get(f) for f in ("resourceVersion", "uid")):
                    continue
                out.extend(self._upsert(kind, key, item, source))
            if namespace is None:
                self._synced.add(kind)
            else:
                listed = self._synced_namespaces[kind]
                listed.add(namespace)
                if listed >= self._expected_namespaces.get(kind, frozenset()):
                    self._synced.add(kind)
            self._resource_versions[kind] = resource_version
            self._replayed_states.pop(kind, None)
            if cluster is not None:
                self._cluster_identity = cluster
            out.extend(
                self._marker(TransitionKind.SYNCED, kind, resource_version, source, resuming=resuming, reset=reset)
            )
            self._commit(out)

    def apply(self, kind: KindName, event_type: str, obj: Obj) -> None:
        """Apply one watch event (``ADDED``, ``MODIFIED``, ``DELETED``)."""
        with self._lock:
            key = object_key(obj)
            if event_type == DELETED:
                out = self._remove(kind, key, obj, ChangeSource.WATCH)
            else:
                out = self._upsert(kind, key, obj, ChangeSource.WATCH)
            rv = _meta(obj).get("resourceVersion")
            if rv:
                self._resource_versions[kind] = str(rv)
            self._commit(out)

    def replayed(self, kind: KindName, event_type: str, obj: Obj) -> None:
        """An event of a resumed watch, at or before the version the store was listed at.

        The store keeps its newer state; the event becomes transitions with source
        ``resumed``, derived from the previous replayed state of the same object, so a
        consumer that persisted a resourceVersion sees every change it missed, including
        objects created and deleted while it was down. Only Workloads are replayed.
        """
        if kind is not KindName.WORKLOAD:
            return
        with self._lock:
            key = object_key(obj)
            states = self._replayed_states.setdefault(kind, {})
            previous = states.get(key)
            if event_type == DELETED:
                states.pop(key, None)
                self._remember_deleted(obj)
                changes = [c for c in tr.derive(previous, obj) if c.kind is not TransitionKind.UPDATED]
                changes.append(tr.Change(TransitionKind.DELETED))
            else:
                states[key] = obj
                changes = tr.derive(previous, obj) or [tr.Change(TransitionKind.UPDATED)]
            self._commit(self._transitions(key, previous, obj, changes, ChangeSource.RESUMED))

    def caught_up(self, kind: KindName, resource_version: str) -> None:
        """The resumed watch of ``kind`` passed the list's version: what follows is live."""
        with self._lock:
            self._replayed_states.pop(kind, None)
            self._commit(self._marker(TransitionKind.CAUGHT_UP, kind, resource_version, ChangeSource.WATCH))

    def bookmark(self, kind: KindName, resource_version: str) -> None:
        """Record the resourceVersion of a BOOKMARK (no object changed)."""
        with self._lock:
            self._resource_versions[kind] = resource_version
            markers = self._marker(TransitionKind.BOOKMARK, kind, resource_version, ChangeSource.WATCH)
            if markers:
                self._commit(markers)

    def _marker(
        self, marker: TransitionKind, kind: KindName, resource_version: str, source: ChangeSource, **fields: Any
    ) -> list[Transition]:
        if not self.hub.has_subscribers:
            return []
        self._sequence += 1
        return [
            Transition(
                sequence=self._sequence,
                kind=marker,
                key="",
                uid="",
                workload={},
                observed_at=self._clock.now(),
                source=source,
                resource_version=resource_version,
                object_kind=kind,
                **fields,
            )
        ]

    def _pod_transition(self, pod: Obj, deleted: bool, source: ChangeSource) -> list[Transition]:
        group = ident.pod_group_of(pod)
        if not group or not self.hub.has_subscribers:
            return []
        key = f"{_meta(pod).get('namespace', '')}/{group}"
        self._sequence += 1
        return [
            Transition(
                sequence=self._sequence,
                kind=TransitionKind.POD_DELETED if deleted else TransitionKind.POD_CHANGED,
                key=key,
                uid=str(_meta(pod).get("uid", "")),
                workload=self._objects[KindName.WORKLOAD].get(key) or {},
                observed_at=self._clock.now(),
                source=source,
                identity=self._identity.get(key),
                resource_version=str(_meta(pod).get("resourceVersion", "")),
                object_kind=KindName.POD,
                pod=pod,
            )
        ]

    def _commit(self, transitions: list[Transition]) -> None:
        self._generation += 1
        self.hub.publish(transitions)
        self._changed.notify_all()

    def _journal_write(self, kind: KindName, key: str) -> None:
        """Journal a write of ``kind``/``key`` (under the lock, before its commit)."""
        if len(self._journal) >= self._journal_entries:
            self._journal_floor = self._journal.popleft()[0]
        self._journal.append((self._generation + 1, kind, key))

    def _upsert(self, kind: KindName, key: str, obj: Obj, source: ChangeSource) -> list[Transition]:
        table = self._objects[kind]
        old = table.get(key)
        table[key] = obj
        self._journal_write(kind, key)
        if kind is KindName.WORKLOAD:
            if old is not None:
                self._unindex_workload(key, old)
            self._index_workload(key, obj)
            self._refresh_identity(key)
            return self._transitions(key, old, obj, tr.derive(old, obj), source)
        if kind is KindName.POD:
            if old is not None:
                self._unindex_pod(key, old)
            self._index_pod(key, obj)
            return self._pod_transition(obj, False, source)
        return []

    def _remove(self, kind: KindName, key: str, last: Obj | None, source: ChangeSource) -> list[Transition]:
        table = self._objects[kind]
        old = table.pop(key, None)
        if old is None:
            return []
        self._journal_write(kind, key)
        final = last if last is not None else old
        if kind is KindName.WORKLOAD:
            self._unindex_workload(key, old)
            self._remember_deleted(final)
            changes = [*tr.derive(old, final), tr.Change(TransitionKind.DELETED)]
            changes = [c for c in changes if c.kind is not TransitionKind.UPDATED]
            out = self._transitions(key, old, final, changes, source)
            self._refresh_identity(key)
            return out
        if kind is KindName.POD:
            self._unindex_pod(key, old)
            return self._pod_transition(final, True, source)
        return []

    def _remember_deleted(self, final: Obj) -> None:
        """Keep ``final``, a deleted Workload's last state, within the bounds (under the lock)."""
        uid = _meta(final).get("uid")
        if not uid or self._deleted_kept == 0:
            return
        now = self._clock.now()
        self._deleted.pop(str(uid), None)
        self._deleted[str(uid)] = (now, final)
        while self._deleted:
            seen, _ = next(iter(self._deleted.values()))
            if len(self._deleted) <= self._deleted_kept and now - seen <= self._deleted_ttl:
                break
            self._deleted.popitem(last=False)

    # ---- transitions ----------------------------------------------------------------------

    def _transitions(
        self, key: str, old: Obj | None, obj: Obj, changes: list[tr.Change], source: ChangeSource
    ) -> list[Transition]:
        if not changes or (source is not ChangeSource.REPLAY and not self.hub.has_subscribers):
            return []  # nobody listens: a late subscriber asks for a replay of the state instead
        meta = _meta(obj)
        now = self._clock.now()
        identity = self._identity.get(key)
        cq = self._cluster_queue_of(obj)
        preempted = tr.is_preempted(obj)
        out = []
        for change in changes:
            self._sequence += 1
            out.append(
                Transition(
                    sequence=self._sequence,
                    kind=change.kind,
                    key=key,
                    uid=str(meta.get("uid", "")),
                    workload=obj,
                    observed_at=now,
                    source=source,
                    reason=change.reason,
                    message=change.message,
                    preemptor=self._preemptor(change) if change.kind is TransitionKind.PREEMPTED else None,
                    preempted=preempted,
                    identity=identity,
                    cluster_queue=cq,
                    resource_version=str(meta.get("resourceVersion", "")),
                )
            )
        return out

    def _preemptor(self, change: tr.Change) -> tr.Preemptor | None:
        if change.preemptor_uid is None:
            return None
        key = self._wl_by_uid.get(change.preemptor_uid)
        cq = change.preemptor_cluster_queue
        if key is not None and cq is None:
            cq = self._cluster_queue_of(self._objects[KindName.WORKLOAD][key])
        return tr.Preemptor(uid=change.preemptor_uid, job_uid=change.preemptor_job_uid, key=key, cluster_queue=cq)

    def replay(self, kinds: Iterable[TransitionKind] | None = None) -> list[Transition]:
        """Transitions that bring an empty observer to the current state (source ``replay``)."""
        wanted = None if kinds is None else frozenset(kinds)
        with self._lock:
            out = []
            for key, obj in sorted(self._objects[KindName.WORKLOAD].items()):
                for t in self._transitions(key, None, obj, tr.derive(None, obj), ChangeSource.REPLAY):
                    if wanted is None or t.kind in wanted:
                        out.append(t)
            return out

    def subscribe(
        self,
        kinds: Iterable[TransitionKind] | None = None,
        *,
        replay: bool = False,
        callback: Callable[[Transition], None] | None = None,
        sink: Callable[[Transition], None] | None = None,
    ) -> Subscription:
        """Subscribe to transitions from now on (with ``replay``, first the current state;
        ``callback`` and ``sink``: see :mod:`sky_kueue.mirror.subscriptions`).

        The replay is built and queued under the store lock, so no live transition can
        precede or be lost relative to it.
        """
        kind_set = None if kinds is None else frozenset(kinds)
        with self._lock:
            backlog = self.replay(kind_set) if replay else []
            return self.hub.subscribe(kind_set, callback=callback, backlog=backlog, sink=sink)

    # ---- Workload indexes -----------------------------------------------------------------

    def _index_workload(self, key: str, obj: Obj) -> None:
        meta = _meta(obj)
        uid = meta.get("uid")
        if uid:
            self._wl_by_uid[str(uid)] = key
        namespace = str(meta.get("namespace", ""))
        self._wl_by_namespace[namespace].add(key)
        queue = _spec(obj).get("queueName")
        if queue:
            self._wl_by_local_queue[f"{namespace}/{queue}"].add(key)
        cq = admitted_cluster_queue(obj)
        if cq:
            self._wl_by_admitted_cq[cq].add(key)

    def _unindex_workload(self, key: str, obj: Obj) -> None:
        meta = _meta(obj)
        uid = meta.get("uid")
        if uid and self._wl_by_uid.get(str(uid)) == key:
            del self._wl_by_uid[str(uid)]
        namespace = str(meta.get("namespace", ""))
        _discard(self._wl_by_namespace, namespace, key)
        queue = _spec(obj).get("queueName")
        if queue:
            _discard(self._wl_by_local_queue, f"{namespace}/{queue}", key)
        cq = admitted_cluster_queue(obj)
        if cq:
            _discard(self._wl_by_admitted_cq, cq, key)

    def _cluster_queue_of(self, workload: Mapping[str, Any]) -> str | None:
        cq = admitted_cluster_queue(workload)
        if cq:
            return cq
        meta = _meta(workload)
        queue = _spec(workload).get("queueName")
        lq = self._objects[KindName.LOCAL_QUEUE].get(f"{meta.get('namespace')}/{queue}")
        target = _spec(lq).get("clusterQueue") if lq is not None else None
        return str(target) if target else None

    # ---- SkyPilot identity ----------------------------------------------------------------

    def _index_pod(self, key: str, pod: Obj) -> None:
        group = ident.pod_group_of(pod)
        if group:
            group_key = f"{_meta(pod).get('namespace', '')}/{group}"
            self._pods_by_group[group_key].add(key)
            self._refresh_identity(group_key)

    def _unindex_pod(self, key: str, pod: Obj) -> None:
        group = ident.pod_group_of(pod)
        if group:
            group_key = f"{_meta(pod).get('namespace', '')}/{group}"
            _discard(self._pods_by_group, group_key, key)
            self._refresh_identity(group_key)

    def _refresh_identity(self, group_key: str) -> None:
        """Recompute the identity of one group (= one Workload key) from its pods, else from
        its Workload; keep the last pod-derived one while the Workload exists."""
        pods = [self._objects[KindName.POD][k] for k in sorted(self._pods_by_group.get(group_key, ()))]
        workload = self._objects[KindName.WORKLOAD].get(group_key)
        namespace, _, name = group_key.partition("/")
        new: ident.SkyPilotIdentity | None
        if pods:
            new = ident.identity_from_pods(namespace, name, pods)
        elif workload is not None:
            new = self._identity.get(group_key) or ident.identity_from_workload(workload)
        else:
            new = None
        old = self._identity.get(group_key)
        if old == new:
            return
        if old is not None:
            for fact in _facts(old):
                _discard(self._groups_by_fact, fact, group_key)
        if new is None:
            self._identity.pop(group_key, None)
            return
        self._identity[group_key] = new
        for fact in _facts(new):
            self._groups_by_fact[fact].add(group_key)

    # ---- reads ------------------------------------------------------------------------------

    @property
    def generation(self) -> int:
        """Increases with every write."""
        with self._lock:
            return self._generation

    def changes_since(self, generation: int | None, kinds: Collection[KindName]) -> StoreChanges:
        """The objects of ``kinds`` written after ``generation`` (a :attr:`generation` read
        earlier, or a previous answer's), as they are now, and the generation now.

        Every write in between is there: an object written and written back, or created and
        deleted, is there too (as it is now). When the journal does not reach back that far
        (more than :data:`CHANGE_JOURNAL_ENTRIES` writes since), or ``generation`` is None, the
        answer is every object of ``kinds`` (``everything``).
        """
        with self._lock:
            if generation is None or generation < self._journal_floor:
                objects: dict[tuple[KindName, str], Obj | None] = {
                    (kind, key): obj for kind in kinds for key, obj in self._objects[kind].items()
                }
                return StoreChanges(self._generation, objects, everything=True)
            objects = {}
            for written, kind, key in reversed(self._journal):
                if written <= generation:
                    break
                if kind in kinds and (kind, key) not in objects:
                    objects[kind, key] = self._objects[kind].get(key)
            return StoreChanges(self._generation, objects, everything=False)

    def is_synced(self, kind: KindName, namespace: str | None = None) -> bool:
        """Whether ``kind`` was listed (every expected namespace of it), or with ``namespace``,
        whether that namespace's list of it was."""
        with self._lock:
            listed = self._synced_namespaces.get(kind)
            if namespace is None or not listed:  # a list of every namespace covers each
                return kind in self._synced
            return namespace in listed

    @property
    def cluster_identity(self) -> str | None:
        """The identity of the cluster the newest list came from (None: unknown; see
        :mod:`.server_state`)."""
        with self._lock:
            return self._cluster_identity

    def resource_version(self, kind: KindName) -> str | None:
        """The last resourceVersion seen for ``kind`` (list, event or bookmark)."""
        with self._lock:
            return self._resource_versions.get(kind)

    def get(self, kind: KindName, key: str) -> Obj | None:
        with self._lock:
            return self._objects[kind].get(key)

    def items(self, kind: KindName) -> list[Obj]:
        """Objects of ``kind`` sorted by key."""
        with self._lock:
            table = self._objects[kind]
            return [table[k] for k in sorted(table)]

    def count(self, kind: KindName) -> int:
        with self._lock:
            return len(self._objects[kind])

    def resource_versions(self, kind: KindName) -> dict[str, str]:
        """key -> resourceVersion of every object of ``kind`` (to compare with the server)."""
        with self._lock:
            return {k: str(_meta(o).get("resourceVersion", "")) for k, o in self._objects[kind].items()}

    def workload_by_uid(self, uid: str) -> Obj | None:
        with self._lock:
            key = self._wl_by_uid.get(uid)
            return self._objects[KindName.WORKLOAD].get(key) if key else None

    def deleted_workload(self, uid: str) -> Obj | None:
        """The final state of the Workload ``uid``, deleted since the store began (None: not
        seen deleted, or forgotten: deleted more than :data:`DELETED_WORKLOAD_TTL_SECONDS` ago,
        or pushed out by :data:`DELETED_WORKLOADS_KEPT` later deletions)."""
        with self._lock:
            found = self._deleted.get(uid)
            if found is None or self._clock.now() - found[0] > self._deleted_ttl:
                return None
            return found[1]

    def cluster_queue_of(self, workload: Mapping[str, Any]) -> str | None:
        """Where a Workload holds quota, else the ClusterQueue its LocalQueue points to."""
        with self._lock:
            return self._cluster_queue_of(workload)

    def identity_of(self, workload_key: str) -> ident.SkyPilotIdentity | None:
        with self._lock:
            return self._identity.get(workload_key)

    def identities(self) -> dict[str, ident.SkyPilotIdentity]:
        with self._lock:
            return dict(self._identity)

    def pods_of_group(self, group_key: str) -> list[Obj]:
        with self._lock:
            pods = self._objects[KindName.POD]
            return [pods[k] for k in sorted(self._pods_by_group.get(group_key, ())) if k in pods]

    def workloads(
        self,
        *,
        cluster_queue: str | None = None,
        local_queue: str | None = None,
        namespace: str | None = None,
        cohort: str | None = None,
        managed_job_id: str | None = None,
        managed_job_name: str | None = None,
        cluster: str | None = None,
        user: str | None = None,
        pod_group: str | None = None,
    ) -> list[Obj]:
        """Workloads matching every given filter, sorted by key.

        Args:
            cluster_queue: admitted in, or queued for, this ClusterQueue.
            local_queue: ``namespace/name`` of a LocalQueue.
            namespace: in this namespace.
            cohort: of a ClusterQueue whose cohort is this one.
            managed_job_id, managed_job_name, cluster, user: SkyPilot identity facts.
            pod_group: ``namespace/group`` (the Workload of that group).
        """
        with self._lock:
            table = self._objects[KindName.WORKLOAD]
            candidates: set[str] | None = None

            def narrow(keys: Iterable[str]) -> None:
                nonlocal candidates
                found = set(keys)
                candidates = found if candidates is None else candidates & found

            if namespace is not None:
                narrow(self._wl_by_namespace.get(namespace, ()))
            if local_queue is not None:
                narrow(self._wl_by_local_queue.get(local_queue, ()))
            if pod_group is not None:
                narrow([pod_group] if pod_group in table else [])
            for fact in (
                ("job-id", managed_job_id),
                ("job-name", managed_job_name),
                ("cluster", cluster),
                ("user", user),
            ):
                if fact[1] is not None:
                    narrow(self._groups_by_fact.get((fact[0], fact[1]), ()))
            queues: set[str] | None = None
            if cluster_queue is not None:
                queues = {cluster_queue}
            if cohort is not None:
                in_cohort = {
                    key for key, cq in self._objects[KindName.CLUSTER_QUEUE].items() if cohort_of(cq) == cohort
                }
                queues = in_cohort if queues is None else queues & in_cohort
            if queues is not None:
                narrow(self._keys_for_cluster_queues(queues))
            keys = set(table) if candidates is None else candidates
            return [table[k] for k in sorted(keys) if k in table]

    def _keys_for_cluster_queues(self, queues: set[str]) -> set[str]:
        table = self._objects[KindName.WORKLOAD]
        keys: set[str] = set()
        for cq in queues:
            keys |= self._wl_by_admitted_cq.get(cq, set())
        for lq_key, lq in self._objects[KindName.LOCAL_QUEUE].items():
            if _spec(lq).get("clusterQueue") in queues:
                keys |= self._wl_by_local_queue.get(lq_key, set())
        return {k for k in keys if k in table and self._cluster_queue_of(table[k]) in queues}

    # ---- waiting ----------------------------------------------------------------------------

    def wait_for(self, predicate: Callable[[MirrorStore], bool], timeout_seconds: float) -> bool:
        """Block until ``predicate(store)`` holds (checked after every write); False on timeout."""
        deadline = time.monotonic() + timeout_seconds
        with self._changed:
            while not predicate(self):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(remaining)
            return True

    def wait_changed(self, since_generation: int, timeout_seconds: float | None) -> int:
        """Block until the generation exceeds ``since_generation``; returns the current one."""
        with self._changed:
            self._changed.wait_for(lambda: self._generation > since_generation, timeout_seconds)
            return self._generation

    def wake_waiters(self) -> None:
        """Wake every waiter (used when the mirror stops or a reflector fails)."""
        with self._changed:
            self._changed.notify_all()


def _discard(index: dict[Any, set[str]], key: Any, value: str) -> None:
    members = index.get(key)
    if members is None:
        return
    members.discard(value)
    if not members:
        del index[key]


def _facts(identity: ident.SkyPilotIdentity) -> list[tuple[str, str]]:
    facts = [
        ("job-id", identity.managed_job_id),
        ("job-name", identity.managed_job_name),
        ("cluster", identity.cluster),
        ("user", identity.user),
    ]
    return [(name, value) for name, value in facts if value]

"""The reconciler: one work item in; history, aging patches and relaunch-race deletions out.

The split is client-go's and controller-runtime's: the *cache* is the mirror's store
(:class:`~sky_kueue.mirror.store.MirrorStore`: Workloads, the pods of SkyPilot groups,
WorkloadPriorityClasses), the *work queue* is :mod:`.work_queue`, and this object decides
what one item means. It runs on one thread (the session's worker), so the history sees
changes in the mirror's order and never concurrently.

What each cause does:

* ``synced`` (Workloads listed): without a replay, finish steps a crash left decided, then
  reconcile every Workload, oldest first; after a relist (a gap: changes were lost) the
  same. With a replay coming (the mirror resumed from the durable cursor), reconcile
  nothing yet: a step decided on the listed state before the replayed preemptions are
  recorded would use an incomplete history.
* ``workload``: a replayed (``resumed``) snapshot is reconciled with ``actuate=False``
  (facts only: its "pending" may be long over), then the object's current snapshot with
  actuation, once per object version. A live snapshot is reconciled with actuation; a
  deletion with the object's last state.
* ``synced`` with ``reset`` (the API server's state went back: an etcd restore, another
  cluster; :mod:`sky_kueue.mirror.server_state`): a warning, the ``state-went-back`` event
  (a metric), versions remembered from the old state forgotten, and every job whose last
  seen Workload is in no list any more gets what remains says of its end recorded
  (:mod:`.vanished`) before every Workload is reconciled (after a plain relist too: its gap
  hid the same ends); the cursor is rebased on the list's version and cluster.
* ``caught-up``: the replay is over; retries and re-aging may act again.
* ``pod``: links the group to its managed job durably the first time it is seen (a
  Workload collected while no controller ran has no pods left to say whose it was), uses a
  pod's ``TerminationTarget`` as the second preemption signal, and checks the relaunch race.
* ``retry``/``reage``: see :class:`~sky_kueue.controller.work_queue.WorkCause`.

Every handled Workload change advances the durable cursor (:mod:`.cursor`).

**The cache runs ahead of the queue.** The mirror's store holds the newest state while older
transitions still wait in the queue; a relaunched Workload (same name, new UID) may be in
the cache while its predecessor's preemption is still queued, and aging it then would use
a history without that preemption. So the reconciler reads a Workload from the cache only
once it has handled a transition of *that UID* (:meth:`Reconciler.current`), and the
``synced`` pass covers only what the list held (versions up to the list's). Reading ahead is
otherwise welcome (a pod's signal reconciles the newest state), so a queued snapshot may be
older than one already acted on: such a snapshot gives facts only (``actuate=False``, as a
replayed one), never an aging decision on a "pending" that is long over.

**The pods may run behind.** Pods and Workloads come from two watches; a Workload's change
can be handled before its group's pods have arrived, and without them a pod-group Workload
carries no SkyPilot marker (it is "not tracked"). Such snapshots are kept
(:data:`MAX_DEFERRED_GROUPS` groups, :data:`MAX_DEFERRED_SNAPSHOTS` each) and handled again,
as facts, when the group's first pod arrives, so a preemption seen before the pods is not
lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from sky_kueue.controller.cursor import WorkloadCursor
from sky_kueue.controller.detection import Detection, DetectionError, DetectionKind, classify
from sky_kueue.controller.engine import AgingEngine, ReconcileOutcome
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind, workload_key, workload_uid
from sky_kueue.controller.history import HistoryStore, Phase
from sky_kueue.controller.kube_actuator import DeletionOutcome
from sky_kueue.controller.relaunch import stale_workload
from sky_kueue.controller.vanished import vanished_ends
from sky_kueue.controller.work_queue import WorkCause, WorkItem
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import HOLD_ANNOTATION, identify_job
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.preemption_message import PreemptionMessage
from sky_kueue.mirror.server_state import as_revision
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.mirror.transitions import ChangeSource, Transition, TransitionKind

log = logging.getLogger(__name__)

#: Pod groups whose Workload snapshots wait for their pods (the oldest group is dropped first:
#: other people's pod groups, whose pods the mirror never lists, would otherwise pile up).
MAX_DEFERRED_GROUPS = 1_000
#: Snapshots kept per waiting group (the newest).
MAX_DEFERRED_SNAPSHOTS = 16


#: Reconciled changes after which nominal quota may be free for a held relaunch.
_QUOTA_FREED = frozenset({DetectionKind.FINISHED, DetectionKind.PREEMPTED, DetectionKind.EVICTED})


class WorkloadDeleter(Protocol):
    def delete(self, namespace: str, name: str, uid: str, version: str) -> tuple[DeletionOutcome, str]: ...


#: Reports one reconcile: (object, detection, outcome, replay?).
Report = Callable[[Mapping[str, Any], Detection, ReconcileOutcome, bool], None]


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _oldest_first(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(objs, key=lambda o: (_created(o), workload_key(o)))


def _held_by_us(obj: Mapping[str, Any]) -> bool:
    """Inactive with the hold annotation: a relaunch the safe-relaunch rule holds."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return (obj.get("spec") or {}).get("active", True) is False and HOLD_ANNOTATION in annotations


def _has_termination_target(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return any(
        isinstance(c, Mapping) and c.get("type") == kueue_api.POD_CONDITION_TERMINATION_TARGET
        for c in status.get("conditions") or ()
    )


def preemptor_class(cache: MirrorStore, preemptor: PreemptionMessage) -> int | None:
    """The preemptor's class priority: from the message, else from its Workload's
    WorkloadPriorityClass (both in the cache), else its ``spec.priority``."""
    if preemptor.class_priority is not None:
        return preemptor.class_priority
    obj = cache.workload_by_uid(preemptor.workload_uid or "") if preemptor.workload_uid else None
    if obj is None:
        return None
    spec = obj.get("spec") or {}
    ref = spec.get("priorityClassRef") or {}
    name = ref.get("name") if ref.get("kind", "WorkloadPriorityClass") == "WorkloadPriorityClass" else None
    if not name and spec.get("priorityClassSource") != "scheduling.k8s.io/priorityclass":
        name = spec.get("priorityClassName")  # v1beta1 spelling
    priority_class = cache.get(KindName.WORKLOAD_PRIORITY_CLASS, str(name)) if name else None
    value = priority_class.get("value") if priority_class is not None else None
    if isinstance(value, int):
        return value
    priority = spec.get("priority")
    return priority if isinstance(priority, int) else None


class Reconciler:
    """Handles work items of one session (see the module docstring)."""

    def __init__(
        self,
        *,
        cache: MirrorStore,
        engine: AgingEngine,
        history: HistoryStore,
        cursor: WorkloadCursor,
        deleter: WorkloadDeleter,
        workload_version: str,
        leading: Callable[[], bool],
        clock: Callable[[], float],
        report: Report,
        emit: Callable[[ControllerEvent], None],
    ) -> None:
        self.cache = cache
        self.engine = engine
        self.cursor = cursor
        self._history = history
        self._deleter = deleter
        self._workload_version = workload_version
        self._leading = leading
        self._clock = clock
        self._report = report
        self._emit = emit
        #: Set while a resumed watch replays: the list's version.
        self.replaying_until: int | None = None
        self._last_change: tuple[str, str, bool] | None = None
        #: Workload key -> the UID whose transitions the reconciler has handled (see above).
        self._seen: dict[str, str] = {}
        #: Workload UID -> the newest version reconciled with actuation (older ones: facts only).
        self._actuated: dict[str, int] = {}
        self._deleting: set[str] = set()
        self._replayed_latest: set[tuple[str, str]] = set()
        self._registered: set[tuple[str, str, str | None]] = set()
        #: Workload key -> snapshots handled before the group's pods arrived (see above).
        self._deferred: dict[str, list[Mapping[str, Any]]] = {}
        #: Keys of Workloads held by the safe-relaunch rule, re-judged when quota may have freed.
        self._held: set[str] = set()

    def handle(self, item: WorkItem) -> None:
        """Raises: StoreError (the history failed; the session ends and a new one replays)."""
        transition = item.transition
        if item.cause is WorkCause.RETRY:
            self._retry_pending()
        elif item.cause is WorkCause.REAGE:
            self._reage_waiting()
        elif transition is None:
            raise ValueError(f"a {item.cause.value} work item needs a transition")
        elif item.cause is WorkCause.POD:
            self._on_pod(transition)
        elif transition.object_kind is not KindName.WORKLOAD:
            if item.cause is WorkCause.SYNCED and transition.object_kind is KindName.POD:
                self._check_all_stale()
        elif item.cause is WorkCause.SYNCED:
            self._on_synced(transition)
        elif item.cause is WorkCause.CAUGHT_UP:
            self.replaying_until = None
        elif item.cause is WorkCause.BOOKMARK:
            self.cursor.advance(transition.resource_version)
        else:
            self._on_workload(transition)

    # --- Workloads ---------------------------------------------------------------------

    def current(self, key: str) -> dict[str, Any] | None:
        """The cached Workload ``key``, if the reconciler has handled a transition of its UID."""
        obj = self.cache.get(KindName.WORKLOAD, key)
        if obj is None or self._seen.get(key) != workload_uid(obj):
            return None
        return obj

    def _currents(self) -> list[dict[str, Any]]:
        return _oldest_first([obj for obj in self.cache.items(KindName.WORKLOAD) if self.current(workload_key(obj))])

    def _on_synced(self, synced: Transition) -> None:
        listed = as_revision(synced.resource_version)
        if synced.reset is not None:
            self._forget_versions()
        for obj in self.cache.items(KindName.WORKLOAD):
            version = as_revision(_version(obj))
            if listed is None or version is None or version <= listed:
                self._seen[workload_key(obj)] = workload_uid(obj)  # in the list; newer ones are queued
            if _held_by_us(obj):
                self._held.add(workload_key(obj))  # held before this session: re-judged as ever
        if synced.resuming:
            self.replaying_until = listed
            self.cursor.remember_cluster(self.cache.cluster_identity)
            self._check_all_stale()
            return
        self.replaying_until = None
        if synced.source is ChangeSource.LIST or synced.reset is not None:
            # After a replay instead (see _retry_pending): a step whose patch landed just before
            # a crash is confirmed by the replayed snapshots, even if its Workload is gone since.
            self.engine.replay_pending(self._lookup, self._own_clusters())
        if synced.reset is not None or synced.source is ChangeSource.RELIST:
            self._record_vanished(synced)
        for obj in self._currents():
            self._reconcile(obj, actuate=True)
        self._check_all_stale()
        if synced.reset is not None:
            self.cursor.rebase(synced.resource_version, self.cache.cluster_identity)
        else:
            self.cursor.advance(synced.resource_version)  # the listed state is handled
            self.cursor.remember_cluster(self.cache.cluster_identity)

    def _own_clusters(self) -> set[str]:
        """The cluster identities this controller answers for: its cluster's now and, until the
        cursor is rebased after a cluster was replaced under it, the one before (a shared
        history's other clusters are not among them; docs/operations.md)."""
        return {c for c in (self.cache.cluster_identity, self.cursor.cluster) if c}

    def _forget_versions(self) -> None:
        """Forgets what was remembered by resourceVersion: after the state went back, the same
        numbers name other changes (and a restored Workload is older than its last sight)."""
        self._last_change = None
        self._seen.clear()
        self._actuated.clear()
        self._replayed_latest.clear()

    def _record_vanished(self, synced: Transition) -> None:
        """Reports a reset, and records how each job's Workloads seen alive ended when they are
        in no list any more (see :mod:`.vanished`): after a reset, or any relist after a gap
        (410 Gone: the changes in between were not seen either).

        Raises:
            StoreError: the history failed.
        """
        now = self._clock()
        if synced.reset is not None:
            log.warning(
                "the API server's state went back (%s; Workloads listed at resourceVersion %s): "
                "reconciling every Workload from a full list and recording the ends nobody observed",
                synced.reset.value,
                synced.resource_version,
            )
            self._emit(ControllerEvent(ControllerEventKind.STATE_WENT_BACK, now, detail=synced.reset.value))
            why = f"the API server's state went back ({synced.reset.value})"
        else:
            why = "the Workload watch lost changes (a relist after a gap)"
        listed = {workload_uid(obj) for obj in self.cache.items(KindName.WORKLOAD)}
        detail = f"ended while {why}; the end was not observed"
        for summary in self._history.jobs():
            if summary.phase not in (Phase.WAITING, Phase.RUNNING):
                continue
            history = self._history.load(summary.key)
            identity = history.identity if history is not None else None
            if history is None or identity is None:
                continue
            group = f"{identity.namespace}/{identity.pod_group}" if identity.pod_group else None
            # The group's pods are the vanished Workload's only while no other Workload holds the group.
            pods = self.cache.pods_of_group(group) if group and self.cache.get(KindName.WORKLOAD, group) is None else []
            ends = vanished_ends(history, listed, pods, at=now, detail=detail, clusters=self._own_clusters())
            for end in ends:
                if end.preemption is not None:
                    recorded = self._history.record_preemption(end.identity, end.preemption)
                elif end.eviction is not None:
                    recorded = self._history.record_eviction(end.identity, end.eviction)
                else:
                    continue
                if not recorded:
                    continue
                log.warning(
                    "job %s: Workload %s is gone and its end was not observed (%s); recorded as %s",
                    summary.key,
                    end.workload_uid,
                    why,
                    end.outcome.value,
                )
                self._emit(ControllerEvent(ControllerEventKind.UNOBSERVED_END, now, detail=end.outcome.value))

    def _on_workload(self, change: Transition) -> None:
        deleted = change.kind is TransitionKind.DELETED
        identity = (change.uid, change.resource_version, deleted)
        if identity == self._last_change:
            return  # one write yields several transitions (evicted, preempted, ...): one reconcile
        self._last_change = identity
        if deleted:
            if self._seen.get(change.key) == change.uid:
                del self._seen[change.key]
        elif change.source is not ChangeSource.RESUMED:
            self._seen[change.key] = change.uid
        if change.source is ChangeSource.RESUMED:
            self._reconcile(change.workload, actuate=False)
            current = self.current(change.key)
            if current is not None and workload_uid(current) == change.uid:
                token = (change.uid, _version(current))
                if token not in self._replayed_latest:  # once per object version, not per replayed event
                    self._replayed_latest.add(token)
                    self._reconcile(current, actuate=True)
        elif change.source is ChangeSource.LIST:
            return  # the initial list: reconciled as a whole on ``synced``
        elif deleted:
            self._reconcile(change.workload, actuate=True, defer_untracked=True)
            self._deleting.discard(change.uid)
            self._actuated.pop(change.uid, None)
            self._held.discard(change.key)
            self._recheck_held()  # its quota is free now
        else:
            outcome = self._reconcile(change.workload, actuate=True, defer_untracked=True)
            self._check_stale(change.key)
            if outcome is not None and outcome.kind in _QUOTA_FREED:
                self._recheck_held()
        self.cursor.advance(change.resource_version)

    def _lookup(self, namespace: str, name: str) -> Detection | None:
        return self._detect(self.current(f"{namespace}/{name}"))

    def _detect(self, obj: Mapping[str, Any] | None) -> Detection | None:
        if obj is None:
            return None
        try:
            return classify(obj, self.cache.pods_of_group(workload_key(obj)))
        except DetectionError as err:
            log.warning("skipping unreadable Workload %s: %s", workload_key(obj), err)
            return None

    def _reconcile(
        self, obj: Mapping[str, Any], *, actuate: bool, only_pending: bool = False, defer_untracked: bool = False
    ) -> ReconcileOutcome | None:
        detection = self._detect(obj)
        if detection is None or (only_pending and not (detection.is_pending or self.engine.is_held(detection))):
            return None
        identity = detection.identity
        if defer_untracked and identity is not None and not identity.skypilot_owned and not detection.pod_signals:
            self._defer(workload_key(obj), obj)
        replay = not actuate  # a stale live snapshot below is no replay: users hear of its news
        if actuate:
            actuate = self._not_superseded(obj)
        outcome = self.engine.reconcile(detection, actuate=actuate)
        if outcome.hold is not None:
            key = workload_key(obj)
            if outcome.hold.is_held:
                self._held.add(key)
            else:
                self._held.discard(key)
        self._report(obj, detection, outcome, replay)
        return outcome

    def _defer(self, key: str, obj: Mapping[str, Any]) -> None:
        if self.cache.pods_of_group(key):
            return  # the pods are here: not SkyPilot's
        snapshots = self._deferred.pop(key, [])  # re-inserted last: the newest group
        snapshots = [*snapshots, obj][-MAX_DEFERRED_SNAPSHOTS:]
        self._deferred[key] = snapshots
        while len(self._deferred) > MAX_DEFERRED_GROUPS:
            del self._deferred[next(iter(self._deferred))]

    def _not_superseded(self, obj: Mapping[str, Any]) -> bool:
        """No newer version of this Workload was reconciled with actuation (and remember this one)."""
        uid, version = workload_uid(obj), as_revision(_version(obj))
        if version is None:
            return True
        newest = self._actuated.get(uid)
        if newest is not None and version < newest:
            return False
        self._actuated[uid] = version
        return True

    # --- periodic work -----------------------------------------------------------------

    def _retry_pending(self) -> None:
        """Re-actuates steps still decided (a transient API error, a lapse of the Lease)."""
        if self.replaying_until is not None:
            return  # still replaying: the replayed snapshots may yet confirm them
        if self._history.pending_steps():
            self.engine.replay_pending(self._lookup, self._own_clusters())

    def _reage_waiting(self) -> None:
        """Reconciles every waiting Workload again, so its boost follows its growing age.

        Reconciling is idempotent: nothing new is recorded, and the step of the pending
        episode is raised (and patched) only when the policy's boost went up since.
        """
        if self.replaying_until is not None:
            return  # still replaying history: boosts are decided once the replay is done
        for obj in self._currents():
            # Band policies also set admitted Workloads' levels; a failed patch is retried here.
            self._reconcile(obj, actuate=True, only_pending=not self.engine.actuates_admitted)

    def _recheck_held(self) -> None:
        """Judges every held relaunch again: a Workload finished, was evicted or deleted, so
        nominal quota may have freed (the periodic re-age pass judges them too)."""
        if self.replaying_until is not None or not self._held:
            return
        for key in sorted(self._held):
            current = self.current(key)
            if current is None:
                self._held.discard(key)
                continue
            self._reconcile(current, actuate=True, only_pending=True)

    # --- pods and the relaunch race ----------------------------------------------------

    def _on_pod(self, change: Transition) -> None:
        pod = change.pod or {}
        deferred: list[Mapping[str, Any]] = []
        if change.kind is TransitionKind.POD_CHANGED:
            self._register(pod)
            deferred = self._deferred.pop(change.key, [])
            for snapshot in deferred:
                self._reconcile(snapshot, actuate=False)  # facts seen before the pods
        if change.source in (ChangeSource.LIST, ChangeSource.RELIST) and not deferred:
            return  # a listed pod is no news: the ``synced`` markers reconcile and check everything
        workload = self.current(change.key)
        if workload is None:
            return
        if deferred or (change.kind is TransitionKind.POD_CHANGED and _has_termination_target(pod)):
            # Now tracked, or the second signal (maybe with the preemptor). While the Workload
            # history is replayed, facts only: aging now would use a partial history.
            self._reconcile(workload, actuate=self.replaying_until is None)
        self._check_stale(change.key)

    def _register(self, pod: Mapping[str, Any]) -> None:
        """Links a SkyPilot pod group to its managed job durably, the first time it is seen.

        A Workload can be preempted and garbage-collected while the controller is down; when
        its deletion is replayed its pods are gone, and only this link tells whose it was.
        """
        identity = identify_job(None, [pod])
        if identity is None or not identity.skypilot_owned:
            return
        token = (identity.namespace, identity.pod_group or "", identity.managed_job_id)
        if token in self._registered:
            return
        self._history.ensure_job(identity, None, self._clock())
        self._registered.add(token)

    def _check_all_stale(self) -> None:
        for obj in self._currents():
            self._check_stale(workload_key(obj))

    def _check_stale(self, key: str) -> None:
        workload = self.current(key)
        if workload is None:
            return
        verdict = stale_workload(workload, self.cache.pods_of_group(key))
        if verdict is None or verdict.uid in self._deleting:
            return
        self._reconcile(workload, actuate=True)  # record the preemption before the object goes
        if not self._leading():
            return
        outcome, why = self._deleter.delete(verdict.namespace, verdict.name, verdict.uid, self._workload_version)
        if outcome is DeletionOutcome.FAILED:
            log.warning("could not delete stale Workload %s: %s", key, why)
            return
        self._deleting.add(verdict.uid)
        if outcome is DeletionOutcome.GONE_OR_REPLACED:
            log.debug("stale Workload %s already gone or replaced (%s)", key, why)
            return
        log.info(verdict.reason, extra={"fields": {"workload": key, "uid": verdict.uid, "action": "deleted"}})
        self._emit(ControllerEvent(ControllerEventKind.STALE_DELETED, self._clock(), workload=workload, stale=verdict))

"""The live resubmission controller: watch events in; history, aging patches and relaunch-race
deletions out; only while leading.

How the parts fit (each in its own module):

* :mod:`.leader` elects one replica through a Lease. The leader runs a *session*; losing the
  Lease ends it, and every write is fenced by :meth:`LeaderElector.is_leader`.
* A session lists the pods of Kueue pod groups and the Workloads, then watches both
  (:mod:`.kube_watch`). Both watch threads feed **one queue**, drained by **one worker
  thread**, so the history sees events in server order per kind and never concurrently.
* Each Workload event is classified (:func:`~sky_kueue.controller.detection.classify`, with
  the pods of its group as the second signal and for the SkyPilot job identity) and handed
  to :class:`~sky_kueue.controller.engine.AgingEngine`, which records the facts under their
  idempotency keys and ages a waiting Workload through the Kueue-level actuator
  (:mod:`.kube_actuator`): the ``priority-boost`` annotation when the cluster runs the
  PriorityBoost gate (:mod:`.gate_detection`), else a ``spec.priority`` merge patch.
* Pod and Workload events also drive the relaunch race (:mod:`.relaunch`): a finished
  Workload holding back new pods of its group is reconciled one last time, then deleted
  with a UID precondition.

Restart safety: the worker advances a durable watch cursor (:mod:`.runtime_state`) after
each handled Workload event. A new session (after a crash, a restart or a leadership change)
lists everything, then watches *from the cursor*: events up to the list's resourceVersion
are a replay. A replayed snapshot is reconciled with ``actuate=False`` (facts only: its
"pending" may be long over) and the object's current, listed snapshot is reconciled right
after it with actuation. Objects whose changes all precede the cursor were fully handled
before; steps decided but not yet patched are finished by ``replay_pending``. Comparing
resourceVersions as integers relies on their being etcd revisions (true of the API server
and of the sandbox); if they are not integers the controller skips the replay and
reconciles the listed state.

Observers (the demo, the benchmark) get a :class:`ControllerEvent` for every reconcile.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from sky_kueue import hooks
from sky_kueue.controller.actuators import (
    ActuationError,
    ActuationOutcome,
    ActuationResult,
    Actuator,
    WorkloadPatch,
)
from sky_kueue.controller.aging import ActuatorKind, AgingSettings
from sky_kueue.controller.clock import Clock, system_clock
from sky_kueue.controller.detection import Detection, DetectionError, Preemptor, classify
from sky_kueue.controller.engine import AgingEngine, ReconcileOutcome
from sky_kueue.controller.gate_detection import KUEUE_NAMESPACE, GateReading, detect_priority_boost_gate
from sky_kueue.controller.history import HistoryStore, StoreError
from sky_kueue.controller.identity import identify_job
from sky_kueue.controller.kube_actuator import KubernetesWorkloadActuator
from sky_kueue.controller.kube_watch import EventType, KindSpec, KindWatch, WatchedEvent
from sky_kueue.controller.leader import KubernetesLeaseClient, LeaderElector, LeaseClient, LeaseSettings
from sky_kueue.controller.relaunch import StaleWorkload, pod_group_of, stale_workload
from sky_kueue.controller.state_spec import ControllerState
from sky_kueue.kueue import api as kueue_api

log = logging.getLogger(__name__)

#: The durable cursor is written at most this often (it may lag; a replay is idempotent).
CURSOR_PERSIST_INTERVAL_SECONDS = 0.5
#: How long a WorkloadPriorityClass value is trusted before it is read again.
PRIORITY_CLASS_CACHE_SECONDS = 60.0
#: How long stopping a session waits for its threads.
SESSION_JOIN_SECONDS = 10.0
#: (connect, read) timeout of the controller's single-object requests.
REQUEST_TIMEOUT_SECONDS = (5, 15)
#: Cursor key of the Workload watch in the runtime state.
WORKLOADS_CURSOR = "workloads"
#: How often (cluster time) every waiting SkyPilot Workload is re-aged: the age factor grows
#: while a Workload waits, and nothing else may make the controller look at it again.
REAGE_INTERVAL_SECONDS = 300.0


class ControllerEventKind(str, Enum):
    RECONCILED = "reconciled"
    STALE_DELETED = "stale-workload-deleted"
    SESSION_STARTED = "session-started"
    SESSION_ENDED = "session-ended"


@dataclass(frozen=True)
class ControllerEvent:
    """What the controller just did, for observers (demo timeline, benchmark)."""

    kind: ControllerEventKind
    at: float
    workload: Mapping[str, Any] | None = None
    detection: Detection | None = None
    outcome: ReconcileOutcome | None = None
    replay: bool = False
    stale: StaleWorkload | None = None
    detail: str = ""


Observer = Callable[[ControllerEvent], None]


@dataclass(frozen=True)
class ControllerSettings:
    """How the controller runs (the aging tunables are :class:`AgingSettings`)."""

    lease: LeaseSettings
    #: Watch one namespace only (None: all namespaces).
    namespace: str | None = None
    #: Force the PriorityBoost gate's state (None: detect it in the cluster).
    priority_boost_gate: bool | None = None
    kueue_namespace: str = KUEUE_NAMESPACE
    workload_version: str = kueue_api.WORKLOAD_VERSIONS[0]
    cursor_persist_interval_seconds: float = CURSOR_PERSIST_INTERVAL_SECONDS
    #: Re-age waiting Workloads this often (seconds of the cluster clock; None: never).
    reage_interval_seconds: float | None = REAGE_INTERVAL_SECONDS


class _Fenced:
    """An actuator that refuses to write unless this replica leads (fencing)."""

    def __init__(self, inner: Actuator, leading: Callable[[], bool]) -> None:
        self._inner = inner
        self._leading = leading

    @property
    def name(self) -> str:
        return self._inner.name

    def apply(self, patch: WorkloadPatch) -> ActuationResult:
        if not self._leading():
            raise ActuationError("not the leader any more; the next leader will actuate this step")
        return self._inner.apply(patch)


def _notify_user_hooks(obj: Mapping[str, Any], detection: Detection, outcome: ReconcileOutcome) -> None:
    """Tell the users' ``sky_kueue.on_preempted``/``on_resubmitted``/``on_burst`` callbacks."""
    base = {"job": outcome.job_key, "workload": _key(obj), "uid": _uid(obj)}
    eviction = detection.eviction
    if eviction is not None and any(item.startswith("preemption ") for item in outcome.recorded):
        preemptor = eviction.preemptor
        hooks.emit(
            hooks.HookEvent.PREEMPTED,
            {
                **base,
                "reason": eviction.preemption_reason.value if eviction.preemption_reason else eviction.reason,
                "preemptor": preemptor.workload_uid if preemptor is not None else None,
                "time": eviction.at,
            },
        )
    if outcome.actuation is not None and outcome.actuation.outcome is ActuationOutcome.APPLIED and outcome.step:
        hooks.emit(hooks.HookEvent.RESUBMITTED, {**base, "boost": outcome.step.boost, "step": outcome.step.key.token})
    if outcome.burst is not None:
        hooks.emit(hooks.HookEvent.BURST, {**base, "detail": outcome.burst.detail})


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _version(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def _as_int(version: str | None) -> int | None:
    try:
        return int(version) if version else None
    except ValueError:
        return None


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def _has_termination_target(pod: Mapping[str, Any]) -> bool:
    status = pod.get("status") or {}
    return any(
        isinstance(c, Mapping) and c.get("type") == kueue_api.POD_CONDITION_TERMINATION_TARGET
        for c in status.get("conditions") or ()
    )


class _Stop:
    """Queue sentinel."""


_STOP = _Stop()
_INITIAL = "initial"
_RETRY = "retry"
_REAGE = "reage"


class _Session:
    """One leadership term: list, watch, and the worker that reconciles."""

    def __init__(self, controller: Controller, engine: AgingEngine) -> None:
        self._c = controller
        self.engine = engine
        self._stop = threading.Event()
        self._queue: queue.Queue[WatchedEvent | str | _Stop] = queue.Queue()
        self._unfinished = 0
        self._unfinished_lock = threading.Lock()
        ns = controller.settings.namespace
        self._pod_watch = KindWatch(controller.api_client, KindSpec.pods(ns), self._put, stop=self._stop)
        self._workload_watch = KindWatch(
            controller.api_client,
            KindSpec.workloads(ns, controller.settings.workload_version),
            self._put,
            stop=self._stop,
        )
        self._threads: list[threading.Thread] = []
        self._list_version: int | None = None
        self._cursor: str | None = None
        self._listed_version = ""
        self._cursor_saved_at = 0.0
        self._cursor_saved: str | None = None
        self._deleting: set[str] = set()
        self._replayed_latest: set[tuple[str, str]] = set()
        self._registered: set[tuple[str, str, str | None]] = set()
        self.error: BaseException | None = None

    def _put(self, item: WatchedEvent | str) -> None:
        with self._unfinished_lock:
            self._unfinished += 1
        self._queue.put(item)

    # --- lifecycle ---------------------------------------------------------------------

    def start(self) -> None:
        """Lists both kinds (raising on failure), then starts the watches and the worker.

        Raises:
            ApiException, urllib3.exceptions.HTTPError: the initial lists failed.
            StoreError: the cursor could not be read.
        """
        c = self._c
        pods, pod_version = self._pod_watch.list()
        workloads, workload_version = self._workload_watch.list()
        c.replace_pods(pods)
        c.replace_workloads(workloads)
        cursor = c.runtime.cursor(WORKLOADS_CURSOR) if c.runtime is not None else None
        listed, saved = _as_int(workload_version), _as_int(cursor)
        replay_from: str | None = None
        if listed is not None and saved is not None and saved < listed:
            replay_from = cursor
            self._list_version = listed
        self._cursor = cursor
        self._listed_version = workload_version
        self._put(_INITIAL if replay_from is None else f"{_INITIAL}:replay")
        start_version = replay_from or workload_version
        log.info(
            "session started",
            extra={
                "fields": {
                    "workloads": len(workloads),
                    "pods": len(pods),
                    "listed_version": workload_version,
                    "replay_from": replay_from,
                    "mechanism": self.engine.mechanism.value,
                }
            },
        )
        targets: list[tuple[str, Callable[[], None]]] = [
            ("sky-kueue-worker", self._work),
            ("sky-kueue-watch-pods", lambda: self._pod_watch.run(pod_version)),
            ("sky-kueue-watch-workloads", lambda: self._workload_watch.run(start_version)),
        ]
        for name, target in targets:
            thread = threading.Thread(target=self._guard(target), name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def _guard(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except BaseException as err:  # a dying thread must end the session, not hang it
                if not self._stop.is_set():
                    self.error = err
                    log.exception("controller session failed: %s", err)
                    self._c.notify()
                    self._stop.set()
                    self._pod_watch.stop()
                    self._workload_watch.stop()
                    self._queue.put(_STOP)

        return run

    @property
    def failed(self) -> bool:
        return self.error is not None

    def stop(self) -> None:
        self._stop.set()
        self._pod_watch.stop()
        self._workload_watch.stop()
        self._queue.put(_STOP)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(SESSION_JOIN_SECONDS)
        if self.error is None:
            self._save_cursor(force=True)

    def idle(self) -> bool:
        with self._unfinished_lock:
            return self._unfinished == 0

    @property
    def handled_version(self) -> int | None:
        """The resourceVersion up to which Workload events were handled (None: unknown)."""
        return _as_int(self._cursor)

    # --- the worker --------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if isinstance(item, _Stop) or self._stop.is_set():
                return
            try:
                if item == _RETRY:
                    self._retry_pending()
                elif item == _REAGE:
                    self._reage_waiting()
                elif isinstance(item, str):
                    self._initial(replay=item.endswith(":replay"))
                elif item.resource == "pods":
                    self._on_pod(item)
                else:
                    self._on_workload(item)
            finally:
                with self._unfinished_lock:
                    self._unfinished -= 1
                self._c.notify()

    def _initial(self, *, replay: bool) -> None:
        c = self._c
        if not replay:
            # After a replay instead (see _retry_pending): a step whose patch landed just before a
            # crash is confirmed by the replayed snapshots, even if its Workload is gone since.
            self.engine.replay_pending(lambda ns, name: self._detect(c.workload(f"{ns}/{name}")))
        if not replay:
            for obj in sorted(c.workloads(), key=lambda o: (_created(o), _key(o))):
                self._reconcile(obj, actuate=True)
        for obj in c.workloads():
            self._check_stale(_key(obj))
        if not replay:
            self._advance(self._listed_version)  # the listed state is handled: nothing older to replay

    def _retry_pending(self) -> None:
        """Re-actuates steps still decided (a transient API error, a lapse of the Lease)."""
        if self._list_version is not None:
            return  # still replaying: the replayed snapshots may yet confirm them
        if self._c.store.pending_steps():
            self.engine.replay_pending(lambda ns, name: self._detect(self._c.workload(f"{ns}/{name}")))

    def retry_later(self) -> None:
        if self.idle():
            self._put(_RETRY)

    def reage_later(self) -> None:
        """Queues a pass over every waiting Workload (after the events already queued)."""
        self._put(_REAGE)

    def _reage_waiting(self) -> None:
        """Reconciles every waiting Workload again, so its boost follows its growing age.

        Reconciling is idempotent: nothing new is recorded, and the step of the pending
        episode is raised (and patched) only when the policy's boost went up since.
        """
        if self._list_version is not None:
            return  # still replaying history: boosts are decided once the replay is done
        for obj in sorted(self._c.workloads(), key=lambda o: (_created(o), _key(o))):
            # Band policies also set admitted Workloads' levels; a failed patch is retried here.
            self._reconcile(obj, actuate=True, only_pending=not self.engine.actuates_admitted)

    def _detect(self, obj: Mapping[str, Any] | None) -> Detection | None:
        if obj is None:
            return None
        try:
            return classify(obj, self._c.pods_of(_key(obj)))
        except DetectionError as err:
            log.warning("skipping unreadable Workload %s: %s", _key(obj), err)
            return None

    def _reconcile(
        self, obj: Mapping[str, Any], *, actuate: bool, only_pending: bool = False
    ) -> ReconcileOutcome | None:
        detection = self._detect(obj)
        if detection is None or (only_pending and not detection.is_pending):
            return None
        outcome = self.engine.reconcile(detection, actuate=actuate)
        self._c.report(obj, detection, outcome, replay=not actuate)
        return outcome

    def _is_replay(self, event: WatchedEvent) -> bool:
        if self._list_version is None:
            return False
        version = _as_int(event.resource_version)
        if version is None or version > self._list_version:
            self._list_version = None  # past the list: everything from here on is live
            return False
        current = self._c.workload(_key(event.obj or {}))
        return current is None or _version(current) != event.resource_version

    def _on_workload(self, event: WatchedEvent) -> None:
        c = self._c
        if event.type is EventType.BOOKMARK:
            bookmark = _as_int(event.resource_version)
            if self._list_version is not None and bookmark is not None and bookmark >= self._list_version:
                self._list_version = None  # the replay is complete
            self._advance(event.resource_version)
            return
        if event.type is EventType.LISTED:
            c.replace_workloads(list(event.items))
            self._list_version = None
            for obj in sorted(c.workloads(), key=lambda o: (_created(o), _key(o))):
                self._reconcile(obj, actuate=True)
                self._check_stale(_key(obj))
            self._advance(event.resource_version)
            return
        obj = event.obj or {}
        key = _key(obj)
        if self._is_replay(event):
            self._reconcile(obj, actuate=False)
            current = c.workload(key)
            if current is not None and _uid(current) == _uid(obj):
                token = (_uid(current), _version(current))
                if token not in self._replayed_latest:  # once per object, not once per replayed event
                    self._replayed_latest.add(token)
                    self._reconcile(current, actuate=True)
        else:
            if event.type is EventType.DELETED:
                self._reconcile(obj, actuate=True)
                c.forget_workload(obj)
                self._deleting.discard(_uid(obj))
            else:
                c.remember_workload(obj)
                self._reconcile(obj, actuate=True)
                self._check_stale(key)
        self._advance(event.resource_version)

    def _on_pod(self, event: WatchedEvent) -> None:
        c = self._c
        if event.type is EventType.BOOKMARK:
            return
        if event.type is EventType.LISTED:
            c.replace_pods(list(event.items))
            for obj in c.workloads():
                self._check_stale(_key(obj))
            return
        pod = event.obj or {}
        group = pod_group_of(pod)
        if group is None:
            return
        if event.type is EventType.DELETED:
            c.forget_pod(pod)
        else:
            c.remember_pod(pod)
            self._register(pod)
        key = f"{(pod.get('metadata') or {}).get('namespace', '')}/{group}"
        workload = c.workload(key)
        if workload is None:
            return
        if event.type is EventType.MODIFIED and _has_termination_target(pod):
            self._reconcile(workload, actuate=True)  # the second signal, maybe with the preemptor
        self._check_stale(key)

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
        self._c.store.ensure_job(identity, None, self._c.clock())
        self._registered.add(token)

    def _check_stale(self, key: str) -> None:
        c = self._c
        workload = c.workload(key)
        if workload is None:
            return
        verdict = stale_workload(workload, c.pods_of(key))
        if verdict is None or verdict.uid in self._deleting:
            return
        self._reconcile(workload, actuate=True)  # record the preemption before the object goes
        if not c.is_leader():
            return
        try:
            c.core_custom.delete_namespaced_custom_object(
                kueue_api.KUEUE_GROUP,
                c.settings.workload_version,
                verdict.namespace,
                kueue_api.WORKLOAD_PLURAL,
                verdict.name,
                body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=verdict.uid)),
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except ApiException as err:
            if err.status in (404, 409):  # expected when our snapshot lags: the UID precondition protects
                log.debug("stale Workload %s already gone or replaced (HTTP %s)", key, err.status)
                self._deleting.add(verdict.uid)
            else:
                log.warning("could not delete stale Workload %s: HTTP %s %s", key, err.status, err.reason)
            return
        except HTTPError as err:
            log.warning("could not delete stale Workload %s: %s", key, err)
            return
        self._deleting.add(verdict.uid)
        log.info(verdict.reason, extra={"fields": {"workload": key, "uid": verdict.uid, "action": "deleted"}})
        c.emit(ControllerEvent(ControllerEventKind.STALE_DELETED, c.clock(), workload=workload, stale=verdict))

    # --- cursor ------------------------------------------------------------------------

    def _advance(self, version: str) -> None:
        if _as_int(version) is None and _as_int(self._cursor) is not None:
            return
        self._cursor = version
        self._save_cursor(force=False)

    def _save_cursor(self, *, force: bool) -> None:
        runtime = self._c.runtime
        if runtime is None or self._cursor is None or self._cursor == self._cursor_saved:
            return
        now = time.monotonic()
        if not force and now - self._cursor_saved_at < self._c.settings.cursor_persist_interval_seconds:
            return
        runtime.save_cursor(WORKLOADS_CURSOR, self._cursor, self._c.clock())
        self._cursor_saved, self._cursor_saved_at = self._cursor, now


class Controller:
    """The resubmission controller. :meth:`run` blocks; :meth:`start`/:meth:`stop` thread it.

    Two clocks: ``clock`` is the cluster's time, used for the history (the demo runs it
    faster than real time); ``lease_clock`` times leader election between real processes.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        store: HistoryStore,
        aging: AgingSettings,
        settings: ControllerSettings,
        *,
        runtime: ControllerState | None = None,
        clock: Clock = system_clock,
        lease_clock: Clock = system_clock,
        lease_client: LeaseClient | None = None,
        actuator: Actuator | None = None,
        observers: Sequence[Observer] = (),
    ) -> None:
        self.api_client = api_client
        self.store = store
        self.aging = aging
        self.settings = settings
        self.runtime = runtime
        self.clock = clock
        self.lease_clock = lease_clock
        self.elector = LeaderElector(
            lease_client or KubernetesLeaseClient(api_client), settings.lease, clock=lease_clock
        )
        self.core_custom = client.CustomObjectsApi(api_client)
        self._actuator = actuator or KubernetesWorkloadActuator(api_client)
        self._observers = list(observers)
        self._cache_lock = threading.RLock()
        self._workloads: dict[str, dict[str, Any]] = {}
        self._uids: dict[str, str] = {}
        self._pods: dict[str, dict[str, dict[str, Any]]] = {}
        self._class_values: dict[str, tuple[int, float]] = {}
        self._session: _Session | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.gate: GateReading | None = None
        self.sessions = 0
        self._last_reage: float | None = None

    # --- caches (worker writes, anyone reads) ------------------------------------------

    def replace_workloads(self, items: list[dict[str, Any]]) -> None:
        with self._cache_lock:
            self._workloads = {_key(o): o for o in items}
            self._uids = {_uid(o): _key(o) for o in items}

    def remember_workload(self, obj: dict[str, Any]) -> None:
        with self._cache_lock:
            key = _key(obj)
            old = self._workloads.get(key)
            if old is not None:
                self._uids.pop(_uid(old), None)
            self._workloads[key] = obj
            self._uids[_uid(obj)] = key

    def forget_workload(self, obj: Mapping[str, Any]) -> None:
        with self._cache_lock:
            key = _key(obj)
            current = self._workloads.get(key)
            if current is not None and _uid(current) == _uid(obj):
                del self._workloads[key]
            self._uids.pop(_uid(obj), None)

    def workload(self, key: str) -> dict[str, Any] | None:
        with self._cache_lock:
            return self._workloads.get(key)

    def workloads(self) -> list[dict[str, Any]]:
        with self._cache_lock:
            return list(self._workloads.values())

    def replace_pods(self, items: list[dict[str, Any]]) -> None:
        with self._cache_lock:
            self._pods = {}
            for pod in items:
                self.remember_pod(pod)

    def _group_key(self, pod: Mapping[str, Any]) -> str | None:
        group = pod_group_of(pod)
        return None if group is None else f"{(pod.get('metadata') or {}).get('namespace', '')}/{group}"

    def remember_pod(self, pod: dict[str, Any]) -> None:
        key = self._group_key(pod)
        if key is not None:
            with self._cache_lock:
                self._pods.setdefault(key, {})[str((pod.get("metadata") or {}).get("name"))] = pod

    def forget_pod(self, pod: Mapping[str, Any]) -> None:
        key = self._group_key(pod)
        if key is None:
            return
        with self._cache_lock:
            members = self._pods.get(key, {})
            members.pop(str((pod.get("metadata") or {}).get("name")), None)
            if not members:
                self._pods.pop(key, None)

    def pods_of(self, key: str) -> list[dict[str, Any]]:
        with self._cache_lock:
            return list(self._pods.get(key, {}).values())

    def versions(self) -> tuple[dict[str, str], dict[str, str]]:
        """The resourceVersion of every cached Workload and pod, by ``namespace/name``."""
        with self._cache_lock:
            workloads = {k: _version(o) for k, o in self._workloads.items()}
            pods = {
                f"{(p.get('metadata') or {}).get('namespace', '')}/{(p.get('metadata') or {}).get('name', '')}": (
                    _version(p)
                )
                for members in self._pods.values()
                for p in members.values()
            }
        return workloads, pods

    # --- observers and waiting ---------------------------------------------------------

    def notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout_seconds: float) -> bool:
        """Blocks until ``predicate()`` holds (re-checked after every handled event)."""
        deadline = time.monotonic() + timeout_seconds
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, 0.5))
            return True

    def idle(self) -> bool:
        """Leading, and nothing queued or in progress."""
        session = self._session
        return session is not None and not session.failed and session.idle()

    def handled_workload_version(self) -> int | None:
        """Up to which resourceVersion Workload events were handled by the running session."""
        session = self._session
        return None if session is None else session.handled_version

    def emit(self, event: ControllerEvent) -> None:
        for observer in self._observers:
            observer(event)

    def report(self, obj: Mapping[str, Any], detection: Detection, outcome: ReconcileOutcome, *, replay: bool) -> None:
        """Logs what a reconcile changed and tells the observers."""
        if outcome.recorded or outcome.actuation is not None or outcome.burst is not None or outcome.patch:
            fields: dict[str, Any] = {
                "job": outcome.job_key,
                "workload": _key(obj),
                "uid": _uid(obj),
                "kind": detection.kind.value,
                "recorded": list(outcome.recorded),
            }
            if replay:
                fields["replay"] = True
            if outcome.step is not None:
                fields.update(step=outcome.step.key.token, boost=outcome.step.boost, state=outcome.step.state.value)
            if outcome.patch is not None:
                fields["patch"] = outcome.patch.summary
            if outcome.actuation is not None:
                fields["actuation"] = outcome.actuation.outcome.value
            if outcome.burst is not None:
                fields["burst"] = outcome.burst.detail
            if outcome.notes:
                fields["notes"] = list(outcome.notes)
            log.info("reconciled %s", _key(obj), extra={"fields": fields})
            if not replay:
                _notify_user_hooks(obj, detection, outcome)
        self.emit(ControllerEvent(ControllerEventKind.RECONCILED, self.clock(), obj, detection, outcome, replay))

    # --- leadership and sessions -------------------------------------------------------

    def is_leader(self) -> bool:
        return self.elector.is_leader()

    def preemptor_class(self, preemptor: Preemptor) -> int | None:
        """The preemptor's class priority: from the message, else its WorkloadPriorityClass."""
        if preemptor.class_priority is not None:
            return preemptor.class_priority
        with self._cache_lock:
            key = self._uids.get(preemptor.workload_uid or "")
            obj = self._workloads.get(key) if key else None
        if obj is None:
            return None
        spec = obj.get("spec") or {}
        ref = spec.get("priorityClassRef") or {}
        name = ref.get("name") if ref.get("kind", "WorkloadPriorityClass") == "WorkloadPriorityClass" else None
        if not name and spec.get("priorityClassSource") != "scheduling.k8s.io/priorityclass":
            name = spec.get("priorityClassName")  # v1beta1 spelling
        value = self._class_value(str(name)) if name else None
        if value is not None:
            return value
        priority = spec.get("priority")
        return priority if isinstance(priority, int) else None

    def _class_value(self, name: str) -> int | None:
        cached = self._class_values.get(name)
        now = time.monotonic()
        if cached is not None and now - cached[1] < PRIORITY_CLASS_CACHE_SECONDS:
            return cached[0]
        try:
            obj = self.core_custom.get_cluster_custom_object(
                kueue_api.KUEUE_GROUP,
                self.settings.workload_version,
                "workloadpriorityclasses",
                name,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
        except (ApiException, HTTPError) as err:
            log.debug("cannot read WorkloadPriorityClass %s: %s", name, err)
            return cached[0] if cached else None
        value = obj.get("value") if isinstance(obj, dict) else None
        if not isinstance(value, int):
            return None
        self._class_values[name] = (value, now)
        return value

    def _new_engine(self) -> AgingEngine:
        gate = self.settings.priority_boost_gate
        if gate is None and self.aging.actuator is ActuatorKind.AUTO:
            self.gate = detect_priority_boost_gate(self.api_client, self.settings.kueue_namespace)
            gate = self.gate.enabled
        elif gate is not None:
            self.gate = GateReading(gate, "set by the operator")
        engine = AgingEngine(
            self.store,
            _Fenced(self._actuator, self.is_leader),
            self.aging,
            clock=self.clock,
            priority_boost_gate=gate,
            preemptor_priority=self.preemptor_class,
        )
        log.info(
            "aging actuator resolved",
            extra={
                "fields": {
                    "mechanism": engine.mechanism.value,
                    "gate": None if self.gate is None else self.gate.enabled,
                    "gate_source": None if self.gate is None else self.gate.source,
                }
            },
        )
        return engine

    def _start_session(self) -> None:
        session = _Session(self, self._new_engine())
        try:
            session.start()
        except (ApiException, HTTPError, OSError, StoreError) as err:
            log.warning("cannot start a controller session (retrying): %s", err)
            session.stop()
            return
        self._session = session
        self._last_reage = self.clock()  # the session's first reconcile ages everything
        self.sessions += 1
        self.emit(ControllerEvent(ControllerEventKind.SESSION_STARTED, self.clock()))
        self.notify()

    def _end_session(self, why: str) -> None:
        session, self._session = self._session, None
        if session is None:
            return
        session.stop()
        log.info("session ended: %s", why)
        self.emit(ControllerEvent(ControllerEventKind.SESSION_ENDED, self.clock(), detail=why))
        self.notify()

    def step(self) -> bool:
        """One round of the election loop; returns whether this replica leads."""
        leading = self.elector.try_acquire_or_renew()
        session = self._session
        if session is not None and session.failed:
            self._end_session(f"failed: {session.error}")
        if leading and self._session is None:
            self._start_session()
        elif not leading and self._session is not None:
            self._end_session("lost the Lease")
        elif self._session is not None:
            self._session.retry_later()
            self._maybe_reage(self._session)
        self._beat(leading)
        return leading

    def _maybe_reage(self, session: _Session) -> None:
        interval = self.settings.reage_interval_seconds
        if interval is None:
            return
        now = self.clock()
        if self._last_reage is None or now - self._last_reage >= interval:
            self._last_reage = now
            session.reage_later()

    def _beat(self, leading: bool) -> None:
        if self.runtime is None:
            return
        details: dict[str, Any] = {
            "sessions": self.sessions,
            "lease": f"{self.settings.lease.namespace}/{self.settings.lease.name}",
            "holder": self.elector.observed_holder,
        }
        session = self._session
        if session is not None:
            details["mechanism"] = session.engine.mechanism.value
        try:
            self.runtime.beat(self.elector.identity, leading, self.lease_clock(), details)
        except StoreError as err:
            log.warning("cannot write the heartbeat: %s", err)

    def run(self, stop: threading.Event | None = None) -> None:
        """The election loop, until ``stop`` is set; then releases the Lease."""
        stop = stop or self._stop
        try:
            while not stop.is_set():
                self.step()
                stop.wait(self.settings.lease.retry_period_seconds)
        finally:
            self.shutdown()

    def shutdown(self) -> None:
        """Ends the session (saving the cursor), releases the Lease, writes a last heartbeat."""
        self._end_session("shutting down")
        self.elector.release()
        self._beat(False)

    def start(self) -> Controller:
        """Runs :meth:`run` on a background thread (for the demo and tests)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self.run, name="sky-kueue-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the loop started by :meth:`start` (or, when driven by :meth:`step`, shuts down)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(SESSION_JOIN_SECONDS * 2)
            self._thread = None
        else:
            self.shutdown()

    def __enter__(self) -> Controller:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def outcome_applied(outcome: ReconcileOutcome | None) -> bool:
    """The reconcile patched a Workload (an aging step reached the cluster)."""
    return (
        outcome is not None
        and outcome.actuation is not None
        and outcome.actuation.outcome is ActuationOutcome.APPLIED
        and outcome.patch is not None
    )


@dataclass
class Recorder:
    """An observer that keeps every event (tests, demo)."""

    events: list[ControllerEvent] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, event: ControllerEvent) -> None:
        with self._lock:
            self.events.append(event)

    def snapshot(self) -> list[ControllerEvent]:
        with self._lock:
            return list(self.events)

"""The resubmission controller's manager: leader election, one session per term, observers.

How the parts fit (each in its own module, as controller-runtime splits a manager, its
cache, work queue and reconciler):

* :mod:`.leader` elects one replica through a Lease. The leader runs a :mod:`.session`;
  losing the Lease ends it, and every write is fenced by :meth:`LeaderElector.is_leader`.
* A session's cache is a :class:`~sky_kueue.mirror.Mirror` of Workloads, SkyPilot pods and
  WorkloadPriorityClasses, resumed from the durable cursor (:mod:`.cursor`); its
  transitions go to the :mod:`.work_queue`, drained by one worker thread into the
  :mod:`.reconciler`.
* The reconciler classifies each Workload (:mod:`.detection`) and hands it to the
  :class:`~sky_kueue.controller.engine.AgingEngine`, which records the facts under their
  idempotency keys and ages a waiting Workload through the Kueue-level actuator
  (:mod:`.kube_actuator`): the ``priority-boost`` annotation when the cluster runs the
  PriorityBoost gate (:mod:`.gate_detection`), else a ``spec.priority`` merge patch.
* Observers (the demo, the benchmark) get a :class:`~.events.ControllerEvent` for every
  reconcile; the log and the users' hooks hear of changes (:mod:`.events`).

This module keeps the loop: elect, start or end sessions, retry undecided steps, re-age
waiting Workloads every ``reage_interval_seconds``, write the heartbeat. With relaunch lanes
configured (``teams.<t>.lane``) the session also mirrors ClusterQueues, and the heartbeat
carries each lane's occupancy and waiting relaunches (:mod:`sky_kueue.mirror.lanes`), at most
every :data:`LANE_REPORT_INTERVAL_SECONDS`, for ``controller status``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from sky_kueue.controller import liveness
from sky_kueue.controller.actuators import ActuationError, ActuationResult, Actuator, WorkloadPatch
from sky_kueue.controller.aging import ActuatorKind, AgingSettings
from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.clock import Clock, system_clock
from sky_kueue.controller.cursor import CURSOR_PERSIST_INTERVAL_SECONDS, WorkloadCursor
from sky_kueue.controller.detection import Detection
from sky_kueue.controller.engine import AgingEngine, ReconcileOutcome, band_mechanism
from sky_kueue.controller.events import (
    ControllerEvent,
    ControllerEventKind,
    Observer,
    log_reconcile,
    notify_user_hooks,
    workload_key,
)
from sky_kueue.controller.gate_detection import KUEUE_NAMESPACE, GateReading, detect_priority_boost_gate
from sky_kueue.controller.history import HistoryStore, StoreError, StoreWriteStats
from sky_kueue.controller.hold import HoldKeeper, HoldTeams
from sky_kueue.controller.kube_actuator import KubernetesWorkloadActuator, KubernetesWorkloadDeleter
from sky_kueue.controller.lane_route import Lanes
from sky_kueue.controller.leader import KubernetesLeaseClient, LeaderElector, LeaseClient, LeaseSettings
from sky_kueue.controller.metrics import WatchRequests
from sky_kueue.controller.mirror_model import MirrorModelCache
from sky_kueue.controller.reconciler import Reconciler, preemptor_class
from sky_kueue.controller.safety_probe import MirrorProtectedSlot, MirrorRelaunchWait, MirrorSafetyProbe
from sky_kueue.controller.session import SESSION_JOIN_SECONDS, Session, session_kinds
from sky_kueue.controller.state_spec import ControllerState
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.errors import MirrorError
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.lanes import lane_views
from sky_kueue.mirror.store import MirrorStore

log = logging.getLogger(__name__)

#: How often (cluster time) every waiting SkyPilot Workload is re-aged: the age factor grows
#: while a Workload waits, and nothing else may make the controller look at it again.
REAGE_INTERVAL_SECONDS = 300.0
#: How often :meth:`Controller.wait_until` re-checks its predicate without a notification.
WAIT_RECHECK_SECONDS = 0.5
#: How often (lease-clock seconds) the heartbeat's lane report is computed again: it reads every
#: mirrored Workload, so not at each beat.
LANE_REPORT_INTERVAL_SECONDS = 10.0


@dataclass(frozen=True)
class ControllerSettings:
    """How the controller runs (the aging tunables are :class:`AgingSettings`)."""

    lease: LeaseSettings
    #: Watch one namespace only (None: all namespaces).
    namespace: str | None = None
    #: Watch SkyPilot's pods in these namespaces only, the team namespaces (None: in all; a
    #: ``namespace`` above wins). ``controller run`` takes them from the plugin config.
    pod_namespaces: tuple[str, ...] | None = None
    #: Force the PriorityBoost gate's state (None: detect it in the cluster).
    priority_boost_gate: bool | None = None
    kueue_namespace: str = KUEUE_NAMESPACE
    workload_version: str = kueue_api.WORKLOAD_VERSIONS[0]
    cursor_persist_interval_seconds: float = CURSOR_PERSIST_INTERVAL_SECONDS
    #: Re-age waiting Workloads this often (seconds of the cluster clock; None: never).
    reage_interval_seconds: float | None = REAGE_INTERVAL_SECONDS


def _plus_session(requests: WatchRequests, session: Session) -> WatchRequests:
    counts = session.mirror.request_counts
    return WatchRequests(
        requests.lists + counts["lists"],
        requests.watches + counts["watches"],
        requests.initial + len(session.mirror.reflectors),
    )


class FencedActuator:
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
        holds: HoldTeams | None = None,
        burst_gates: BurstGates | None = None,
        lanes: Lanes | None = None,
    ) -> None:
        band_mechanism(aging)  # refuse a band setting it cannot honour before taking the Lease
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
        self._actuator = actuator or KubernetesWorkloadActuator(api_client)
        self._deleter = KubernetesWorkloadDeleter(api_client)
        self._observers = list(observers)
        #: Teams whose relaunches are held until they would not borrow (safe relaunch).
        self.holds = holds or HoldTeams()
        #: Teams whose preemption bursts wait for the predictor (``teams.<t>.burst``).
        self.burst_gates = burst_gates or BurstGates()
        #: Teams whose relaunches may enter a relaunch lane (reported in the heartbeat).
        self.lanes = lanes or Lanes()
        self._lane_report: tuple[float, list[dict[str, Any]]] | None = None
        self._session: Session | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.gate: GateReading | None = None
        self.sessions = 0
        self._last_reage: float | None = None
        #: Times this replica gained or lost the Lease (for metrics).
        self.leader_transitions = 0
        self._was_leading = False
        #: Watch requests of the sessions that ended (for metrics).
        self._ended_requests = WatchRequests(0, 0, 0)

    # --- what tests, the demo and the benchmark read -----------------------------------

    def versions(self) -> tuple[dict[str, str], dict[str, str]]:
        """The resourceVersion of every cached Workload and pod, by ``namespace/name``."""
        session = self._session
        if session is None:
            return {}, {}
        cache = session.mirror.store
        return cache.resource_versions(KindName.WORKLOAD), cache.resource_versions(KindName.POD)

    def notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_until(self, predicate: Callable[[], bool], timeout_seconds: float) -> bool:
        """Blocks until ``predicate()`` holds (re-checked after every handled item)."""
        deadline = time.monotonic() + timeout_seconds
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._changed.wait(min(remaining, WAIT_RECHECK_SECONDS))
            return True

    def idle(self) -> bool:
        """Leading, and nothing queued or in progress."""
        session = self._session
        return session is not None and not session.failed and session.idle()

    def handled_workload_version(self) -> int | None:
        """Up to which resourceVersion Workload changes were handled by the running session."""
        session = self._session
        return None if session is None else session.cursor.revision

    def queue_depth(self) -> int:
        """Work items queued and not yet taken (0 without a session)."""
        session = self._session
        return 0 if session is None else session.queue.depth

    def queue_oldest_age_seconds(self) -> float:
        """Seconds the oldest work item not yet taken has waited (0 without a session or item)."""
        session = self._session
        return 0.0 if session is None else session.queue.oldest_age_seconds()

    def watch_requests(self) -> WatchRequests:
        """Lists and watches of every session so far, with each session's first ones per kind."""
        ended, session = self._ended_requests, self._session
        if session is None:
            return ended
        return _plus_session(ended, session)

    def store_write_stats(self) -> StoreWriteStats:
        """The history store's writes and conflicts."""
        return self.store.write_stats()

    def emit(self, event: ControllerEvent) -> None:
        for observer in self._observers:
            observer(event)

    def report(
        self,
        obj: Mapping[str, Any],
        detection: Detection,
        outcome: ReconcileOutcome,
        replay: bool,
        cache: MirrorStore | None = None,
    ) -> None:
        """Logs what a reconcile changed, tells the users' hooks (live changes only) and the
        observers (with the Workload's ClusterQueue and pods from the term's ``cache``)."""
        if log_reconcile(obj, detection, outcome, replay=replay) and not replay:
            notify_user_hooks(obj, detection, outcome)
        cluster_queue = cache.cluster_queue_of(obj) if cache is not None else None
        pods = tuple(cache.pods_of_group(workload_key(obj))) if cache is not None else ()
        self.emit(
            ControllerEvent(
                ControllerEventKind.RECONCILED,
                self.clock(),
                obj,
                detection,
                outcome,
                replay,
                cluster_queue=cluster_queue,
                pods=pods,
            )
        )

    # --- leadership and sessions -------------------------------------------------------

    def is_leader(self) -> bool:
        return self.elector.is_leader()

    def _new_engine(self, cache: MirrorStore) -> AgingEngine:
        gate = self.settings.priority_boost_gate
        if gate is None and self.aging.actuator is ActuatorKind.AUTO:
            self.gate = detect_priority_boost_gate(self.api_client, self.settings.kueue_namespace)
            gate = self.gate.enabled
        elif gate is not None:
            self.gate = GateReading(gate, "set by the operator")
        actuator = FencedActuator(self._actuator, self.is_leader)
        keeper = None
        within_nominal = self.aging.protect_within_nominal
        model = MirrorModelCache(cache)  # built on the first question; shared by the gate and the hold
        if self.holds.enabled:
            keeper = HoldKeeper(self.store, actuator, self.holds, MirrorSafetyProbe(cache, self.clock, cached=model))
        engine = AgingEngine(
            self.store,
            actuator,
            self.aging,
            clock=self.clock,
            priority_boost_gate=gate,
            preemptor_priority=lambda preemptor: preemptor_class(cache, preemptor),
            holds=keeper,
            burst_gates=self.burst_gates,
            relaunch_wait=MirrorRelaunchWait(cache, self.clock, cached=model) if self.burst_gates.enabled else None,
            protected_slot=MirrorProtectedSlot(cache) if within_nominal else None,
            cluster=lambda: cache.cluster_identity,
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

    def _new_reconciler(self, cache: MirrorStore, engine: AgingEngine, cursor: WorkloadCursor) -> Reconciler:
        return Reconciler(
            cache=cache,
            engine=engine,
            history=self.store,
            cursor=cursor,
            deleter=self._deleter,
            workload_version=self.settings.workload_version,
            leading=self.is_leader,
            clock=self.clock,
            report=lambda obj, detection, outcome, replay: self.report(obj, detection, outcome, replay, cache),
            emit=self.emit,
        )

    def _start_session(self) -> None:
        try:
            cursor = WorkloadCursor(
                self.runtime, self.clock, persist_interval_seconds=self.settings.cursor_persist_interval_seconds
            )
            session = Session(
                self.api_client,
                workload_version=self.settings.workload_version,
                namespace=self.settings.namespace,
                pod_namespaces=self.settings.pod_namespaces,
                cursor=cursor,
                new_engine=self._new_engine,
                new_reconciler=self._new_reconciler,
                on_handled=self.notify,
                # protect_within_nominal reads ClusterQueues' nominal quota from the mirror too.
                kind_list=session_kinds(
                    self.holds.enabled
                    or self.burst_gates.enabled
                    or self.aging.protect_within_nominal
                    or self.lanes.enabled  # the lanes' quota, for the heartbeat's report
                ),
            )
        except StoreError as err:
            log.warning("cannot start a controller session (retrying): %s", err)
            return
        try:
            session.start()
        except (MirrorError, StoreError, OSError) as err:
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
        self._ended_requests = _plus_session(self._ended_requests, session)
        try:
            session.stop()
        except StoreError as err:
            log.warning("cannot save the cursor (the next session replays a little more): %s", err)
        log.info("session ended: %s", why)
        self.emit(ControllerEvent(ControllerEventKind.SESSION_ENDED, self.clock(), detail=why))
        self.notify()

    def step(self) -> bool:
        """One round of the election loop; returns whether this replica leads."""
        leading = self.elector.try_acquire_or_renew()
        if leading != self._was_leading:
            self._was_leading = leading
            self.leader_transitions += 1
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

    def _maybe_reage(self, session: Session) -> None:
        interval = self.settings.reage_interval_seconds
        if interval is None:
            return
        now = self.clock()
        if self._last_reage is None or now - self._last_reage >= interval:
            self._last_reage = now
            session.reage_later()

    def _beat(self, leading: bool, *, stopped: bool = False) -> None:
        """Write the heartbeat: who, whether leading, and (for ``controller status``) how often
        it beats and whether this is the last beat of a process shutting down."""
        if self.runtime is None:
            return
        details: dict[str, Any] = {
            "sessions": self.sessions,
            "lease": f"{self.settings.lease.namespace}/{self.settings.lease.name}",
            "holder": self.elector.observed_holder,
            liveness.PERIOD_KEY: self.settings.lease.retry_period_seconds,
        }
        if stopped:
            details[liveness.STOPPED_KEY] = True
        session = self._session
        if session is not None and session.engine is not None:
            details["mechanism"] = session.engine.mechanism.value
        if session is not None and self.lanes.enabled:
            details[liveness.LANES_KEY] = self._lanes_report(session.mirror.store)
        try:
            self.runtime.beat(self.elector.identity, leading, self.lease_clock(), details)
        except StoreError as err:
            log.warning("cannot write the heartbeat: %s", err)

    def _lanes_report(self, cache: MirrorStore) -> list[dict[str, Any]]:
        """Each lane's occupancy and waiting relaunches as the mirror holds them (recomputed at most
        every :data:`LANE_REPORT_INTERVAL_SECONDS`)."""
        now = self.lease_clock()
        if self._lane_report is not None and now - self._lane_report[0] < LANE_REPORT_INTERVAL_SECONDS:
            return self._lane_report[1]
        views = lane_views(
            cache.items(KindName.CLUSTER_QUEUE),
            cache.items(KindName.LOCAL_QUEUE),
            cache.items(KindName.WORKLOAD),
            now=self.clock(),
            identities=cache.identities(),
            names=[lane.cluster_queue for lane in self.lanes.by_team.values() if lane.cluster_queue],
        )
        report = [view.to_json() for view in views]
        self._lane_report = (now, report)
        return report

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
        self._beat(False, stopped=True)

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

"""Kubernetes Events on the Workloads the controller acts on, as controllers record them.

``kubectl describe workload`` then shows, beside Kueue's own Events, what sky-kueue did:
``PreemptionRecorded`` (a Kueue preemption counted toward aging), ``Aged`` (a boost step or a
band level patched), ``BurstDecided`` (the job goes to a cloud on its next relaunch), ``Held``
("held: waiting for nominal quota (predicted 4m)": a relaunch kept out of Kueue until it would
not borrow), ``Released`` (why it was let in) and ``MovedToLane`` (a relaunch queued in its
team's relaunch lane, :mod:`sky_kueue.controller.lane_moves`).

Why core ``v1`` Events rather than ``events.k8s.io/v1``: ``kubectl describe`` lists the
involved object's Events through the core API (a field selector on ``involvedObject``), the
sandbox API server serves core Events with those field selectors, and the two APIs share one
storage on a real cluster.

Deduplication and rate limiting follow client-go's recorder (``tools/record``, its
``EventCorrelator``): an Event with the same reason on the same object within
:data:`DEDUP_WINDOW_SECONDS` is not created again; the existing one gets ``count + 1``, the
newest message and ``lastTimestamp`` through a patch. Each object may emit
:data:`SPAM_BURST` Events at once, then one per :data:`SPAM_REFILL_SECONDS` (client-go's
spam filter: burst 25, one per 5 minutes); the excess is dropped. Recording never blocks a
reconcile: Events go through a bounded queue (:data:`QUEUE_SIZE`, full: dropped, as
client-go's broadcaster does) to one writer thread, and a failed write is logged and dropped.

:class:`EventCorrelator` and :func:`events_for` are pure; :class:`WorkloadEventRecorder` does the I/O.
"""

from __future__ import annotations

import datetime
import enum
import logging
import queue
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.controller.actuators import WorkloadRef
from sky_kueue.controller.clock import Clock, system_clock
from sky_kueue.controller.engine import FactKind
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind, outcome_applied
from sky_kueue.controller.hold import HoldAction
from sky_kueue.controller.lane_moves import LaneEntries
from sky_kueue.controller.lane_route import Lanes
from sky_kueue.kueue import api as kueue_api

log = logging.getLogger(__name__)

#: Same reason on the same object within this many seconds: count + 1 on the existing Event
#: (client-go aggregates within 10 minutes).
DEDUP_WINDOW_SECONDS = 600.0
#: Events an object may emit at once (client-go's spam filter burst).
SPAM_BURST = 25
#: Seconds for an object to earn one more Event once its burst is spent (client-go: 1/300 QPS).
SPAM_REFILL_SECONDS = 300.0
#: Objects remembered by the correlator (client-go's LRU size); the oldest is forgotten first.
MAX_REMEMBERED = 4096
#: Events waiting for the writer thread; more are dropped.
QUEUE_SIZE = 1000
#: Per-request timeout (connect, read) of an Event write, whole seconds.
REQUEST_TIMEOUT_SECONDS = (5, 10)
#: The component named in ``source`` and ``reportingComponent``.
COMPONENT = "sky-kueue-controller"
REPORTING_COMPONENT = "sky-kueue.io/controller"
#: How long :meth:`WorkloadEventRecorder.close` waits for the writer to drain.
CLOSE_JOIN_SECONDS = 5.0
#: Written requests kept in :attr:`WorkloadEventRecorder.sent`.
SENT_REMEMBERED = 256
#: Event types (core v1).
NORMAL = "Normal"


class EventReason(str, enum.Enum):
    PREEMPTION_RECORDED = "PreemptionRecorded"
    AGED = "Aged"
    BURST_DECIDED = "BurstDecided"
    HELD = "Held"
    RELEASED = "Released"
    MOVED_TO_LANE = "MovedToLane"


@dataclass(frozen=True)
class EventRequest:
    """One Event to record on a Workload."""

    target: WorkloadRef
    reason: EventReason
    message: str
    type: str = NORMAL

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.target.namespace, self.target.name, self.target.uid, self.reason.value)


class Action(str, enum.Enum):
    CREATE = "create"
    PATCH = "patch"
    DROP = "drop"


@dataclass(frozen=True)
class Correlation:
    """What to do with one request: create an Event, patch ``name`` to ``count``, or drop it."""

    action: Action
    count: int = 1
    name: str = ""
    first_at: float = 0.0


@dataclass
class _Seen:
    name: str
    count: int
    first_at: float
    last_at: float


@dataclass
class _Bucket:
    tokens: float
    at: float


class EventCorrelator:
    """client-go's dedup and spam filter, on an injected time (pure; one thread at a time)."""

    def __init__(
        self,
        *,
        window_seconds: float = DEDUP_WINDOW_SECONDS,
        burst: int = SPAM_BURST,
        refill_seconds: float = SPAM_REFILL_SECONDS,
        max_remembered: int = MAX_REMEMBERED,
    ) -> None:
        self._window = window_seconds
        self._burst = burst
        self._refill = refill_seconds
        self._max = max_remembered
        self._seen: OrderedDict[tuple[str, str, str, str], _Seen] = OrderedDict()
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def correlate(self, request: EventRequest, now: float) -> Correlation:
        if not self._take_token(request.target.uid, now):
            return Correlation(Action.DROP)
        seen = self._seen.get(request.key)
        if seen is not None and now - seen.last_at <= self._window:
            return Correlation(Action.PATCH, seen.count + 1, seen.name, seen.first_at)
        return Correlation(Action.CREATE, 1, "", now)

    def recorded(self, request: EventRequest, name: str, count: int, first_at: float, now: float) -> None:
        """The Event ``name`` now says ``count`` (after a create or a patch)."""
        self._seen.pop(request.key, None)
        self._seen[request.key] = _Seen(name, count, first_at, now)
        while len(self._seen) > self._max:
            self._seen.popitem(last=False)

    def forget(self, request: EventRequest) -> None:
        """The Event is gone (a patch found none): the next request creates one."""
        self._seen.pop(request.key, None)

    def _take_token(self, uid: str, now: float) -> bool:
        bucket = self._buckets.pop(uid, None) or _Bucket(float(self._burst), now)
        bucket.tokens = min(float(self._burst), bucket.tokens + max(0.0, now - bucket.at) / self._refill)
        bucket.at = now
        self._buckets[uid] = bucket
        while len(self._buckets) > self._max:
            self._buckets.popitem(last=False)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


def events_for(event: ControllerEvent, lanes: LaneEntries | None = None) -> list[EventRequest]:
    """The Events one reconcile calls for (pure but for ``lanes``' memory of announced entries):
    a preemption recorded, a patch applied, a burst, a hold, a relaunch entering its lane."""
    outcome, detection = event.outcome, event.detection
    if event.kind is not ControllerEventKind.RECONCILED or outcome is None or detection is None:
        return []
    facts = detection.workload
    own = WorkloadRef.of(facts)
    requests: list[EventRequest] = []
    entered = lanes.entry(event) if lanes is not None else None
    if entered is not None:
        requests.append(EventRequest(own, EventReason.MOVED_TO_LANE, entered.message()))
    eviction = detection.eviction
    if eviction is not None and outcome.recorded_any(FactKind.PREEMPTION):
        reason = eviction.preemption_reason.value if eviction.preemption_reason else "Unknown"
        preemptor = eviction.preemptor.workload_uid if eviction.preemptor is not None else None
        by = f" by Workload UID {preemptor}" if preemptor else ""
        requests.append(
            EventRequest(
                own,
                EventReason.PREEMPTION_RECORDED,
                f"sky-kueue recorded a Kueue preemption ({reason}){by} for job {outcome.job_key}",
            )
        )
    patch = outcome.patch
    if outcome_applied(outcome) and patch is not None:
        decision = outcome.decision
        after = f" after {decision.preemptions} preemption(s)" if decision is not None else ""
        step = f" (step {outcome.step.key.token})" if outcome.step is not None else ""
        if patch.boost == 0:
            # A band level recorded on a Workload already at it (plan_band_patch's record_level).
            what = f"sky-kueue kept priority {patch.effective_priority} and recorded it as the Workload's band level"
        else:
            how = f"boost {patch.boost:+d}, {patch.mechanism.value}"
            what = f"sky-kueue set priority {patch.effective_priority} ({how})"
        requests.append(EventRequest(patch.target, EventReason.AGED, f"{what}{after}{step}"))
    if outcome.burst is not None:
        requests.append(
            EventRequest(own, EventReason.BURST_DECIDED, f"sky-kueue: the next relaunch bursts: {outcome.burst.detail}")
        )
    hold = outcome.hold
    if hold is not None and hold.record is not None:
        if hold.action is HoldAction.HELD:
            requests.append(EventRequest(own, EventReason.HELD, hold.record.reason))
        elif hold.action is HoldAction.RELEASED:
            requests.append(EventRequest(own, EventReason.RELEASED, hold.record.release_reason or "released"))
    return requests


def _timestamp(at: float) -> str:
    moment = datetime.datetime.fromtimestamp(at, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def event_body(request: EventRequest, name: str, at: float, instance: str) -> dict[str, Any]:
    """A core v1 Event about ``request.target`` (pure)."""
    target = request.target
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": target.namespace},
        "involvedObject": {
            "apiVersion": f"{kueue_api.KUEUE_GROUP}/{target.version}",
            "kind": "Workload",
            "name": target.name,
            "namespace": target.namespace,
            "uid": target.uid,
        },
        "reason": request.reason.value,
        "message": request.message,
        "type": request.type,
        "count": 1,
        "firstTimestamp": _timestamp(at),
        "lastTimestamp": _timestamp(at),
        "source": {"component": COMPONENT},
        "reportingComponent": REPORTING_COMPONENT,
        "reportingInstance": instance,
    }


class WorkloadEventRecorder:
    """The observer that records :func:`events_for` each reconcile, through one writer thread.

    Args:
        api_client: the controller's client (its User-Agent names the controller).
        instance: this replica's identity (``reportingInstance``).
        clock: the cluster's time (the Events' timestamps and the dedup window).
        lanes: the teams' relaunch lanes (``MovedToLane``).
    """

    def __init__(
        self, api_client: client.ApiClient, instance: str, clock: Clock = system_clock, lanes: Lanes | None = None
    ) -> None:
        self._api = client.CoreV1Api(api_client)
        self._lanes = LaneEntries(lanes) if lanes is not None and lanes.enabled else None
        self._instance = instance
        self._clock = clock
        self._correlator = EventCorrelator()
        self._queue: queue.Queue[EventRequest | None] = queue.Queue(QUEUE_SIZE)
        self._thread = threading.Thread(target=self._write_all, name="sky-kueue-events", daemon=True)
        self.dropped = 0
        self._last_nanos = 0
        #: The latest requests written (created or counted), in order; bounded, since the
        #: recorder lives as long as the controller.
        self.sent: deque[EventRequest] = deque(maxlen=SENT_REMEMBERED)
        self._thread.start()

    def __call__(self, event: ControllerEvent) -> None:
        self.record(events_for(event, self._lanes))

    def record(self, requests: Sequence[EventRequest]) -> None:
        for request in requests:
            try:
                self._queue.put_nowait(request)
            except queue.Full:
                self.dropped += 1
                log.debug("event queue full; dropped %s on %s", request.reason.value, request.target)

    def flush(self) -> None:
        """Blocks until every queued Event is written (or dropped)."""
        self._queue.join()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(CLOSE_JOIN_SECONDS)

    def _write_all(self) -> None:
        while (request := self._queue.get()) is not None:
            try:
                self._write(request)
            except (ApiException, OSError) as err:  # urllib3's errors are OSErrors
                log.warning("cannot record event %s on Workload %s: %s", request.reason.value, request.target, err)
            finally:
                self._queue.task_done()
        self._queue.task_done()

    def _write(self, request: EventRequest) -> None:
        now = self._clock()
        correlation = self._correlator.correlate(request, now)
        if correlation.action is Action.DROP:
            self.dropped += 1
            return
        if correlation.action is Action.PATCH:
            patch = {"count": correlation.count, "message": request.message, "lastTimestamp": _timestamp(now)}
            try:
                self._api.patch_namespaced_event(
                    correlation.name, request.target.namespace, patch, _request_timeout=REQUEST_TIMEOUT_SECONDS
                )
            except ApiException as err:
                if err.status != 404:
                    raise
                self._correlator.forget(request)  # deleted (TTL): start a new one
            else:
                self._correlator.recorded(request, correlation.name, correlation.count, correlation.first_at, now)
                self.sent.append(request)
                return
        # client-go names an Event <object>.<unix nanoseconds>; a relaunch reuses the Workload's
        # name, and a manual clock repeats instants, so the nanoseconds only ever increase here.
        self._last_nanos = max(int(now * 1e9), self._last_nanos + 1)
        name = f"{request.target.name}.{self._last_nanos:x}"
        self._api.create_namespaced_event(
            request.target.namespace,
            event_body(request, name, now, self._instance),
            _request_timeout=REQUEST_TIMEOUT_SECONDS,
        )
        self._correlator.recorded(request, name, 1, now, now)
        self.sent.append(request)

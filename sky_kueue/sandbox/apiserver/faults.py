"""Fault injection: make chosen requests fail the way real clusters fail.

Why: the code under test (the mirror, the controller, the SkyPilot policy) must survive what a
real API server does under load or during upgrades — 500s, throttling with Retry-After, slow
answers, connections reset before any byte, watch streams cut mid-way or closed cleanly, and
410 on a watch — and each of these reaches a client differently (an ``ApiException``, a
``urllib3`` ``ProtocolError``, a silent reconnect inside ``Watch.stream``). A fault is matched
on the request's verb, resource, name, namespace and subresource, and fires a given number of
times; the server records in its request log which fault each request met.
"""

from __future__ import annotations

import dataclasses
import enum
import threading

#: Default Retry-After of an injected 429.
DEFAULT_RETRY_AFTER_SECONDS = 1


class FaultKind(str, enum.Enum):
    """What happens to a matching request.

    ``STATUS`` answers with ``status_code`` (500 by default) and a Status body;
    ``THROTTLE`` answers 429 with ``Retry-After``; ``DELAY`` waits ``delay_seconds`` and then
    serves the request normally; ``DROP_CONNECTION`` closes the connection without answering.
    The watch faults apply to watch requests after ``after_events`` events were sent:
    ``WATCH_CUT`` closes the connection mid-stream (no terminating chunk), ``WATCH_END`` ends
    the stream cleanly, ``WATCH_GONE`` sends an ERROR event with a 410 Status and ends.
    """

    STATUS = "status"
    THROTTLE = "throttle"
    DELAY = "delay"
    DROP_CONNECTION = "drop-connection"
    WATCH_CUT = "watch-cut"
    WATCH_END = "watch-end"
    WATCH_GONE = "watch-gone"

    @property
    def is_watch_fault(self) -> bool:
        return self in (FaultKind.WATCH_CUT, FaultKind.WATCH_END, FaultKind.WATCH_GONE)


@dataclasses.dataclass(frozen=True)
class RequestInfo:
    """What a fault (and the request log) knows about a request.

    ``verb`` is the Kubernetes verb: get, list, watch, create, update, patch, delete,
    deletecollection (or the HTTP method, lower-case, for non-resource paths).
    """

    verb: str
    resource: str = ""
    group: str = ""
    version: str = ""
    namespace: str = ""
    name: str = ""
    subresource: str = ""


@dataclasses.dataclass
class Fault:
    """An injected fault; ``None`` matchers match anything. Read ``fired`` to see how often it hit."""

    kind: FaultKind
    verb: str | None = None
    resource: str | None = None
    name: str | None = None
    namespace: str | None = None
    subresource: str | None = None
    times: int = 1
    status_code: int = 500
    retry_after_seconds: int = DEFAULT_RETRY_AFTER_SECONDS
    delay_seconds: float = 0.0
    after_events: int = 0
    fired: int = 0

    def matches(self, request: RequestInfo) -> bool:
        if self.kind.is_watch_fault and request.verb != "watch":
            return False
        checks = (
            (self.verb, request.verb),
            (self.resource, request.resource),
            (self.name, request.name),
            (self.namespace, request.namespace),
            (self.subresource, request.subresource),
        )
        return all(wanted is None or wanted == actual for wanted, actual in checks)

    @property
    def exhausted(self) -> bool:
        return self.fired >= self.times


class FaultInjector:
    """The set of armed faults; thread-safe. Each request takes at most one fault."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def inject(
        self,
        kind: FaultKind | str,
        *,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        subresource: str | None = None,
        times: int = 1,
        status_code: int = 500,
        retry_after_seconds: int = DEFAULT_RETRY_AFTER_SECONDS,
        delay_seconds: float = 0.0,
        after_events: int = 0,
    ) -> Fault:
        """Arms a fault for the next ``times`` matching requests and returns it."""
        fault = Fault(
            FaultKind(kind),
            verb=verb,
            resource=resource,
            name=name,
            namespace=namespace,
            subresource=subresource,
            times=times,
            status_code=status_code,
            retry_after_seconds=retry_after_seconds,
            delay_seconds=delay_seconds,
            after_events=after_events,
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, request: RequestInfo) -> Fault | None:
        """The first armed fault matching ``request``, counted as fired; None if none."""
        with self._lock:
            for fault in self._faults:
                if not fault.exhausted and fault.matches(request):
                    fault.fired += 1
                    return fault
        return None

    def clear(self) -> None:
        """Disarms every fault."""
        with self._lock:
            self._faults.clear()

    def pending(self) -> list[Fault]:
        """Faults that have not fired all their times yet."""
        with self._lock:
            return [fault for fault in self._faults if not fault.exhausted]

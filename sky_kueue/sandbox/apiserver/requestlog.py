"""The request log: what clients asked of the server, for assertions in tests.

Why: much of what the project promises is about traffic, not state — "the mirror lists once
and then only watches", "the controller re-watches from the last resourceVersion after a cut",
"no write is retried blindly". Recording every request (verb, resource, query, status, which
fault it met) makes those promises testable. The log is bounded so a long-running sandbox
does not grow without limit.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable

from sky_kueue.sandbox.apiserver.faults import FaultKind, RequestInfo

#: Default number of requests remembered.
REQUEST_LOG_CAPACITY_RECORDS = 20_000


@dataclasses.dataclass(frozen=True)
class RequestRecord:
    """One finished request.

    ``status`` is the HTTP status sent (0 if the connection was dropped without answer);
    ``query`` maps each query parameter to its last value.
    """

    method: str
    path: str
    query: dict[str, str]
    info: RequestInfo
    status: int
    duration_seconds: float
    fault: FaultKind | None = None
    user_agent: str = ""
    #: The authenticated user (``system:serviceaccount:<ns>:<name>`` for a pod's token);
    #: empty for a request without credentials (the sandbox's kubeconfig carries none).
    user: str = ""

    @property
    def verb(self) -> str:
        return self.info.verb

    @property
    def resource(self) -> str:
        return self.info.resource


class RequestLog:
    """A bounded, thread-safe list of :class:`RequestRecord`, oldest first."""

    def __init__(self, capacity_records: int = REQUEST_LOG_CAPACITY_RECORDS) -> None:
        self._records: collections.deque[RequestRecord] = collections.deque(maxlen=capacity_records)
        self._condition = threading.Condition()

    def append(self, record: RequestRecord) -> None:
        with self._condition:
            self._records.append(record)
            self._condition.notify_all()

    def records(self) -> list[RequestRecord]:
        with self._condition:
            return list(self._records)

    def __len__(self) -> int:
        with self._condition:
            return len(self._records)

    def clear(self) -> None:
        with self._condition:
            self._records.clear()

    def matching(
        self,
        *,
        verb: str | None = None,
        resource: str | None = None,
        name: str | None = None,
        namespace: str | None = None,
        status: int | None = None,
    ) -> list[RequestRecord]:
        """Records whose fields equal every given (non-None) value."""
        return [
            record
            for record in self.records()
            if (verb is None or record.info.verb == verb)
            and (resource is None or record.info.resource == resource)
            and (name is None or record.info.name == name)
            and (namespace is None or record.info.namespace == namespace)
            and (status is None or record.status == status)
        ]

    def wait_for(self, predicate: Callable[[list[RequestRecord]], bool], timeout_seconds: float) -> bool:
        """Blocks until ``predicate(records)`` holds or the timeout passes; returns whether it held."""
        deadline = time.monotonic() + timeout_seconds
        with self._condition:
            while not predicate(list(self._records)):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._condition.wait(remaining)
            return True

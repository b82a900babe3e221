"""Change events and the bounded log that watches resume from.

Why bounded, and why it must say "410": a real cluster keeps a window of history (the watch
cache and etcd before compaction). A client that resumes a watch from a resourceVersion older
than the window gets ``410 Gone`` and must relist; a client that never handles that is broken
in production. The log here has a fixed capacity; once events fall out of it, resuming from
before them raises 410, and :meth:`EventLog.compact` drops history on demand so tests can
provoke the real thing.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import Iterator
from typing import Any

from sky_kueue.sandbox.apiserver import errors
from sky_kueue.sandbox.apiserver.objects import ObjectKey
from sky_kueue.sandbox.apiserver.resources import ResourceType

#: Default number of change events kept for watch resumption. Each retained event keeps one
#: object version alive (1-4 KB for typical objects), so this bounds memory at tens of MB.
WATCH_EVENT_LOG_CAPACITY_EVENTS = 10_000


class EventType(str, enum.Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


@dataclasses.dataclass(frozen=True)
class StoreEvent:
    """A committed change.

    ``obj`` is the object after the change (for DELETED: its last state, carrying the
    deletion's resourceVersion); ``old`` the object before it (None for ADDED). Both are the
    store's own, storage-version dicts: read them, never modify them.
    """

    resource_version: int
    type: EventType
    resource: ResourceType
    key: ObjectKey
    obj: dict[str, Any]
    old: dict[str, Any] | None


class EventLog:
    """The most recent events, oldest first, with the resourceVersion below which history is lost."""

    def __init__(self, capacity_events: int = WATCH_EVENT_LOG_CAPACITY_EVENTS) -> None:
        if capacity_events < 1:
            raise ValueError("the event log needs room for at least one event")
        self._events: collections.deque[StoreEvent] = collections.deque()
        self._capacity = capacity_events
        self._compacted_through = 0

    @property
    def compacted_through(self) -> int:
        """Events with resourceVersion <= this value can no longer be replayed."""
        return self._compacted_through

    def __len__(self) -> int:
        return len(self._events)

    def append(self, event: StoreEvent) -> None:
        self._events.append(event)
        if len(self._events) > self._capacity:
            self._compacted_through = self._events.popleft().resource_version

    def compact(self, through_resource_version: int) -> None:
        """Forgets every event with resourceVersion <= the given one."""
        while self._events and self._events[0].resource_version <= through_resource_version:
            self._events.popleft()
        self._compacted_through = max(self._compacted_through, through_resource_version)

    def truncate_after(self, resource_version: int) -> None:
        """Forgets every event newer than ``resource_version`` (the store was rolled back to it)."""
        while self._events and self._events[-1].resource_version > resource_version:
            self._events.pop()

    def check_available(self, since_resource_version: int) -> None:
        """Raises ApiError 410 if events after ``since_resource_version`` were compacted away."""
        if since_resource_version < self._compacted_through:
            raise errors.too_old_resource_version(since_resource_version, self._compacted_through + 1)

    def after(self, since_resource_version: int) -> Iterator[StoreEvent]:
        """Events newer than ``since_resource_version``, oldest first.

        Raises:
            ApiError: 410 if some of them were compacted away.
        """
        self.check_available(since_resource_version)
        if not self._events or self._events[-1].resource_version <= since_resource_version:
            return iter(())
        # Binary search for the first newer event; the deque is ordered by resourceVersion.
        low, high = 0, len(self._events)
        while low < high:
            middle = (low + high) // 2
            if self._events[middle].resource_version <= since_resource_version:
                low = middle + 1
            else:
                high = middle
        return (self._events[index] for index in range(low, len(self._events)))

    def newest_first_after(self, since_resource_version: int) -> Iterator[StoreEvent]:
        """Events newer than ``since_resource_version``, newest first (to undo them).

        Raises:
            ApiError: 410 if some of them were compacted away.
        """
        self.check_available(since_resource_version)
        for event in reversed(self._events):
            if event.resource_version <= since_resource_version:
                return
            yield event

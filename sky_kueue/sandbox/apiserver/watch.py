"""Watchers: per-client ordered queues of change events, filtered as the apiserver filters them.

Why filtering happens here and not in the store: the store hands every change of a resource
to every watcher of that resource under its lock, in commit order, so each watcher sees a
gap-free sequence. Selectors are applied on the consumer's side, where the transition rules
live: an object that stops matching a watch's selector is reported as DELETED, one that starts
matching as ADDED, exactly as the apiserver's watch cache does. Getting this wrong is the
classic cause of informers that keep ghost objects.

Besides change events a watcher can yield a synthetic ADDED per existing object (the initial
state of ``sendInitialEvents`` or of a watch without resourceVersion) followed, if asked, by
the ``k8s.io/initial-events-end`` bookmark.
"""

from __future__ import annotations

import collections
import copy
import dataclasses
import threading
import time
from collections.abc import Callable
from typing import Any

from sky_kueue.sandbox.apiserver.events import EventType, StoreEvent
from sky_kueue.sandbox.apiserver.resources import ResourceType
from sky_kueue.sandbox.apiserver.selectors import ALL_FIELDS, EVERYTHING, FieldSelector, LabelSelector

#: Annotation of the bookmark that ends the initial events of ``sendInitialEvents``.
INITIAL_EVENTS_END_ANNOTATION = "k8s.io/initial-events-end"


class WatchClosed(Exception):
    """The watcher was closed (by its owner or because the server is stopping)."""


@dataclasses.dataclass(frozen=True)
class WatchEvent:
    """What a watch consumer receives.

    For ``BOOKMARK`` events ``obj`` is None and ``resource_version`` is the bookmark's;
    ``initial_events_end`` marks the bookmark that closes the initial state.
    """

    type: EventType
    resource: ResourceType | None
    obj: dict[str, Any] | None
    resource_version: int
    initial_events_end: bool = False


@dataclasses.dataclass(frozen=True)
class InitialEventsEnd:
    """The initial-events-end bookmark, queued after the synthetic ADDED events."""

    resource_version: int


class Watcher:
    """An ordered queue of one watch's events; obtain one from ``ObjectStore.watch``.

    Use as an iterator (blocking) or call :meth:`next` with a timeout; close it when done
    (it is a context manager), or the store keeps queueing events for it.
    """

    def __init__(
        self,
        resource: ResourceType | None,
        namespace: str | None,
        label_selector: LabelSelector = EVERYTHING,
        field_selector: FieldSelector = ALL_FIELDS,
        *,
        copy_objects: bool = True,
        on_close: Callable[[Watcher], None] | None = None,
    ) -> None:
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self._copy_objects = copy_objects
        self._on_close = on_close
        self._queue: collections.deque[StoreEvent | InitialEventsEnd] = collections.deque()
        self._condition = threading.Condition(threading.Lock())
        self._closed = False

    # -- store side (called with the store lock held) ------------------------------------

    def wants(self, event: StoreEvent) -> bool:
        """Cheap pre-filter on resource and namespace; selectors are applied in :meth:`next`."""
        if self.resource is not None and event.resource.key != self.resource.key:
            return False
        return not self.namespace or event.key.namespace == self.namespace

    def offer(self, item: StoreEvent | InitialEventsEnd) -> None:
        with self._condition:
            if self._closed:
                return
            self._queue.append(item)
            self._condition.notify()

    def is_drained(self) -> bool:
        with self._condition:
            return not self._queue

    # -- consumer side --------------------------------------------------------------------

    def _matches(self, obj: dict[str, Any] | None) -> bool:
        return obj is not None and self.label_selector.matches(obj) and self.field_selector.matches(obj)

    def _translate(self, event: StoreEvent) -> WatchEvent | None:
        now_matches = self._matches(event.obj)
        if event.type is EventType.DELETED:
            kind = EventType.DELETED if now_matches or self._matches(event.old) else None
        elif event.type is EventType.ADDED:
            kind = EventType.ADDED if now_matches else None
        else:
            was_matching = self._matches(event.old)
            if was_matching and now_matches:
                kind = EventType.MODIFIED
            elif now_matches:
                kind = EventType.ADDED
            elif was_matching:
                kind = EventType.DELETED
            else:
                kind = None
        if kind is None:
            return None
        obj = copy.deepcopy(event.obj) if self._copy_objects else event.obj
        return WatchEvent(kind, event.resource, obj, event.resource_version)

    def next(self, timeout_seconds: float | None = None) -> WatchEvent | None:
        """The next event for this watch, or None if none arrived within the timeout.

        Raises:
            WatchClosed: once the watcher is closed.
        """
        deadline = None if timeout_seconds is None else time.monotonic() + timeout_seconds
        while True:
            with self._condition:
                while not self._queue and not self._closed:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return None
                    self._condition.wait(remaining)
                if self._closed:
                    raise WatchClosed()
                item = self._queue.popleft()
            if isinstance(item, InitialEventsEnd):
                return WatchEvent(EventType.BOOKMARK, self.resource, None, item.resource_version, True)
            translated = self._translate(item)
            if translated is not None:
                return translated
            # Filtered out by the selectors: keep waiting.

    def __iter__(self) -> Watcher:
        return self

    def __next__(self) -> WatchEvent:
        try:
            event = self.next(None)
        except WatchClosed:
            raise StopIteration from None
        if event is None:  # pragma: no cover - next(None) only returns on an event or close
            raise StopIteration
        return event

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stops the watch; a blocked :meth:`next` wakes up and raises WatchClosed."""
        with self._condition:
            if self._closed:
                return
            self._closed = True
            self._queue.clear()
            self._condition.notify_all()
        if self._on_close is not None:
            self._on_close(self)

    def __enter__(self) -> Watcher:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

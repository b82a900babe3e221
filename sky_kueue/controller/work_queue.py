"""The controller's work queue: typed items, one consumer, and an exact notion of "idle".

Why typed items rather than keys only (client-go's work queue holds ``namespace/name``
strings and the reconciler reads the object from the cache): exactly-once aging must see
the *last state of a deleted Workload* (a preempted SkyPilot pod group is finished and
garbage-collected within a second) and the *past states replayed* after a restart, neither
of which the cache holds. So an item names its cause (:class:`WorkCause`) and carries the
mirror's transition when there is one; periodic work (retries, re-aging) has a cause and
no transition.

Why "unfinished" rather than "empty": a test or the demo waits until every change has been
handled, including the one being reconciled right now; the count drops only after the
worker has finished an item (:meth:`WorkQueue.done`).

Why an enqueue instant per item: the age of the oldest queued item (client-go's
``workqueue_queue_duration_seconds`` tells the same story) shows a reconciler falling behind
before the depth does, and costs one clock read per ``put``; it is read at scrape time.
"""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from sky_kueue.mirror.transitions import Transition, TransitionKind


class WorkCause(str, Enum):
    """Why the reconciler is asked to look."""

    #: A kind was listed: the initial list (maybe followed by a replay) or a relist after a gap.
    SYNCED = "synced"
    #: The resumed watch has replayed everything up to the list: from now on, changes are live.
    CAUGHT_UP = "caught-up"
    #: The Workload watch reached a version (nothing changed): the cursor may advance.
    BOOKMARK = "bookmark"
    #: A Workload changed (live, resumed or from a relist): its snapshot is in the transition.
    WORKLOAD = "workload"
    #: A pod of a SkyPilot group changed or is gone.
    POD = "pod"
    #: Re-actuate aging steps still decided (a transient API error, a lapse of the Lease).
    RETRY = "retry"
    #: Re-age every waiting Workload: its age keeps growing while nothing else changes.
    REAGE = "reage"


_CAUSE_OF_TRANSITION: dict[TransitionKind, WorkCause] = {
    TransitionKind.SYNCED: WorkCause.SYNCED,
    TransitionKind.CAUGHT_UP: WorkCause.CAUGHT_UP,
    TransitionKind.BOOKMARK: WorkCause.BOOKMARK,
    TransitionKind.POD_CHANGED: WorkCause.POD,
    TransitionKind.POD_DELETED: WorkCause.POD,
}


@dataclass(frozen=True)
class WorkItem:
    """One unit of work: a cause, and the mirror's transition behind it (if any)."""

    cause: WorkCause
    transition: Transition | None = None

    @classmethod
    def of(cls, transition: Transition) -> WorkItem:
        return cls(_CAUSE_OF_TRANSITION.get(transition.kind, WorkCause.WORKLOAD), transition)


class WorkQueue:
    """FIFO of :class:`WorkItem`; ``put`` from any thread (the mirror's writer included)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._items: collections.deque[WorkItem] = collections.deque()
        #: When each queued item was put (seconds of ``clock``), in the items' order.
        self._enqueued: collections.deque[float] = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._unfinished = 0
        self._closed = False

    def put(self, item: WorkItem) -> None:
        with self._ready:
            if self._closed:
                return
            self._items.append(item)
            self._enqueued.append(self._clock())
            self._unfinished += 1
            self._ready.notify()

    def put_transition(self, transition: Transition) -> None:
        """The mirror's sink (called under the mirror's lock: it only appends)."""
        self.put(WorkItem.of(transition))

    def get(self) -> WorkItem | None:
        """The next item, blocking; None once the queue is closed."""
        with self._ready:
            self._ready.wait_for(lambda: self._items or self._closed)
            if self._closed:
                return None
            self._enqueued.popleft()
            return self._items.popleft()

    def done(self) -> None:
        """The item last returned by :meth:`get` is handled."""
        with self._ready:
            self._unfinished -= 1

    @property
    def idle(self) -> bool:
        """Nothing queued and nothing being handled."""
        with self._ready:
            return self._unfinished == 0

    @property
    def depth(self) -> int:
        """Items queued and not yet taken."""
        with self._ready:
            return len(self._items)

    def oldest_age_seconds(self) -> float:
        """Seconds the oldest item not yet taken has been queued (0 when none is)."""
        with self._ready:
            if not self._enqueued:
                return 0.0
            oldest = self._enqueued[0]
        return max(0.0, self._clock() - oldest)

    def holds(self, cause: WorkCause) -> bool:
        """An item of ``cause`` is queued (not yet taken): no need to queue another."""
        with self._ready:
            return any(item.cause is cause for item in self._items)

    def close(self) -> None:
        """Wakes the consumer; items still queued are dropped."""
        with self._ready:
            self._closed = True
            self._items.clear()
            self._enqueued.clear()
            self._ready.notify_all()

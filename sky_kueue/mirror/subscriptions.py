"""Delivering transitions to subscribers: in order, none dropped, no subscriber blocking another.

Why a queue per subscriber: the reflectors must never wait for a slow consumer (a controller
patching Workloads, a terminal redrawing), or the watch streams back up and the server drops
them. So the store appends each transition, under its lock and therefore in one total order,
to every subscription's own unbounded queue and returns at once; each consumer drains its
queue at its own pace. Unbounded is deliberate: a dropped transition could be a preemption
that no later state shows again (the Workload is gone). A consumer that stops reading should
close its subscription.

Three ways to consume: pull (``for t in subscription`` or ``subscription.get(timeout)``);
push (``TransitionHub.subscribe(callback=...)`` runs the callback on a thread of its own; an
exception in the callback is logged and delivery goes on); or a *sink*
(``subscribe(sink=...)``), called by the writer itself, in stream order, under the store's
lock: a sink must only enqueue (the controller's work queue), and in return the consumer
knows that whatever the store holds has reached its queue (no item in flight between two
threads, so "idle" is exact).
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Collection, Iterable, Iterator

from sky_kueue.mirror.transitions import WORKLOAD_KINDS, Transition, TransitionKind

log = logging.getLogger(__name__)

Callback = Callable[[Transition], None]


class SubscriptionClosed(Exception):
    """The subscription was closed and its queue is drained."""


class Subscription:
    """One consumer's ordered queue of transitions."""

    def __init__(self, kinds: Collection[TransitionKind] | None, on_close: Callable[[Subscription], None]) -> None:
        #: What this subscription receives; None subscribes to every Workload transition
        #: (stream markers are delivered only when named).
        self.kinds: frozenset[TransitionKind] = frozenset(kinds) if kinds is not None else WORKLOAD_KINDS
        self._queue: collections.deque[Transition] = collections.deque()
        self._ready = threading.Condition(threading.Lock())
        self._closed = False
        self._on_close = on_close

    def wants(self, transition: Transition) -> bool:
        return transition.kind in self.kinds

    def offer(self, transitions: Iterable[Transition]) -> None:
        """Append (called by the hub, in stream order)."""
        with self._ready:
            if self._closed:
                return
            before = len(self._queue)
            self._queue.extend(t for t in transitions if self.wants(t))
            if len(self._queue) != before:
                self._ready.notify_all()

    def get(self, timeout_seconds: float | None = None) -> Transition | None:
        """The next transition; None if none arrived within the timeout.

        Raises:
            SubscriptionClosed: closed and drained.
        """
        with self._ready:
            if not self._ready.wait_for(lambda: self._queue or self._closed, timeout_seconds):
                return None
            if self._queue:
                return self._queue.popleft()
            raise SubscriptionClosed()

    def drain(self) -> list[Transition]:
        """Everything queued now, without waiting."""
        with self._ready:
            items = list(self._queue)
            self._queue.clear()
            return items

    def __iter__(self) -> Iterator[Transition]:
        """Blocks for each next transition; ends when the subscription is closed and drained."""
        while True:
            try:
                item = self.get(None)
            except SubscriptionClosed:
                return
            if item is not None:
                yield item

    def __len__(self) -> int:
        with self._ready:
            return len(self._queue)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Stop receiving; already queued transitions can still be read."""
        with self._ready:
            if self._closed:
                return
            self._closed = True
            self._ready.notify_all()
        self._on_close(self)

    def __enter__(self) -> Subscription:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class _SinkSubscription(Subscription):
    """A subscription whose transitions go straight to a sink (see the module docstring)."""

    def __init__(
        self,
        kinds: Collection[TransitionKind] | None,
        on_close: Callable[[Subscription], None],
        sink: Callback,
    ) -> None:
        super().__init__(kinds, on_close)
        self._sink = sink

    def offer(self, transitions: Iterable[Transition]) -> None:
        if self.closed:
            return
        for transition in transitions:
            if self.wants(transition):
                self._sink(transition)


class TransitionHub:
    """The set of subscriptions; :meth:`publish` fans a batch out to all of them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscriptions: list[Subscription] = []
        self._threads: list[threading.Thread] = []

    def subscribe(
        self,
        kinds: Collection[TransitionKind] | None = None,
        *,
        callback: Callback | None = None,
        backlog: Iterable[Transition] = (),
        sink: Callback | None = None,
    ) -> Subscription:
        """A new subscription; with ``callback``, a thread delivers to it; with ``sink``, the
        writer does (it must only enqueue).

        ``backlog`` is queued first (a replay of the current state, built under the store's
        lock so that nothing published later can overtake it).
        """
        subscription = (
            Subscription(kinds, self._remove) if sink is None else _SinkSubscription(kinds, self._remove, sink)
        )
        subscription.offer(backlog)
        with self._lock:
            self._subscriptions.append(subscription)
        if callback is not None:
            thread = threading.Thread(
                target=_deliver, args=(subscription, callback), name="sky-kueue-mirror-subscriber", daemon=True
            )
            with self._lock:
                self._threads.append(thread)
            thread.start()
        return subscription

    @property
    def has_subscribers(self) -> bool:
        with self._lock:
            return bool(self._subscriptions)

    def publish(self, transitions: list[Transition]) -> None:
        if not transitions:
            return
        with self._lock:
            subscriptions = list(self._subscriptions)
        for subscription in subscriptions:
            subscription.offer(transitions)

    def close_all(self, join_timeout_seconds: float = 5.0) -> None:
        with self._lock:
            subscriptions = list(self._subscriptions)
            threads = list(self._threads)
            self._threads.clear()
        for subscription in subscriptions:
            subscription.close()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(join_timeout_seconds)

    def _remove(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscriptions:
                self._subscriptions.remove(subscription)


def _deliver(subscription: Subscription, callback: Callback) -> None:
    """Callback delivery loop; a failing callback is logged, never silences the stream."""
    for transition in subscription:
        try:
            callback(transition)
        except Exception:
            log.exception("transition subscriber failed on %s %s", transition.kind.value, transition.key)

"""The queue mirror: one reflector per kind feeding one indexed store and its transition stream.

Usage (the controller's view)::

    from sky_kueue.mirror import Mirror, TransitionKind

    with Mirror.connect(kubeconfig, context) as mirror:       # discovery, then reflectors start
        subscription = mirror.subscribe({TransitionKind.PREEMPTED, TransitionKind.FINISHED})
        mirror.wait_synced(timeout_seconds=60)
        for transition in subscription:                        # blocks; in order; never dropped
            handle(transition.kind, transition.workload, transition.preemptor, transition.identity)

Subscribe *before* the initial sync completes to receive the initial state as ``created`` (and
further) transitions with source ``list``; or later with ``replay=True`` to get the current
state first. Reads go to :attr:`Mirror.store` (indexed queries) and to
:meth:`Mirror.cluster_state` (the model's input, for predictions on live state).

Why one process-wide store and reflector threads rather than an asyncio loop: the official
client is synchronous, the work per event is tiny, and the controller and the CLI are
synchronous too. Eight watch connections and one lock are cheap.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import urllib3

from sky_kueue.kueue import objects as model
from sky_kueue.mirror import connection, discovery, export, kinds
from sky_kueue.mirror.clock import Clock, SystemClock
from sky_kueue.mirror.cluster_identity import ClusterIdentityReader
from sky_kueue.mirror.errors import MirrorError, SyncTimeoutError, explain
from sky_kueue.mirror.reflector import Reflector, ReflectorSettings
from sky_kueue.mirror.source import KindSource
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.mirror.subscriptions import Subscription
from sky_kueue.mirror.transitions import Transition, TransitionKind

log = logging.getLogger(__name__)

#: How long :meth:`Mirror.stop` waits for each reflector thread.
STOP_JOIN_SECONDS = 5.0


class Mirror:
    """A live, watch-based copy of a cluster's Kueue state."""

    def __init__(
        self,
        conn: connection.Connection,
        api: discovery.KueueApi,
        *,
        clock: Clock | None = None,
        settings: ReflectorSettings | None = None,
        sleep: Callable[[float], None] | None = None,
        kind_list: Iterable[kinds.Kind] = kinds.ALL_KINDS,
        rng: random.Random | None = None,
        resume: Mapping[kinds.KindName, str] | None = None,
        resume_cluster: str | None = None,
        namespace: str | None = None,
        owns_connection: bool = True,
        check_cluster_identity: bool = True,
    ) -> None:
        """Args:
        resume: per kind, a resourceVersion a consumer handled everything up to; the
            mirror replays what changed since (see :mod:`.reflector`, rule 5).
        resume_cluster: the cluster identity ``resume`` belongs to (the consumer saved
            :attr:`MirrorStore.cluster_identity` with it); on another cluster nothing is
            resumed and the lists say ``reset`` (:mod:`.server_state`).
        check_cluster_identity: read the cluster identity before each list and resumed
            watch (one GET each), to notice a cluster replaced under the mirror.
        namespace: mirror namespaced kinds of this namespace only (None: all).
        owns_connection: :meth:`stop` closes the connection (False: the caller shares it).
        """
        self._owns_connection = owns_connection
        self.connection = conn
        self.api = api
        self.clock: Clock = clock or SystemClock()
        self.store = MirrorStore(clock=self.clock)
        self._lock = threading.Lock()
        self._errors: dict[kinds.KindName, tuple[BaseException, bool]] = {}
        #: Failures reported by the reflectors so far (a watcher of the mirror compares counts).
        self.error_count = 0
        self._last_error: tuple[kinds.KindName, BaseException] | None = None
        self._started = False
        self.reflectors: dict[kinds.KindName, Reflector] = {}
        timeout = (settings or ReflectorSettings()).request_timeout
        identity = ClusterIdentityReader(conn.api_client, timeout) if check_cluster_identity else None
        for kind in kind_list:
            if not api.serves(kind):
                continue
            source = KindSource(conn.api_client, kind, api.version_of(kind), namespace)
            self.reflectors[kind.name] = Reflector(
                source,
                self.store,
                settings=settings,
                sleep=sleep,
                on_error=self._error_reporter(kind.name),
                rng=rng,
                resume_from=(resume or {}).get(kind.name),
                identity=identity,
                resume_cluster=resume_cluster,
            )

    @classmethod
    def connect(
        cls,
        kubeconfig: str | Path | None = None,
        context: str | None = None,
        *,
        retries: urllib3.Retry | bool | None = None,
        **options: Any,
    ) -> Mirror:
        """Connect (kubeconfig, discovery) and build a mirror; call :meth:`start` (or use
        ``with``) to begin.

        Raises:
            MirrorError: kubeconfig, context, reachability, Kueue not installed, RBAC.
        """
        conn = connection.connect(kubeconfig, context, retries=retries)
        try:
            api = discovery.discover(conn.api_client, conn.host)
        except MirrorError:
            conn.close()
            raise
        return cls(conn, api, **options)

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> Mirror:
        with self._lock:
            if self._started:
                return self
            self._started = True
        for reflector in self.reflectors.values():
            reflector.start()
        return self

    def stop(self) -> None:
        """Stop the reflectors, close subscriptions and the connection pool."""
        for reflector in self.reflectors.values():
            reflector.stop()
        for reflector in self.reflectors.values():
            reflector.join(STOP_JOIN_SECONDS)
        self.store.hub.close_all()
        self.store.wake_waiters()
        if self._owns_connection:
            self.connection.close()

    def __enter__(self) -> Mirror:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- health ------------------------------------------------------------------------------

    def _error_reporter(self, kind: kinds.KindName) -> Callable[[BaseException, bool], None]:
        def report(exc: BaseException, permanent: bool) -> None:
            with self._lock:
                self._errors[kind] = (exc, permanent)
                self.error_count += 1
                self._last_error = (kind, exc)
            self.store.wake_waiters()

        return report

    def _settled(self, kind: kinds.KindName) -> bool:
        """Synced, or an optional kind that was refused for good."""
        if self.store.is_synced(kind):
            return True
        with self._lock:
            error = self._errors.get(kind)
        reflector = self.reflectors[kind]
        return error is not None and error[1] and not reflector.kind.required

    def _fatal(self) -> MirrorError | None:
        with self._lock:
            errors = dict(self._errors)
        for name, (exc, permanent) in errors.items():
            reflector = self.reflectors[name]
            if permanent and reflector.kind.required and not self.store.is_synced(name):
                return explain(
                    exc,
                    host=self.connection.host,
                    what=f"list {reflector.kind.resource_name(reflector.source.version)}",
                )
        return None

    @property
    def synced(self) -> bool:
        return all(self._settled(name) for name in self.reflectors)

    def wait_synced(self, timeout_seconds: float) -> None:
        """Block until every kind has been listed once.

        Raises:
            MirrorError: a required kind is refused (RBAC, not found).
            SyncTimeoutError: not synced in time (the message names the kinds and last errors).
        """
        self.start()
        done = self.store.wait_for(lambda _store: self.synced or self._fatal() is not None, timeout_seconds)
        fatal = self._fatal()
        if fatal is not None:
            raise fatal
        if not done:
            missing = [name for name in self.reflectors if not self._settled(name)]
            details = []
            with self._lock:
                for name in missing:
                    error = self._errors.get(name)
                    reflector = self.reflectors[name]
                    details.append(
                        reflector.kind.plural
                        + (
                            f" ({explain(error[0], host=self.connection.host, what='list ' + reflector.kind.plural)})"
                            if error
                            else ""
                        )
                    )
            raise SyncTimeoutError(
                f"the mirror of {self.connection.host} did not sync within {timeout_seconds:.0f}s: {'; '.join(details)}"
            )

    @property
    def warnings(self) -> list[str]:
        """Optional kinds the mirror could not read."""
        out = []
        with self._lock:
            errors = dict(self._errors)
        for name, (exc, permanent) in sorted(errors.items()):
            reflector = self.reflectors[name]
            if permanent and not reflector.kind.required:
                error = explain(exc, host=self.connection.host, what=f"list {reflector.kind.plural}")
                out.append(f"{reflector.kind.plural} not mirrored: {error}")
        return out

    # ---- consumers ---------------------------------------------------------------------------

    def subscribe(
        self,
        kinds_wanted: Collection[TransitionKind] | None = None,
        *,
        replay: bool = False,
        callback: Callable[[Transition], None] | None = None,
        sink: Callable[[Transition], None] | None = None,
    ) -> Subscription:
        """Transitions from now on, in order (see :meth:`MirrorStore.subscribe`)."""
        return self.store.subscribe(kinds_wanted, replay=replay, callback=callback, sink=sink)

    def documents(self, warnings: list[str] | None = None) -> list[dict[str, Any]]:
        """The model's documents as of now (see :func:`sky_kueue.mirror.export.documents`)."""
        return export.documents(self.store, warnings=warnings)

    def cluster_state(
        self, config: model.KueueConfig | None = None, *, now: datetime | None = None
    ) -> model.ClusterState:
        """The model's input for the current state; ``now`` defaults to the mirror's clock.

        Raises:
            ModelError: an object the model cannot read.
        """
        return export.cluster_state(self.documents(), config=config, now=now or self.clock.now())

    def delivered_version(self, kind: kinds.KindName) -> str | None:
        """The last resourceVersion of ``kind`` the mirror has delivered (list, event or
        bookmark); a consumer persists what it has handled and passes it as ``resume``."""
        return self.store.resource_version(kind)

    def wait_for(self, predicate: Callable[[MirrorStore], bool], timeout_seconds: float) -> bool:
        """Block until ``predicate(store)`` holds; False on timeout."""
        return self.store.wait_for(predicate, timeout_seconds)

    def last_error_message(self) -> str | None:
        """The most recent reflector failure, explained in one line (None if there was none)."""
        with self._lock:
            last = self._last_error
        if last is None:
            return None
        kind, exc = last
        reflector = self.reflectors[kind]
        return str(explain(exc, host=self.connection.host, what=f"watch {reflector.kind.plural}"))

    @property
    def request_counts(self) -> dict[str, int]:
        """Lists and watches issued so far, over all reflectors."""
        return {
            "lists": sum(r.lists for r in self.reflectors.values()),
            "watches": sum(r.watches for r in self.reflectors.values()),
        }

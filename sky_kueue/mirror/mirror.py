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

A namespaced kind is watched across all namespaces by one reflector, or (``per_namespace``)
by one reflector per namespace named: the controller watches SkyPilot's pods only in the team
namespaces, so its RBAC grants reading pods there and nowhere else (a pod's spec holds its
environment, secrets included). Each namespace then has its own list, watch and
resourceVersion; the store replaces only that namespace's objects on its list
(:meth:`MirrorStore.replace`), and the kind counts as synced once every namespace is.

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

#: A reflector's key in :attr:`Mirror.reflectors`: its kind, or (kind, namespace) for a kind
#: watched one namespace at a time.
ReflectorKey = kinds.KindName | tuple[kinds.KindName, str]


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
        per_namespace: Mapping[kinds.KindName, Iterable[str]] | None = None,
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
        per_namespace: namespaced kinds to mirror only in these namespaces, one reflector
            per namespace (with ``namespace`` given, that one namespace wins).
        owns_connection: :meth:`stop` closes the connection (False: the caller shares it).
        """
        self._owns_connection = owns_connection
        self.connection = conn
        self.api = api
        self.clock: Clock = clock or SystemClock()
        self.store = MirrorStore(clock=self.clock)
        self._lock = threading.Lock()
        self._errors: dict[ReflectorKey, tuple[BaseException, bool]] = {}
        #: Failures reported by the reflectors so far (a watcher of the mirror compares counts).
        self.error_count = 0
        self._last_error: tuple[ReflectorKey, BaseException] | None = None
        self._started = False
        self.reflectors: dict[ReflectorKey, Reflector] = {}
        timeout = (settings or ReflectorSettings()).request_timeout
        identity = ClusterIdentityReader(conn.api_client, timeout) if check_cluster_identity else None
        scoped = {} if namespace is not None else {k: sorted(set(v)) for k, v in (per_namespace or {}).items()}
        for kind in kind_list:
            if not api.serves(kind):
                continue
            scopes: list[tuple[ReflectorKey, str | None]] = [(kind.name, namespace)]
            if kind.namespaced and kind.name in scoped:
                self.store.expect_namespaces(kind.name, scoped[kind.name])
                scopes = [((kind.name, ns), ns) for ns in scoped[kind.name]]
            for key, scope in scopes:
                source = KindSource(conn.api_client, kind, api.version_of(kind), scope)
                self.reflectors[key] = Reflector(
                    source,
                    self.store,
                    settings=settings,
                    sleep=sleep,
                    on_error=self._error_reporter(key),
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

    def _error_reporter(self, key: ReflectorKey) -> Callable[[BaseException, bool], None]:
        def report(exc: BaseException, permanent: bool) -> None:
            with self._lock:
                self._errors[key] = (exc, permanent)
                self.error_count += 1
                self._last_error = (key, exc)
            self.store.wake_waiters()

        return report

    def _synced(self, key: ReflectorKey) -> bool:
        reflector = self.reflectors[key]
        return self.store.is_synced(reflector.kind.name, reflector.source.namespace)

    def _settled(self, key: ReflectorKey) -> bool:
        """Synced, or an optional kind that was refused for good."""
        if self._synced(key):
            return True
        with self._lock:
            error = self._errors.get(key)
        reflector = self.reflectors[key]
        return error is not None and error[1] and not reflector.kind.required

    def _fatal(self) -> MirrorError | None:
        with self._lock:
            errors = dict(self._errors)
        for key, (exc, permanent) in errors.items():
            reflector = self.reflectors[key]
            if permanent and reflector.kind.required and not self._synced(key):
                where = f" in namespace {reflector.source.namespace}" if reflector.source.namespace else ""
                return explain(
                    exc,
                    host=self.connection.host,
                    what=f"list {reflector.kind.resource_name(reflector.source.version)}{where}",
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
            missing = [key for key in self.reflectors if not self._settled(key)]
            details = []
            with self._lock:
                for key in missing:
                    error = self._errors.get(key)
                    reflector = self.reflectors[key]
                    details.append(
                        reflector.what
                        + (
                            f" ({explain(error[0], host=self.connection.host, what='list ' + reflector.what)})"
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
        for exc, permanent, reflector in sorted(
            ((exc, permanent, self.reflectors[key]) for key, (exc, permanent) in errors.items()),
            key=lambda found: found[2].what,
        ):
            if permanent and not reflector.kind.required:
                error = explain(exc, host=self.connection.host, what=f"list {reflector.what}")
                out.append(f"{reflector.what} not mirrored: {error}")
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
        key, exc = last
        reflector = self.reflectors[key]
        return str(explain(exc, host=self.connection.host, what=f"watch {reflector.what}"))

    @property
    def request_counts(self) -> dict[str, int]:
        """Lists and watches issued so far, over all reflectors."""
        return {
            "lists": sum(r.lists for r in self.reflectors.values()),
            "watches": sum(r.watches for r in self.reflectors.values()),
        }

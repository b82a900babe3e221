"""A reflector: keeps one kind of the :class:`~sky_kueue.mirror.store.MirrorStore` equal to the
server, by listing once and then watching. No polling.

Informer semantics, and why each rule (client-go ``tools/cache/reflector.go`` is the
reference; the ``kubernetes`` client's ``watch/watch.py`` and ``client/rest.py`` show how the
Python client surfaces each failure):

1. **List, then watch from the list's resourceVersion** with ``allowWatchBookmarks``. The list
   is paged (:data:`~sky_kueue.mirror.source.LIST_PAGE_SIZE_OBJECTS` per page) through a
   continue token, which pins one consistent snapshot; the store is replaced with it in one
   step, so readers never see half a list.
2. **Resume, don't relist**: after a clean end of the watch (server ``timeoutSeconds``) or a
   cut stream (``urllib3`` ``ProtocolError``, a read timeout), watch again from the last
   resourceVersion seen (an event's or a bookmark's). The server replays every change since
   then, so nothing is missed, even an object that was modified and deleted meanwhile.
3. **Relist on 410 Gone** (an ERROR event or a 410 answer: the resourceVersion was
   compacted away). The relist diff turns objects that vanished into ``deleted`` transitions.
4. **Back off on trouble**: 5xx, 429 (at least ``Retry-After``), dropped connections and
   timeouts are retried with bounded, jittered delays (:mod:`sky_kueue.mirror.backoff`); a
   watch that ends at once without any event also counts as trouble, so a server that closes
   every watch cannot make the reflector spin. A healthy session resets the delay.
5. **Resume from a consumer's version** (``resume_from``): a consumer that persisted the last
   version it handled (the controller, across a SIGKILL) must see what happened while it was
   down, deletions included, which no list can show. The reflector lists as usual (the store
   is current), then watches from the *older* version: events up to the list's version are
   handed to :meth:`MirrorStore.replayed` (transitions with source ``resumed``; the store
   keeps its newer state), then the store says ``caught-up`` and the watch is live. Versions
   are compared as integers (etcd revisions, as on the API server and the sandbox); a
   version that is not an integer, or not older than the list, is not resumed from. A 410
   during the replay relists and the ``synced`` marker says ``relist``: a gap.
6. **Notice a state that went back** (:mod:`sky_kueue.mirror.server_state`): a list older
   than a version already seen (the resume version included), or a cluster identity other
   than the one seen before (read before each list and each watch resumed after a failure
   or an early end; a change there relists), is an etcd restore or another cluster: the
   list is stored as a relist with the ``synced`` marker's ``reset`` set, nothing is resumed
   from an older version, and a warning says so.
7. **Permanent refusals** (403, 404) are reported to the mirror (which tells a waiting caller).
   A required kind is retried at the slowest pace (RBAC can be fixed while the mirror runs);
   an optional kind (pods, namespaces) is given up, so a forbidden optional kind costs no
   requests while idle.

The reflector runs on its own daemon thread; :meth:`Reflector.stop` ends it promptly by
shutting down the watch's socket.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import urllib3
from kubernetes.client.exceptions import ApiException

from sky_kueue.mirror import connection
from sky_kueue.mirror.backoff import BACKGROUND_POLICY, FailureBackoff, RetryPolicy, retrying
from sky_kueue.mirror.cluster_identity import ClusterIdentityReader
from sky_kueue.mirror.errors import is_resource_version_too_large, is_transient, list_retryable
from sky_kueue.mirror.server_state import ResetReason, as_revision, went_back
from sky_kueue.mirror.source import LIST_PAGE_SIZE_OBJECTS, KindSource, RawWatch
from sky_kueue.mirror.store import MirrorStore, normalize

log = logging.getLogger(__name__)

#: Server-side watch duration (seconds), randomized in [min, 2*min) like client-go.
WATCH_TIMEOUT_MIN_SECONDS = 300
#: Socket read timeout of a watch (seconds): longer than the apiserver's bookmark interval
#: (about a minute), so only a dead connection trips it; the reflector then resumes.
WATCH_READ_TIMEOUT_SECONDS = 120
#: A watch that ends sooner than this without delivering anything counts as a failure.
MIN_HEALTHY_WATCH_SECONDS = 1.0


@dataclass(frozen=True)
class ReflectorSettings:
    """Tunables of one reflector (defaults for production)."""

    policy: RetryPolicy = BACKGROUND_POLICY
    page_size: int = LIST_PAGE_SIZE_OBJECTS
    request_timeout: tuple[int, int] = connection.REQUEST_TIMEOUT
    watch_timeout_min_seconds: int = WATCH_TIMEOUT_MIN_SECONDS
    watch_read_timeout_seconds: int = WATCH_READ_TIMEOUT_SECONDS
    min_healthy_watch_seconds: float = MIN_HEALTHY_WATCH_SECONDS


class _Stopped(Exception):
    """The reflector was asked to stop."""


class _Relist(Exception):
    """The watch's resourceVersion is gone (410): list again."""


#: Reports a failure: (exception, permanent?). Called from the reflector thread.
ErrorReporter = Callable[[BaseException, bool], None]


class Reflector:
    """Mirrors one kind into a store on a background thread."""

    def __init__(
        self,
        source: KindSource,
        store: MirrorStore,
        *,
        settings: ReflectorSettings | None = None,
        sleep: Callable[[float], None] | None = None,
        on_error: ErrorReporter | None = None,
        rng: random.Random | None = None,
        resume_from: str | None = None,
        identity: ClusterIdentityReader | None = None,
        resume_cluster: str | None = None,
    ) -> None:
        """Args:
        resume_from: the version a consumer handled everything up to (rule 5).
        identity: reads the cluster's identity (None: the identity is not checked).
        resume_cluster: the identity ``resume_from`` belongs to (None: unknown).
        """
        self.source = source
        self._resume_from = resume_from
        self._identity = identity
        #: The cluster identity of what this reflector delivered, and the newest version.
        self._cluster = resume_cluster
        self._last_version = resume_from
        self.kind = source.kind
        #: What this reflector mirrors, for log lines: ``pods``, or ``pods in team-a``.
        self.what = f"{source.kind.plural} in {source.namespace}" if source.namespace else source.kind.plural
        self._store = store
        self._settings = settings or ReflectorSettings()
        self._stop = threading.Event()
        self._sleep_fn = sleep
        self._on_error = on_error or (lambda exc, permanent: None)
        self._rng = rng or random.Random()
        self._watch: RawWatch | None = None
        self._watch_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        #: Counters for tests and benchmarks.
        self.lists = 0
        self.watches = 0
        #: Relists because the server had not reached our resourceVersion (it restarted).
        self.resyncs_after_restart = 0
        #: Lists that found the server's state gone back (an older version, another cluster).
        self.state_resets = 0

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        suffix = f"-{self.source.namespace}" if self.source.namespace else ""
        name = f"sky-kueue-reflector-{self.kind.plural}{suffix}"
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the reflector to stop; an open watch is shut down at once."""
        self._stop.set()
        with self._watch_lock:
            watcher = self._watch
        if watcher is not None:
            watcher.stop()

    def join(self, timeout_seconds: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout_seconds)

    @property
    def running(self) -> bool:
        """Whether the reflector's thread is still alive (it ends soon after :meth:`stop`)."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def _sleep(self, seconds: float) -> None:
        if self._sleep_fn is not None:
            self._sleep_fn(seconds)
        else:
            self._stop.wait(seconds)
        if self._stop.is_set():
            raise _Stopped()

    # ---- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        backoff = FailureBackoff(self._settings.policy, self._rng)
        gap = False
        while not self._stop.is_set():
            try:
                resume = None if gap else self._resume_from
                resource_version, replay_until = self._list(gap=gap, resume_from=resume)
                backoff.success()
                gap = True  # every later list follows a lost stretch of the watch
                if resume is not None and replay_until is not None:
                    self._watch_until_relist(resume, replay_until=replay_until)
                else:
                    self._watch_until_relist(resource_version)
            except _Stopped:
                return
            except _Relist:
                continue
            except ApiException as exc:
                if self._stop.is_set():
                    return
                permanent = not is_transient(exc)
                self._on_error(exc, permanent)
                if permanent and not self.kind.required:
                    log.warning("%s: list refused (HTTP %s); not mirrored", self.what, exc.status)
                    return
                delay = self._settings.policy.max_delay_seconds if permanent else backoff.failure(exc)
                # A permanent refusal before the first sync already went to the owner through
                # ``on_error``: waiting for the sync fails with it (a CLI ends with one line
                # saying so, a controller logs it), so a warning here would be a second, racing
                # report of the same fact. Later, nobody waits, and the warning is the report.
                first_sync = permanent and not self._store.is_synced(self.kind.name, self.source.namespace)
                log.log(
                    logging.INFO if first_sync else logging.WARNING,
                    "%s: list failed (HTTP %s); retrying in %.1fs",
                    self.what,
                    exc.status,
                    delay,
                )
                try:
                    self._sleep(delay)
                except _Stopped:
                    return
            except (urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
                if self._stop.is_set():
                    return
                self._on_error(exc, False)
                delay = backoff.failure(exc)
                log.warning("%s: list failed (%s); retrying in %.1fs", self.what, type(exc).__name__, delay)
                try:
                    self._sleep(delay)
                except _Stopped:
                    return

    def _list(self, *, gap: bool = False, resume_from: str | None = None) -> tuple[str, int | None]:
        """List every page (retrying transient failures) and replace the store's copy.

        Returns the list's resourceVersion, and the revision up to which the watch from
        ``resume_from`` replays what was missed (None: nothing to replay, no resume or not
        behind the list).

        Raises:
            ApiException: a permanent refusal, or retries exhausted.
        """
        for attempt in retrying(
            self._settings.policy, sleep=self._sleep, should_stop=self._stop.is_set, retry_on=list_retryable
        ):
            with attempt:
                if self._stop.is_set():
                    raise _Stopped()
                cluster = self._identity.read() if self._identity is not None else None
                items, resource_version = self._list_pages()
        self.lists += 1
        version = self.source.api_version
        reset = self._reset_reason(cluster, resource_version)
        listed, resume = as_revision(resource_version), as_revision(resume_from)
        replay_until = listed if listed is not None and resume is not None and resume < listed else None
        if reset is not None:
            replay_until = None  # a version of another state: nothing to resume from
        if cluster is not None:
            self._cluster = cluster
        self._last_version = resource_version
        self._store.replace(
            self.kind.name,
            [normalize(self.kind.name, version, item) for item in items],
            resource_version,
            gap=gap or reset is not None,
            resuming=replay_until is not None,
            reset=reset,
            cluster=cluster,
            namespace=self.source.namespace,
        )
        log.debug("%s: listed %d at resourceVersion %s", self.what, len(items), resource_version)
        return resource_version, replay_until

    def _reset_reason(self, cluster: str | None, listed: str) -> ResetReason | None:
        """Why the list at ``listed`` (of cluster ``cluster``) shows a state that went back, if it does."""
        if cluster is not None and self._cluster is not None and cluster != self._cluster:
            reason, detail = ResetReason.CLUSTER, f"cluster identity {self._cluster} became {cluster}"
        elif went_back(self._last_version, listed):
            reason, detail = ResetReason.RESOURCE_VERSION, f"listed at {listed}, older than {self._last_version}"
        else:
            return None
        self.state_resets += 1
        log.warning(
            "%s: the API server's state went back (%s; an etcd restore or another cluster?): "
            "reconciling from a full list",
            self.what,
            detail,
        )
        return reason

    def _cluster_changed(self) -> bool:
        """Whether the cluster identity now differs from the one this reflector delivered.

        Raises:
            ApiException, urllib3.exceptions.HTTPError, OSError: the identity read failed.
        """
        if self._identity is None or self._cluster is None:
            return False
        cluster = self._identity.read()
        return cluster is not None and cluster != self._cluster

    def _list_pages(self) -> tuple[list[dict[str, object]], str]:
        items: list[dict[str, object]] = []
        token: str | None = None
        first_version = ""
        while True:
            page = self.source.list_page(
                limit=self._settings.page_size, continue_token=token, timeout=self._settings.request_timeout
            )
            items.extend(page.items)
            if not first_version:
                first_version = page.resource_version
            token = page.continue_token
            if not token:
                return items, first_version

    def _watch_until_relist(self, resource_version: str, *, replay_until: int | None = None) -> None:
        """Watch and resume until a 410 (raises :class:`_Relist`) or a stop.

        With ``replay_until`` (the list's version), events up to it are replayed past states.

        Raises:
            _Relist: the resourceVersion expired.
            _Stopped: stop requested.
            ApiException: a permanent refusal of the watch.
        """
        backoff = FailureBackoff(self._settings.policy, self._rng)
        kind = self.kind.name
        api_version = self.source.api_version
        # Whether to read the cluster identity before the next watch: not right after the list
        # (it read it), nor after a watch that ran its full timeout (one server all along).
        check_cluster = False
        while True:
            if self._stop.is_set():
                raise _Stopped()
            started = time.monotonic()
            delivered = 0
            watcher = RawWatch(return_type=dict)
            with self._watch_lock:
                # Checked under the lock :meth:`stop` reads the watcher with: either stop sees
                # this watcher and shuts it down, or this sees the stop.
                if self._stop.is_set():
                    raise _Stopped()
                self._watch = watcher
            failure: BaseException | None = None
            requested_seconds = 0
            try:
                if check_cluster and self._cluster_changed():
                    log.info("%s: the cluster identity changed; relisting", self.what)
                    raise _Relist()
                check_cluster = True
                self.watches += 1
                timeout = self._settings.watch_timeout_min_seconds
                requested_seconds = timeout + self._rng.randrange(max(1, timeout))
                events = self.source.watch(
                    watcher,
                    resource_version=resource_version,
                    timeout_seconds=requested_seconds,
                    request_timeout=(self._settings.request_timeout[0], self._settings.watch_read_timeout_seconds),
                )
                for event in events:
                    if self._stop.is_set():
                        raise _Stopped()
                    # ``Watch.stream`` yields None for a blank or undecodable line.
                    obj = event.get("raw_object") if isinstance(event, dict) else None
                    if not isinstance(obj, dict):
                        continue
                    event_type = str(event.get("type", ""))
                    version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                    number = as_revision(version)
                    if replay_until is not None and (
                        number is None or number > replay_until or (event_type == "BOOKMARK" and number >= replay_until)
                    ):
                        replay_until = None
                        self._store.caught_up(kind, version)
                    if version and replay_until is None:
                        self._last_version = version  # the newest version seen (replayed ones are older)
                    if event_type == "BOOKMARK":
                        if version:
                            resource_version = version
                            if replay_until is None:
                                self._store.bookmark(kind, version)
                        continue
                    if replay_until is not None:
                        self._store.replayed(kind, event_type, normalize(kind, api_version, obj))
                    else:
                        self._store.apply(kind, event_type, normalize(kind, api_version, obj))
                    if version:
                        resource_version = version
                    delivered += 1
                    backoff.success()
            except ApiException as exc:
                if self._stop.is_set():
                    raise _Stopped() from exc
                if exc.status == 410:
                    log.info("%s: resourceVersion %s expired; relisting", self.what, resource_version)
                    raise _Relist() from exc
                if is_resource_version_too_large(exc):
                    log.warning(
                        "%s: the API server has not reached resourceVersion %s (restarted?); relisting",
                        self.what,
                        resource_version,
                    )
                    self.resyncs_after_restart += 1
                    raise _Relist() from exc
                if not is_transient(exc):
                    raise
                failure = exc
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if self._stop.is_set():
                    raise _Stopped() from exc
                failure = exc
            finally:
                with self._watch_lock:
                    self._watch = None
            if failure is None:
                elapsed = time.monotonic() - started
                check_cluster = elapsed < requested_seconds  # ended before its timeout: a restart?
                healthy = delivered > 0 or elapsed >= self._settings.min_healthy_watch_seconds
                if healthy:
                    continue  # clean end: resume from the last resourceVersion at once
            if failure is not None:
                self._on_error(failure, False)
            delay = backoff.failure(failure)
            log.info(
                "%s: watch ended (%s); resuming from %s in %.2fs",
                self.what,
                type(failure).__name__ if failure else "closed early",
                resource_version,
                delay,
            )
            self._sleep(delay)

"""List and watch one kind with the official client, resuming from any resourceVersion.

Why the controller has its own small watch loop instead of the queue mirror
(:mod:`sky_kueue.mirror`): exactly-once aging across SIGKILL needs the watch to *resume from
a resourceVersion persisted before the crash*, so that the deletion of a preempted SkyPilot
Workload that happened while the controller was down is replayed (see
:mod:`sky_kueue.controller.runtime_state`). The mirror always starts with a fresh list, which
cannot show objects that are already gone. When the mirror grows a "resume from" option the
controller can feed on its transition stream instead; the engine only needs snapshots.

The loop, for one kind (Workloads or the pods of Kueue pod groups):

* :meth:`KindWatch.list` pages through a consistent list (``limit`` + ``continue``).
* :meth:`KindWatch.run` watches from a resourceVersion with bookmarks and a randomized
  server-side ``timeoutSeconds`` (as client-go's reflector does), then re-watches from the
  last resourceVersion seen. A cut stream (``ProtocolError``), a read timeout or a refused
  connection backs off (jittered, capped) and resumes from the same version. A 410 (version
  compacted away, as an HTTP status or an ERROR event) relists and hands the full list to the
  sink marked as a gap, because events in between are lost.
* Objects stay the decoded JSON the server sent (``_preload_content=False``): building client
  models for every event costs more than everything else the controller does.
* :meth:`KindWatch.stop` shuts the open response down from another thread, so graceful
  shutdown does not wait for a server timeout.

Every request carries an integer ``(connect, read)`` timeout (the client ignores floats).
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror import rest

log = logging.getLogger(__name__)

#: Objects per list page (client-go's default).
LIST_PAGE_SIZE_OBJECTS = 500
#: Server-side watch timeout range; randomized so that many watches do not expire together.
WATCH_TIMEOUT_MIN_SECONDS = 240
WATCH_TIMEOUT_MAX_SECONDS = 360
#: Extra read timeout beyond the server-side watch timeout before the client gives up.
WATCH_READ_SLACK_SECONDS = 30
#: (connect, read) timeout of list requests.
LIST_REQUEST_TIMEOUT_SECONDS = (5, 60)
#: Connect timeout of watch requests.
WATCH_CONNECT_TIMEOUT_SECONDS = 5
#: Backoff after a failed list or watch: doubles from the initial value up to the cap.
BACKOFF_INITIAL_SECONDS = 0.1
BACKOFF_MAX_SECONDS = 5.0
#: Label selector of the pods the controller watches: members of Kueue pod groups.
POD_GROUP_SELECTOR = "kueue.x-k8s.io/pod-group-name"


class EventType(str, Enum):
    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    #: A full list (after a 410, or on request); ``items`` holds every object.
    LISTED = "LISTED"


@dataclass(frozen=True)
class WatchedEvent:
    """One change of one object, or a bookmark, or a full list."""

    resource: str
    type: EventType
    resource_version: str
    obj: dict[str, Any] | None = None
    items: tuple[dict[str, Any], ...] = field(default=())
    #: For LISTED after a 410: changes between the old version and the list were not seen.
    gap: bool = False


class ResourceVersionGone(Exception):
    """The requested resourceVersion is older than the server's retained history (410)."""


@dataclass(frozen=True)
class KindSpec:
    """What to list and watch."""

    resource: str
    namespace: str | None = None
    label_selector: str | None = None
    workload_version: str = kueue_api.WORKLOAD_VERSIONS[0]

    @classmethod
    def workloads(cls, namespace: str | None = None, version: str = kueue_api.WORKLOAD_VERSIONS[0]) -> KindSpec:
        return cls("workloads", namespace, None, version)

    @classmethod
    def pods(cls, namespace: str | None = None) -> KindSpec:
        return cls("pods", namespace, POD_GROUP_SELECTOR)


def raw_request(
    api_client: client.ApiClient,
    method: str,
    path: str,
    query: dict[str, Any] | None = None,
    *,
    timeout: tuple[int, int],
) -> Any:
    """One request through ``api_client`` (auth, TLS, host), returning the raw urllib3 response.

    Why not ``CoreV1Api``/``AppsV1Api``: instantiating those loads multi-megabyte generated
    modules (about a second of a restart); the controller needs a handful of paths.

    Raises:
        ApiException: a non-2xx answer.
        urllib3.exceptions.HTTPError: the server could not be reached.
    """
    return rest.request(api_client, method, path, query, timeout=timeout)


def release(response: Any, *, clean: bool) -> None:
    """Give a streamed response's connection back to the pool only if nothing is left unread.

    Why: a watch left mid-stream (a stop, an ERROR event, a sink failure) still has the
    server's next chunks in flight on its socket; pooled again, the next request on it (the
    leader's Lease renewal) would read them as its status line (``BadStatusLine``). Such a
    connection is closed instead; the pool opens a fresh one.
    """
    if not clean:
        with contextlib.suppress(HTTPError, OSError):  # already cut by the server or by stop()
            response.close()
    response.release_conn()


def _is_gone(status: object) -> bool:
    return isinstance(status, dict) and (status.get("code") == 410 or status.get("reason") in ("Expired", "Gone"))


class KindWatch:
    """List and watch one kind; events go to ``sink`` in server order, from one thread."""

    def __init__(
        self,
        api_client: client.ApiClient,
        spec: KindSpec,
        sink: Callable[[WatchedEvent], None],
        *,
        stop: threading.Event | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.spec = spec
        self._sink = sink
        self._stop = stop or threading.Event()
        self._rng = rng or random.Random()
        self._api_client = api_client
        self._custom = client.CustomObjectsApi(api_client)
        self._response: Any = None
        self._response_lock = threading.Lock()
        self.resource_version: str | None = None

    # --- requests -------------------------------------------------------------------------

    def _call(self, **kwargs: Any) -> Any:
        spec = self.spec
        if spec.label_selector:
            kwargs["label_selector"] = spec.label_selector
        if spec.resource == "workloads":
            args = (kueue_api.KUEUE_GROUP, spec.workload_version)
            if spec.namespace:
                return self._custom.list_namespaced_custom_object(
                    *args, spec.namespace, kueue_api.WORKLOAD_PLURAL, _preload_content=False, **kwargs
                )
            return self._custom.list_cluster_custom_object(
                *args, kueue_api.WORKLOAD_PLURAL, _preload_content=False, **kwargs
            )
        if spec.resource == "pods":
            path = f"/api/v1/namespaces/{spec.namespace}/pods" if spec.namespace else "/api/v1/pods"
            timeout = kwargs.pop("_request_timeout")
            names = {
                "label_selector": "labelSelector",
                "_continue": "continue",
                "resource_version": "resourceVersion",
                "allow_watch_bookmarks": "allowWatchBookmarks",
                "timeout_seconds": "timeoutSeconds",
            }
            query = {names.get(k, k): v for k, v in kwargs.items()}
            return raw_request(self._api_client, "GET", path, query, timeout=timeout)
        raise ValueError(f"cannot watch {spec.resource!r}")

    def list(self) -> tuple[list[dict[str, Any]], str]:
        """A consistent list of every object, and its resourceVersion.

        Raises:
            ApiException: the server refused (403, 404 if Kueue is not installed, ...).
            urllib3.exceptions.HTTPError: the server could not be reached.
        """
        while True:
            items: list[dict[str, Any]] = []
            token: str | None = None
            version = ""
            try:
                while True:
                    kwargs: dict[str, Any] = {"limit": LIST_PAGE_SIZE_OBJECTS}
                    if token:
                        kwargs["_continue"] = token
                    response = self._call(_request_timeout=LIST_REQUEST_TIMEOUT_SECONDS, **kwargs)
                    try:
                        document = json.loads(response.data)
                    finally:
                        response.release_conn()
                    meta = document.get("metadata") or {}
                    version = version or str(meta.get("resourceVersion", ""))
                    items.extend(document.get("items") or [])
                    token = meta.get("continue") or None
                    if not token:
                        return items, version
            except ApiException as err:
                if err.status != 410:
                    raise
                log.info("%s: list continue token expired; listing again", self.spec.resource)

    def _lines(self, response: Any) -> Iterator[bytes]:
        pending = b""
        for chunk in response.stream(amt=None, decode_content=False):
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                if line.strip():
                    yield line
        if pending.strip():
            yield pending

    def watch_once(self, resource_version: str) -> str:
        """Streams events after ``resource_version`` to the sink until the server ends the
        watch or :meth:`stop` is called; returns the last resourceVersion seen.

        Raises:
            ResourceVersionGone: the version was compacted away (relist).
            ApiException: any other error answer.
            urllib3.exceptions.HTTPError: the stream was cut or timed out.
        """
        timeout = self._rng.randint(WATCH_TIMEOUT_MIN_SECONDS, WATCH_TIMEOUT_MAX_SECONDS)
        try:
            response = self._call(
                watch=True,
                resource_version=resource_version,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _request_timeout=(WATCH_CONNECT_TIMEOUT_SECONDS, timeout + WATCH_READ_SLACK_SECONDS),
            )
        except ApiException as err:
            if err.status == 410:
                raise ResourceVersionGone(str(err.reason)) from err
            raise
        with self._response_lock:
            if self._stop.is_set():
                response.release_conn()
                return resource_version
            self._response = response
        version = resource_version
        ended = False
        try:
            for line in self._lines(response):
                if self._stop.is_set():
                    break
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("%s: undecodable watch line skipped", self.spec.resource)
                    continue
                kind = event.get("type")
                obj = event.get("object")
                if kind == "ERROR":
                    if _is_gone(obj):
                        raise ResourceVersionGone(str((obj or {}).get("message", "")))
                    raise ApiException(status=(obj or {}).get("code", 500), reason=(obj or {}).get("message"))
                if not isinstance(obj, dict):
                    continue
                new_version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                try:
                    event_type = EventType(kind)
                except ValueError:
                    continue
                version = new_version
                self.resource_version = version
                self._sink(
                    WatchedEvent(
                        self.spec.resource, event_type, version, None if event_type is EventType.BOOKMARK else obj
                    )
                )
            else:
                ended = True  # the server closed the stream: the connection is clean
        finally:
            with self._response_lock:
                self._response = None
            release(response, clean=ended)
        return version

    # --- the loop ---------------------------------------------------------------------------

    def _pause(self, seconds: float) -> None:
        self._stop.wait(seconds * (0.5 + self._rng.random()))

    def run(self, resource_version: str) -> None:
        """Watches from ``resource_version`` until :meth:`stop`; resumes and relists as needed."""
        version = resource_version
        backoff = BACKOFF_INITIAL_SECONDS
        while not self._stop.is_set():
            try:
                version = self.watch_once(version)
                backoff = BACKOFF_INITIAL_SECONDS
            except ResourceVersionGone as err:
                if self._stop.is_set():
                    return
                log.warning(
                    "%s: resourceVersion %s expired (%s); relisting, changes in between are lost",
                    self.spec.resource,
                    version,
                    err,
                )
                relisted = self._relist(backoff)
                if relisted is None:
                    return
                version = relisted
            except ApiException as err:
                if self._stop.is_set():
                    return
                log.warning("%s: watch refused: HTTP %s %s; retrying", self.spec.resource, err.status, err.reason)
                self._pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
            except (HTTPError, OSError) as err:
                if self._stop.is_set():
                    return
                log.info(
                    "%s: watch stream ended (%s); resuming from %s", self.spec.resource, type(err).__name__, version
                )
                self._pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)

    def _relist(self, backoff: float) -> str | None:
        while not self._stop.is_set():
            try:
                items, version = self.list()
            except (ApiException, HTTPError, OSError) as err:
                log.warning("%s: relist failed (%s); retrying", self.spec.resource, err)
                self._pause(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_SECONDS)
                continue
            self.resource_version = version
            self._sink(WatchedEvent(self.spec.resource, EventType.LISTED, version, None, tuple(items), gap=True))
            return version
        return None

    def stop(self) -> None:
        """Ends :meth:`run` promptly, closing the open watch response if there is one."""
        self._stop.set()
        with self._response_lock:
            response = self._response
        if response is not None:
            try:
                response.shutdown()
            except (HTTPError, OSError) as err:  # already closed by the server
                log.debug("%s: watch response already closed: %s", self.spec.resource, err)

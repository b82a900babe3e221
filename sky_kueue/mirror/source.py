"""Listing and watching one kind through the official client's generated methods.

Why raw JSON: ``CoreV1Api.list_pod_for_all_namespaces`` turns every pod into ``V1Pod`` models
and ``kubernetes.watch.Watch`` deserializes every event the same way; for 10,000 Workloads or
a busy namespace of pods that costs more than the network. The generated methods are still
used (authentication, URL building, parameter validation, the client's error mapping), with
``_preload_content=False`` for lists, and a :class:`RawWatch` that keeps each event as the
decoded JSON the server sent.

Every call passes an integer ``(connect, read)`` timeout (the client ignores floats). A watch
also passes the server-side ``timeoutSeconds``, randomized like client-go's reflector so that
watches of many mirrors do not expire together; with ``timeoutSeconds`` set, ``Watch.stream``
does not reconnect on its own, so the reflector decides where to resume.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch

from sky_kueue.mirror.kinds import Kind, KindName

#: Objects per list page. client-go uses 500; the mirror lists larger pages because a big
#: cluster's Workloads (a few KB each) then list in a handful of round trips (10,000 in five,
#: a few MB per page), and every page costs the server a pass over the collection.
LIST_PAGE_SIZE_OBJECTS = 2000


class RawWatch(watch.Watch):
    """``kubernetes.watch.Watch`` without model deserialization, and with a prompt ``stop``.

    Each event is the decoded JSON line (``type``, ``object``) plus ``raw_object``; ERROR
    events still raise ``ApiException`` with the Status code (410 included) from
    ``Watch.stream``, which is what the reflector relies on.

    The client's ``Watch.stop`` only sets a flag that ``stream`` reads between events, so a
    reader blocked on a quiet watch would wait for the next event, bookmark or read timeout
    (a minute on a quiet cluster) before it noticed. Here :meth:`stop` also shuts the socket
    under the response down, and :meth:`attach` does so if the stop arrived while the watch
    request was still in flight. The stop is remembered in a flag of our own because
    ``stream`` clears the client's flag when it starts.
    """

    def __init__(self, return_type: Any = None) -> None:
        super().__init__(return_type=return_type)
        self._response: Any = None
        self._stopped = False
        self._response_lock = threading.Lock()

    def attach(self, response: Any) -> None:
        """Record the streaming response of the watch request (shut down at once if stopped)."""
        with self._response_lock:
            self._response = response
            stopped = self._stopped
        if stopped and response is not None:
            _shutdown(response)

    def stop(self) -> None:
        with self._response_lock:
            self._stopped = True
            response = self._response
        super().stop()
        if response is not None:
            _shutdown(response)

    def unmarshal_event(self, data: str, return_type: Any) -> dict[str, Any] | None:
        if not data or data.isspace():
            return None
        try:
            event = json.loads(data)
        except json.JSONDecodeError:
            return None
        if not isinstance(event, dict):
            return None
        event["raw_object"] = event.get("object")
        obj = event["raw_object"]
        if isinstance(obj, dict) and event.get("type") != "ERROR":
            meta = obj.get("metadata")
            if isinstance(meta, dict) and meta.get("resourceVersion"):
                self.resource_version = meta["resourceVersion"]
        return event


def _shutdown(response: Any) -> None:
    """Shut down the socket under a streaming response so a blocked read returns at once."""
    conn = getattr(response, "connection", None)
    sock = getattr(conn, "sock", None) if conn is not None else None
    if sock is not None:
        with contextlib.suppress(OSError):  # already closed by the peer: nothing to unblock
            sock.shutdown(socket.SHUT_RDWR)


@dataclass(frozen=True)
class ListPage:
    items: list[dict[str, Any]]
    resource_version: str
    continue_token: str | None


class KindSource:
    """List pages of, and watch, one kind in one version."""

    def __init__(self, api_client: client.ApiClient, kind: Kind, version: str, namespace: str | None = None) -> None:
        self.kind = kind
        self.version = version
        #: One namespace only (for namespaced kinds); None: all namespaces.
        self.namespace = namespace if kind.namespaced else None
        self.api_version = f"{kind.group}/{version}" if kind.group else version
        self._custom = client.CustomObjectsApi(api_client)
        self._core = client.CoreV1Api(api_client)

    def _method(self) -> Callable[..., Any]:
        namespace = self.namespace
        if self.kind.group:
            custom = self._custom
            group, version, plural = self.kind.group, self.version, self.kind.plural

            def list_custom(**kwargs: Any) -> Any:
                if namespace:
                    return custom.list_namespaced_custom_object(group, version, namespace, plural, **kwargs)
                return custom.list_cluster_custom_object(group, version, plural, **kwargs)

            return list_custom
        if self.kind.name is KindName.NAMESPACE:
            return self._core.list_namespace
        if self.kind.name is KindName.POD:
            if namespace:
                core = self._core

                def list_pods(**kwargs: Any) -> Any:
                    return core.list_namespaced_pod(namespace, **kwargs)

                return list_pods
            return self._core.list_pod_for_all_namespaces
        raise ValueError(f"no list method for {self.kind.name.value}")

    def _selectors(self) -> dict[str, Any]:
        return {"label_selector": self.kind.label_selector} if self.kind.label_selector else {}

    def list_page(self, *, limit: int, continue_token: str | None, timeout: tuple[int, int]) -> ListPage:
        """One page of a consistent list (the continue token pins the snapshot).

        Raises:
            ApiException: an error answer (410 if the continue token expired).
        """
        kwargs: dict[str, Any] = {"limit": limit, **self._selectors()}
        if continue_token:
            kwargs["_continue"] = continue_token
        response = self._method()(_preload_content=False, _request_timeout=timeout, **kwargs)
        try:
            document = json.loads(response.data)
        finally:
            response.release_conn()
        meta = document.get("metadata") or {}
        return ListPage(
            items=list(document.get("items") or []),
            resource_version=str(meta.get("resourceVersion", "")),
            continue_token=meta.get("continue") or None,
        )

    def watch(
        self, watcher: RawWatch, *, resource_version: str, timeout_seconds: int, request_timeout: tuple[int, int]
    ) -> Iterator[dict[str, Any]]:
        """Events after ``resource_version``, with bookmarks, until the server ends the watch.

        Raises:
            ApiException: an error answer or an ERROR event (410: the version is too old).
            urllib3.exceptions.ProtocolError: the stream was cut.
            urllib3.exceptions.ReadTimeoutError: nothing arrived within the read timeout.
        """
        method = self._method()

        @functools.wraps(method)
        def request(*args: Any, **kwargs: Any) -> Any:
            response = method(*args, **kwargs)
            watcher.attach(response)
            return response

        return watcher.stream(
            request,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=request_timeout,
            **self._selectors(),
        )

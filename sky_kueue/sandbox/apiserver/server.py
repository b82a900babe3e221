"""The HTTP front of the API server: standard-library, 127.0.0.1, one thread per connection.

Why the standard library: the server must run wherever the tests run, start in milliseconds
and have no dependency the project does not already carry. ``ThreadingHTTPServer`` is enough
once two details measured in practice are handled: ``TCP_NODELAY`` (without it a request
takes ~44 ms instead of ~0.5 ms, Nagle's algorithm meeting delayed ACKs), and keeping the
connection alive after a watch's final chunk (closing it breaks urllib3's connection reuse
with ``RemoteDisconnected`` on the next request).

This module only translates: HTTP method, path and query into a call on
:class:`~sky_kueue.sandbox.apiserver.store.ObjectStore`; the request's API version into the
storage version and back; store events into a chunked watch stream; errors into ``Status``
objects. It also applies injected faults and records every request.
"""

from __future__ import annotations

import contextlib
import json
import logging
import pathlib
import select
import selectors
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sky_kueue.sandbox.apiserver import discovery, errors, openapi, protobuf_body, tables
from sky_kueue.sandbox.apiserver import kubeconfig as kubeconfig_file
from sky_kueue.sandbox.apiserver.clock import Clock
from sky_kueue.sandbox.apiserver.events import WATCH_EVENT_LOG_CAPACITY_EVENTS, EventType
from sky_kueue.sandbox.apiserver.faults import Fault, FaultInjector, FaultKind, RequestInfo
from sky_kueue.sandbox.apiserver.patch import apply_patch, patch_type_for
from sky_kueue.sandbox.apiserver.requestlog import REQUEST_LOG_CAPACITY_RECORDS, RequestLog, RequestRecord
from sky_kueue.sandbox.apiserver.resources import ResourceType
from sky_kueue.sandbox.apiserver.routing import PathKind, Route, is_true, route
from sky_kueue.sandbox.apiserver.store import ObjectStore, Preconditions, Propagation
from sky_kueue.sandbox.apiserver.watch import INITIAL_EVENTS_END_ANNOTATION, WatchClosed, Watcher, WatchEvent

LOGGER = logging.getLogger(__name__)

#: Default address; the server is for local clients only.
DEFAULT_HOST = "127.0.0.1"
#: Interval between BOOKMARK events on watches that allow them (the apiserver: about a minute).
BOOKMARK_INTERVAL_SECONDS = 5.0
#: Duration of a watch that gives no ``timeoutSeconds`` (the apiserver picks 30-60 minutes).
WATCH_DEFAULT_TIMEOUT_SECONDS = 1800.0
#: How often a waiting watch checks whether the server is stopping.
WATCH_STOP_CHECK_INTERVAL_SECONDS = 0.25
#: Pending connections the listening socket queues (the stdlib default of 5 drops bursts).
LISTEN_BACKLOG_CONNECTIONS = 128
#: Largest request body accepted.
MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024

_JSON = "application/json"
_YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
_BODY_TYPES = [_JSON, "application/yaml", protobuf_body.PROTOBUF_MEDIA_TYPE]
_DRY_RUN_ALL = "All"
#: Kinds whose DELETE answers with the deleted object rather than a Status (as the apiserver).
_RETURNS_DELETED_OBJECT = frozenset({"Pod", "Namespace", "Service"})


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _error_frame(failure: errors.ApiError) -> bytes:
    """A watch ERROR event carrying ``failure`` as a Status, newline-terminated like every event."""
    return _dumps({"type": EventType.ERROR.value, "object": failure.to_status()}) + b"\n"


StreamHandler = Callable[[Any, str], bool]
#: Maps a bearer token to the user it authenticates, or None for a token the server does not
#: know (answered 401, as kube-apiserver's token authenticators do).
Authenticator = Callable[[str], str | None]


class _DroppedConnection(Exception):
    """The handler closed the connection on purpose without a (complete) response."""


class _Handler(BaseHTTPRequestHandler):
    """Serves one connection; ``self.server`` is the :class:`_HttpServer`."""

    protocol_version = "HTTP/1.1"
    server: _HttpServer

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._status_sent = 0

    def log_message(self, format: str, *args: Any) -> None:
        LOGGER.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_PATCH(self) -> None:
        self._handle("PATCH")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    # ---- plumbing -------------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BODY_BYTES:
            self.close_connection = True
            raise errors.ApiError(413, errors.Reason.BAD_REQUEST, "request entity too large")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            # The client went away mid-request (e.g. it was killed between the headers and the
            # body). The apiserver fails such a read ("unexpected EOF") and acts on nothing; acting
            # on the truncated body would, say, turn a DELETE with preconditions into a plain one.
            self.close_connection = True
            raise _DroppedConnection()
        return body

    def _respond(
        self, code: int, body: bytes, headers: dict[str, str] | None = None, *, content_type: str = _JSON
    ) -> None:
        try:
            phrase = HTTPStatus(code).phrase
        except ValueError:
            phrase = "Unknown"
        lines = [f"HTTP/1.1 {code} {phrase}", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        lines.extend(f"{name}: {value}" for name, value in (headers or {}).items())
        if self.close_connection:
            lines.append("Connection: close")
        self._status_sent = code
        self._record(code)
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

    def respond_raw(self, code: int, body: bytes, headers: dict[str, str], content_type: str) -> None:
        """A complete response (for the streaming subresources a kubelet serves)."""
        self._respond(code, body, headers, content_type=content_type)

    def switch_protocols(self, headers: dict[str, str]) -> None:
        """Answer ``101 Switching Protocols``; the connection then belongs to the caller."""
        lines = ["HTTP/1.1 101 Switching Protocols", *(f"{name}: {value}" for name, value in headers.items())]
        self._status_sent = 101
        self._record(101)
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        self.wfile.flush()

    def _respond_json(self, code: int, value: Any, headers: dict[str, str] | None = None) -> None:
        self._respond(code, _dumps(value), headers)

    def _respond_error(self, failure: errors.ApiError) -> None:
        headers = {}
        if failure.retry_after_seconds is not None:
            headers["Retry-After"] = str(failure.retry_after_seconds)
        self._respond_json(failure.code, failure.to_status(), headers)

    def _drop_connection(self) -> None:
        self.close_connection = True
        self._record(self._status_sent)
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        raise _DroppedConnection()

    # ---- request flow -----------------------------------------------------------------

    def _handle(self, method: str) -> None:
        app = self.server.app
        self._started = time.perf_counter()
        self._method = method
        self._split = urlsplit(self.path)
        self._query = {key: values[-1] for key, values in parse_qs(self._split.query, keep_blank_values=True).items()}
        self._info = RequestInfo(verb=method.lower())
        self._fault: Fault | None = None
        self._recorded = False
        self._status_sent = 0
        self._user = ""
        try:
            if app.stopping.is_set():
                # A stopping server answers nothing more, as an exiting process: a request on a
                # kept-alive connection must not see the old state once its watches have ended.
                self._drop_connection()
            body = self._read_body()
            self._authenticate()
            streams = app.stream_handler
            if streams is not None and streams(self, method):
                return
            target = route(self._split.path, app.store.registry)
            self._info = target.request_info(method, is_true(self._query.get("watch")))
            fault = self._fault = app.faults.take(self._info)
            if fault is not None and not fault.kind.is_watch_fault:
                self._apply_fault(fault)
            watch_fault = fault if fault is not None and fault.kind.is_watch_fault else None
            self._dispatch(method, target, self._query, body, watch_fault)
        except errors.ApiError as failure:
            self._respond_error(failure)
        except _DroppedConnection:
            pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as failure:
            LOGGER.exception("internal error serving %s %s", method, self.path)
            self._respond_error(errors.internal(f"{type(failure).__name__}: {failure}"))
        finally:
            self._record(self._status_sent)

    def _authenticate(self) -> None:
        """A request with a bearer token is served as the token's user, or refused (401).

        A request without credentials is served anonymously (the sandbox's kubeconfig has
        none, and the sandbox enforces no authorization: nothing is denied to anyone)."""
        authenticator = self.server.app.authenticator
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        if authenticator is None or scheme.lower() != "bearer" or not token.strip():
            return
        user = authenticator(token.strip())
        if user is None:
            raise errors.ApiError(401, errors.Reason.UNAUTHORIZED, "Unauthorized")
        self._user = user

    def _record(self, status: int) -> None:
        """Appends this request to the log, once. Called just before the last bytes of the
        response go out, so a client that has its answer always finds the request logged."""
        if self._recorded:
            return
        self._recorded = True
        self.server.app.requests.append(
            RequestRecord(
                method=self._method,
                path=self._split.path,
                query=self._query,
                info=self._info,
                status=status,
                duration_seconds=time.perf_counter() - self._started,
                fault=self._fault.kind if self._fault else None,
                user_agent=self.headers.get("User-Agent", ""),
                user=self._user,
            )
        )

    def _apply_fault(self, fault: Fault) -> None:
        if fault.kind is FaultKind.STATUS:
            raise errors.ApiError(
                fault.status_code,
                errors.Reason.INTERNAL_ERROR if fault.status_code >= 500 else errors.Reason.BAD_REQUEST,
                f"injected fault: status {fault.status_code}",
            )
        if fault.kind is FaultKind.THROTTLE:
            raise errors.too_many_requests(fault.retry_after_seconds)
        if fault.kind is FaultKind.DELAY:
            self.server.app.stopping.wait(fault.delay_seconds)
            return
        if fault.kind is FaultKind.DROP_CONNECTION:
            self._drop_connection()

    def _dispatch(
        self, method: str, target: Route, query: dict[str, str], body: bytes, watch_fault: Fault | None
    ) -> None:
        app = self.server.app
        registry = app.store.registry
        if target.kind is PathKind.RESOURCE and target.resource is not None:
            self._serve_resource(method, target, target.resource, query, body, watch_fault)
            return
        if method != "GET":
            raise errors.method_not_allowed(f"{method} is not supported on {self.path}")
        document: Any
        if target.kind is PathKind.HEALTH:
            self._respond(200, b"ok", content_type="text/plain; charset=utf-8")
            return
        if target.kind is PathKind.VERSION:
            document = discovery.version_info()
        elif target.kind is PathKind.DISCOVERY_CORE:
            document = discovery.core_versions(f"{app.host}:{app.port}")
        elif target.kind is PathKind.DISCOVERY_GROUPS:
            document = discovery.group_list(registry)
        elif target.kind is PathKind.DISCOVERY_GROUP:
            document = discovery.group(registry, target.group)
        elif target.kind is PathKind.DISCOVERY_RESOURCES:
            document = discovery.resource_list(registry, target.group, target.version)
        elif target.kind is PathKind.OPENAPI:
            document = openapi.document_for_path(registry, self.path.split("?", 1)[0])
        else:
            document = None
        if document is None:
            raise errors.ApiError(404, errors.Reason.NOT_FOUND, "the server could not find the requested resource")
        self._respond_json(200, document)

    # ---- resources --------------------------------------------------------------------

    def _decode(self, body: bytes) -> Any:
        content_type = (self.headers.get("Content-Type") or _JSON).split(";", 1)[0].strip().lower()
        try:
            if content_type in _YAML_TYPES:
                import yaml  # a project dependency; only needed for YAML bodies

                return yaml.safe_load(body.decode())
            if content_type == protobuf_body.PROTOBUF_MEDIA_TYPE:
                return protobuf_body.decode(body)
            if content_type != _JSON and not content_type.endswith("+json"):
                raise errors.unsupported_media_type(content_type, _BODY_TYPES)
            return json.loads(body) if body else None
        except (ValueError, UnicodeDecodeError) as failure:
            raise errors.bad_request(f"the request body is not valid {content_type}: {failure}") from failure

    def _object_body(self, body: bytes, resource: ResourceType, version: str) -> dict[str, Any]:
        decoded = self._decode(body)
        if not isinstance(decoded, dict):
            raise errors.bad_request(f"the request body must be a {resource.kind} object")
        expected = resource.api_version(version)
        if decoded.get("apiVersion", expected) != expected or decoded.get("kind", resource.kind) != resource.kind:
            raise errors.bad_request(
                f"the API version in the data ({decoded.get('apiVersion')}) or kind ({decoded.get('kind')}) "
                "does not "
                f"match the expected API version ({expected}) and kind ({resource.kind})"
            )
        return resource.to_storage(decoded, version)

    def _out(self, resource: ResourceType, version: str, obj: dict[str, Any]) -> dict[str, Any]:
        return resource.from_storage(obj, version)

    def _serve_resource(
        self,
        method: str,
        target: Route,
        resource: ResourceType,
        query: dict[str, str],
        body: bytes,
        watch_fault: Fault | None,
    ) -> None:
        store = self.server.app.store
        version = target.version
        dry_run = query.get("dryRun") == _DRY_RUN_ALL
        namespace = target.namespace or None
        if method == "GET":
            if is_true(query.get("watch")):
                self._serve_watch(target, resource, query, watch_fault)
            elif target.name:
                obj = store.get(resource, target.name, namespace, shared=True)
                self._respond_object(200, resource, version, obj)
            else:
                self._serve_list(target, resource, query)
            return
        if method == "POST":
            if target.name:
                raise errors.method_not_allowed(f"POST is not supported on a named {resource.singular}")
            if resource.namespaced and not target.namespace:
                raise errors.method_not_allowed(
                    f"create {resource.plural} in a namespace: POST to .../namespaces/<ns>/"
                )
            created = store.create(resource, self._object_body(body, resource, version), namespace, dry_run=dry_run)
            self._respond_object(201, resource, version, created)
            return
        if not target.name and method in ("PUT", "PATCH"):
            raise errors.method_not_allowed(f"{method} needs an object name")
        if method == "PUT":
            candidate = self._object_body(body, resource, version)
            meta = candidate.setdefault("metadata", {})
            if not isinstance(meta, dict):
                raise errors.bad_request("metadata must be an object")
            meta.setdefault("name", target.name)
            if meta["name"] != target.name:
                raise errors.bad_request(
                    f"the name of the object ({meta['name']}) does not match the name on the URL ({target.name})"
                )
            if resource.namespaced:
                meta["namespace"] = target.namespace
            updated = store.update(
                resource,
                candidate,
                namespace,
                subresource=target.subresource or None,
                dry_run=dry_run,
            )
            self._respond_object(200, resource, version, updated)
            return
        if method == "PATCH":
            patch_type = patch_type_for(self.headers.get("Content-Type") or "", strategic_allowed=not resource.custom)
            patch_body = self._decode(body)

            def change(current: dict[str, Any]) -> dict[str, Any]:
                seen = resource.from_storage(current, version)
                return resource.to_storage(apply_patch(seen, patch_body, patch_type), version)

            patched = store.mutate(
                resource,
                target.name,
                change,
                namespace,
                subresource=target.subresource or None,
                dry_run=dry_run,
            )
            self._respond_object(200, resource, version, patched)
            return
        if method == "DELETE":
            self._serve_delete(target, resource, query, body, dry_run)
            return
        raise errors.method_not_allowed(f"{method} is not supported")

    def _respond_object(self, code: int, resource: ResourceType, version: str, obj: dict[str, Any]) -> None:
        out = self._out(resource, version, obj)
        if tables.wants_table(self.headers.get("Accept") or ""):
            now = self.server.app.store.clock.now()
            self._respond_json(code, tables.table(resource, version, [out], now))
        else:
            self._respond_json(code, out)

    def _serve_list(self, target: Route, resource: ResourceType, query: dict[str, str]) -> None:
        store = self.server.app.store
        exact = query.get("resourceVersionMatch") == "Exact"
        requested = query.get("resourceVersion") or ""
        if exact and not requested:
            raise errors.bad_request("resourceVersionMatch=Exact requires a resourceVersion")
        try:
            limit = int(query["limit"]) if query.get("limit") else None
            exact_version = int(requested) if exact else None
        except ValueError as failure:
            raise errors.bad_request(f"invalid limit or resourceVersion: {failure}") from failure
        result = store.list(
            resource,
            target.namespace or None,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            limit=limit,
            continue_token=query.get("continue") or None,
            resource_version=exact_version,
            shared=True,
        )
        items = [self._out(resource, target.version, item) for item in result.items]
        if tables.wants_table(self.headers.get("Accept") or ""):
            include_object = query.get("includeObject") == "Object"
            document = tables.table(
                resource,
                target.version,
                items,
                store.clock.now(),
                resource_version=str(result.resource_version),
                continue_token=result.continue_token or "",
                row_object=None if include_object else tables.partial_metadata,
            )
            self._respond_json(200, document)
            return
        metadata: dict[str, Any] = {"resourceVersion": str(result.resource_version)}
        if result.continue_token:
            metadata["continue"] = result.continue_token
            metadata["remainingItemCount"] = result.remaining_item_count
        self._respond_json(
            200,
            {
                "kind": resource.list_kind,
                "apiVersion": resource.api_version(target.version),
                "metadata": metadata,
                "items": items,
            },
        )

    def _serve_delete(
        self, target: Route, resource: ResourceType, query: dict[str, str], body: bytes, dry_run: bool
    ) -> None:
        store = self.server.app.store
        options = self._decode(body) if body else None
        options = options if isinstance(options, dict) else {}
        propagation_name = query.get("propagationPolicy") or options.get("propagationPolicy") or "Background"
        try:
            propagation = Propagation(propagation_name)
        except ValueError as failure:
            raise errors.bad_request(f"unknown propagationPolicy {propagation_name!r}") from failure
        dry_run = dry_run or _DRY_RUN_ALL in (options.get("dryRun") or [])
        if not target.name:
            store.delete_collection(
                resource,
                target.namespace or None,
                label_selector=query.get("labelSelector"),
                field_selector=query.get("fieldSelector"),
                propagation=propagation,
                dry_run=dry_run,
            )
            self._respond_json(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})
            return
        raw = options.get("preconditions") or {}
        preconditions = Preconditions(raw.get("uid"), raw.get("resourceVersion")) if raw else None
        grace = query.get("gracePeriodSeconds", options.get("gracePeriodSeconds"))
        try:
            grace_seconds = None if grace is None else int(grace)
        except (TypeError, ValueError) as failure:
            raise errors.bad_request(f"gracePeriodSeconds must be an integer, got {grace!r}") from failure
        last = store.delete(
            resource,
            target.name,
            target.namespace or None,
            preconditions=preconditions,
            propagation=propagation,
            dry_run=dry_run,
            grace_period_seconds=grace_seconds,
        )
        still_there = store.try_get(resource, target.name, target.namespace or None, shared=True) is not None
        code = 202 if still_there and not dry_run else 200
        if still_there or resource.custom or resource.kind in _RETURNS_DELETED_OBJECT:
            self._respond_object(code, resource, target.version, last)
            return
        self._respond_json(
            code,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {
                    "name": target.name,
                    "group": resource.group,
                    "kind": resource.plural,
                    "uid": last.get("metadata", {}).get("uid", ""),
                },
            },
        )

    # ---- watch --------------------------------------------------------------------------

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

    def _end_chunks(self) -> None:
        self._record(self._status_sent)
        self.wfile.write(b"0\r\n\r\n")

    def _open_watch(self, target: Route, resource: ResourceType, query: dict[str, str]) -> Watcher:
        store = self.server.app.store
        requested = query.get("resourceVersion") or ""
        bookmarks = is_true(query.get("allowWatchBookmarks"))
        field_selector = query.get("fieldSelector") or ""
        if target.name:  # the deprecated watch of one named object
            field_selector = ",".join(filter(None, [field_selector, f"metadata.name={target.name}"]))
        common: dict[str, Any] = {
            "label_selector": query.get("labelSelector"),
            "field_selector": field_selector,
            "shared": True,
        }
        namespace = target.namespace or None
        if is_true(query.get("sendInitialEvents")):
            if not bookmarks or query.get("resourceVersionMatch") != "NotOlderThan":
                raise errors.invalid(
                    "ListOptions",
                    "meta.k8s.io",
                    "",
                    "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
                )
            return store.watch(resource, namespace, initial_events=True, initial_events_end=True, **common)
        if requested in ("", "0"):
            return store.watch(resource, namespace, initial_events=True, **common)
        try:
            since = int(requested)
        except ValueError as failure:
            raise errors.bad_request(f"invalid resourceVersion {requested!r}") from failure
        return store.watch(resource, namespace, since=since, **common)

    def _watch_frame(self, target: Route, resource: ResourceType, event: WatchEvent, first: bool) -> bytes:
        version = target.version
        obj: dict[str, Any]
        if event.type is EventType.BOOKMARK:
            metadata: dict[str, Any] = {"resourceVersion": str(event.resource_version)}
            if event.initial_events_end:
                metadata["annotations"] = {INITIAL_EVENTS_END_ANNOTATION: "true"}
            obj = {"kind": resource.kind, "apiVersion": resource.api_version(version), "metadata": metadata}
        else:
            assert event.obj is not None
            obj = self._out(resource, version, event.obj)
            if tables.wants_table(self.headers.get("Accept") or ""):
                now = self.server.app.store.clock.now()
                obj = tables.table(resource, version, [obj], now, with_definitions=first)
        return _dumps({"type": event.type.value, "object": obj}) + b"\n"

    def _serve_watch(self, target: Route, resource: ResourceType, query: dict[str, str], fault: Fault | None) -> None:
        app = self.server.app
        try:
            timeout = float(query["timeoutSeconds"]) if query.get("timeoutSeconds") else WATCH_DEFAULT_TIMEOUT_SECONDS
        except ValueError as failure:
            raise errors.bad_request(f"invalid timeoutSeconds: {failure}") from failure
        bookmarks = is_true(query.get("allowWatchBookmarks"))
        gone: errors.ApiError | None = None
        watcher: Watcher | None = None
        try:
            watcher = self._open_watch(target, resource, query)
        except errors.ApiError as failure:
            if failure.code != 410:
                raise
            gone = failure
        headers = f"HTTP/1.1 200 OK\r\nContent-Type: {_JSON}\r\nTransfer-Encoding: chunked\r\n\r\n"
        self.wfile.write(headers.encode("latin-1"))
        self._status_sent = 200
        if gone is not None or watcher is None:
            self._write_chunk(_error_frame(gone or errors.internal("no watch")))
            self._end_chunks()
            return
        app.track_watcher(watcher)
        try:
            self._stream(target, resource, watcher, timeout, bookmarks, fault)
        finally:
            watcher.close()
            app.untrack_watcher(watcher)

    def _stream(
        self,
        target: Route,
        resource: ResourceType,
        watcher: Watcher,
        timeout_seconds: float,
        bookmarks: bool,
        fault: Fault | None,
    ) -> None:
        app = self.server.app
        now = time.monotonic()
        deadline = now + timeout_seconds
        next_bookmark = now + app.bookmark_interval_seconds
        sent = 0
        while not app.stopping.is_set():
            if fault is not None and sent >= fault.after_events:
                self._finish_with_fault(fault)
                return
            now = time.monotonic()
            if now >= deadline:
                break
            wake_at = min(deadline, next_bookmark) if bookmarks else deadline
            wait = min(max(0.0, wake_at - now), WATCH_STOP_CHECK_INTERVAL_SECONDS)
            try:
                event = watcher.next(wait)
            except WatchClosed:
                break
            if event is None:
                if self._client_gone():
                    self.close_connection = True
                    return
                if bookmarks and time.monotonic() >= next_bookmark:
                    version = app.store.bookmark_resource_version(watcher)
                    if version is not None:
                        bookmark = WatchEvent(EventType.BOOKMARK, resource, None, version)
                        self._write_chunk(self._watch_frame(target, resource, bookmark, False))
                    next_bookmark = time.monotonic() + app.bookmark_interval_seconds
                continue
            if event.type is EventType.BOOKMARK and not bookmarks:
                continue
            self._write_chunk(self._watch_frame(target, resource, event, sent == 0))
            sent += 1
        self._end_chunks()

    def _client_gone(self) -> bool:
        """Whether the client closed its end (a readable socket with nothing to read)."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if isinstance(self.connection, ssl.SSLSocket):
                # TLS cannot peek; a watch client sends nothing until it closes (close_notify
                # or FIN), so anything readable means it is gone.
                return bool(readable)
            return bool(readable) and not self.connection.recv(1, socket.MSG_PEEK)
        except OSError:
            return True

    def _finish_with_fault(self, fault: Fault) -> None:
        if fault.kind is FaultKind.WATCH_CUT:
            self._drop_connection()
        if fault.kind is FaultKind.WATCH_GONE:
            self._write_chunk(_error_frame(errors.gone("injected fault: too old resource version")))
        self._end_chunks()


class _HttpServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` that knows its app, stops without polling, and can close idle
    keep-alive connections.

    ``serve_forever`` polls for shutdown (every 0.5 s by default), which makes every stop in a
    test suite slow; :meth:`serve` instead waits on the listening socket and a wake-up socket.
    """

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = LISTEN_BACKLOG_CONNECTIONS

    def __init__(self, address: tuple[str, int], app: ApiServer, ssl_context: ssl.SSLContext | None = None) -> None:
        self.app = app
        self._ssl_context = ssl_context
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._stop_requested = threading.Event()
        super().__init__(address, _Handler)

    def serve(self) -> None:
        """Accepts connections until :meth:`request_stop`."""
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self._stop_requested.is_set():
                for key, _ in selector.select():
                    if key.fileobj is self.socket and not self._stop_requested.is_set():
                        self.handle_request()

    def get_request(self) -> tuple[socket.socket, Any]:
        request, address = super().get_request()
        if self._ssl_context is not None:
            # The handshake happens on the first read, in the connection's own thread (not in
            # the accept loop, which a slow or failing client would otherwise stall).
            request = self._ssl_context.wrap_socket(request, server_side=True, do_handshake_on_connect=False)
        return request, address

    def handle_error(self, request: Any, client_address: Any) -> None:
        failure = sys.exc_info()[1]
        if isinstance(failure, (ssl.SSLError, ConnectionError)):
            LOGGER.debug("connection from %s failed: %s", client_address, failure)
            return
        super().handle_error(request, client_address)

    def request_stop(self) -> None:
        self._stop_requested.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"x")

    def server_close(self) -> None:
        super().server_close()
        self._wake_reader.close()
        self._wake_writer.close()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._connections_lock:
            self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)


class ApiServer:
    """A local Kubernetes API server over one :class:`ObjectStore`.

    Usage::

        with ApiServer() as server:
            server.write_kubeconfig(path)
            server.faults.inject(FaultKind.STATUS, verb="list", resource="pods")
            ... # talk to server.url with kubectl or the kubernetes client
            server.requests.matching(verb="list")

    Attributes:
        store: the object store; in-process code reads, writes and watches it directly.
        faults: arm faults with ``faults.inject(...)``.
        requests: the request log.
    """

    def __init__(
        self,
        host: str = DEFAULT_HOST,
        port: int = 0,
        *,
        store: ObjectStore | None = None,
        clock: Clock | None = None,
        bookmark_interval_seconds: float = BOOKMARK_INTERVAL_SECONDS,
        event_log_capacity_events: int = WATCH_EVENT_LOG_CAPACITY_EVENTS,
        request_log_capacity_records: int = REQUEST_LOG_CAPACITY_RECORDS,
    ) -> None:
        self.store = store or ObjectStore(clock=clock, event_log_capacity_events=event_log_capacity_events)
        self.faults = FaultInjector()
        self.requests = RequestLog(request_log_capacity_records)
        #: Serves pod streaming subresources (exec, log) when set: called with the request
        #: handler and method, returns True if it answered. ``sandbox.kubelet`` provides one.
        self.stream_handler: StreamHandler | None = None
        #: Authenticates bearer tokens when set (``sandbox.workloads.service_accounts``).
        self.authenticator: Authenticator | None = None
        self._listeners: list[tuple[_HttpServer, threading.Thread]] = []
        self.bookmark_interval_seconds = bookmark_interval_seconds
        self.stopping = threading.Event()
        self._requested_address = (host, port)
        self._httpd: _HttpServer | None = None
        self._thread: threading.Thread | None = None
        self._watchers: set[Watcher] = set()
        self._watchers_changed = threading.Condition()

    # ---- lifecycle ------------------------------------------------------------------------

    def start(self) -> ApiServer:
        """Binds and starts serving in a background thread; returns self."""
        if self._httpd is not None:
            return self
        self.stopping.clear()
        self._httpd = _HttpServer(self._requested_address, self)
        self._thread = threading.Thread(
            target=self._httpd.serve,
            name=f"sky-kueue-apiserver:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Ends watches, stops accepting requests, closes connections."""
        if self._httpd is None:
            return
        self.stopping.set()
        with self._watchers_changed:
            watchers = list(self._watchers)
        for watcher in watchers:
            watcher.close()
        self._httpd.request_stop()
        if self._thread is not None:
            self._thread.join()
        self._httpd.close_connections()
        self._httpd.server_close()
        for listener, thread in self._listeners:
            listener.request_stop()
            thread.join()
            listener.close_connections()
            listener.server_close()
        self._listeners = []
        self._httpd = None
        self._thread = None

    def restart(self, while_down: Callable[[ObjectStore], None] | None = None) -> ApiServer:
        """Stops and serves again on the same port, as an API server restarted in place.

        ``while_down`` runs while no request is served (e.g. ``lambda s: s.restore(rv)``), so
        clients reconnect to its result only. Extra listeners (:meth:`add_listener`) end.
        """
        port = self.port
        self.stop()
        if while_down is not None:
            while_down(self.store)
        self._requested_address = (self.host, port)
        return self.start()

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # ---- addresses -----------------------------------------------------------------------

    @property
    def host(self) -> str:
        return self._requested_address[0]

    @property
    def port(self) -> int:
        """The bound port (the requested one until started)."""
        if self._httpd is None:
            return self._requested_address[1]
        return int(self._httpd.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_listener(self, host: str, port: int = 0, *, ssl_context: ssl.SSLContext | None = None) -> int:
        """Serve the same API on another address too (until :meth:`stop`); returns its port.

        For clients that cannot use the main listener: pods reach the API server on their
        network's gateway, over HTTPS (``load_incluster_config`` only speaks HTTPS) with
        ``ssl_context`` holding the sandbox's serving certificate.
        """
        if self._httpd is None:
            raise RuntimeError("start the server before adding a listener")
        listener = _HttpServer((host, port), self, ssl_context)
        thread = threading.Thread(target=listener.serve, name=f"sky-kueue-apiserver:{host}:{port}", daemon=True)
        thread.start()
        self._listeners.append((listener, thread))
        return int(listener.server_address[1])

    def inject(self, kind: FaultKind | str, **match_and_options: Any) -> Fault:
        """Shorthand for ``faults.inject``: arms a fault (see :class:`FaultInjector`)."""
        return self.faults.inject(kind, **match_and_options)

    def write_kubeconfig(
        self, path: str | pathlib.Path, *, context: str = kubeconfig_file.DEFAULT_CONTEXT
    ) -> pathlib.Path:
        """Writes a kubeconfig pointing at this (started) server and returns its path.

        Raises:
            RuntimeError: if the server was asked for port 0 and is not started yet.
            OSError: if the file cannot be written.
        """
        if self._httpd is None and self._requested_address[1] == 0:
            raise RuntimeError("start the server before writing its kubeconfig: its port is not known yet")
        return kubeconfig_file.write(path, self.url, context=context)

    # ---- watch bookkeeping (for the handler) ------------------------------------------------

    def track_watcher(self, watcher: Watcher) -> None:
        with self._watchers_changed:
            self._watchers.add(watcher)
            self._watchers_changed.notify_all()
        if self.stopping.is_set():
            watcher.close()

    def untrack_watcher(self, watcher: Watcher) -> None:
        with self._watchers_changed:
            self._watchers.discard(watcher)
            self._watchers_changed.notify_all()

    def open_watch_count(self) -> int:
        """Number of HTTP watch streams currently open."""
        with self._watchers_changed:
            return len(self._watchers)

    def wait_for_watches(self, count: int, timeout_seconds: float) -> bool:
        """Blocks until at least ``count`` HTTP watch streams are open (a client is now
        listening); returns False if that did not happen within the timeout."""
        with self._watchers_changed:
            return self._watchers_changed.wait_for(lambda: len(self._watchers) >= count, timeout_seconds)

"""The RESTful admin-policy server: ``KueuePolicy``'s decisions over HTTP, for SkyPilot's
``RestfulAdminPolicy`` (``admin_policy: http://127.0.0.1:<port>/policy``).

Why a server at all: an API server whose Python environment cannot install sky-kueue (a
managed or shared deployment) can still call the policy over HTTP. The server reuses the
pure engine (``config_cache.ConfigCache.evaluate``) and never imports SkyPilot, so it starts
fast and gives exactly the in-process policy's answers.

Endpoints:

* ``POST /policy`` (also ``/``): the RestfulAdminPolicy exchange (``wire``). 200 with the
  mutated request, 400 with the rejection message or the reason a body is malformed.
* ``GET /health`` (also ``/healthz``): ``{"status": "ok"}``; no token needed.

Why uvicorn: SkyPilot fails closed (``RestfulAdminPolicy.apply`` in ``sky/admin_policy.py``
turns any failed call into a rejected launch), so the server must keep answering while
clients misbehave. The previous server gave each connection a thread and a timeout per
read; forty clients each sending a byte every 3 s held all its threads and every launch
failed (issue 36). Here uvicorn (SkyPilot 0.14.1 depends on it already) serves connections
on one asyncio event loop, where a slow connection costs no thread, and each connection is
bounded (:mod:`sky_kueue.skypilot.connection_guard`): its request must arrive whole, headers
and body, within :data:`REQUEST_DEADLINE_SECONDS`, and one client address holds at most
:data:`MAX_CONNECTIONS_PER_CLIENT` connections. The token is checked on the headers alone,
before any of the body is awaited; the request line and headers are capped at
:data:`MAX_HEADER_BYTES` and the body at :data:`MAX_BODY_BYTES` (its JSON/YAML nesting is
bounded by ``wire``), and bodies larger than :data:`SMALL_BODY_BYTES` share a budget of
:data:`LARGE_BODIES_BUDGET_BYTES` (a thread per connection bounded memory by its threads; an
event loop must bound it itself). Decisions run on a pool of :data:`WORKER_THREADS` threads, off the
event loop, since a first cluster sync can take seconds. An unexpected error is logged here
and answered with a one-line 500 (SkyPilot then fails closed), never a traceback.
``benchmarks/policy_server.py`` measures a launch storm, alone and beside slow clients.

Safety: binds 127.0.0.1 unless told otherwise, and refuses to serve beyond the loopback
without a token (:func:`require_token_beyond_loopback`).

Authentication (``--token-file``): SkyPilot 0.14.1's client sends no headers of its own,
but ``requests`` sends HTTP Basic credentials taken from the URL
(``http://sky-kueue:TOKEN@127.0.0.1:PORT/policy``) or, better because the token then stays
out of SkyPilot's config and error messages, from a ``~/.netrc`` (or ``$NETRC``) entry
``machine 127.0.0.1 login sky-kueue password TOKEN``. The server accepts the token as the
Basic password (any user name) or as ``Authorization: Bearer TOKEN``; anything else gets
401, which SkyPilot turns into a rejection.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hmac
import ipaddress
import json
import logging
import os
import socket
import stat
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any, cast

import uvicorn

from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.connection_guard import ClientSlots, GuardedH11Protocol
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.policy_metrics import PolicyMetrics, Verdict
from sky_kueue.skypilot.wire import WireError, decode_request, encode_response

logger = logging.getLogger(__name__)

#: An ASGI scope, event and the application's callables (the ASGI 3 specification).
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18765
POLICY_PATHS = frozenset({"/policy", "/"})
HEALTH_PATHS = frozenset({"/health", "/healthz"})
SERVER_NAME = "sky-kueue-policy"

#: Largest accepted request body; a task with large inline files is still far below this.
MAX_BODY_BYTES = 8 * 1024 * 1024

#: Bodies up to this size are read whatever else is in flight: SkyPilot's are a few KB, and
#: :data:`MAX_CONNECTIONS` of them hold at most 32 MiB.
SMALL_BODY_BYTES = 64 * 1024

#: Bytes of larger bodies held at once, across connections: the previous server's bound (its
#: 32 threads each reading one body of :data:`MAX_BODY_BYTES`). A large body that would go
#: beyond it is answered 503 (SkyPilot shows the message) rather than read.
LARGE_BODIES_BUDGET_BYTES = 32 * MAX_BODY_BYTES

#: Largest request line plus headers (h11's own default); SkyPilot sends a few hundred bytes.
MAX_HEADER_BYTES = 16 * 1024

#: Time a request has to arrive whole, headers and body, from the connection's opening (or
#: the previous response on a kept-alive connection). SkyPilot's client sends its request at
#: once and waits 30 s for the answer (``RestfulAdminPolicy.apply``); a request this late is
#: a stalled or hostile client, and its connection is closed.
REQUEST_DEADLINE_SECONDS = 10

#: Connections the kernel queues before the server accepts them (``listen`` backlog).
LISTEN_BACKLOG = 1024

#: Threads deciding requests; more decisions wait in the pool's queue.
WORKER_THREADS = 32

#: Connections or requests in progress beyond which new requests get 503 (uvicorn's
#: ``limit_concurrency``).
MAX_CONNECTIONS = 512

#: Connections one client address may hold at once; further ones are closed at once. SkyPilot's
#: API server is one address, so this is well above a launch storm's concurrency (50 in the
#: benchmark, 90 beside its 40 slow clients, all on the loopback).
MAX_CONNECTIONS_PER_CLIENT = 256

#: Idle time after a response before a kept-alive connection is closed (uvicorn's).
KEEP_ALIVE_SECONDS = 5

#: How long stopping waits for requests in progress before cancelling them.
SHUTDOWN_GRACE_SECONDS = 5


class TokenError(ValueError):
    """A token file that cannot be used; the message is one line."""


def load_token(path: str | os.PathLike[str]) -> str:
    """Read a bearer token from a file (surrounding whitespace removed).

    Raises:
        TokenError: the file cannot be read or holds no token.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        mode = Path(path).stat().st_mode
    except OSError as exc:
        raise TokenError(f"{os.fspath(path)}: cannot read the token file: {exc.strerror or exc}") from None
    token = text.strip()
    if not token or any(c.isspace() for c in token):
        raise TokenError(f"{os.fspath(path)}: the token file must hold one token without spaces")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        logger.warning("sky-kueue: token file %s is readable by other users; chmod 600 it", os.fspath(path))
    return token


def authorized(header: str | None, token: str) -> bool:
    """Whether an ``Authorization`` header carries ``token`` (Bearer, or Basic password)."""
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if scheme.lower() == "bearer":
        return hmac.compare_digest(value.encode("utf-8"), token.encode("utf-8"))
    if scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return False
        _, sep, password = decoded.partition(":")
        return bool(sep) and hmac.compare_digest(password.encode("utf-8"), token.encode("utf-8"))
    return False


def is_loopback(host: str) -> bool:
    """Whether binding ``host`` keeps the server on this machine (``localhost`` or a loopback IP)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def require_token_beyond_loopback(host: str, token: str | None) -> None:
    """Refuse to serve beyond the loopback without a token.

    Raises:
        TokenError: ``host`` is not a loopback address and ``token`` is None.
    """
    if token is None and not is_loopback(host):
        raise TokenError(
            f"refusing to serve the policy on {host or 'every address'} without a token: anyone who can reach "
            "it could place or reject launches; give it a token (--token-file FILE) or bind 127.0.0.1"
        )


@dataclass(frozen=True)
class BodyProblem:
    """Why a request body cannot be read: malformed framing, or no room for it (busy)."""

    status: HTTPStatus
    reason: str
    verdict: Verdict = Verdict.MALFORMED

    @property
    def text(self) -> str:
        return f"malformed policy request: {self.reason}" if self.verdict is Verdict.MALFORMED else self.reason


class BodyBudget:
    """Bytes of large request bodies held at once; used from the event loop's thread only."""

    def __init__(self, limit_bytes: int) -> None:
        self.limit_bytes = limit_bytes
        self.held = 0

    def take(self, size: int) -> bool:
        """Hold ``size`` more bytes; False (holding nothing more) when that exceeds the limit."""
        if self.held + size > self.limit_bytes:
            return False
        self.held += size
        return True

    def give_back(self, size: int) -> None:
        self.held -= size


@dataclass
class BodyClaim:
    """What one request's body holds of the :class:`BodyBudget`."""

    budget: BodyBudget
    held: int = 0

    def cover(self, received: int) -> bool:
        """Hold the body's ``received`` bytes so far (only once past :data:`SMALL_BODY_BYTES`)."""
        if received <= SMALL_BODY_BYTES or received <= self.held:
            return True
        if not self.budget.take(received - self.held):
            return False
        self.held = received
        return True

    def release(self) -> None:
        self.budget.give_back(self.held)
        self.held = 0


@dataclass(frozen=True)
class Answer:
    """A response: status, body and content type, plus how the metrics count it."""

    status: HTTPStatus
    body: bytes
    content_type: str
    verdict: Verdict
    reason: str = ""


JSON = "application/json"
TEXT = "text/plain; charset=utf-8"


class PolicyApp:
    """The ASGI application: routing, the token, the bounded body, the decision.

    Each answer is counted before it is sent, so a client that has its answer (a test, a
    scrape right after) finds it in ``/metrics``. Every answer to a POST closes the
    connection: one sent before the body was read (404, 401, 411, 413) so that the unread
    body is never parsed as the next request, and a policy answer because SkyPilot opens a
    connection per request (``requests.post``) and the server closing it first frees its
    slot at once; waiting for the client's close let a launch storm of 90 connections count
    128 open from the loopback.
    """

    def __init__(self, server: PolicyServer) -> None:
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # lifespan is off and websockets are not served; nothing else is expected
        method, path = scope["method"], scope["path"]
        if method == "GET":
            if path in HEALTH_PATHS:
                await _respond(scope, send, HTTPStatus.OK, json.dumps({"status": "ok"}).encode("utf-8"), JSON)
            else:
                await _respond_text(scope, send, HTTPStatus.NOT_FOUND, f"no such endpoint {path!r}; use POST /policy")
            return
        if method != "POST":
            text = f"unsupported method {method!r}; use POST /policy"
            await _respond_text(scope, send, HTTPStatus.NOT_IMPLEMENTED, text, close=True)
            return
        await self._policy(scope, receive, send)

    async def _policy(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        path = scope["path"]
        if path not in POLICY_PATHS:
            text = f"no such endpoint {path!r}; use POST /policy"
            await _respond_text(scope, send, HTTPStatus.NOT_FOUND, text, close=True)
            return
        token = self.server.token
        if token is not None and not authorized(_header(scope, b"authorization"), token):
            self.server.metrics.answered(Verdict.UNAUTHORIZED, started)
            await _respond_text(
                scope,
                send,
                HTTPStatus.UNAUTHORIZED,
                "missing or invalid token",
                close=True,
                extra_headers=[(b"www-authenticate", b'Bearer realm="sky-kueue"')],
            )
            return
        claim = BodyClaim(self.server.body_budget)
        try:
            body = await _read_body(scope, receive, claim)
            if body is None:
                return  # the client went away (or missed the deadline) before its body arrived
            if isinstance(body, BodyProblem):
                self.server.metrics.answered(body.verdict, started)
                await _respond_text(scope, send, body.status, body.text, close=True)
                return
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(self.server.pool, self._decide, body)
        finally:
            claim.release()
        self.server.metrics.answered(answer.verdict, started, answer.reason)
        await _respond(scope, send, answer.status, answer.body, answer.content_type, close=True)

    def _decide(self, body: bytes) -> Answer:
        """Decode, evaluate and encode one request (on a worker thread)."""
        try:
            request = decode_request(body)
            result = self.server.cache.evaluate(request)
            rejection = result.rejection
            if rejection is not None:
                return _text_answer(HTTPStatus.BAD_REQUEST, rejection.message, Verdict.REJECTED, rejection.code.value)
            response = encode_response(result.task, result.skypilot_config)
        except WireError as exc:
            return _text_answer(HTTPStatus.BAD_REQUEST, f"malformed policy request: {exc}", Verdict.MALFORMED)
        except Exception:
            logger.exception("sky-kueue policy server: internal error while evaluating a request")
            return _text_answer(
                HTTPStatus.INTERNAL_SERVER_ERROR, "internal error in the sky-kueue policy server", Verdict.ERROR
            )
        placed = isinstance(result.decision, Placement)
        return Answer(HTTPStatus.OK, response, JSON, Verdict.PLACED if placed else Verdict.PASSED_THROUGH)


def _text_answer(status: HTTPStatus, text: str, verdict: Verdict, reason: str = "") -> Answer:
    return Answer(status, text.encode("utf-8"), TEXT, verdict, reason)


def _header(scope: Scope, name: bytes) -> str | None:
    """The first value of header ``name`` (lower case), decoded as Latin-1 as HTTP defines."""
    for key, value in scope["headers"]:
        if key == name:
            return bytes(value).decode("latin-1")
    return None


async def _read_body(scope: Scope, receive: Receive, claim: BodyClaim) -> bytes | BodyProblem | None:
    """The request body (held by ``claim``), a problem, or None when the client went away."""
    raw_length = _header(scope, b"content-length")
    if raw_length is None:
        return BodyProblem(HTTPStatus.LENGTH_REQUIRED, "Content-Length is required")
    try:
        length = int(raw_length)
    except ValueError:
        return BodyProblem(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
    if length < 0:
        return BodyProblem(HTTPStatus.BAD_REQUEST, "invalid Content-Length")
    if length > MAX_BODY_BYTES:
        return BodyProblem(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body larger than {MAX_BODY_BYTES} bytes")
    chunks: list[bytes] = []
    received = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(bytes(message.get("body", b"")))
        received += len(chunks[-1])
        if not claim.cover(received):
            busy = (
                f"sky-kueue policy server busy: more than {claim.budget.limit_bytes} bytes of large request "
                "bodies in flight; retry shortly"
            )
            return BodyProblem(HTTPStatus.SERVICE_UNAVAILABLE, busy, Verdict.BUSY)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _respond_text(
    scope: Scope,
    send: Send,
    status: HTTPStatus,
    text: str,
    close: bool = False,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    await _respond(scope, send, status, text.encode("utf-8"), TEXT, close, extra_headers)


async def _respond(
    scope: Scope,
    send: Send,
    status: HTTPStatus,
    body: bytes,
    content_type: str,
    close: bool = False,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type.encode("latin-1")), (b"content-length", str(len(body)).encode())]
    headers += extra_headers or []
    if close:
        headers.append((b"connection", b"close"))
    _log_access(scope, status)
    await send({"type": "http.response.start", "status": int(status), "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _log_access(scope: Scope, status: HTTPStatus) -> None:
    """One access-log line: client, request line and status (never a header)."""
    client = scope.get("client")
    target = bytes(scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    query = bytes(scope.get("query_string", b"")).decode("latin-1")
    logger.info(
        '%s "%s %s HTTP/%s" %d',
        client[0] if client else "-",
        scope["method"],
        f"{target}?{query}" if query else target,
        scope["http_version"],
        int(status),
    )


class PolicyServer:
    """The policy HTTP server: uvicorn on a socket bound at construction, serving :class:`PolicyApp`.

    Args:
        address: (host, port); port 0 picks a free port (see ``server_address``).
        cache: the plugin config to decide with.
        token: the required token, or None for no authentication (loopback only).
        workers: threads deciding requests.
        request_deadline_seconds: time a request has to arrive whole (tests shorten it).
        max_connections_per_client: connections one client address may hold.
        large_bodies_budget_bytes: bytes of large bodies held at once.

    ``metrics`` counts every policy answer (serve its registry with
    :func:`sky_kueue.metrics_http.serve_metrics`). Run it with :meth:`serve_forever` (or
    :func:`serve_in_thread`), stop it with :meth:`shutdown` from another thread, then
    :meth:`server_close`; the socket listens from construction on, so clients can connect
    before it serves.

    Raises:
        TokenError: ``address`` is beyond the loopback and there is no token.
        OSError: the address cannot be bound.
    """

    def __init__(
        self,
        address: tuple[str, int],
        cache: ConfigCache,
        token: str | None = None,
        workers: int = WORKER_THREADS,
        *,
        request_deadline_seconds: float = REQUEST_DEADLINE_SECONDS,
        max_connections_per_client: int = MAX_CONNECTIONS_PER_CLIENT,
        large_bodies_budget_bytes: int = LARGE_BODIES_BUDGET_BYTES,
    ) -> None:
        require_token_beyond_loopback(address[0], token)
        self.cache = cache
        self.token = token
        self.metrics = PolicyMetrics(cache.loaded_views)
        self.listen_backlog = LISTEN_BACKLOG
        self.socket = _listen(address, self.listen_backlog)
        self.server_address: tuple[Any, ...] = self.socket.getsockname()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sky-kueue-policy")
        self.slots = ClientSlots(max_connections_per_client)
        self.body_budget = BodyBudget(large_bodies_budget_bytes)
        protocol = functools.partial(
            GuardedH11Protocol, slots=self.slots, request_deadline_seconds=request_deadline_seconds
        )
        config = uvicorn.Config(
            PolicyApp(self),
            http=cast("type[asyncio.Protocol]", protocol),
            ws="none",
            lifespan="off",
            interface="asgi3",
            log_config=None,  # our access log and the CLI's logging instead of uvicorn's
            access_log=False,
            proxy_headers=False,  # the client is the peer; X-Forwarded-For is not trusted
            server_header=False,
            headers=[("server", SERVER_NAME)],
            limit_concurrency=MAX_CONNECTIONS,
            backlog=self.listen_backlog,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
            h11_max_incomplete_event_size=MAX_HEADER_BYTES,
        )
        self._uvicorn = uvicorn.Server(config)
        self._serving = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        """The policy URL to put into SkyPilot's ``admin_policy``."""
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/policy"

    def serve_forever(self) -> None:
        """Serve until :meth:`shutdown` (or, in the main thread, SIGINT/SIGTERM, as uvicorn handles them)."""
        self._serving.set()
        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(self._uvicorn.serve(sockets=[self.socket]))
        finally:
            loop.close()
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving and wait until :meth:`serve_forever` has returned (thread-safe)."""
        self._uvicorn.should_exit = True
        if self._serving.is_set():
            self._stopped.wait()

    def server_close(self) -> None:
        """Close the listening socket and the decision threads."""
        self.socket.close()
        self.pool.shutdown(wait=False, cancel_futures=True)


def _listen(address: tuple[str, int], backlog: int) -> socket.socket:
    host, port = address
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def make_server(
    config_path: str | os.PathLike[str],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> PolicyServer:
    """Load the config (failing fast) and the run history, and bind a server; call
    ``serve_forever`` to run it.

    Raises:
        TokenError: ``host`` is beyond the loopback and there is no token.
        ConfigError: the config is invalid.
        ManifestError: a manifest named by the config cannot be read.
        OSError: the address cannot be bound.
    """
    require_token_beyond_loopback(host, token)
    cache = ConfigCache(config_path)
    cache.warm()
    return PolicyServer((host, port), cache, token)


def serve_in_thread(server: PolicyServer) -> threading.Thread:
    """Run ``server`` in a daemon thread (tests, embedding); stop it with ``server.shutdown()``."""
    thread = threading.Thread(target=server.serve_forever, name="sky-kueue-policy-server", daemon=True)
    thread.start()
    return thread

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

Safety and load: binds 127.0.0.1 unless told otherwise; bodies are capped at
:data:`MAX_BODY_BYTES` and their JSON/YAML nesting is bounded (``wire``); a bounded pool of
:data:`WORKER_THREADS` serves connections from a listen backlog of :data:`LISTEN_BACKLOG`
(Python's default of 5 reset connections under a launch storm, and SkyPilot fails closed,
so every reset was a spurious rejection); a client that does not send its request within
:data:`CLIENT_TIMEOUT_SECONDS` is dropped, so stalled connections cannot hold the pool; an
unexpected error is logged here and answered with a one-line 500 (SkyPilot then fails
closed), never a traceback. ``benchmarks/policy_server.py`` measures a launch storm.

Authentication (optional, ``--token-file``): SkyPilot 0.14.1's client sends no headers of
its own, but ``requests`` sends HTTP Basic credentials taken from the URL
(``http://sky-kueue:TOKEN@127.0.0.1:PORT/policy``) or, better because the token then stays
out of SkyPilot's config and error messages, from a ``~/.netrc`` (or ``$NETRC``) entry
``machine 127.0.0.1 login sky-kueue password TOKEN``. The server accepts the token as the
Basic password (any user name) or as ``Authorization: Bearer TOKEN``; anything else gets
401, which SkyPilot turns into a rejection.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import os
import socket
import stat
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.decision import Placement
from sky_kueue.skypilot.policy_metrics import PolicyMetrics, Verdict
from sky_kueue.skypilot.wire import WireError, decode_request, encode_response

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 18765
POLICY_PATHS = frozenset({"/policy", "/"})
HEALTH_PATHS = frozenset({"/health", "/healthz"})

#: Largest accepted request body; a task with large inline files is still far below this.
MAX_BODY_BYTES = 8 * 1024 * 1024

#: Socket timeout per client connection. SkyPilot's client sends its whole request at once,
#: so a connection silent this long is stalled; it is dropped to free its worker.
CLIENT_TIMEOUT_SECONDS = 5

#: Connections the kernel queues before the server accepts them (``listen`` backlog).
LISTEN_BACKLOG = 1024

#: Worker threads serving connections; more connections wait in the queue, not in threads.
WORKER_THREADS = 32

#: How often an embedded server (``serve_in_thread``) checks for ``shutdown()``.
SHUTDOWN_POLL_SECONDS = 0.05


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


class PolicyServer(HTTPServer):
    """The policy HTTP server: a bounded worker pool behind a deep listen backlog.

    Args:
        address: (host, port); port 0 picks a free port (see ``server_address``).
        cache: the plugin config to decide with.
        token: the required token, or None for no authentication.
        workers: size of the worker pool.

    ``metrics`` counts every policy answer (serve its registry with
    :func:`sky_kueue.metrics_http.serve_metrics`).
    """

    request_queue_size = LISTEN_BACKLOG

    def __init__(
        self, address: tuple[str, int], cache: ConfigCache, token: str | None = None, workers: int = WORKER_THREADS
    ) -> None:
        self.cache = cache
        self.token = token
        self.metrics = PolicyMetrics(cache.loaded_views)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sky-kueue-policy")
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, PolicyRequestHandler)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Hand the connection to the pool (``socketserver`` would serve it in this thread)."""
        self._pool.submit(self._serve_one, request, client_address)

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:  # noqa: BLE001 - one connection's failure is logged; the server keeps serving
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    @property
    def url(self) -> str:
        """The policy URL to put into SkyPilot's ``admin_policy``."""
        host, port = str(self.server_address[0]), self.server_address[1]
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/policy"

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Log a connection-level error in one line instead of printing a traceback."""
        logger.warning("sky-kueue policy server: connection from %s failed", client_address[0], exc_info=True)


@dataclass(frozen=True)
class BodyProblem:
    """Why a request body cannot be read (answered as a malformed request)."""

    status: HTTPStatus
    reason: str


class PolicyRequestHandler(BaseHTTPRequestHandler):
    """Handles one HTTP request (see the module docstring for the endpoints)."""

    server: PolicyServer
    server_version = "sky-kueue-policy"
    timeout = CLIENT_TIMEOUT_SECONDS

    def do_GET(self) -> None:
        """Health endpoint."""
        if self._path() in HEALTH_PATHS:
            self._send_json(HTTPStatus.OK, {"status": "ok"})
        else:
            self._send_text(HTTPStatus.NOT_FOUND, f"no such endpoint {self._path()!r}; use POST /policy")

    def do_POST(self) -> None:
        """The RestfulAdminPolicy exchange.

        Each answer is counted before it is sent, so a client that has its answer (a test,
        a scrape right after) finds it in ``/metrics``.
        """
        started = time.perf_counter()
        if self._path() not in POLICY_PATHS:
            self._send_text(HTTPStatus.NOT_FOUND, f"no such endpoint {self._path()!r}; use POST /policy")
            return
        token = self.server.token
        if token is not None and not authorized(self.headers.get("Authorization"), token):
            self.server.metrics.answered(Verdict.UNAUTHORIZED, started)
            self._send_text(
                HTTPStatus.UNAUTHORIZED,
                "missing or invalid token",
                extra_headers={"WWW-Authenticate": 'Bearer realm="sky-kueue"'},
            )
            return
        body = self._read_body()
        if isinstance(body, BodyProblem):
            self.server.metrics.answered(Verdict.MALFORMED, started)
            self._send_text(body.status, f"malformed policy request: {body.reason}")
            return
        try:
            request = decode_request(body)
        except WireError as exc:
            self.server.metrics.answered(Verdict.MALFORMED, started)
            self._send_text(HTTPStatus.BAD_REQUEST, f"malformed policy request: {exc}")
            return
        try:
            result = self.server.cache.evaluate(request)
        except Exception:
            logger.exception("sky-kueue policy server: internal error while evaluating a request")
            self.server.metrics.answered(Verdict.ERROR, started)
            self._send_text(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error in the sky-kueue policy server")
            return
        rejection = result.rejection
        if rejection is not None:
            self.server.metrics.answered(Verdict.REJECTED, started, rejection.code.value)
            self._send_text(HTTPStatus.BAD_REQUEST, rejection.message)
            return
        response = encode_response(result.task, result.skypilot_config)
        placed = isinstance(result.decision, Placement)
        self.server.metrics.answered(Verdict.PLACED if placed else Verdict.PASSED_THROUGH, started)
        self._send(HTTPStatus.OK, response, "application/json")

    def log_message(self, format: str, *args: Any) -> None:
        """Route the access log to ``logging`` (request line and status only, no headers)."""
        logger.info("%s %s", self.client_address[0], format % args)

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _read_body(self) -> bytes | BodyProblem:
        raw_length = self.headers.get("Content-Length")
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
        body = self.rfile.read(length)
        if len(body) != length:
            return BodyProblem(HTTPStatus.BAD_REQUEST, "body shorter than Content-Length")
        return body

    def _send_json(self, status: HTTPStatus, payload: object) -> None:
        self._send(status, json.dumps(payload).encode("utf-8"), "application/json")

    def _send_text(self, status: HTTPStatus, text: str, extra_headers: dict[str, str] | None = None) -> None:
        self._send(status, text.encode("utf-8"), "text/plain; charset=utf-8", extra_headers)

    def _send(
        self, status: HTTPStatus, body: bytes, content_type: str, extra_headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra_headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


def make_server(
    config_path: str | os.PathLike[str],
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
) -> PolicyServer:
    """Load the config (failing fast) and bind a server; call ``serve_forever`` to run it.

    Raises:
        ConfigError: the config is invalid.
        ManifestError: a manifest named by the config cannot be read.
        OSError: the address cannot be bound.
    """
    cache = ConfigCache(config_path)
    cache.get()
    return PolicyServer((host, port), cache, token)


def serve_in_thread(server: PolicyServer) -> threading.Thread:
    """Run ``server`` in a daemon thread (tests, embedding); stop it with ``server.shutdown()``."""
    thread = threading.Thread(
        target=server.serve_forever,
        kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
        name="sky-kueue-policy-server",
        daemon=True,
    )
    thread.start()
    return thread

"""The policy server under load and abuse: a launch storm, stalled and slow connections, an
unauthenticated body, one client's share of connections, hostile bodies.

SkyPilot fails closed (``RestfulAdminPolicy``: any transport error rejects the launch), so a
reset connection is a user's launch refused for nothing.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.connection_guard import ClientSlots
from sky_kueue.skypilot.policy_server import LISTEN_BACKLOG, SMALL_BODY_BYTES, PolicyServer, make_server
from tests.skypilot.builders import DEMO_CONFIG, TEMPLATES
from tests.skypilot.test_policy_server import running

#: ``running`` as a ``with`` statement, for a test that builds its own server.
serving = contextlib.contextmanager(running)

STORM_REQUESTS = 300
STORM_CLIENTS = 50
REQUEST_TIMEOUT_SECONDS = 30
#: Slow clients: as many as in issue 36, each sending one more byte every interval.
SLOW_CLIENTS = 40
TRICKLE_INTERVAL_SECONDS = 0.25
#: A slow client gives up (and closes) after this, so a server they stall still ends the test.
TRICKLE_LIMIT_SECONDS = 6.0
#: How soon a legitimate request must be answered beside them (a warm decision takes ms).
ANSWER_BOUND_SECONDS = 2.0
#: The request deadline of ``small_server`` and how often its slow client sends a byte (well
#: inside the deadline, so only a deadline on the whole request closes the connection).
SHORT_DEADLINE_SECONDS = 0.5
SHORT_TRICKLE_SECONDS = 0.1
REQUESTS_SAMPLE = "sky_kueue_policy_requests_total"
#: How often a test looks again at server state it cannot be notified of.
POLL_SECONDS = 0.01


def _body() -> bytes:
    task = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
    inner = {"task": yaml.safe_dump(task), "skypilot_config": "{}\n", "request_name": "jobs.launch"}
    return json.dumps(json.dumps(inner)).encode()


def _post(port: int, body: bytes) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_SECONDS)
    try:
        connection.request("POST", "/policy", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


@pytest.fixture
def small_server() -> Iterator[PolicyServer]:
    """Four workers and a half-second request deadline, so stalls are quick to show."""
    server = PolicyServer(
        ("127.0.0.1", 0), ConfigCache(DEMO_CONFIG), workers=4, request_deadline_seconds=SHORT_DEADLINE_SECONDS
    )
    yield from running(server)


def test_a_launch_storm_gets_an_answer_for_every_request(small_server: PolicyServer) -> None:
    port = small_server.server_address[1]
    body = _body()
    with ThreadPoolExecutor(STORM_CLIENTS) as clients:
        results = list(clients.map(lambda _: _post(port, body), range(STORM_REQUESTS)))
    assert [status for status, _ in results].count(200) == STORM_REQUESTS
    assert small_server.listen_backlog == LISTEN_BACKLOG


def test_stalled_connections_cannot_hold_the_pool(small_server: PolicyServer) -> None:
    port = small_server.server_address[1]
    stalled = []
    for _ in range(12):  # three times the pool
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"POST /policy HTTP/1.1\r\nHost: x\r\n")  # and never the rest
        stalled.append(sock)
    try:
        started = time.monotonic()
        status, _ = _post(port, _body())
        waited = time.monotonic() - started
    finally:
        for sock in stalled:
            sock.close()
    assert status == 200
    assert waited < 5.0  # not held behind the stalled connections


class SlowClients:
    """Connections that each send one more byte of a never-ending request header every interval.

    They stop (and close) when :meth:`stop` is called or after ``limit_seconds``; ``errors``
    holds what a send raised, i.e. a connection the server closed.
    """

    PREFIX = b"POST /policy HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "

    def __init__(self, port: int, count: int, interval: float, limit_seconds: float) -> None:
        self.sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
        self.interval, self.limit_seconds = interval, limit_seconds
        self.errors: list[str] = []
        self.warm = threading.Event()  # every connection has sent two bytes
        self._stop = threading.Event()
        self._sent = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _send_one_byte_each(self) -> None:
        byte = (self.PREFIX[self._sent : self._sent + 1]) or b"a"
        for index, sock in enumerate(self.sockets):
            try:
                sock.sendall(byte)
            except OSError as exc:
                self.errors.append(f"connection {index}: {exc}")
        self._sent += 1

    def _run(self) -> None:
        ends = time.monotonic() + self.limit_seconds
        try:
            self._send_one_byte_each()
            while not self._stop.wait(self.interval) and time.monotonic() < ends:
                self._send_one_byte_each()
                if self._sent >= 2:
                    self.warm.set()
        finally:
            for sock in self.sockets:
                sock.close()
            self.warm.set()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_SECONDS)


@pytest.fixture
def shipped_server() -> Iterator[PolicyServer]:
    """The server as ``sky-kueue policy-server`` runs it (default pool, deadline and limits)."""
    yield from running(make_server(DEMO_CONFIG, port=0))


def test_a_legitimate_request_is_answered_while_forty_slow_clients_hold_connections(
    shipped_server: PolicyServer,
) -> None:
    """Issue 36: forty clients sending a byte at a time held every worker of the thread-pool
    server, and a launch waited until they gave up."""
    port = shipped_server.server_address[1]
    slow = SlowClients(port, SLOW_CLIENTS, TRICKLE_INTERVAL_SECONDS, TRICKLE_LIMIT_SECONDS)
    try:
        assert slow.warm.wait(REQUEST_TIMEOUT_SECONDS)
        started = time.monotonic()
        status, text = _post(port, _body())
        waited = time.monotonic() - started
        errors_while_answered = list(slow.errors)
    finally:
        slow.stop()
    assert status == 200, text
    assert waited < ANSWER_BOUND_SECONDS, f"answered after {waited:.1f} s beside {SLOW_CLIENTS} slow clients"
    assert errors_while_answered == []  # the slow clients still held their connections


def _closed_by_server(sock: socket.socket, trickle: bytes, interval: float, limit: float) -> float | None:
    """Send ``trickle`` a byte every ``interval`` until the server closes the connection;
    the seconds that took, or None if it did not within ``limit``."""
    started = time.monotonic()
    sock.settimeout(interval)
    for index in range(len(trickle)):
        if time.monotonic() - started > limit:
            return None
        try:
            sock.sendall(trickle[index : index + 1])
            if sock.recv(4096) == b"":
                return time.monotonic() - started
        except TimeoutError:
            continue  # still open: the next byte
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - started
    return None


ENDLESS_HEADERS = b"POST /policy HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 1000


@pytest.mark.parametrize("phase", ["headers", "body", "next-request"])
def test_a_request_must_arrive_whole_within_the_deadline(small_server: PolicyServer, phase: str) -> None:
    """A byte every 0.1 s never trips a per-read timeout; the whole-request deadline (0.5 s
    here) closes the connection anyway, whether the bytes are headers, the body, or the
    next request on a kept-alive connection."""
    port = small_server.server_address[1]
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_SECONDS)
    try:
        if phase == "next-request":
            connection.request("GET", "/health")
            response = connection.getresponse()
            assert response.status == 200 and response.read() == b'{"status": "ok"}'
            assert connection.sock is not None  # kept alive
            sock = connection.sock
        else:
            connection.connect()
            sock = connection.sock
        trickle = ENDLESS_HEADERS
        if phase == "body":
            sock.sendall(b"POST /policy HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\n")
            trickle = b"x" * 1000
        closed_after = _closed_by_server(sock, trickle, SHORT_TRICKLE_SECONDS, limit=10 * SHORT_DEADLINE_SECONDS)
    finally:
        connection.close()
    assert closed_after is not None, "the server kept a trickling connection open past 10 deadlines"
    assert 0.8 * SHORT_DEADLINE_SECONDS <= closed_after < 4 * SHORT_DEADLINE_SECONDS


def test_an_unauthenticated_request_is_refused_before_its_body() -> None:
    """A wrong token announcing a megabyte it never sends gets 401 at once, and the
    connection is closed: no wait for the body, no slot held."""
    server = PolicyServer(("127.0.0.1", 0), ConfigCache(DEMO_CONFIG), token="right-token")
    with serving(server) as running_server:
        sock = socket.create_connection(("127.0.0.1", running_server.server_address[1]))
        try:
            sock.settimeout(REQUEST_TIMEOUT_SECONDS)
            started = time.monotonic()
            sock.sendall(
                b"POST /policy HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer wrong-token\r\n"
                b"Content-Length: 1000000\r\n\r\n"
            )
            response = http.client.HTTPResponse(sock)
            response.begin()
            answered = time.monotonic() - started
            assert response.status == 401
            assert response.read() == b"missing or invalid token"
            assert sock.recv(1) == b""  # closed by the server
        finally:
            sock.close()
        assert answered < ANSWER_BOUND_SECONDS
        samples = running_server.metrics.registry
        assert samples.get_sample_value(REQUESTS_SAMPLE, {"verdict": "unauthorized", "reason": ""}) == 1.0


def _get_health(sock: socket.socket, close: bool = False) -> int:
    sock.sendall(
        b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (b"Connection: close\r\n" if close else b"") + b"\r\n"
    )
    response = http.client.HTTPResponse(sock)
    response.begin()
    response.read()
    return response.status


def test_one_client_address_holds_at_most_its_share_of_connections() -> None:
    server = PolicyServer(("127.0.0.1", 0), ConfigCache(DEMO_CONFIG), max_connections_per_client=3)
    with serving(server) as running_server:
        port = running_server.server_address[1]
        held = [socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS) for _ in range(3)]
        try:
            assert [_get_health(sock) for sock in held] == [200, 200, 200]
            assert running_server.slots.held("127.0.0.1") == 3
            with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS) as fourth:
                assert fourth.recv(1) == b""  # closed before any request
            assert _get_health(held[0], close=True) == 200
            assert held[0].recv(1) == b""  # the server closed it, and gave its slot back first
            with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS) as fifth:
                assert _get_health(fifth) == 200
        finally:
            for sock in held:
                sock.close()


def _wait_until(predicate: Callable[[], bool], what: str) -> None:
    """Wait (bounded) for the server's event loop to reach a state the test cannot be told of."""
    deadline = time.monotonic() + REQUEST_TIMEOUT_SECONDS
    tick = threading.Event()
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        tick.wait(POLL_SECONDS)


def test_large_bodies_share_a_budget_and_small_ones_are_always_read() -> None:
    """An event loop reads every connection's body at once; without a budget, many large bodies
    held open would hold their bytes all together."""
    budget = 4 * SMALL_BODY_BYTES
    server = PolicyServer(("127.0.0.1", 0), ConfigCache(DEMO_CONFIG), large_bodies_budget_bytes=budget)
    with serving(server) as running_server:
        port = running_server.server_address[1]
        held = 3 * SMALL_BODY_BYTES  # within the budget, and the client never sends its last byte
        holder = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT_SECONDS)
        try:
            holder.sendall(f"POST /policy HTTP/1.1\r\nHost: x\r\nContent-Length: {held + 1}\r\n\r\n".encode())
            holder.sendall(b"x" * held)
            _wait_until(lambda: running_server.body_budget.held == held, "the held body to be read")
            status, text = _post(port, b"x" * (2 * SMALL_BODY_BYTES))  # would take the budget past its limit
            assert status == 503
            assert text == (
                f"sky-kueue policy server busy: more than {budget} bytes of large request bodies in flight; "
                "retry shortly"
            )
            assert _post(port, _body())[0] == 200  # a launch's small body is read regardless
        finally:
            holder.close()
        _wait_until(lambda: running_server.body_budget.held == 0, "the held body to be released")
        status, text = _post(port, b"x" * (2 * SMALL_BODY_BYTES))
        assert status == 400 and text.startswith("malformed policy request: body is not JSON")
        registry = running_server.metrics.registry
        assert registry.get_sample_value(REQUESTS_SAMPLE, {"verdict": "busy", "reason": ""}) == 1.0


def test_a_policy_answer_closes_its_connection_and_frees_its_slot(small_server: PolicyServer) -> None:
    """SkyPilot opens a connection per request; had the server waited for the client's close,
    a storm would count more connections from its address than it has open."""
    sock = socket.create_connection(("127.0.0.1", small_server.server_address[1]), timeout=ANSWER_BOUND_SECONDS)
    try:
        body = _body()
        sock.sendall(b"POST /policy HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        response = http.client.HTTPResponse(sock)
        response.begin()
        assert response.status == 200 and response.getheader("Connection") == "close"
        response.read()
        assert sock.recv(1) == b""  # closed by the server, which gave the slot back first
    finally:
        sock.close()
    assert small_server.slots.held("127.0.0.1") == 0


def test_client_slots_count_per_address() -> None:
    slots = ClientSlots(per_client=2)
    assert slots.take("10.0.0.1") and slots.take("10.0.0.1")
    assert not slots.take("10.0.0.1")
    assert slots.take("10.0.0.2")  # another address has its own share
    slots.give_back("10.0.0.1")
    assert slots.held("10.0.0.1") == 1 and slots.take("10.0.0.1")
    with pytest.raises(ValueError, match="at least 1"):
        ClientSlots(per_client=0)


def _wire(task_yaml: str) -> bytes:
    return json.dumps(json.dumps({"task": task_yaml, "request_name": "launch"})).encode()


#: Nine levels of nine aliases each: 9**9 leaves if anything expanded it.
ALIAS_BOMB = "a: &a [x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9)
)


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"[" * 200_000 + b"]" * 200_000, "nests JSON too deeply"),
        (_wire("a: " + "[" * 5000 + "]" * 5000), "nested deeper than"),
        (_wire(ALIAS_BOMB), "aliases"),
    ],
    ids=["deep-json", "deep-yaml", "alias-bomb"],
)
def test_hostile_bodies_get_a_400_with_the_reason(small_server: PolicyServer, body: bytes, reason: str) -> None:
    status, text = _post(small_server.server_address[1], body)
    assert status == 400
    assert text.startswith("malformed policy request:") and reason in text

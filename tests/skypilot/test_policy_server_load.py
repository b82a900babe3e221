"""The policy server under load and abuse: a launch storm, stalled connections, hostile bodies.

SkyPilot fails closed (``RestfulAdminPolicy``: any transport error rejects the launch), so a
reset connection is a user's launch refused for nothing.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import yaml

from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.policy_server import LISTEN_BACKLOG, PolicyRequestHandler, PolicyServer
from tests.skypilot.builders import DEMO_CONFIG, TEMPLATES
from tests.skypilot.test_policy_server import running

STORM_REQUESTS = 300
STORM_CLIENTS = 50
REQUEST_TIMEOUT_SECONDS = 30


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
def small_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[PolicyServer]:
    """Four workers and a half-second client timeout, so stalls are quick to show."""
    monkeypatch.setattr(PolicyRequestHandler, "timeout", 0.5)
    yield from running(PolicyServer(("127.0.0.1", 0), ConfigCache(DEMO_CONFIG), workers=4))


def test_a_launch_storm_gets_an_answer_for_every_request(small_server: PolicyServer) -> None:
    port = small_server.server_address[1]
    body = _body()
    with ThreadPoolExecutor(STORM_CLIENTS) as clients:
        results = list(clients.map(lambda _: _post(port, body), range(STORM_REQUESTS)))
    assert [status for status, _ in results].count(200) == STORM_REQUESTS
    assert small_server.request_queue_size == LISTEN_BACKLOG


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
    assert waited < 5.0  # three rounds of half-second timeouts, not a 30-s hold


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

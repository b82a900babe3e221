"""Launch storm against the RESTful policy server, alone and beside slow clients.

1,000 policy requests (``jobs.launch`` of a template, as SkyPilot's ``RestfulAdminPolicy``
sends them: a new connection per request) from 50 concurrent clients, twice in one run, each
time against a fresh server in a subprocess of its own (so the clients do not share its GIL):

* ``storm_alone``: the storm by itself;
* ``storm_beside_slow_clients``: the same storm while 40 slow clients (issue 36) each hold a
  connection and send one more byte of a never-ending request every 3 s, reconnecting when
  the server closes them; they connect and send their first bytes one interval before the
  storm starts.

SkyPilot fails closed: every failure is a launch refused for nothing. The target is 0
failures and a p99 below 200 ms in both.

    .venv/bin/python benchmarks/policy_server.py [--requests 1000] [--clients 50]
        [--slow-clients 40] [--slow-interval 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import pathlib
import socket
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "sky-kueue-demo.yaml"
TEMPLATE = REPO / "task_templates" / "team-b-cpu-dev.yaml"
REQUEST_TIMEOUT_SECONDS = 30
STARTUP_TIMEOUT_SECONDS = 30
#: What a slow client sends, one byte at a time: a request whose headers never end.
SLOW_REQUEST_PREFIX = b"POST /policy HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


def serve() -> None:
    """The server as ``sky-kueue policy-server`` runs it, on a free loopback port."""
    from sky_kueue.skypilot.policy_server import make_server

    server = make_server(CONFIG, port=0)
    print(f"ready {server.server_address[1]}", flush=True)
    server.serve_forever()


def _body() -> bytes:
    task = yaml.safe_load(TEMPLATE.read_text())
    inner = {"task": yaml.safe_dump(task), "skypilot_config": "{}\n", "request_name": "jobs.launch"}
    return json.dumps(json.dumps(inner)).encode()


def _one(port: int, body: bytes) -> tuple[bool, float]:
    started = time.perf_counter()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT_SECONDS)
        try:
            connection.request("POST", "/policy", body=body, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            response.read()
            ok = response.status == 200
        finally:
            connection.close()
    except OSError:
        ok = False
    return ok, time.perf_counter() - started


class SlowClients:
    """``count`` connections, each sending one more byte every ``interval`` seconds until stopped;
    a connection the server closes is opened again (and counted)."""

    def __init__(self, port: int, count: int, interval: float) -> None:
        self.port, self.interval = port, interval
        self.sockets: list[socket.socket | None] = [None] * count
        self.sent = [0] * count
        self.closed_by_server = 0
        self.connections_opened = 0
        self._stop = threading.Event()
        self._round()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _round(self) -> None:
        for index, sock in enumerate(self.sockets):
            if sock is None:
                try:
                    sock = socket.create_connection(("127.0.0.1", self.port), timeout=REQUEST_TIMEOUT_SECONDS)
                except OSError:
                    continue
                self.sockets[index], self.sent[index] = sock, 0
                self.connections_opened += 1
            offset = self.sent[index]
            byte = SLOW_REQUEST_PREFIX[offset : offset + 1] or b"a"
            try:
                sock.sendall(byte)
                self.sent[index] += 1
            except OSError:
                sock.close()
                self.sockets[index] = None
                self.closed_by_server += 1

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._round()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(REQUEST_TIMEOUT_SECONDS)
        for sock in self.sockets:
            if sock is not None:
                sock.close()


def storm(requests: int, clients: int, slow_clients: int, slow_interval: float) -> dict[str, Any]:
    process = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    slow: SlowClients | None = None
    try:
        assert process.stdout is not None
        ready = process.stdout.readline().split()
        if len(ready) != 2 or ready[0] != "ready":
            raise RuntimeError("the policy server did not start")
        port = int(ready[1])
        if slow_clients:
            slow = SlowClients(port, slow_clients, slow_interval)
            threading.Event().wait(slow_interval)  # one interval: every slow client holds its connection
        body = _body()
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda _: _one(port, body), range(requests)))
        wall = time.perf_counter() - started
    finally:
        if slow is not None:
            slow.stop()
        process.terminate()
        process.wait(STARTUP_TIMEOUT_SECONDS)
    latencies = sorted(seconds for _, seconds in results)
    figures: dict[str, Any] = {
        "requests": requests,
        "clients": clients,
        "failures": sum(1 for ok, _ in results if not ok),
        "requests_per_second": round(requests / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
    }
    if slow is not None:
        figures["slow_clients"] = {
            "count": slow_clients,
            "byte_interval_seconds": slow_interval,
            "connections_opened": slow.connections_opened,
            "closed_by_server": slow.closed_by_server,
        }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--slow-clients", type=int, default=40)
    parser.add_argument("--slow-interval", type=float, default=3.0, help="seconds between a slow client's bytes")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve()
        return
    alone = storm(args.requests, args.clients, 0, args.slow_interval)
    beside = storm(args.requests, args.clients, args.slow_clients, args.slow_interval)
    print(
        json.dumps(
            {
                "storm_alone": alone,
                "storm_beside_slow_clients": beside,
                "ratios_beside_to_alone": {
                    "requests_per_second": round(beside["requests_per_second"] / alone["requests_per_second"], 2),
                    "p99": round(beside["p99_ms"] / alone["p99_ms"], 2) if alone["p99_ms"] else None,
                },
                "target": {"failures": 0, "p99_ms_below": 200},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

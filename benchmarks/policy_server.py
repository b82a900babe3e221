"""Launch storm against the RESTful policy server: throughput, p50/p99 latency and failures.

1,000 policy requests (``jobs.launch`` of a template, as SkyPilot's ``RestfulAdminPolicy``
sends them: a new connection per request) from 50 concurrent clients, against

* ``pool``: the server as shipped (bounded worker pool, listen backlog 1,024), and
* ``baseline``: the same handler on the standard library's ``ThreadingHTTPServer`` with its
  default listen backlog of 5 and a thread per connection (the server before this change),

each in a subprocess of its own (so the clients do not share its GIL), in the same run.
SkyPilot fails closed: every failure is a launch refused for nothing.

    .venv/bin/python benchmarks/policy_server.py [--requests 1000] [--clients 50]
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
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from typing import Any

import yaml

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIG = REPO / "configs" / "sky-kueue-demo.yaml"
TEMPLATE = REPO / "task_templates" / "team-b-cpu-dev.yaml"
REQUEST_TIMEOUT_SECONDS = 30
STARTUP_TIMEOUT_SECONDS = 30


def serve(kind: str, port: int) -> None:
    from sky_kueue.skypilot.config_cache import ConfigCache
    from sky_kueue.skypilot.policy_server import PolicyRequestHandler, PolicyServer

    cache = ConfigCache(CONFIG)
    cache.get()
    if kind == "pool":
        server: Any = PolicyServer(("127.0.0.1", port), cache)
    else:

        class Baseline(ThreadingHTTPServer):
            daemon_threads = True

        class SlowHandler(PolicyRequestHandler):
            timeout = 30

        server = Baseline(("127.0.0.1", port), SlowHandler)
        server.cache, server.token = cache, None
    print("ready", flush=True)
    server.serve_forever()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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


def storm(kind: str, requests: int, clients: int) -> dict[str, Any]:
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, __file__, "--serve", kind, "--port", str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        if process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"{kind} server did not start")
        body = _body()
        started = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            results = list(pool.map(lambda _: _one(port, body), range(requests)))
        wall = time.perf_counter() - started
    finally:
        process.terminate()
        process.wait(STARTUP_TIMEOUT_SECONDS)
    latencies = sorted(seconds for _, seconds in results)
    return {
        "server": kind,
        "requests": requests,
        "clients": clients,
        "failures": sum(1 for ok, _ in results if not ok),
        "requests_per_second": round(requests / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 1),
        "p99_ms": round(latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))] * 1000, 1),
        "max_ms": round(latencies[-1] * 1000, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--serve", choices=("pool", "baseline"))
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.port)
        return
    baseline = storm("baseline", args.requests, args.clients)
    pool = storm("pool", args.requests, args.clients)
    print(
        json.dumps(
            {
                "baseline": baseline,
                "pool": pool,
                "ratios_pool_to_baseline": {
                    "requests_per_second": round(pool["requests_per_second"] / baseline["requests_per_second"], 2),
                    "p99": round(pool["p99_ms"] / baseline["p99_ms"], 2) if baseline["p99_ms"] else None,
                },
                "target": {"failures": 0, "p99_ms_below": 200},
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

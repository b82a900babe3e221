"""Benchmark of the sandbox API server; prints one JSON document.

What is measured, and against what (a baseline measured in the same run, so the figures are
comparable across machines):

* ``get``: median latency of GET of one Pod over a keep-alive connection, against a trivial
  ``ThreadingHTTPServer`` handler (same socket options) that returns the same bytes. Also the
  median through the official ``kubernetes`` client, which is what callers see.
* ``list_10k_workloads``: time to GET a list of 10,000 Workloads and parse it, against the
  trivial handler serving the identical bytes (so the ratio isolates the server's own work:
  snapshot, sort, serialization).
* ``watch_fanout``: 10 watch streams (minimal clients that only split lines and parse JSON;
  the official client's per-event model building would dominate otherwise, as everything runs
  in one process) while 1,000 writes are made over HTTP; reports whether every watcher got
  every event in order, and the delivered events/s. (The conformance tests check the same
  with the official ``watch.Watch``.)
* ``requests_per_second``: sequential GETs on one connection and concurrent GETs on 4
  connections for a fixed duration, against the trivial handler.

Run: ``.venv/bin/python benchmarks/sandbox.py`` (about 20 s).
"""

from __future__ import annotations

import http.client
import json
import socket
import statistics
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client

from sky_kueue.sandbox.apiserver import ApiServer

GET_SAMPLES = 2000
LIST_SIZE_OBJECTS = 10_000
LIST_REPEATS = 5
WATCHERS = 10
WATCHED_WRITES = 1000
THROUGHPUT_DURATION_SECONDS = 2.0
CONCURRENT_CLIENTS = 4
WATCH_DEADLINE_SECONDS = 120
POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"app": "bench"}},
    "spec": {"containers": [{"name": "main", "image": "busybox"}]},
}


class _Baseline:
    """A trivial HTTP server answering every GET with fixed bytes (set per measurement)."""

    def __init__(self) -> None:
        baseline = self
        self.body = b"{}"

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                body = baseline.body
                self.wfile.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode()
                    + b"\r\n\r\n"
                    + body
                )

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _get(connection: http.client.HTTPConnection, path: str) -> bytes:
    connection.request("GET", path, headers={"Accept": "application/json"})
    response = connection.getresponse()
    body = response.read()
    if response.status != 200:
        raise RuntimeError(f"GET {path}: {response.status} {body[:200]!r}")
    return body


def _latencies(port: int, path: str, samples: int) -> list[float]:
    connection = http.client.HTTPConnection("127.0.0.1", port)
    _get(connection, path)
    timings = []
    for _ in range(samples):
        started = time.perf_counter()
        _get(connection, path)
        timings.append(time.perf_counter() - started)
    connection.close()
    return timings


def _timed(action: Callable[[], object], repeats: int) -> float:
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def _throughput(port: int, path: str, clients: int) -> float:
    counts = [0] * clients
    deadline = time.perf_counter() + THROUGHPUT_DURATION_SECONDS

    def hammer(index: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port)
        while time.perf_counter() < deadline:
            _get(connection, path)
            counts[index] += 1
        connection.close()

    threads = [threading.Thread(target=hammer, args=(index,)) for index in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(counts) / THROUGHPUT_DURATION_SECONDS


def _workload(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": f"wl-{index:05d}", "namespace": "default", "labels": {"team": f"t{index % 7}"}},
        "spec": {
            "queueName": "lq",
            "priority": index % 100,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}
                            ]
                        }
                    },
                }
            ],
        },
    }


def _ratio(value: float, baseline: float) -> float:
    return round(value / baseline, 2) if baseline else float("nan")


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def bench_get(server: ApiServer, baseline: _Baseline, api: client.ApiClient) -> dict[str, Any]:
    server.store.create("pods", POD, "default")
    path = "/api/v1/namespaces/default/pods/p"
    baseline.body = _get(http.client.HTTPConnection("127.0.0.1", server.port), path)
    served = statistics.median(_latencies(server.port, path, GET_SAMPLES))
    trivial = statistics.median(_latencies(baseline.port, path, GET_SAMPLES))
    core = client.CoreV1Api(api)
    core.read_namespaced_pod("p", "default")
    official = _timed(lambda: core.read_namespaced_pod("p", "default"), 500)
    return {
        "median_ms": _ms(served),
        "baseline_median_ms": _ms(trivial),
        "ratio_to_baseline": _ratio(served, trivial),
        "official_client_median_ms": _ms(official),
        "target_median_ms": 2.0,
        "meets_target": served < 0.002,
    }


def bench_list(server: ApiServer, baseline: _Baseline, api: client.ApiClient) -> dict[str, Any]:
    started = time.perf_counter()
    for index in range(LIST_SIZE_OBJECTS):
        server.store.create("workloads", _workload(index))
    create_seconds = time.perf_counter() - started
    path = "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads"
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    body = _get(connection, path)
    baseline.body = body
    baseline_connection = http.client.HTTPConnection("127.0.0.1", baseline.port)
    served = _timed(lambda: json.loads(_get(connection, path)), LIST_REPEATS)
    trivial = _timed(lambda: json.loads(_get(baseline_connection, path)), LIST_REPEATS)
    legacy = _timed(lambda: json.loads(_get(connection, path.replace("v1beta2", "v1beta1"))), LIST_REPEATS)
    custom = client.CustomObjectsApi(api)
    official = _timed(
        lambda: custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "workloads"),
        LIST_REPEATS,
    )
    return {
        "objects": LIST_SIZE_OBJECTS,
        "response_bytes": len(body),
        "seconds": round(served, 4),
        "baseline_seconds": round(trivial, 4),
        "ratio_to_baseline": _ratio(served, trivial),
        "v1beta1_converted_seconds": round(legacy, 4),
        "official_client_seconds": round(official, 4),
        "in_process_create_seconds": round(create_seconds, 3),
    }


def _follow_raw(port: int, path: str, expected: int, into: list[int]) -> None:
    """A minimal watch client: one JSON event per line, nothing else parsed."""
    connection = http.client.HTTPConnection("127.0.0.1", port)
    connection.request("GET", path)
    response = connection.getresponse()
    while len(into) < expected:
        line = response.readline()
        if not line:
            return
        into.append(int(json.loads(line)["object"]["data"]["n"]))
    connection.close()


def bench_watch_fanout(server: ApiServer, api: client.ApiClient) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    query = f"watch=true&resourceVersion={start}&timeoutSeconds={WATCH_DEADLINE_SECONDS}"
    path = f"/api/v1/namespaces/default/configmaps?{query}"
    received: list[list[int]] = [[] for _ in range(WATCHERS)]
    threads = [
        threading.Thread(target=_follow_raw, args=(server.port, path, WATCHED_WRITES, received[index]))
        for index in range(WATCHERS)
    ]
    for thread in threads:
        thread.start()
    if not server.wait_for_watches(WATCHERS, 30.0):
        raise RuntimeError("watchers did not connect")
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    started = time.perf_counter()
    for number in range(WATCHED_WRITES):
        body = json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{number}"}, "data": {"n": str(number)}}
        )
        connection.request(
            "POST", "/api/v1/namespaces/default/configmaps", body=body, headers={"Content-Type": "application/json"}
        )
        response = connection.getresponse()
        response.read()
    writes_seconds = time.perf_counter() - started
    for thread in threads:
        thread.join()
    delivered_seconds = time.perf_counter() - started
    in_order = all(sequence == list(range(WATCHED_WRITES)) for sequence in received)
    return {
        "watchers": WATCHERS,
        "writes": WATCHED_WRITES,
        "all_delivered_in_order": in_order,
        "events_delivered": sum(len(sequence) for sequence in received),
        "writes_seconds": round(writes_seconds, 3),
        "all_delivered_seconds": round(delivered_seconds, 3),
        "delivered_events_per_second": round(WATCHERS * WATCHED_WRITES / delivered_seconds),
    }


def bench_throughput(server: ApiServer, baseline: _Baseline) -> dict[str, Any]:
    path = "/api/v1/namespaces/default/pods/p"
    baseline.body = _get(http.client.HTTPConnection("127.0.0.1", server.port), path)
    sequential = _throughput(server.port, path, 1)
    sequential_baseline = _throughput(baseline.port, path, 1)
    concurrent = _throughput(server.port, path, CONCURRENT_CLIENTS)
    concurrent_baseline = _throughput(baseline.port, path, CONCURRENT_CLIENTS)
    return {
        "sequential": round(sequential),
        "sequential_baseline": round(sequential_baseline),
        "sequential_ratio_to_baseline": _ratio(sequential, sequential_baseline),
        f"concurrent_{CONCURRENT_CLIENTS}_clients": round(concurrent),
        f"concurrent_{CONCURRENT_CLIENTS}_clients_baseline": round(concurrent_baseline),
        "concurrent_ratio_to_baseline": _ratio(concurrent, concurrent_baseline),
    }


def main() -> None:
    baseline = _Baseline()
    try:
        with ApiServer() as server:
            configuration = client.Configuration()
            configuration.host = server.url
            configuration.retries = False
            configuration.connection_pool_maxsize = WATCHERS + 2
            with client.ApiClient(configuration) as api:
                results = {
                    "get": bench_get(server, baseline, api),
                    "requests_per_second": bench_throughput(server, baseline),
                    "watch_fanout": bench_watch_fanout(server, api),
                    "list_10k_workloads": bench_list(server, baseline, api),
                }
    finally:
        baseline.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

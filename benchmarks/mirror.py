"""Benchmark of the queue mirror against the sandbox API server; prints one JSON document.

What is measured, and against what (baselines measured in the same run, so ratios are
comparable across machines):

* ``initial_sync``: seconds from ``Mirror.start()`` to ``wait_synced()`` with 10,000 Workloads
  (plus queues, flavors, namespaces), against one plain ``list_cluster_custom_object`` call
  of the same 10,000 Workloads through the official client (``ratio_to_plain_list``); also
  with a subscriber attached from the start (every Workload then yields a ``created``
  transition). Target: under 3 s. Client imports and first-call set-up are warmed up first.
  The sandbox server runs in the same process, so its serialization shares the GIL with the
  mirror: the absolute figures are pessimistic for a real cluster, the ratio is the signal.
* ``transitions``: 5,000 status writes made as fast as the in-process store takes them; the
  mirror's subscriber must see every one. ``per_second`` is transitions delivered per second
  of wall time from the first write to the last delivery; ``ratio_to_writer`` compares that
  with the rate the writer alone achieves (the mirror keeping up gives a ratio near 1).
* ``delay``: 500 writes one at a time; the time from just before the server-side write to the
  subscriber holding the transition. Median and p99 (target: p99 under 50 ms), against the
  same writes seen through a bare ``kubernetes.watch.Watch`` on the same server
  (``ratio_to_raw_watch``): what the mirror adds over the watch stream itself.
* ``memory``: bytes the store retains per 10,000 Workloads (``tracemalloc``, after a
  collection), against the size of the same Workloads as JSON on the wire.
* ``idle``: API requests per minute while nothing changes (a window of watching a synced
  mirror; open watch streams are not requests being made). Target: zero, no polling.

Run: ``.venv/bin/python benchmarks/mirror.py`` (about a minute; ``--quick`` uses 2,000
Workloads and shorter windows).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from sky_kueue.mirror import Mirror, TransitionKind
from sky_kueue.mirror.connection import connect
from sky_kueue.mirror.kinds import WORKLOADS, KindName
from sky_kueue.mirror.source import KindSource, RawWatch
from sky_kueue.mirror.store import MirrorStore, normalize
from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore

WORKLOADS_TOTAL = 10_000
TRANSITION_WRITES = 5_000
DELAY_SAMPLES = 500
IDLE_WINDOW_SECONDS = 15.0
NAMESPACES = 20
CLUSTER_QUEUES = 20
WAIT_SECONDS = 120.0
SYNC_TARGET_SECONDS = 3.0
P99_TARGET_MILLISECONDS = 50.0
KUEUE = "kueue.x-k8s.io/v1beta2"


def _populate(store: ObjectStore, workloads: int) -> None:
    store.create("resourceflavors", {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}})
    for i in range(CLUSTER_QUEUES):
        store.create(
            "clusterqueues",
            {
                "apiVersion": KUEUE,
                "kind": "ClusterQueue",
                "metadata": {"name": f"cq-{i}"},
                "spec": {
                    "cohortName": f"cohort-{i % 4}",
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory"],
                            "flavors": [
                                {
                                    "name": "default",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "100"},
                                        {"name": "memory", "nominalQuota": "400Gi"},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        )
    for n in range(NAMESPACES):
        store.create("namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"team-{n}"}})
        store.create(
            "localqueues",
            {
                "apiVersion": KUEUE,
                "kind": "LocalQueue",
                "metadata": {"name": "lq", "namespace": f"team-{n}"},
                "spec": {"clusterQueue": f"cq-{n % CLUSTER_QUEUES}"},
            },
        )
    for i in range(workloads):
        store.create("workloads", _workload(f"job-{i:05d}", f"team-{i % NAMESPACES}", i))


def _workload(name: str, namespace: str, i: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
        },
        "spec": {
            "queueName": "lq",
            "priority": i % 7 * 100,
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "dev"},
            "podSets": [
                {
                    "name": "3f2a9c1d",
                    "count": 1 + i % 4,
                    "template": {
                        "metadata": {"labels": {"parent": "skypilot", "skypilot-cluster-name": name}},
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "ray-node",
                                    "image": "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot:latest",
                                    "resources": {"requests": {"cpu": "4", "memory": "16G"}},
                                }
                            ],
                        },
                    },
                }
            ],
        },
    }


def _status_write(store: ObjectStore, name: str, namespace: str, step: int) -> None:
    def change(obj: dict[str, Any]) -> None:
        status = obj.setdefault("status", {})
        status["conditions"] = [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": f"couldn't assign flavors to pod set main: insufficient quota (attempt {step})",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            }
        ]

    store.mutate("workloads", name, change, namespace, subresource="status")


def _plain_list_seconds(api: client.ApiClient) -> float:
    custom = client.CustomObjectsApi(api)
    start = time.perf_counter()
    result = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "workloads")
    elapsed = time.perf_counter() - start
    assert len(result["items"]) >= 1
    return elapsed


def _warm_up(kubeconfig: Path) -> None:
    """Import and first-call costs (generated modules, pydantic validators) are paid once."""
    with Mirror.connect(kubeconfig, retries=False) as mirror:
        mirror.wait_synced(WAIT_SECONDS)


def _sync(kubeconfig: Path, *, subscribed: bool = False) -> tuple[float, Mirror]:
    """Seconds to sync; ``subscribed``: a subscriber listens from the start (as the controller
    does), so every listed Workload also becomes a ``created`` transition."""
    mirror = Mirror.connect(kubeconfig, retries=False)
    subscription = mirror.subscribe() if subscribed else None
    start = time.perf_counter()
    mirror.start()
    mirror.wait_synced(WAIT_SECONDS)
    elapsed = time.perf_counter() - start
    if subscription is not None:
        assert len(subscription) >= mirror.store.count(KindName.WORKLOAD)
        subscription.close()
    return elapsed, mirror


def _transitions(store: ObjectStore, mirror: Mirror, writes: int) -> dict[str, float]:
    subscription = mirror.subscribe({TransitionKind.UPDATED})
    names = [(f"job-{i:05d}", f"team-{i % NAMESPACES}") for i in range(writes)]
    start = time.perf_counter()
    for step, (name, namespace) in enumerate(names):
        _status_write(store, name, namespace, step)
    written = time.perf_counter() - start
    received = 0
    while received < writes:
        if subscription.get(WAIT_SECONDS) is None:
            raise RuntimeError(f"only {received} of {writes} transitions arrived")
        received += 1
    elapsed = time.perf_counter() - start
    subscription.close()
    return {
        "writes": writes,
        "per_second": round(writes / elapsed, 1),
        "writer_per_second": round(writes / written, 1),
        "ratio_to_writer": round((writes / elapsed) / (writes / written), 3),
    }


def _delays(store: ObjectStore, samples: int, receive: Callable[[], None]) -> list[float]:
    out = []
    for step in range(samples):
        name = f"job-{step % 100:05d}"
        start = time.perf_counter()
        _status_write(store, name, f"team-{(step % 100) % NAMESPACES}", 10_000 + step)
        receive()
        out.append(time.perf_counter() - start)
    return out


def _mirror_delays(store: ObjectStore, mirror: Mirror, samples: int) -> list[float]:
    subscription = mirror.subscribe({TransitionKind.UPDATED})

    def receive() -> None:
        if subscription.get(WAIT_SECONDS) is None:
            raise RuntimeError("transition not delivered")

    try:
        return _delays(store, samples, receive)
    finally:
        subscription.close()


def _raw_watch_delays(kubeconfig: Path, store: ObjectStore, samples: int) -> list[float]:
    """The same writes through a bare ``Watch`` stream (no store, no transitions)."""
    conn = connect(kubeconfig, retries=False)
    source = KindSource(conn.api_client, WORKLOADS, "v1beta2")
    watcher = RawWatch(return_type=dict)
    arrived = threading.Semaphore(0)
    ready = threading.Event()

    def run() -> None:
        events = source.watch(
            watcher, resource_version=str(store.resource_version), timeout_seconds=600, request_timeout=(5, 600)
        )
        ready.set()
        try:
            for event in events:
                if event.get("type") == "MODIFIED":
                    arrived.release()
        except Exception:  # noqa: BLE001 - the benchmark stops the stream by shutting its socket
            return

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(WAIT_SECONDS)
    # The watch request is issued lazily on the generator's first step: give it a write to see.
    _status_write(store, "job-00000", "team-0", -1)
    if not arrived.acquire(timeout=WAIT_SECONDS):
        raise RuntimeError("raw watch did not start")

    def receive() -> None:
        if not arrived.acquire(timeout=WAIT_SECONDS):
            raise RuntimeError("raw watch event not delivered")

    try:
        return _delays(store, samples, receive)
    finally:
        watcher.stop()
        thread.join(5)
        conn.close()


def _memory(kubeconfig: Path) -> dict[str, float]:
    """Bytes a store retains for every Workload, against their JSON size."""
    conn = connect(kubeconfig, retries=False)
    source = KindSource(conn.api_client, WORKLOADS, "v1beta2")
    raw = client.CustomObjectsApi(conn.api_client).list_cluster_custom_object(
        "kueue.x-k8s.io", "v1beta2", "workloads", _preload_content=False
    )
    json_bytes = len(raw.data)
    raw.release_conn()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    store = MirrorStore()
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = source.list_page(limit=500, continue_token=token, timeout=(5, 60))
        items.extend(page.items)
        token = page.continue_token
        if not token:
            break
    store.replace(KindName.WORKLOAD, [normalize(KindName.WORKLOAD, source.api_version, i) for i in items], "0")
    del items, page
    gc.collect()
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    count = store.count(KindName.WORKLOAD)
    conn.close()
    per_10k = retained * 10_000 / count
    return {
        "workloads": count,
        "bytes_per_10k_workloads": int(per_10k),
        "megabytes_per_10k_workloads": round(per_10k / 2**20, 1),
        "json_bytes_per_10k_workloads": int(json_bytes * 10_000 / count),
        "ratio_to_json": round(retained / json_bytes, 2),
    }


def _idle(server: ApiServer, mirror: Mirror, window_seconds: float) -> dict[str, float]:
    server.requests.clear()
    before = dict(mirror.request_counts)
    time.sleep(window_seconds)  # the measurement itself: a quiet cluster for a fixed window
    records = server.requests.records()
    after = mirror.request_counts
    polling = [r for r in records if r.info.verb in ("list", "get")]
    return {
        "window_seconds": window_seconds,
        "requests": len(records),
        "requests_per_minute": round(len(records) * 60 / window_seconds, 2),
        "polling_requests": len(polling),
        "lists_started": after["lists"] - before["lists"],
        "watches_started": after["watches"] - before["watches"],
    }


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="2,000 Workloads and shorter windows")
    args = parser.parse_args(argv)
    workloads = 2_000 if args.quick else WORKLOADS_TOTAL
    writes = 1_000 if args.quick else TRANSITION_WRITES
    samples = 200 if args.quick else DELAY_SAMPLES
    idle_window = 3.0 if args.quick else IDLE_WINDOW_SECONDS
    result: dict[str, Any] = {"workloads": workloads}
    with tempfile.TemporaryDirectory() as tmp, ApiServer(event_log_capacity_events=10 * workloads) as server:
        kubeconfig = server.write_kubeconfig(Path(tmp) / "kubeconfig")
        _warm_up(kubeconfig)
        _populate(server.store, workloads)
        api = connect(kubeconfig, retries=False).api_client
        _plain_list_seconds(api)  # warm
        plain = statistics.median(_plain_list_seconds(api) for _ in range(3))
        subscribed_seconds, subscribed_mirror = _sync(kubeconfig, subscribed=True)
        subscribed_mirror.stop()
        sync_seconds, mirror = _sync(kubeconfig)
        result["initial_sync"] = {
            "seconds": round(sync_seconds, 3),
            "seconds_with_subscriber": round(subscribed_seconds, 3),
            "plain_list_seconds": round(plain, 3),
            "ratio_to_plain_list": round(sync_seconds / plain, 2),
            "target_seconds": SYNC_TARGET_SECONDS,
            "meets_target": sync_seconds < SYNC_TARGET_SECONDS,
        }
        try:
            result["transitions"] = _transitions(server.store, mirror, writes)
            mirror_delays = _mirror_delays(server.store, mirror, samples)
            result["idle"] = _idle(server, mirror, idle_window)
            result["idle"]["meets_target"] = result["idle"]["polling_requests"] == 0
        finally:
            mirror.stop()
        raw_delays = _raw_watch_delays(kubeconfig, server.store, samples)
        p50, p99 = _percentile(mirror_delays, 0.5), _percentile(mirror_delays, 0.99)
        raw50, raw99 = _percentile(raw_delays, 0.5), _percentile(raw_delays, 0.99)
        result["delay"] = {
            "samples": samples,
            "median_ms": round(p50 * 1000, 2),
            "p99_ms": round(p99 * 1000, 2),
            "raw_watch_median_ms": round(raw50 * 1000, 2),
            "raw_watch_p99_ms": round(raw99 * 1000, 2),
            "ratio_to_raw_watch_median": round(p50 / raw50, 2),
            "ratio_to_raw_watch_p99": round(p99 / raw99, 2),
            "target_p99_ms": P99_TARGET_MILLISECONDS,
            "meets_target": p99 * 1000 < P99_TARGET_MILLISECONDS,
        }
        result["memory"] = _memory(kubeconfig)
    json.dump(result, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

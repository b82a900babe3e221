"""The visibility API (``visibility.kueue.x-k8s.io``), which the sandbox does not serve: a stub
server stands in for Kueue's aggregated API server."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.mirror import connection, discovery, visibility

PENDING = {
    "kind": "PendingWorkloadsSummary",
    "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
    "items": [
        {
            "metadata": {"name": "sticky", "namespace": "team-a", "creationTimestamp": "2026-01-01T10:05:00Z"},
            "priority": 100,
            "localQueueName": "lq",
            "positionInClusterQueue": 0,
            "positionInLocalQueue": 0,
        },
        {
            "metadata": {"name": "high", "namespace": "team-b", "creationTimestamp": "2026-01-01T10:00:00Z"},
            "priority": 1000,
            "localQueueName": "lq",
            "positionInClusterQueue": 1,
            "positionInLocalQueue": 0,
        },
    ],
}
DOCUMENTS: dict[str, Any] = {
    "/apis/kueue.x-k8s.io": {"versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]},
    "/apis/kueue.x-k8s.io/v1beta2": {
        "resources": [
            {"name": plural}
            for plural in ("workloads", "clusterqueues", "localqueues", "resourceflavors", "workloadpriorityclasses")
        ]
    },
    "/apis/visibility.kueue.x-k8s.io": {"versions": [{"version": "v1beta2"}, {"version": "v1beta1"}]},
    "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq/pendingworkloads": PENDING,
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path.endswith("/clusterqueues/locked/pendingworkloads"):
            self._send(403, {"kind": "Status", "code": 403, "message": "forbidden"})
        elif path in DOCUMENTS:
            self._send(200, DOCUMENTS[path])
        else:
            self._send(404, {"kind": "Status", "code": 404, "message": "not found"})

    def _send(self, code: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        return


@pytest.fixture
def kueue_with_visibility(tmp_path: Path) -> Iterator[connection.Connection]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    from sky_kueue.sandbox.apiserver.kubeconfig import write

    kubeconfig = write(tmp_path / "kubeconfig", f"http://127.0.0.1:{httpd.server_address[1]}")
    conn = connection.connect(kubeconfig, retries=False)
    yield conn
    conn.close()
    httpd.shutdown()
    httpd.server_close()


def test_discovery_finds_the_served_visibility_version(kueue_with_visibility: connection.Connection) -> None:
    api = discovery.discover(kueue_with_visibility.api_client)

    assert (api.version, api.visibility_version) == ("v1beta2", "v1beta2")


def test_positions_are_kueues_own_order(kueue_with_visibility: connection.Connection) -> None:
    entries = visibility.pending_in_cluster_queue(kueue_with_visibility.api_client, "v1beta2", "cq")
    positions = visibility.positions(kueue_with_visibility.api_client, "v1beta2", ["cq"])

    assert [(e.key, e.priority, e.position_in_cluster_queue) for e in entries] == [
        ("team-a/sticky", 100, 0),  # a sticky preemptor heads the queue despite its priority
        ("team-b/high", 1000, 1),
    ]
    assert positions == {"team-a/sticky": 0, "team-b/high": 1}


def test_a_forbidden_or_missing_visibility_api_means_model_positions(
    kueue_with_visibility: connection.Connection,
) -> None:
    api_client = kueue_with_visibility.api_client

    assert visibility.positions(api_client, "v1beta2", ["cq", "locked"]) is None
    assert visibility.positions(api_client, None, ["cq"]) is None

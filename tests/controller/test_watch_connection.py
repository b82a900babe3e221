"""The controller shares one connection pool between its mirror's watches and its own
requests (the Lease, patches): a watch stopped mid-stream must not hand its half-read
connection back to the pool, or the next request on it would read the stream's leftovers."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from sky_kueue.mirror import kinds, rest
from sky_kueue.mirror.connection import Connection
from sky_kueue.mirror.discovery import KueueApi
from sky_kueue.mirror.mirror import Mirror
from sky_kueue.sandbox.apiserver import ApiServer
from tests.sandbox import builders

WAIT_SECONDS = 10.0


def test_a_watch_stopped_mid_stream_leaves_the_shared_pool_usable() -> None:
    with ApiServer() as server:
        configuration = client.Configuration()
        configuration.host = server.url
        configuration.connection_pool_maxsize = 1  # the next request must reuse this connection
        api_client = client.ApiClient(configuration)
        mirror = Mirror(
            Connection(api_client, server.url),
            KueueApi("v1beta2", frozenset({"workloads"})),
            kind_list=(kinds.WORKLOADS,),
            owns_connection=False,
        )
        mirror.start()
        mirror.wait_synced(WAIT_SECONDS)
        for i in range(20):
            server.store.create("workloads", builders.workload(f"wl-{i}"))
        assert mirror.wait_for(lambda store: store.count(kinds.KindName.WORKLOAD) >= 1, WAIT_SECONDS)
        mirror.stop()  # mid-stream: events may still be in flight on the watch's socket
        answers: list[Any] = [rest.get_json(api_client, "/api/v1/namespaces") for _ in range(3)]
    assert all(answer["kind"] == "NamespaceList" for answer in answers)

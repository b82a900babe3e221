"""A watch left mid-stream must not hand its half-read connection back to the pool: the next
request on it (a Lease renewal, in the controller) would read the stream's leftovers."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes import client

from sky_kueue.controller.kube_watch import KindSpec, KindWatch, WatchedEvent
from sky_kueue.mirror import rest
from sky_kueue.sandbox.apiserver import ApiServer
from tests.sandbox import builders


class SinkFailed(RuntimeError):
    pass


def test_a_watch_abandoned_mid_stream_leaves_the_pool_usable() -> None:
    with ApiServer() as server:
        start = str(server.store.resource_version)
        for i in range(20):
            server.store.create("workloads", builders.workload(f"wl-{i}"))
        configuration = client.Configuration()
        configuration.host = server.url
        configuration.connection_pool_maxsize = 1  # the next request must reuse this connection
        api_client = client.ApiClient(configuration)
        seen: list[WatchedEvent] = []

        def sink(event: WatchedEvent) -> None:
            seen.append(event)
            raise SinkFailed("the consumer failed after one event")

        watch = KindWatch(api_client, KindSpec.workloads(), sink)
        with pytest.raises(SinkFailed):
            watch.watch_once(start)
        answers: list[Any] = [rest.get_json(api_client, "/api/v1/namespaces") for _ in range(3)]

    assert len(seen) == 1
    assert all(answer["kind"] == "NamespaceList" for answer in answers)


class _Response:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def close(self) -> None:
        self.calls.append("close")

    def release_conn(self) -> None:
        self.calls.append("release_conn")


def test_only_a_cleanly_ended_stream_returns_its_connection_open() -> None:
    """The race the integration test above cannot force: a chunk that arrives after urllib3's
    reuse check would be read as the next response's status line, so an abandoned stream's
    connection is closed before it goes back to the pool."""
    from sky_kueue.controller.kube_watch import release

    abandoned, ended = _Response(), _Response()
    release(abandoned, clean=False)
    release(ended, clean=True)
    assert abandoned.calls == ["close", "release_conn"]
    assert ended.calls == ["release_conn"]

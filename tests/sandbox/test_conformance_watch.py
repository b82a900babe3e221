"""Conformance: watches through the official client's ``watch.Watch``.

No test sleeps: each waits for events (every watch has a ``timeout_seconds`` so a failure ends
the stream instead of hanging) or for the server to report the watch open.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from typing import Any

from kubernetes import client, watch

from sky_kueue.sandbox.apiserver import ApiServer, FaultKind, ObjectStore
from sky_kueue.sandbox.apiserver.watch import INITIAL_EVENTS_END_ANNOTATION
from tests.sandbox import builders

#: Upper bound on any single watch in these tests; reached only when a test fails.
WATCH_TIMEOUT_SECONDS = 5
WATCH_READY_TIMEOUT_SECONDS = 5.0


def _name(event: dict[str, Any]) -> str:
    return str(event["raw_object"]["metadata"]["name"])


def test_watch_from_a_resource_version_replays_only_newer_events(core: client.CoreV1Api) -> None:
    start = core.create_namespaced_pod("default", builders.pod("before")).metadata.resource_version
    core.create_namespaced_pod("default", builders.pod("after-1"))
    core.create_namespaced_pod("default", builders.pod("after-2"))
    seen: list[tuple[str, str]] = []

    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=WATCH_TIMEOUT_SECONDS
    ):
        seen.append((event["type"], _name(event)))
        if len(seen) == 2:
            core.create_namespaced_pod("default", builders.pod("live"))
        if len(seen) == 3:
            stream.stop()

    assert seen == [("ADDED", "after-1"), ("ADDED", "after-2"), ("ADDED", "live")]


def test_watch_without_resource_version_starts_with_the_current_state(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("existing"))
    seen: list[tuple[str, str]] = []

    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, "default", timeout_seconds=WATCH_TIMEOUT_SECONDS):
        seen.append((event["type"], _name(event)))
        if len(seen) == 1:
            core.patch_namespaced_pod("existing", "default", {"metadata": {"labels": {"x": "y"}}})
        else:
            stream.stop()

    assert seen == [("ADDED", "existing"), ("MODIFIED", "existing")]


def test_watch_from_a_compacted_resource_version_gets_an_error_event_with_410(
    store: ObjectStore, core: client.CoreV1Api
) -> None:
    old = core.create_namespaced_pod("default", builders.pod("p1")).metadata.resource_version
    core.create_namespaced_pod("default", builders.pod("p2"))
    store.compact()

    response = core.list_namespaced_pod(
        "default",
        watch=True,
        resource_version=old,
        timeout_seconds=WATCH_TIMEOUT_SECONDS,
        _preload_content=False,
    )
    lines = [line for line in response.data.decode().splitlines() if line]

    assert response.status == 200
    assert len(lines) == 1
    event = json.loads(lines[0])
    assert event["type"] == "ERROR"
    assert event["object"]["code"] == 410
    assert event["object"]["reason"] == "Expired"


def test_an_object_that_stops_matching_the_selector_is_deleted_from_the_watch(core: client.CoreV1Api) -> None:
    seen: list[tuple[str, str]] = []
    steps = [
        lambda: core.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"app": "db"}}}),
        lambda: core.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"app": "web"}}}),
    ]
    core.create_namespaced_pod("default", builders.pod("web", labels={"app": "web"}))

    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod, "default", label_selector="app=web", timeout_seconds=WATCH_TIMEOUT_SECONDS
    ):
        seen.append((event["type"], event["raw_object"]["metadata"]["labels"]["app"]))
        if steps:
            steps.pop(0)()
        else:
            stream.stop()

    assert seen == [("ADDED", "web"), ("DELETED", "db"), ("ADDED", "web")]


def test_watch_ends_after_timeout_seconds(core: client.CoreV1Api) -> None:
    started = time.monotonic()

    events = list(watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=1))

    elapsed = time.monotonic() - started
    assert events == []
    assert 0.9 <= elapsed < 3.0


def test_bookmarks_are_sent_when_allowed(store: ObjectStore, core: client.CoreV1Api) -> None:
    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod, "default", allow_watch_bookmarks=True, timeout_seconds=WATCH_TIMEOUT_SECONDS
    ):
        assert event["type"] == "BOOKMARK"
        assert event["raw_object"]["kind"] == "Pod"
        assert int(event["raw_object"]["metadata"]["resourceVersion"]) == store.resource_version
        stream.stop()


def test_send_initial_events_ends_with_the_initial_events_end_bookmark(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1"))
    core.create_namespaced_pod("default", builders.pod("p2"))
    seen: list[tuple[str, str]] = []

    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod,
        "default",
        send_initial_events=True,
        allow_watch_bookmarks=True,
        resource_version_match="NotOlderThan",
        timeout_seconds=WATCH_TIMEOUT_SECONDS,
    ):
        annotations = event["raw_object"]["metadata"].get("annotations") or {}
        if event["type"] == "BOOKMARK":
            if annotations.get(INITIAL_EVENTS_END_ANNOTATION) == "true":
                seen.append(("BOOKMARK", "initial-events-end"))
                stream.stop()
            continue
        seen.append((event["type"], _name(event)))

    assert seen == [("ADDED", "p1"), ("ADDED", "p2"), ("BOOKMARK", "initial-events-end")]


def test_finalizer_removal_shows_as_modified_then_deleted(core: client.CoreV1Api) -> None:
    start = core.create_namespaced_pod(
        "default", builders.pod("p1", finalizers=["kueue.x-k8s.io/managed"])
    ).metadata.resource_version
    core.delete_namespaced_pod("p1", "default")
    core.patch_namespaced_pod("p1", "default", {"metadata": {"finalizers": None}})
    seen: list[tuple[str, bool]] = []

    stream = watch.Watch()
    for event in stream.stream(
        core.list_namespaced_pod, "default", resource_version=start, timeout_seconds=WATCH_TIMEOUT_SECONDS
    ):
        seen.append((event["type"], bool(event["raw_object"]["metadata"].get("deletionTimestamp"))))
        if event["type"] == "DELETED":
            stream.stop()

    assert seen == [("MODIFIED", True), ("DELETED", True)]


def test_concurrent_watchers_see_every_write_in_order(server: ApiServer, api_client: client.ApiClient) -> None:
    watchers, writes = 10, 100
    core = client.CoreV1Api(api_client)
    start = core.list_namespaced_config_map("default").metadata.resource_version
    received: list[list[int]] = [[] for _ in range(watchers)]

    def follow(index: int) -> None:
        stream = watch.Watch()
        for event in stream.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=start,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
        ):
            received[index].append(int(event["raw_object"]["data"]["n"]))
            if len(received[index]) == writes:
                stream.stop()

    threads = [threading.Thread(target=follow, args=(index,)) for index in range(watchers)]
    for thread in threads:
        thread.start()
    assert server.wait_for_watches(watchers, WATCH_READY_TIMEOUT_SECONDS)
    for number in range(writes):
        server.store.create("configmaps", builders.config_map(f"cm-{number}", n=str(number)))
    for thread in threads:
        thread.join()

    assert all(sequence == list(range(writes)) for sequence in received)


def test_the_connection_stays_usable_after_a_watch_ends(server: ApiServer) -> None:
    """urllib3 reuses the connection after a watch; closing it would surface RemoteDisconnected."""
    server.faults.inject(FaultKind.WATCH_END, resource="pods", after_events=0)
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=WATCH_TIMEOUT_SECONDS)

    connection.request("GET", "/api/v1/namespaces/default/pods?watch=true")
    ended = connection.getresponse()
    ended_body = ended.read()
    connection.request("GET", "/api/v1/namespaces/default/pods")
    listed = connection.getresponse()
    listed_body = json.loads(listed.read())

    assert ended.status == 200
    assert ended_body == b""
    assert listed.status == 200
    assert listed_body["kind"] == "PodList"
    connection.close()

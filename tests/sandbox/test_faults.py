"""Every fault kind, as the official client (with ``retries = False``) observes it."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from sky_kueue.sandbox.apiserver import ApiServer, FaultKind, ObjectStore
from tests.sandbox import builders

WATCH_TIMEOUT_SECONDS = 5


def _names(events: list[dict[str, Any]]) -> list[str]:
    return [event["raw_object"]["metadata"]["name"] for event in events]


def test_status_fault_answers_500(server: ApiServer, core: client.CoreV1Api) -> None:
    fault = server.faults.inject(FaultKind.STATUS, verb="list", resource="pods")

    with pytest.raises(ApiException) as failure:
        core.list_namespaced_pod("default")
    core.list_namespaced_pod("default")  # fired once, then disarmed

    assert failure.value.status == 500
    assert fault.fired == 1
    assert [r.status for r in server.requests.matching(verb="list", resource="pods")] == [500, 200]


def test_status_fault_with_another_code(server: ApiServer, core: client.CoreV1Api) -> None:
    server.faults.inject(FaultKind.STATUS, verb="get", resource="namespaces", status_code=503)

    with pytest.raises(ApiException) as failure:
        core.read_namespace("default")

    assert failure.value.status == 503


def test_throttle_fault_answers_429_with_retry_after(server: ApiServer, core: client.CoreV1Api) -> None:
    server.faults.inject(FaultKind.THROTTLE, verb="create", resource="pods", retry_after_seconds=3)

    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("default", builders.pod("p1"))

    assert failure.value.status == 429
    assert failure.value.headers["Retry-After"] == "3"
    assert json.loads(failure.value.body)["details"]["retryAfterSeconds"] == 3


def test_faults_match_on_name_namespace_and_subresource(
    server: ApiServer, store: ObjectStore, core: client.CoreV1Api
) -> None:
    store.create("pods", builders.pod("target"))
    store.create("pods", builders.pod("bystander"))
    server.faults.inject(
        FaultKind.STATUS, resource="pods", name="target", namespace="default", subresource="status", times=2
    )

    core.read_namespaced_pod("target", "default")
    core.read_namespaced_pod_status("bystander", "default")
    with pytest.raises(ApiException) as first:
        core.read_namespaced_pod_status("target", "default")
    with pytest.raises(ApiException) as second:
        core.patch_namespaced_pod_status("target", "default", {"status": {"phase": "Running"}})
    core.read_namespaced_pod_status("target", "default")

    assert (first.value.status, second.value.status) == (500, 500)
    assert server.faults.pending() == []


def test_delay_fault_makes_a_short_read_timeout_expire(server: ApiServer, core: client.CoreV1Api) -> None:
    server.faults.inject(FaultKind.DELAY, verb="get", resource="namespaces", delay_seconds=1.0)

    with pytest.raises(urllib3.exceptions.ReadTimeoutError):
        core.read_namespace("default", _request_timeout=(1, 0.2))


def test_delay_fault_then_serves_the_request(server: ApiServer, core: client.CoreV1Api) -> None:
    server.faults.inject(FaultKind.DELAY, verb="get", resource="namespaces", delay_seconds=0.3)

    namespace = core.read_namespace("default")

    assert namespace.metadata.name == "default"
    (record,) = server.requests.matching(verb="get", resource="namespaces")
    assert record.fault is FaultKind.DELAY
    assert record.duration_seconds >= 0.3


def test_dropped_connection_surfaces_as_a_protocol_error(server: ApiServer, core: client.CoreV1Api) -> None:
    server.faults.inject(FaultKind.DROP_CONNECTION, verb="list", resource="pods")

    with pytest.raises(urllib3.exceptions.ProtocolError):
        core.list_namespaced_pod("default")
    listed = core.list_namespaced_pod("default")  # the client recovers on a new connection

    assert listed.items == []
    assert server.requests.matching(verb="list", resource="pods")[0].status == 0


def test_watch_cut_mid_stream_raises_protocol_error_out_of_the_watch(
    server: ApiServer, store: ObjectStore, core: client.CoreV1Api
) -> None:
    for index in range(3):
        store.create("pods", builders.pod(f"p{index}"))
    server.faults.inject(FaultKind.WATCH_CUT, resource="pods", after_events=2)
    received: list[dict[str, Any]] = []

    with pytest.raises(urllib3.exceptions.ProtocolError):
        for event in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=WATCH_TIMEOUT_SECONDS):
            received.append(event)

    assert _names(received) == ["p0", "p1"]


def test_watch_ended_cleanly_is_resumed_by_the_client_from_the_last_resource_version(
    server: ApiServer, store: ObjectStore, core: client.CoreV1Api
) -> None:
    store.create("pods", builders.pod("p0"))
    store.create("pods", builders.pod("p1"))
    server.faults.inject(FaultKind.WATCH_END, resource="pods", after_events=1)
    received: list[dict[str, Any]] = []

    def write_after_resume() -> None:
        server.requests.wait_for(lambda records: any(r.fault is FaultKind.WATCH_END for r in records), 5.0)
        assert server.wait_for_watches(1, 5.0)
        store.create("pods", builders.pod("p2"))

    writer = threading.Thread(target=write_after_resume)
    writer.start()
    stream = watch.Watch()
    for event in stream.stream(core.list_namespaced_pod, "default"):  # no timeout: the client re-watches
        received.append(event)
        if len(received) == 3:
            stream.stop()
    writer.join()

    assert _names(received) == ["p0", "p1", "p2"]
    assert server.requests.wait_for(lambda records: len([r for r in records if r.verb == "watch"]) == 2, 5.0)
    first, second = server.requests.matching(verb="watch", resource="pods")
    assert first.fault is FaultKind.WATCH_END
    assert "resourceVersion" not in first.query
    assert second.query["resourceVersion"] == received[0]["raw_object"]["metadata"]["resourceVersion"]


def test_watch_gone_error_event_raises_410(server: ApiServer, store: ObjectStore, core: client.CoreV1Api) -> None:
    store.create("pods", builders.pod("p0"))
    server.faults.inject(FaultKind.WATCH_GONE, resource="pods", after_events=1)
    received: list[dict[str, Any]] = []

    with pytest.raises(ApiException) as failure:
        for event in watch.Watch().stream(core.list_namespaced_pod, "default", timeout_seconds=WATCH_TIMEOUT_SECONDS):
            received.append(event)

    assert failure.value.status == 410
    assert _names(received) == ["p0"]


def test_real_410_after_compaction_for_watch_list_and_continue(store: ObjectStore, core: client.CoreV1Api) -> None:
    for index in range(3):
        store.create("pods", builders.pod(f"p{index}"))
    old = core.list_namespaced_pod("default", limit=1)
    store.create("pods", builders.pod("p3"))
    store.compact()

    with pytest.raises(ApiException) as watch_failure:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod,
                "default",
                resource_version=old.metadata.resource_version,
                timeout_seconds=WATCH_TIMEOUT_SECONDS,
            )
        )
    with pytest.raises(ApiException) as exact_list_failure:
        core.list_namespaced_pod(
            "default", resource_version=old.metadata.resource_version, resource_version_match="Exact"
        )
    with pytest.raises(ApiException) as continue_failure:
        core.list_namespaced_pod("default", limit=1, _continue=old.metadata._continue)

    assert watch_failure.value.status == 410
    assert exact_list_failure.value.status == 410
    assert continue_failure.value.status == 410


def test_an_exact_list_before_compaction_sees_the_past(store: ObjectStore, core: client.CoreV1Api) -> None:
    store.create("pods", builders.pod("p0"))
    then = core.list_namespaced_pod("default").metadata.resource_version
    store.create("pods", builders.pod("p1"))
    store.delete("pods", "p0", "default")

    past = core.list_namespaced_pod("default", resource_version=then, resource_version_match="Exact")

    assert [pod.metadata.name for pod in past.items] == ["p0"]


def test_a_restart_restored_to_a_snapshot_serves_the_snapshot_with_its_uids_and_versions(
    server: ApiServer, store: ObjectStore, core: client.CoreV1Api
) -> None:
    kept = store.create("pods", builders.pod("kept"))
    snapshot = store.resource_version
    store.create("pods", builders.pod("later"))
    store.delete("pods", "kept", "default")
    seen = store.resource_version
    port = server.port

    server.restart(lambda s: s.restore(snapshot))

    listed = core.list_namespaced_pod("default")
    assert server.port == port
    assert int(listed.metadata.resource_version) == snapshot < seen
    ((name, uid, version),) = [(p.metadata.name, p.metadata.uid, p.metadata.resource_version) for p in listed.items]
    assert (name, uid, version) == ("kept", kept["metadata"]["uid"], kept["metadata"]["resourceVersion"])
    # The undone writes' versions are reused, and a resumed watch from the old one is too new.
    assert int(store.create("pods", builders.pod("after"))["metadata"]["resourceVersion"]) == snapshot + 1
    with pytest.raises(ApiException) as too_new:
        list(
            watch.Watch().stream(
                core.list_namespaced_pod, "default", resource_version=str(seen), timeout_seconds=WATCH_TIMEOUT_SECONDS
            )
        )
    assert too_new.value.status == 504
    store.delete("pods", "kept", "default")  # the restored object is indexed again
    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["after"]

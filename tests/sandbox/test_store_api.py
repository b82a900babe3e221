"""The in-process store API the sandbox's Kueue emulation builds on."""

from __future__ import annotations

import threading

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.sandbox.apiserver import (
    AdmissionRequest,
    ApiError,
    EventType,
    ManualClock,
    ObjectStore,
    Operation,
    StoreEvent,
)
from sky_kueue.sandbox.apiserver import errors as api_errors
from tests.sandbox import builders

ADMISSION_GATE = "kueue.x-k8s.io/admission"


def test_objects_go_in_and_come_out_in_the_storage_version() -> None:
    store = ObjectStore()

    created = store.create("clusterqueues.kueue.x-k8s.io", builders.cluster_queue("cq", cohort="c"))

    assert created["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert store.get("cq", "cq")["spec"]["cohortName"] == "c"


def test_returned_objects_are_copies_unless_shared() -> None:
    store = ObjectStore()
    store.create("configmaps", builders.config_map("cm", a="1"))

    copy = store.get("configmaps", "cm", "default")
    copy["data"]["a"] = "changed"

    assert store.get("configmaps", "cm", "default")["data"]["a"] == "1"
    assert store.get("configmaps", "cm", "default", shared=True) is store.get(
        "configmaps", "cm", "default", shared=True
    )


def test_timestamps_come_from_the_injected_clock() -> None:
    clock = ManualClock()
    store = ObjectStore(clock=clock)
    clock.advance(3600)

    created = store.create("pods", builders.pod("p1", finalizers=["x/y"]))
    clock.advance(60)
    deleting = store.delete("pods", "p1", "default")

    assert created["metadata"]["creationTimestamp"] == "2025-01-01T01:00:00Z"
    assert deleting["metadata"]["deletionTimestamp"] == "2025-01-01T01:01:00Z"


def test_mutate_is_an_atomic_read_modify_write() -> None:
    store = ObjectStore()
    store.create("configmaps", builders.config_map("counter", n="0"))

    def bump(obj: dict[str, dict[str, str]]) -> None:
        obj["data"]["n"] = str(int(obj["data"]["n"]) + 1)

    threads = [
        threading.Thread(target=lambda: [store.mutate("configmaps", "counter", bump, "default") for _ in range(50)])
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert store.get("configmaps", "counter", "default")["data"]["n"] == "200"


def test_update_status_writes_only_status() -> None:
    store = ObjectStore()
    workload = store.create("workloads", builders.workload("wl"))
    workload["status"] = {"conditions": [builders.admitted_condition()]}
    workload["spec"]["priority"] = 5

    updated = store.update_status("workloads", workload)

    assert updated["status"]["conditions"][0]["type"] == "Admitted"
    assert "priority" not in updated["spec"]


def test_admission_hooks_mutate_creates_like_a_webhook(core: client.CoreV1Api, store: ObjectStore) -> None:
    def gate_pods(request: AdmissionRequest) -> None:
        if request.operation is Operation.CREATE and "kueue.x-k8s.io/queue-name" in request.obj["metadata"].get(
            "labels", {}
        ):
            request.obj["spec"]["schedulingGates"] = [{"name": ADMISSION_GATE}]

    store.add_admission_hook(gate_pods, "pods")

    gated = core.create_namespaced_pod("default", builders.pod("p1", labels={"kueue.x-k8s.io/queue-name": "lq"}))
    plain = core.create_namespaced_pod("default", builders.pod("p2"))

    assert [gate.name for gate in gated.spec.scheduling_gates] == [ADMISSION_GATE]
    assert plain.spec.scheduling_gates is None


def test_admission_hooks_reject_with_an_api_error(core: client.CoreV1Api, store: ObjectStore) -> None:
    def reject(request: AdmissionRequest) -> None:
        raise api_errors.forbidden("admission webhook denied the request: no")

    remove = store.add_admission_hook(reject, "pods")
    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("default", builders.pod("p1"))
    remove()
    core.create_namespaced_pod("default", builders.pod("p1"))

    assert failure.value.status == 403


def test_commit_hooks_see_every_event_in_order() -> None:
    store = ObjectStore()
    seen: list[tuple[EventType, str, int]] = []

    def record(event: StoreEvent) -> None:
        seen.append((event.type, event.key.name, event.resource_version))

    store.add_commit_hook(record, "configmaps")
    store.create("configmaps", builders.config_map("a"))
    store.create("pods", builders.pod("ignored"))
    store.patch("configmaps", "a", {"data": {"x": "1"}}, "default")
    store.delete("configmaps", "a", "default")

    assert [(kind, name) for kind, name, _ in seen] == [
        (EventType.ADDED, "a"),
        (EventType.MODIFIED, "a"),
        (EventType.DELETED, "a"),
    ]
    versions = [version for _, _, version in seen]
    assert versions == sorted(versions)


def test_in_process_watch_across_resources() -> None:
    store = ObjectStore()
    start = store.resource_version

    store.create("pods", builders.pod("p1"))
    store.create("workloads", builders.workload("wl"))
    with store.watch(None, since=start) as watcher:
        first = watcher.next(1.0)
        second = watcher.next(1.0)
        nothing = watcher.next(0.0)

    assert first is not None and first.resource is not None and first.resource.kind == "Pod"
    assert second is not None and second.resource is not None and second.resource.kind == "Workload"
    assert nothing is None
    assert store.watcher_count() == 0


def test_watch_from_before_the_retained_history_is_410() -> None:
    store = ObjectStore(event_log_capacity_events=2)
    start = store.resource_version
    for index in range(3):
        store.create("configmaps", builders.config_map(f"cm{index}"))

    with pytest.raises(ApiError) as failure:
        store.watch("configmaps", since=start)

    assert failure.value.code == 410
    assert store.compacted_through > start


def test_list_as_of_an_earlier_resource_version() -> None:
    store = ObjectStore()
    store.create("configmaps", builders.config_map("a", v="1"))
    then = store.resource_version
    store.patch("configmaps", "a", {"data": {"v": "2"}}, "default")
    store.create("configmaps", builders.config_map("b"))

    past = store.list("configmaps", "default", resource_version=then)

    assert [(item["metadata"]["name"], item["data"]["v"]) for item in past.items] == [("a", "1")]
    assert past.resource_version == then


def test_resource_names_resolve_like_kubectl() -> None:
    store = ObjectStore()

    assert store.resource("cq").kind == "ClusterQueue"
    assert store.resource("jobs.batch").kind == "Job"
    assert store.resource("Workload").plural == "workloads"
    with pytest.raises(KeyError):
        store.resource("gadgets")

"""Conformance: Kueue's two API versions served from one store, and discovery."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client, watch

from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from tests.sandbox import builders, raw_http

KUEUE = builders.KUEUE_GROUP


def _get(api_client: client.ApiClient, path: str) -> Any:
    response = raw_http.send(api_client, "GET", path, headers={"Accept": "application/json"})
    assert response.status == 200, response.data
    return response.json()


def test_cluster_queue_cohort_is_renamed_between_versions(store: ObjectStore, custom: client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(
        KUEUE, "v1beta1", "clusterqueues", builders.cluster_queue("cq", cohort="team-ab", version="v1beta1")
    )

    as_v1beta2 = custom.get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq")
    as_v1beta1 = custom.get_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", "cq")

    assert as_v1beta2["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert as_v1beta2["spec"]["cohortName"] == "team-ab"
    assert "cohort" not in as_v1beta2["spec"]
    assert as_v1beta1["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert as_v1beta1["spec"]["cohort"] == "team-ab"
    assert "cohortName" not in as_v1beta1["spec"]
    assert store.get("clusterqueues", "cq")["spec"]["cohortName"] == "team-ab"


def test_one_store_serves_both_versions(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("a"))
    custom.create_namespaced_custom_object(
        KUEUE, "v1beta1", "default", "workloads", builders.workload("b", version="v1beta1")
    )

    old = custom.list_namespaced_custom_object(KUEUE, "v1beta1", "default", "workloads")
    new = custom.list_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads")

    assert [item["metadata"]["name"] for item in old["items"]] == ["a", "b"]
    assert {item["apiVersion"] for item in old["items"]} == {"kueue.x-k8s.io/v1beta1"}
    assert [item["metadata"]["name"] for item in new["items"]] == ["a", "b"]
    assert old["metadata"]["resourceVersion"] == new["metadata"]["resourceVersion"]


def test_workload_priority_class_fields_convert(custom: client.CustomObjectsApi) -> None:
    body = builders.workload("wl", priority=100, version="v1beta1")
    body["spec"]["priorityClassName"] = "prod-priority"
    body["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    custom.create_namespaced_custom_object(KUEUE, "v1beta1", "default", "workloads", body)

    as_v1beta2 = custom.get_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", "wl")
    as_v1beta1 = custom.get_namespaced_custom_object(KUEUE, "v1beta1", "default", "workloads", "wl")

    assert as_v1beta2["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "prod-priority",
    }
    assert "priorityClassName" not in as_v1beta2["spec"]
    assert as_v1beta1["spec"]["priorityClassName"] == "prod-priority"
    assert as_v1beta1["spec"]["priorityClassSource"] == "kueue.x-k8s.io/workloadpriorityclass"
    assert as_v1beta1["spec"]["priority"] == 100


def test_patches_apply_to_the_version_the_client_speaks(custom: client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", builders.cluster_queue("cq"))

    custom.patch_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", "cq", {"spec": {"cohort": "old-api"}})

    assert custom.get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq")["spec"]["cohortName"] == "old-api"


def test_local_queue_status_flavor_usage_is_renamed(store: ObjectStore, custom: client.CustomObjectsApi) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    custom.create_namespaced_custom_object(
        KUEUE, "v1beta2", "team-a", "localqueues", builders.local_queue("lq", "team-a", "cq")
    )
    usage = [{"name": "default-flavor", "resources": [{"name": "cpu", "total": "2"}]}]

    custom.patch_namespaced_custom_object_status(
        KUEUE, "v1beta2", "team-a", "localqueues", "lq", {"status": {"flavorsUsage": usage}}
    )
    as_v1beta1 = custom.get_namespaced_custom_object(KUEUE, "v1beta1", "team-a", "localqueues", "lq")

    assert as_v1beta1["status"]["flavorUsage"] == usage
    assert "flavorsUsage" not in as_v1beta1["status"]


def test_watch_events_are_converted_to_the_watched_version(server: ApiServer, custom: client.CustomObjectsApi) -> None:
    def create_when_watched() -> None:
        assert server.wait_for_watches(1, 5.0)
        server.store.create("clusterqueues", builders.cluster_queue("cq", cohort="team-ab"))

    writer = threading.Thread(target=create_when_watched)
    writer.start()
    seen: list[tuple[str, str]] = []
    stream = watch.Watch()
    for event in stream.stream(custom.list_cluster_custom_object, KUEUE, "v1beta1", "clusterqueues", timeout_seconds=5):
        seen.append((event["raw_object"]["apiVersion"], event["raw_object"]["spec"].get("cohort", "")))
        stream.stop()
    writer.join()

    assert seen == [("kueue.x-k8s.io/v1beta1", "team-ab")]


def test_discovery_lists_groups_versions_and_resources(api_client: client.ApiClient) -> None:
    core = _get(api_client, "/api")
    groups = _get(api_client, "/apis")
    kueue = _get(api_client, "/apis/kueue.x-k8s.io")
    resources = _get(api_client, "/apis/kueue.x-k8s.io/v1beta1")
    version = _get(api_client, "/version")

    assert core["versions"] == ["v1"]
    names = {group["name"] for group in groups["groups"]}
    assert {"batch", "coordination.k8s.io", "kueue.x-k8s.io"} <= names
    assert kueue["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in kueue["versions"]] == ["v1beta2", "v1beta1"]
    by_name = {entry["name"]: entry for entry in resources["resources"]}
    assert by_name["clusterqueues"]["namespaced"] is False
    assert by_name["clusterqueues"]["shortNames"] == ["cq"]
    assert "watch" in by_name["workloads"]["verbs"]
    assert by_name["workloads/status"]["verbs"] == ["get", "patch", "update"]
    assert "resourceflavors/status" not in by_name
    assert version["major"] == "1"


def test_health_endpoints(api_client: client.ApiClient) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        response = raw_http.send(api_client, "GET", path)
        assert response.status == 200
        assert response.data == b"ok"

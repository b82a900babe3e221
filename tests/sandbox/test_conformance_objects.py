"""Conformance: create, get and list, as the official client sees them."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.sandbox.apiserver import ObjectStore
from sky_kueue.sandbox.apiserver.store import FIRST_RESOURCE_VERSION
from tests.sandbox import builders, raw_http

KUEUE = builders.KUEUE_GROUP


def test_create_sets_uid_timestamp_generation_and_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", builders.pod("p1"))

    assert created.metadata.uid
    assert created.metadata.creation_timestamp is not None
    assert created.metadata.generation == 1
    assert int(created.metadata.resource_version) > FIRST_RESOURCE_VERSION - 1


def test_resource_versions_start_well_above_zero(core: client.CoreV1Api) -> None:
    listed = core.list_namespace()

    assert int(listed.metadata.resource_version) >= FIRST_RESOURCE_VERSION
    assert listed.metadata.resource_version != "0"


def test_generate_name_appends_a_random_suffix(core: client.CoreV1Api) -> None:
    body = builders.pod("")
    body["metadata"] = {"generateName": "worker-"}

    first = core.create_namespaced_pod("default", body)
    second = core.create_namespaced_pod("default", body)

    assert first.metadata.name.startswith("worker-")
    assert len(first.metadata.name) == len("worker-") + 5
    assert first.metadata.name != second.metadata.name


def test_namespace_comes_from_the_url(core: client.CoreV1Api) -> None:
    core.create_namespace(builders.namespace("team-a"))
    body = builders.pod("p1")
    del body["metadata"]["namespace"]

    created = core.create_namespaced_pod("team-a", body)

    assert created.metadata.namespace == "team-a"
    assert core.read_namespaced_pod("p1", "team-a").metadata.namespace == "team-a"


def test_namespace_mismatch_between_body_and_url_is_rejected(core: client.CoreV1Api) -> None:
    core.create_namespace(builders.namespace("team-a"))

    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("team-a", builders.pod("p1", namespace="default"))

    assert failure.value.status == 400


def test_creating_an_existing_name_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1"))

    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("default", builders.pod("p1"))

    assert failure.value.status == 409
    assert '"AlreadyExists"' in failure.value.body


def test_creating_in_a_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("nowhere", builders.pod("p1", namespace="nowhere"))

    assert failure.value.status == 404


def test_invalid_names_are_422(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as failure:
        core.create_namespaced_pod("default", builders.pod("Not_A_Name"))

    assert failure.value.status == 422


def test_get_of_a_missing_object_is_404_not_found(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as failure:
        core.read_namespaced_pod("ghost", "default")

    assert failure.value.status == 404
    assert '"NotFound"' in failure.value.body


def test_list_carries_kind_api_version_and_resource_version(api_client: client.ApiClient) -> None:
    client.CoreV1Api(api_client).create_namespaced_pod("default", builders.pod("p1"))
    custom = client.CustomObjectsApi(api_client)
    custom.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", builders.cluster_queue("cq"))

    pods = client.CoreV1Api(api_client).list_namespaced_pod("default")
    queues = custom.list_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues")

    assert pods.kind == "PodList"
    assert pods.api_version == "v1"
    assert [item.metadata.name for item in pods.items] == ["p1"]
    assert queues["kind"] == "ClusterQueueList"
    assert queues["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert int(queues["metadata"]["resourceVersion"]) >= int(pods.metadata.resource_version)


def test_list_across_namespaces(core: client.CoreV1Api) -> None:
    core.create_namespace(builders.namespace("team-a"))
    core.create_namespaced_pod("default", builders.pod("p1"))
    core.create_namespaced_pod("team-a", builders.pod("p2", namespace="team-a"))

    listed = core.list_pod_for_all_namespaces()

    assert sorted((p.metadata.namespace, p.metadata.name) for p in listed.items) == [
        ("default", "p1"),
        ("team-a", "p2"),
    ]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-1", "web-2"]),
        ("app==web", ["web-1", "web-2"]),
        ("app!=web", ["db-1", "plain"]),
        ("tier in (front, back)", ["db-1", "web-1"]),
        ("tier notin (front)", ["db-1", "plain", "web-2"]),
        ("tier", ["db-1", "web-1"]),
        ("!tier", ["plain", "web-2"]),
        ("app=web,tier=front", ["web-1"]),
    ],
)
def test_label_selectors(core: client.CoreV1Api, selector: str, expected: list[str]) -> None:
    core.create_namespaced_pod("default", builders.pod("web-1", labels={"app": "web", "tier": "front"}))
    core.create_namespaced_pod("default", builders.pod("web-2", labels={"app": "web"}))
    core.create_namespaced_pod("default", builders.pod("db-1", labels={"app": "db", "tier": "back"}))
    core.create_namespaced_pod("default", builders.pod("plain"))

    listed = core.list_namespaced_pod("default", label_selector=selector)

    assert sorted(p.metadata.name for p in listed.items) == expected


def test_malformed_label_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as failure:
        core.list_namespaced_pod("default", label_selector="app in (web")

    assert failure.value.status == 400


def test_field_selectors_on_dotted_paths(core: client.CoreV1Api) -> None:
    for name, target in (("e1", "wl-a"), ("e2", "wl-b"), ("e3", "wl-a")):
        core.create_namespaced_event(
            "default",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name},
                "involvedObject": {"kind": "Workload", "name": target, "namespace": "default"},
                "reason": "Pending",
            },
        )

    matching = core.list_namespaced_event("default", field_selector="involvedObject.name=wl-a")
    others = core.list_namespaced_event("default", field_selector="involvedObject.name!=wl-a")
    by_name = core.list_namespaced_event("default", field_selector="metadata.name=e2")

    assert sorted(e.metadata.name for e in matching.items) == ["e1", "e3"]
    assert [e.metadata.name for e in others.items] == ["e2"]
    assert [e.metadata.name for e in by_name.items] == ["e2"]


def test_list_pages_with_limit_and_continue(core: client.CoreV1Api) -> None:
    for index in range(5):
        core.create_namespaced_pod("default", builders.pod(f"p{index}"))

    first = core.list_namespaced_pod("default", limit=2)
    core.create_namespaced_pod("default", builders.pod("p9"))  # after the snapshot: not in these pages
    second = core.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)

    names = [p.metadata.name for page in (first, second, third) for p in page.items]
    assert names == ["p0", "p1", "p2", "p3", "p4"]
    assert first.metadata.remaining_item_count == 3
    assert not third.metadata._continue
    assert second.metadata.resource_version == first.metadata.resource_version


def test_generation_moves_on_spec_changes_only(store: ObjectStore, custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))

    labelled = custom.patch_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", "wl", {"metadata": {"labels": {"x": "y"}}}
    )
    respecified = custom.patch_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", "wl", {"spec": {"priority": 5}}
    )

    assert labelled["metadata"]["generation"] == 1
    assert respecified["metadata"]["generation"] == 2
    assert store.get("workloads", "wl", "default")["metadata"]["generation"] == 2


def test_creating_a_namespaced_kind_needs_a_namespace_in_the_url(api_client: client.ApiClient) -> None:
    response = raw_http.send(
        api_client, "POST", "/api/v1/pods", headers={"Content-Type": "application/json"}, body=builders.pod("p1")
    )

    assert response.status == 405


def test_tables_for_kubectl_carry_the_printer_columns(api_client: client.ApiClient, store: ObjectStore) -> None:
    store.create("workloads", builders.workload("wl", queue="team-a-lq"))

    response = raw_http.send(
        api_client,
        "GET",
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/default/workloads",
        headers={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"},
    )
    table = response.json()

    assert table["kind"] == "Table"
    assert [column["name"] for column in table["columnDefinitions"]] == [
        "Name",
        "Queue",
        "Reserved in",
        "Admitted",
        "Finished",
        "Age",
    ]
    assert table["rows"][0]["cells"][:2] == ["wl", "team-a-lq"]
    assert table["rows"][0]["object"]["kind"] == "PartialObjectMetadata"

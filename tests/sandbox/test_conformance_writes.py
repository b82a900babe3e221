"""Conformance: PUT with optimistic concurrency, the PATCH flavours, status isolation."""

from __future__ import annotations

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.sandbox.apiserver import ObjectStore
from tests.sandbox import builders, raw_http

KUEUE = builders.KUEUE_GROUP
JSON_PATCH = "application/json-patch+json"


def test_put_with_the_current_resource_version_succeeds(coordination: client.CoordinationV1Api) -> None:
    created = coordination.create_namespaced_lease("default", builders.lease("leader"))
    created.spec.holder_identity = "b"

    updated = coordination.replace_namespaced_lease("leader", "default", created)

    assert updated.spec.holder_identity == "b"
    assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)


def test_put_with_a_stale_resource_version_is_409_conflict(coordination: client.CoordinationV1Api) -> None:
    stale = coordination.create_namespaced_lease("default", builders.lease("leader"))
    fresh = coordination.read_namespaced_lease("leader", "default")
    fresh.spec.holder_identity = "b"
    coordination.replace_namespaced_lease("leader", "default", fresh)
    stale.spec.holder_identity = "c"

    with pytest.raises(ApiException) as failure:
        coordination.replace_namespaced_lease("leader", "default", stale)

    assert failure.value.status == 409
    assert '"Conflict"' in failure.value.body
    assert coordination.read_namespaced_lease("leader", "default").spec.holder_identity == "b"


def test_put_of_a_custom_resource_needs_a_resource_version(custom: client.CustomObjectsApi) -> None:
    custom.create_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", builders.cluster_queue("cq"))

    with pytest.raises(ApiException) as failure:
        custom.replace_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq", builders.cluster_queue("cq"))

    assert failure.value.status == 422


def test_patch_carrying_a_stale_resource_version_is_409(custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))
    custom.patch_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", "wl", {"spec": {"priority": 1}})

    with pytest.raises(ApiException) as failure:
        custom.patch_namespaced_custom_object(
            KUEUE,
            "v1beta2",
            "default",
            "workloads",
            "wl",
            {
                "metadata": {"resourceVersion": created["metadata"]["resourceVersion"]},
                "spec": {"priority": 2},
            },
        )

    assert failure.value.status == 409


def test_patch_carrying_another_objects_uid_is_409_and_changes_nothing(custom: client.CustomObjectsApi) -> None:
    """A uid in a patch is a precondition (the apiserver's update path): a patch decided for a
    deleted Workload must never land on its same-named successor."""
    created = custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))
    uid = created["metadata"]["uid"]
    custom.patch_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", "wl", {"metadata": {"uid": uid}, "spec": {"priority": 1}}
    )

    with pytest.raises(ApiException) as failure:
        custom.patch_namespaced_custom_object(
            KUEUE,
            "v1beta2",
            "default",
            "workloads",
            "wl",
            {"metadata": {"uid": "someone-else"}, "spec": {"priority": 2}},
        )

    assert failure.value.status == 409
    assert "Precondition failed: UID in precondition: someone-else" in str(failure.value.body)
    stored = custom.get_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", "wl")
    assert stored["spec"]["priority"] == 1


def test_merge_patch_sets_and_deletes_fields(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", builders.config_map("cm", a="1", b="2"))

    response = raw_http.send(
        core.api_client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        body={"data": {"a": None, "c": "3"}},
        headers={"Content-Type": "application/merge-patch+json"},
    )

    assert response.status == 200
    assert response.json()["data"] == {"b": "2", "c": "3"}


def test_strategic_merge_patch_is_served_for_built_in_kinds(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1", labels={"a": "1"}))

    patched = core.patch_namespaced_pod("p1", "default", {"metadata": {"labels": {"b": "2"}}})

    assert patched.metadata.labels == {"a": "1", "b": "2"}


def test_strategic_merge_patch_of_a_custom_resource_is_415(api_client: client.ApiClient) -> None:
    custom = client.CustomObjectsApi(api_client)
    custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))

    response = raw_http.send(
        api_client,
        "PATCH",
        f"/apis/{KUEUE}/v1beta2/namespaces/default/workloads/wl",
        body={"spec": {"priority": 1}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )

    assert response.status == 415


def test_unknown_patch_media_type_is_415(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", builders.config_map("cm", a="1"))

    response = raw_http.send(
        core.api_client,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/cm",
        body={"data": {"a": "2"}},
        headers={"Content-Type": "application/apply-patch+yaml"},
    )

    assert response.status == 415


def test_json_patch_applies_operations_in_order(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", builders.workload("wl", priority=1)
    )
    operations = [
        {"op": "test", "path": "/spec/priority", "value": 1},
        {"op": "replace", "path": "/spec/priority", "value": 7},
        {"op": "add", "path": "/metadata/labels/team", "value": "a"},
    ]

    response = raw_http.send(
        custom.api_client,
        "PATCH",
        f"/apis/{KUEUE}/v1beta2/namespaces/default/workloads/wl",
        body=operations,
        headers={"Content-Type": JSON_PATCH},
    )
    patched = response.json()

    assert response.status == 200
    assert patched["spec"]["priority"] == 7
    assert patched["metadata"]["labels"] == {"team": "a"}


def test_json_patch_with_a_failing_operation_is_422_and_changes_nothing(
    store: ObjectStore, custom: client.CustomObjectsApi
) -> None:
    custom.create_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", builders.workload("wl", priority=1)
    )
    operations = [
        {"op": "replace", "path": "/spec/priority", "value": 7},
        {"op": "test", "path": "/spec/priority", "value": 1},
    ]

    response = raw_http.send(
        custom.api_client,
        "PATCH",
        f"/apis/{KUEUE}/v1beta2/namespaces/default/workloads/wl",
        body=operations,
        headers={"Content-Type": JSON_PATCH},
    )

    assert response.status == 422
    assert store.get("workloads", "wl", "default")["spec"]["priority"] == 1


def test_a_json_patch_list_sent_as_merge_patch_is_rejected(custom: client.CustomObjectsApi) -> None:
    """The client pitfall: CustomObjectsApi.patch_* defaults to merge-patch even for a list body."""
    custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))

    with pytest.raises(ApiException) as failure:
        custom.patch_namespaced_custom_object(
            KUEUE,
            "v1beta2",
            "default",
            "workloads",
            "wl",
            [{"op": "replace", "path": "/spec/priority", "value": 3}],
        )

    assert failure.value.status == 400


def test_main_resource_writes_ignore_status(store: ObjectStore, custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(
        KUEUE, "v1beta2", "default", "workloads", {**builders.workload("wl"), "status": {"conditions": []}}
    )
    created["status"] = {"conditions": [builders.admitted_condition()]}
    created["spec"]["priority"] = 3

    replaced = custom.replace_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", "wl", created)
    patched = custom.patch_namespaced_custom_object(
        KUEUE,
        "v1beta2",
        "default",
        "workloads",
        "wl",
        {"status": {"conditions": [builders.admitted_condition()]}},
    )

    assert "status" not in replaced
    assert replaced["spec"]["priority"] == 3
    assert "status" not in patched
    assert "status" not in store.get("workloads", "wl", "default")


def test_status_writes_ignore_everything_but_status(store: ObjectStore, custom: client.CustomObjectsApi) -> None:
    created = custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))
    created["spec"]["priority"] = 99
    created["metadata"]["labels"] = {"sneaky": "yes"}
    created["status"] = {"conditions": [builders.admitted_condition()]}

    replaced = custom.replace_namespaced_custom_object_status(KUEUE, "v1beta2", "default", "workloads", "wl", created)
    patched = custom.patch_namespaced_custom_object_status(
        KUEUE,
        "v1beta2",
        "default",
        "workloads",
        "wl",
        {"spec": {"priority": 42}, "status": {"admission": {}}},
    )

    assert replaced["status"]["conditions"][0]["type"] == "Admitted"
    assert "priority" not in replaced["spec"]
    assert replaced["metadata"].get("labels") == {}
    assert patched["status"]["admission"] == {}
    stored = store.get("workloads", "wl", "default")
    assert "priority" not in stored["spec"]
    assert stored["metadata"]["generation"] == 1


def test_pod_status_subresource(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1"))

    patched = core.patch_namespaced_pod_status("p1", "default", {"status": {"phase": "Running"}})
    read = core.read_namespaced_pod_status("p1", "default")

    assert patched.status.phase == "Running"
    assert read.status.phase == "Running"


def test_job_status_subresource(batch: client.BatchV1Api) -> None:
    batch.create_namespaced_job("default", builders.job("j1"))

    batch.patch_namespaced_job_status("j1", "default", {"status": {"active": 1}})
    batch.patch_namespaced_job("j1", "default", {"spec": {"suspend": False}, "status": {"active": 5}})
    read = batch.read_namespaced_job("j1", "default")

    assert read.status.active == 1
    assert read.spec.suspend is False


def test_a_write_that_changes_nothing_keeps_the_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_config_map("default", builders.config_map("cm", a="1"))

    patched = core.patch_namespaced_config_map("cm", "default", {"data": {"a": "1"}})

    assert patched.metadata.resource_version == created.metadata.resource_version


def test_dry_run_writes_nothing(store: ObjectStore, core: client.CoreV1Api) -> None:
    before = store.resource_version

    core.create_namespaced_config_map("default", builders.config_map("cm", a="1"), dry_run="All")

    assert store.try_get("configmaps", "cm", "default") is None
    assert store.resource_version == before


def test_yaml_request_bodies_are_accepted(api_client: client.ApiClient) -> None:
    response = raw_http.send(
        api_client,
        "POST",
        "/api/v1/namespaces/default/configmaps",
        headers={"Content-Type": "application/yaml", "Accept": "application/json"},
        body="apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\ndata:\n  a: '1'\n",
    )

    assert response.status == 201
    assert response.json()["metadata"]["name"] == "from-yaml"

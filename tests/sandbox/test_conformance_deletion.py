"""Conformance: delete with preconditions, finalizers, deletecollection, namespaces, owners."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from tests.sandbox import builders

KUEUE = builders.KUEUE_GROUP
MANAGED_FINALIZER = "kueue.x-k8s.io/managed"


def test_delete_removes_an_object_without_finalizers(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1"))

    deleted = core.delete_namespaced_pod("p1", "default")

    assert deleted.metadata.name == "p1"
    with pytest.raises(ApiException) as failure:
        core.read_namespaced_pod("p1", "default")
    assert failure.value.status == 404


def test_delete_of_a_missing_object_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as failure:
        core.delete_namespaced_pod("ghost", "default")

    assert failure.value.status == 404


def test_delete_preconditions_on_uid_and_resource_version(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", builders.pod("p1"))

    with pytest.raises(ApiException) as wrong_uid:
        core.delete_namespaced_pod("p1", "default", body={"preconditions": {"uid": "not-the-uid"}})
    with pytest.raises(ApiException) as wrong_version:
        core.delete_namespaced_pod("p1", "default", body={"preconditions": {"resourceVersion": "1"}})
    core.delete_namespaced_pod(
        "p1",
        "default",
        body={
            "preconditions": {
                "uid": created.metadata.uid,
                "resourceVersion": created.metadata.resource_version,
            }
        },
    )

    assert wrong_uid.value.status == 409
    assert wrong_version.value.status == 409
    assert core.list_namespaced_pod("default").items == []


def test_finalizers_hold_the_object_until_the_last_is_removed(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1", finalizers=[MANAGED_FINALIZER, "other/x"]))

    core.delete_namespaced_pod("p1", "default")
    terminating = core.read_namespaced_pod("p1", "default")
    core.patch_namespaced_pod("p1", "default", {"metadata": {"finalizers": ["other/x"]}})
    still_there = core.read_namespaced_pod("p1", "default")
    core.patch_namespaced_pod("p1", "default", {"metadata": {"finalizers": None}})

    assert terminating.metadata.deletion_timestamp is not None
    assert still_there.metadata.finalizers == ["other/x"]
    with pytest.raises(ApiException) as failure:
        core.read_namespaced_pod("p1", "default")
    assert failure.value.status == 404


def test_no_new_finalizers_on_an_object_being_deleted(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("p1", finalizers=[MANAGED_FINALIZER]))
    core.delete_namespaced_pod("p1", "default")

    with pytest.raises(ApiException) as failure:
        core.patch_namespaced_pod("p1", "default", {"metadata": {"finalizers": [MANAGED_FINALIZER, "late/one"]}})

    assert failure.value.status == 422


def test_delete_collection_honours_the_label_selector(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", builders.pod("a1", labels={"group": "a"}))
    core.create_namespaced_pod("default", builders.pod("a2", labels={"group": "a"}))
    core.create_namespaced_pod("default", builders.pod("b1", labels={"group": "b"}))

    core.delete_collection_namespaced_pod("default", label_selector="group=a")

    assert [p.metadata.name for p in core.list_namespaced_pod("default").items] == ["b1"]


def test_deleting_a_namespace_deletes_its_contents(store: ObjectStore, core: client.CoreV1Api) -> None:
    core.create_namespace(builders.namespace("team-a"))
    core.create_namespaced_pod("team-a", builders.pod("p1", namespace="team-a"))
    core.create_namespaced_pod("team-a", builders.pod("held", namespace="team-a", finalizers=[MANAGED_FINALIZER]))
    store.create("workloads", builders.workload("wl", namespace="team-a"))

    core.delete_namespace("team-a")
    terminating = core.read_namespace("team-a")
    remaining = core.list_namespaced_pod("team-a")

    assert terminating.status.phase == "Terminating"
    assert [p.metadata.name for p in remaining.items] == ["held"]
    assert store.list("workloads", "team-a").items == []
    with pytest.raises(ApiException) as refused:
        core.create_namespaced_pod("team-a", builders.pod("late", namespace="team-a"))
    assert refused.value.status == 403

    core.patch_namespaced_pod("held", "team-a", {"metadata": {"finalizers": None}})

    with pytest.raises(ApiException) as gone:
        core.read_namespace("team-a")
    assert gone.value.status == 404


def test_dependents_are_deleted_with_their_last_owner(store: ObjectStore, core: client.CoreV1Api) -> None:
    first = core.create_namespaced_pod("default", builders.pod("p1"))
    second = core.create_namespaced_pod("default", builders.pod("p2"))
    owners = [
        {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}
        for pod in (first, second)
    ]
    store.create(
        "workloads",
        {**builders.workload("group"), "metadata": {"name": "group", "ownerReferences": owners}},
        "default",
    )

    core.delete_namespaced_pod("p1", "default")
    kept = store.try_get("workloads", "group", "default")
    core.delete_namespaced_pod("p2", "default")

    assert kept is not None
    assert store.try_get("workloads", "group", "default") is None


def test_orphan_propagation_keeps_dependents(store: ObjectStore, core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_pod("default", builders.pod("p1"))
    reference = {"apiVersion": "v1", "kind": "Pod", "name": "p1", "uid": owner.metadata.uid}
    store.create(
        "configmaps",
        {**builders.config_map("cm"), "metadata": {"name": "cm", "ownerReferences": [reference]}},
        "default",
    )

    core.delete_namespaced_pod("p1", "default", propagation_policy="Orphan")

    assert store.try_get("configmaps", "cm", "default") is not None


def test_delete_of_a_custom_resource_returns_the_object(custom: client.CustomObjectsApi) -> None:
    custom.create_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", builders.workload("wl"))

    deleted = custom.delete_namespaced_custom_object(KUEUE, "v1beta2", "default", "workloads", "wl")

    assert deleted["metadata"]["name"] == "wl"


def test_a_request_whose_body_never_arrives_changes_nothing(server: ApiServer, core: client.CoreV1Api) -> None:
    """A client killed between the headers and the body: the apiserver fails the read and acts
    on nothing (it must not run the DELETE without the preconditions the body carried)."""
    core.create_namespaced_pod("default", builders.pod("p"))
    host, port = server.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port))) as connection:
        connection.sendall(
            b"DELETE /api/v1/namespaces/default/pods/p HTTP/1.1\r\nHost: x\r\n"
            b"Content-Type: application/json\r\nContent-Length: 64\r\n\r\n"
        )
        connection.shutdown(socket.SHUT_WR)  # the body never comes
        assert connection.recv(1024) == b""  # no answer: the connection is closed
    assert server.requests.wait_for(lambda records: any(r.method == "DELETE" for r in records), 5)
    assert core.read_namespaced_pod("p", "default").metadata.name == "p"

"""The sandbox's deployment and replicaset controllers: Deployment -> ReplicaSet -> pods."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sky_kueue.sandbox.apiserver import ObjectStore
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.workloads.deployments import (
    POD_TEMPLATE_HASH_LABEL,
    DeploymentController,
    controlled_by,
    pod_template_hash,
)

WAIT_SECONDS = 10.0
LABELS = {"app": "web"}


def _deployment(replicas: int = 2, image: str = "example/web:1") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS), "annotations": {"note": "kept"}},
                "spec": {"containers": [{"name": "web", "image": image}]},
            },
        },
    }


@pytest.fixture
def store() -> Iterator[ObjectStore]:
    yield ObjectStore()  # "default" exists, as on a cluster


def _pods(store: ObjectStore) -> list[dict[str, Any]]:
    return [p for p in store.list("pods", "default").items if not p["metadata"].get("deletionTimestamp")]


def test_deployment_makes_one_replicaset_with_the_hash_and_owned_pods(store: ObjectStore) -> None:
    deployment = store.create("deployments.apps", _deployment())
    controller = DeploymentController(store)
    controller.reconcile()
    controller.reconcile()

    [replicaset] = store.list("replicasets.apps", "default").items
    template_hash = pod_template_hash(_deployment()["spec"]["template"])
    assert replicaset["metadata"]["name"] == f"web-{template_hash}"
    assert replicaset["metadata"]["labels"][POD_TEMPLATE_HASH_LABEL] == template_hash
    assert replicaset["spec"]["selector"]["matchLabels"] == {**LABELS, POD_TEMPLATE_HASH_LABEL: template_hash}
    assert controlled_by(replicaset, deployment)
    pods = _pods(store)
    assert len(pods) == 2
    for pod in pods:
        assert pod["metadata"]["name"].startswith(f"web-{template_hash}-")
        assert pod["metadata"]["labels"] == {**LABELS, POD_TEMPLATE_HASH_LABEL: template_hash}
        assert pod["metadata"]["annotations"] == {"note": "kept"}
        assert controlled_by(pod, replicaset)
        assert pod["spec"]["containers"][0]["image"] == "example/web:1"
    assert store.get("replicasets.apps", replicaset["metadata"]["name"], "default")["status"]["replicas"] == 2


def test_a_deleted_pod_is_recreated_and_scaling_down_deletes(store: ObjectStore) -> None:
    store.create("deployments.apps", _deployment(replicas=2))
    controller = DeploymentController(store)
    controller.reconcile()
    first = {p["metadata"]["name"] for p in _pods(store)}
    victim = sorted(first)[0]
    store.delete("pods", victim, "default")
    controller.reconcile()
    second = {p["metadata"]["name"] for p in _pods(store)}
    assert len(second) == 2 and victim not in second and (first - {victim}) <= second

    store.mutate("deployments.apps", "web", lambda d: d["spec"].__setitem__("replicas", 1), "default")
    controller.reconcile()
    assert len(_pods(store)) == 1


def test_a_new_template_gets_a_new_replicaset_and_the_old_one_scales_to_zero(store: ObjectStore) -> None:
    store.create("deployments.apps", _deployment(image="example/web:1"))
    controller = DeploymentController(store)
    controller.reconcile()
    store.mutate(
        "deployments.apps",
        "web",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].__setitem__("image", "example/web:2"),
        "default",
    )
    controller.reconcile()
    controller.reconcile()
    sets = {
        rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs
        for rs in store.list("replicasets.apps").items
    }
    assert sorted(sets) == ["1", "2"]
    assert sets["1"]["spec"]["replicas"] == 0 and sets["2"]["spec"]["replicas"] == 2
    assert {p["spec"]["containers"][0]["image"] for p in _pods(store)} == {"example/web:2"}


def test_deleting_the_deployment_collects_its_replicasets_and_pods(store: ObjectStore) -> None:
    store.create("deployments.apps", _deployment())
    controller = DeploymentController(store)
    controller.reconcile()
    store.delete("deployments.apps", "web", "default")
    assert store.list("replicasets.apps").items == []
    assert _pods(store) == []


def _wait(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_in_a_sandbox_pods_run_and_the_deployment_reports_available() -> None:
    """The running controller (its own thread) with the Kueue emulation's scheduling of
    unqueued pods: the Deployment's pods are bound, Running and Ready, and its status says so."""
    with Sandbox(step_interval_seconds=0.05) as sandbox:
        controller = DeploymentController(sandbox.store).start()
        try:
            sandbox.apply(_deployment(replicas=2))

            def available() -> bool:
                status = sandbox.store.get("deployments.apps", "web", "default").get("status") or {}
                return status.get("readyReplicas") == 2 and status.get("availableReplicas") == 2

            _wait(available, "two ready replicas")
            running = [p for p in _pods(sandbox.store) if p["status"]["phase"] == "Running"]
            assert len(running) == 2
            conditions = {
                c["type"]: c["status"]
                for c in sandbox.store.get("deployments.apps", "web", "default")["status"]["conditions"]
            }
            assert conditions["Available"] == "True"

            victim = running[0]["metadata"]["name"]
            sandbox.store.delete("pods", victim, "default")
            _wait(
                lambda: (
                    len([p for p in _pods(sandbox.store) if p["status"].get("phase") == "Running"]) == 2
                    and victim not in {p["metadata"]["name"] for p in _pods(sandbox.store)}
                ),
                "a replacement pod running",
            )
        finally:
            controller.stop()

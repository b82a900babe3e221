"""Initial sync: the mirror lists every kind, in the version discovery picked, and indexes it."""

from __future__ import annotations

import dataclasses

import pytest

from sky_kueue.mirror import Mirror, TransitionKind
from sky_kueue.mirror.kinds import KindName
from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from sky_kueue.sandbox.apiserver.resources import ResourceRegistry, default_resources
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, MirrorFactory, wait_converged


def _team(store: ObjectStore) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq-a", cohort="shared"))
    store.create("clusterqueues", builders.cluster_queue("cq-b", cohort="shared"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq-a"))


def test_initial_sync_copies_every_kind_and_reports_created(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _team(store)
    store.create("workloads", builders.workload("train-7-fcd1e5cf"))
    store.create("pods", builders.skypilot_pod("train-7-fcd1e5cf"))
    store.create("pods", {**builders.skypilot_pod("other"), "metadata": {"name": "plain", "namespace": "team-a"}})
    mirror = make_mirror()
    subscription = mirror.subscribe()

    mirror.wait_synced(WAIT_SECONDS)

    wait_converged(store, mirror)
    assert mirror.api.version == "v1beta2"
    assert [t.kind for t in subscription.drain()] == [TransitionKind.CREATED]
    assert mirror.store.count(KindName.POD) == 1  # only SkyPilot pod-group members are mirrored
    workload = mirror.store.get(KindName.WORKLOAD, "team-a/train-7-fcd1e5cf")
    assert workload is not None and workload["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_indexes_answer_by_queue_cohort_namespace_and_skypilot_identity(
    store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _team(store)
    store.create("workloads", builders.workload("train-7-fcd1e5cf"))
    store.create("workloads", builders.workload("other", cpu="2"))
    store.create("pods", builders.skypilot_pod("train-7-fcd1e5cf", job_id="7", job_name="train", user="alice"))
    builders.reserve_quota(store, "other", "team-a", "cq-b")
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    wait_converged(store, mirror)
    names = lambda objs: [o["metadata"]["name"] for o in objs]  # noqa: E731

    assert names(mirror.store.workloads(cluster_queue="cq-a")) == ["train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(cluster_queue="cq-b")) == ["other"]  # admitted there
    assert names(mirror.store.workloads(cohort="shared")) == ["other", "train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(local_queue="team-a/lq")) == ["other", "train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(namespace="team-a", managed_job_id="7")) == ["train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(managed_job_name="train", user="alice")) == ["train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(cluster="train-7-fcd1e5cf")) == ["train-7-fcd1e5cf"]
    assert names(mirror.store.workloads(pod_group="team-a/train-7-fcd1e5cf")) == ["train-7-fcd1e5cf"]
    identity = mirror.store.identity_of("team-a/train-7-fcd1e5cf")
    assert identity is not None and identity.display() == "train (#7)"


def _v1beta1_only() -> ResourceRegistry:
    return ResourceRegistry(
        dataclasses.replace(r, versions=("v1beta1",)) if r.group == "kueue.x-k8s.io" else r for r in default_resources()
    )


@pytest.mark.parametrize("served", ["both", "v1beta1-only"])
def test_reads_the_preferred_served_version(served: str, tmp_path: object) -> None:
    from pathlib import Path

    registry = _v1beta1_only() if served == "v1beta1-only" else None
    with ApiServer(store=ObjectStore(registry) if registry else None) as server:
        _team(server.store)
        server.store.create("workloads", builders.workload("w"))
        kubeconfig = server.write_kubeconfig(Path(str(tmp_path)) / "kubeconfig")
        with Mirror.connect(kubeconfig, retries=False) as mirror:
            mirror.wait_synced(WAIT_SECONDS)
            cq = mirror.store.get(KindName.CLUSTER_QUEUE, "cq-a")

    expected = "v1beta1" if served == "v1beta1-only" else "v1beta2"
    assert mirror.api.version == expected
    assert cq is not None and cq["apiVersion"] == f"kueue.x-k8s.io/{expected}"
    cohort_field = "cohort" if expected == "v1beta1" else "cohortName"
    assert cq["spec"][cohort_field] == "shared"
    state = mirror.cluster_state()
    assert state.cluster_queues["cq-a"].cohort == "shared"
    assert "team-a/w" in state.workloads

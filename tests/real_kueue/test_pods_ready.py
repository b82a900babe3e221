"""Kueue's waitForPodsReady path on a cluster that turns it on (Kueue v0.17 leaves it off by
default): a SkyPilot group whose pods never become Ready is evicted with ``PodsReadyTimeout``
and, being unretriable, finishes; the controller records an eviction, not a preemption, and
ages nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.realcluster import build, versions
from sky_kueue.realcluster.cluster import ClusterError, RealCluster
from sky_kueue.realcluster.manifests import NEVER_READY_LABEL
from tests.controller.live_support import demo_aging
from tests.real_kueue.support import KueueCluster, condition_true, conditions, running_controller
from tests.real_kueue.test_preemption import admitted, seed, skypilot_pod

#: Kueue's waitForPodsReady timeout on this cluster (seconds).
PODS_READY_TIMEOUT_SECONDS = 10


@pytest.fixture(scope="module")
def pods_ready_kueue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KueueCluster]:
    binaries = build.ensure_built(versions.load_pins())
    cluster = RealCluster(
        tmp_path_factory.mktemp("pods-ready-cluster"), binaries, wait_for_pods_ready_seconds=PODS_READY_TIMEOUT_SECONDS
    )
    try:
        cluster.up()
    except ClusterError as err:
        pytest.fail(f"the waitForPodsReady cluster did not start: {err}", pytrace=False)
    try:
        yield KueueCluster(cluster)
    finally:
        cluster.down()


def test_a_group_that_never_gets_ready_is_evicted_and_not_counted_as_a_preemption(
    pods_ready_kueue: KueueCluster, tmp_path: Path
) -> None:
    kueue = pods_ready_kueue
    seed(kueue)
    try:
        with running_controller(
            kueue.cluster, tmp_path / "controller.db", demo_aging(), identity="real-kueue-pods-ready"
        ) as (_, store):
            stuck = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="2")
            stuck["metadata"]["labels"][NEVER_READY_LABEL] = "true"
            group = stuck["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
            kueue.create_pod(stuck)
            first = kueue.wait_workload("team-b", group, admitted, "admitted")
            assert conditions(first).get("PodsReady", {}).get("status") != "True"
            evicted = kueue.wait_workload(
                "team-b",
                group,
                lambda w: condition_true(w, "Evicted"),
                "evicted for PodsReadyTimeout",
                timeout=PODS_READY_TIMEOUT_SECONDS + 60,
            )
            assert conditions(evicted)["Evicted"]["reason"] == "PodsReadyTimeout", conditions(evicted)
            assert conditions(evicted)["PodsReady"]["status"] == "False"
            history = kueue.wait(
                "the controller's record of the eviction",
                lambda: (lambda h: h if h is not None and h.evictions else None)(store.load("managed-job/1")),
            )
            assert [e.reason for e in history.evictions] == ["PodsReadyTimeout"], history.evictions
            assert history.preemptions == () and all(step.boost == 0 for step in history.steps), history.steps
    finally:
        kueue.reset()

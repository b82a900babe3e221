"""The real cluster for the real-Kueue tier: built (or found cached) and started once per run.

Every test here is marked ``real_kueue`` (deselected unless ``--real-kueue``, see
``tests/conftest.py``). A cluster that cannot be built or started fails the tests that need
it, with the component's log named; it never skips them.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.realcluster import build, versions
from sky_kueue.realcluster.cluster import ClusterError, RealCluster
from tests.real_kueue.support import REPO, KueueCluster


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).is_relative_to(here):
            item.add_marker(pytest.mark.real_kueue)


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    try:
        binaries = build.ensure_built(versions.load_pins())
    except build.BuildError as err:
        pytest.fail(f"the real cluster cannot be built: {err}", pytrace=False)
    cluster = RealCluster(tmp_path_factory.mktemp("real-cluster"), binaries)
    try:
        cluster.up()
    except ClusterError as err:
        pytest.fail(f"the real cluster did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.down()


#: The taint the real-node cluster puts on its KWOK nodes: only pods that tolerate it (the tests'
#: SkyPilot-shaped pods) land there, so everything else (the controller's pods) runs on the real node.
KWOK_TAINT = {"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}
#: Images the real node imports at start: the Debian base (test pods) and the controller's image.
REAL_NODE_IMAGES = ("debian:bookworm", "ghcr.io/sky-kueue/sky-kueue:0.1.0")


@pytest.fixture(scope="session")
def real_node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    """A second real cluster: 2 KWOK nodes (tainted) and a real node (kubelet, containerd; root)."""
    from sky_kueue.sandbox.containers import recipes_controller

    if recipes_controller.CONTROLLER is None:
        pytest.fail("the controller's image is built from a checkout; this is not one", pytrace=False)
    try:
        binaries = build.ensure_built(versions.load_pins())
    except build.BuildError as err:
        pytest.fail(f"the real cluster cannot be built: {err}", pytrace=False)
    # under /tmp: the node's paths (overlay mounts, sockets) stay short
    cluster = RealCluster(
        Path(tempfile.mkdtemp(prefix="real-node-", dir="/tmp")), binaries, real_node=True, node_images=REAL_NODE_IMAGES
    )
    try:
        cluster.up()
        core = cluster.core()
        for node in core.list_node(label_selector="type=kwok").items:
            core.patch_node(node.metadata.name, {"spec": {"taints": [KWOK_TAINT]}})
    except ClusterError as err:
        pytest.fail(f"the real cluster with a real node did not start: {err}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.down()


@pytest.fixture
def kueue(real_cluster: RealCluster) -> Iterator[KueueCluster]:
    """The real cluster, emptied of every Kueue object and team pod after the test."""
    helper = KueueCluster(real_cluster)
    try:
        yield helper
    finally:
        helper.reset()


@pytest.fixture
def cli_env(real_cluster: RealCluster, tmp_path: Path) -> dict[str, str]:
    """The environment of a ``sky-kueue`` process pointed at the real cluster."""
    env = dict(os.environ)
    env["KUBECONFIG"] = str(real_cluster.kubeconfig)
    env["HOME"] = str(tmp_path / "home")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env

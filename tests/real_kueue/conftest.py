"""The real cluster for the real-Kueue tier: built (or found cached) and started once per run.

Every test here is marked ``real_kueue`` (deselected unless ``--real-kueue``, see
``tests/conftest.py``). A cluster that cannot be built or started fails the tests that need
it, with the component's log named; it never skips them.
"""

from __future__ import annotations

import os
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

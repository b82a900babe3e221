"""Fixtures shared by the controller's unit tests: a manual clock and a history store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.history import HistoryStore
from sky_kueue.controller.kube_store import KubernetesHistoryStore, RetryPolicy
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.sandbox.apiserver import ApiServer

from .builders import T0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteHistoryStore]:
    s = SqliteHistoryStore(tmp_path / "history.db")
    yield s
    s.close()


#: The namespace the Kubernetes store writes to in tests (as the Deployment's).
STORE_NAMESPACE = "sky-kueue-system"
#: Retries in tests never sleep: the policy's waits are recorded instead.
NO_SLEEP_RETRY = RetryPolicy(sleep=lambda seconds: None)


@pytest.fixture
def api_server() -> Iterator[ApiServer]:
    with ApiServer() as running:
        yield running


def sandbox_client(server: ApiServer) -> client.ApiClient:
    """An official client for ``server`` with urllib3's own retries off (faults stay visible)."""
    configuration = client.Configuration()
    configuration.host = server.url
    configuration.retries = False
    return client.ApiClient(configuration)


def kubernetes_store(server: ApiServer, **options: object) -> KubernetesHistoryStore:
    api = sandbox_client(server)
    if server.store.try_get("namespaces", STORE_NAMESPACE) is None:
        client.CoreV1Api(api).create_namespace({"metadata": {"name": STORE_NAMESPACE}})
    options.setdefault("retry", NO_SLEEP_RETRY)
    return KubernetesHistoryStore(api, STORE_NAMESPACE, **options)  # type: ignore[arg-type]


@pytest.fixture(params=["sqlite", "kubernetes"])
def history_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HistoryStore]:
    """Each store behind the HistoryStore protocol: the contract tests run against both."""
    if request.param == "sqlite":
        s: HistoryStore = SqliteHistoryStore(tmp_path / "history.db")
        yield s
        s.close()
        return
    with ApiServer() as server:
        k = kubernetes_store(server)
        yield k
        k.close()

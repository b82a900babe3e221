"""Fixtures: a fresh API server per test and official-client APIs pointed at it.

Every client has ``retries = False`` so that injected faults reach the test instead of being
retried away by urllib3.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore

#: Bookmark cadence in tests: short, so bookmark tests finish fast.
TEST_BOOKMARK_INTERVAL_SECONDS = 0.05


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS) as running:
        yield running


@pytest.fixture
def store(server: ApiServer) -> ObjectStore:
    return server.store


@pytest.fixture
def api_client(server: ApiServer) -> Iterator[client.ApiClient]:
    configuration = client.Configuration()
    configuration.host = server.url
    configuration.retries = False
    with client.ApiClient(configuration) as api:
        yield api


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)


@pytest.fixture
def batch(api_client: client.ApiClient) -> client.BatchV1Api:
    return client.BatchV1Api(api_client)


@pytest.fixture
def coordination(api_client: client.ApiClient) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client)


@pytest.fixture
def custom(api_client: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api_client)

"""Fixtures: a sandbox API server per test, its kubeconfig, and mirrors pointed at it.

Mirrors connect through the official client with ``retries = False`` so injected faults are
visible, and with a recording sleep: backoff delays are observed (and asserted) without
being waited, which keeps fault tests fast and free of timing assumptions.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sky_kueue.mirror import Mirror
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore

#: Bookmark cadence in tests (seconds).
TEST_BOOKMARK_INTERVAL_SECONDS = 0.1
#: Generous bound on any wait in these tests (seconds); they normally finish in milliseconds.
WAIT_SECONDS = 10.0
#: Kinds and the sandbox resource each is stored under.
RESOURCES = {
    KindName.WORKLOAD: "workloads",
    KindName.CLUSTER_QUEUE: "clusterqueues",
    KindName.LOCAL_QUEUE: "localqueues",
    KindName.COHORT: "cohorts",
    KindName.RESOURCE_FLAVOR: "resourceflavors",
    KindName.WORKLOAD_PRIORITY_CLASS: "workloadpriorityclasses",
    KindName.NAMESPACE: "namespaces",
    KindName.POD: "pods",
}
POD_SELECTOR = "parent=skypilot,kueue.x-k8s.io/pod-group-name"


@pytest.fixture(autouse=True)
def no_plugin_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``predict --task`` reads the plugin config from ``$SKY_KUEUE_CONFIG`` (else
    ``~/.sky/sky-kueue.yaml``): these tests predict tasks as written, whatever the machine has."""
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(tmp_path / "no-plugin-config.yaml"))


class RecordingSleep:
    """Records requested delays; returns at once unless a gate is armed, then waits for it."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self._gate: threading.Event | None = None
        self.sleeping = threading.Event()

    def arm(self) -> threading.Event:
        """The next sleep blocks until the returned event is set."""
        self._gate = threading.Event()
        self.sleeping.clear()
        return self._gate

    def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
        gate, self._gate = self._gate, None
        if gate is not None:
            self.sleeping.set()
            gate.wait(WAIT_SECONDS)


@pytest.fixture
def server() -> Iterator[ApiServer]:
    with ApiServer(bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS) as running:
        yield running


@pytest.fixture
def store(server: ApiServer) -> ObjectStore:
    return server.store


@pytest.fixture
def kubeconfig(server: ApiServer, tmp_path: Path) -> Path:
    return server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
def sleep() -> RecordingSleep:
    return RecordingSleep()


MirrorFactory = Callable[..., Mirror]


@pytest.fixture
def make_mirror(kubeconfig: Path, sleep: RecordingSleep) -> Iterator[MirrorFactory]:
    """Build (not start) mirrors on the test server; all are stopped at teardown."""
    made: list[Mirror] = []

    def make(**options: object) -> Mirror:
        options.setdefault("sleep", sleep)
        options.setdefault("settings", ReflectorSettings(watch_read_timeout_seconds=30))
        mirror = Mirror.connect(kubeconfig, retries=False, **options)  # type: ignore[arg-type]
        made.append(mirror)
        return mirror

    yield make
    for mirror in made:
        mirror.stop()


def server_versions(store: ObjectStore, kind: KindName) -> dict[str, str]:
    """key -> resourceVersion of what the server holds (same selector as the mirror)."""
    selector = POD_SELECTOR if kind is KindName.POD else None
    out = {}
    for obj in store.list(RESOURCES[kind], label_selector=selector).items:
        meta = obj["metadata"]
        key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
        out[key] = str(meta["resourceVersion"])
    return out


def converged(server_store: ObjectStore, mirror_store: MirrorStore) -> bool:
    """Whether the mirror holds exactly the server's objects, at the server's versions."""
    return all(mirror_store.resource_versions(kind) == server_versions(server_store, kind) for kind in RESOURCES)


def wait_converged(server_store: ObjectStore, mirror: Mirror) -> None:
    assert mirror.wait_for(lambda s: converged(server_store, s), WAIT_SECONDS), _diff(server_store, mirror.store)


def _diff(server_store: ObjectStore, mirror_store: MirrorStore) -> str:
    lines = []
    for kind in RESOURCES:
        mine, theirs = mirror_store.resource_versions(kind), server_versions(server_store, kind)
        if mine != theirs:
            lines.append(f"{kind.value}: mirror {mine} != server {theirs}")
    return "; ".join(lines)

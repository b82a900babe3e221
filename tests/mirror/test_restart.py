"""An API server that restarts with a fresh store (its resourceVersions start over) under a
running mirror: the resumed watch asks for a version the new server never reached, the
server answers 504 "Too large resource version", and the mirror relists and converges - it
drops what the new server does not hold and shows what it does."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from sky_kueue.mirror import Mirror
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.sandbox.apiserver import ApiServer
from tests.mirror import builders
from tests.mirror.conftest import TEST_BOOKMARK_INTERVAL_SECONDS, WAIT_SECONDS, RecordingSleep, wait_converged


def test_a_restarted_server_is_relisted_and_converged(tmp_path: Path) -> None:
    first = ApiServer(bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS).start()
    port = urlsplit(first.url).port
    assert port is not None
    kubeconfig = first.write_kubeconfig(tmp_path / "kubeconfig")
    store = first.store
    store.create("namespaces", builders.namespace("team-a"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq"))
    for i in range(30):
        store.create("workloads", builders.workload(f"old-{i}", "team-a"))
    mirror = Mirror.connect(
        kubeconfig, retries=False, sleep=RecordingSleep(), settings=ReflectorSettings(watch_read_timeout_seconds=30)
    )
    second: ApiServer | None = None
    try:
        mirror.start()
        mirror.wait_synced(WAIT_SECONDS)
        wait_converged(store, mirror)
        first.stop()

        second = ApiServer("127.0.0.1", port, bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS).start()
        fresh = second.store
        fresh.create("namespaces", builders.namespace("team-a"))
        fresh.create("resourceflavors", builders.flavor())
        fresh.create("clusterqueues", builders.cluster_queue("cq"))
        fresh.create("localqueues", builders.local_queue("lq", "team-a", "cq"))
        fresh.create("workloads", builders.workload("new-0", "team-a"))
        assert fresh.resource_version < store.resource_version  # the new server starts over

        wait_converged(fresh, mirror)
        names = sorted(key.rpartition("/")[2] for key in mirror.store.resource_versions(KindName.WORKLOAD))
        relisted = mirror.reflectors[KindName.WORKLOAD].resyncs_after_restart
    finally:
        mirror.stop()
        if second is not None:
            second.stop()
        first.stop()
    assert names == ["new-0"]
    assert relisted >= 1

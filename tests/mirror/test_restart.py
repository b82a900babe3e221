"""An API server whose state goes back under a running mirror (issue 36, item 4).

* Restarted with a fresh store (another cluster: its resourceVersions start over, its
  ``kube-system`` UID is new): the mirror notices the identity before resuming its watches
  (or, when the identity cannot be read, the server answers the resumed watch 504 "Too large
  resource version" and the list is older than what was seen), relists, converges - it drops
  what the new server does not hold and shows what it does - and says ``reset``.
* Restored to an older snapshot (same identity, same UIDs): the relist is older than what
  the mirror delivered, which is a reset too.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

import pytest

from sky_kueue.mirror import Mirror
from sky_kueue.mirror.cluster_identity import IDENTITY_NAMESPACE
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.mirror.server_state import ResetReason, went_back
from sky_kueue.mirror.transitions import Transition, TransitionKind
from sky_kueue.sandbox.apiserver import ApiServer, FaultKind
from tests.mirror import builders
from tests.mirror.conftest import TEST_BOOKMARK_INTERVAL_SECONDS, WAIT_SECONDS, RecordingSleep, wait_converged


def _resets(transitions: list[Transition]) -> list[ResetReason | None]:
    return [t.reset for t in transitions if t.kind is TransitionKind.SYNCED and t.reset is not None]


@pytest.mark.parametrize("identity_readable", [True, False])
def test_a_restarted_server_is_relisted_and_converged(tmp_path: Path, identity_readable: bool) -> None:
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
    synced: list[Transition] = []
    mirror.subscribe({TransitionKind.SYNCED}, sink=synced.append)
    try:
        mirror.start()
        mirror.wait_synced(WAIT_SECONDS)
        wait_converged(store, mirror)
        first.stop()

        second = ApiServer("127.0.0.1", port, bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS)
        if not identity_readable:
            second.inject(FaultKind.STATUS, verb="get", resource="namespaces", status_code=403, times=1000)
        second.start()
        fresh = second.store
        fresh.create("namespaces", builders.namespace("team-a"))
        fresh.create("resourceflavors", builders.flavor())
        fresh.create("clusterqueues", builders.cluster_queue("cq"))
        fresh.create("localqueues", builders.local_queue("lq", "team-a", "cq"))
        fresh.create("workloads", builders.workload("new-0", "team-a"))
        assert fresh.resource_version < store.resource_version  # the new server starts over

        wait_converged(fresh, mirror)
        names = sorted(key.rpartition("/")[2] for key in mirror.store.resource_versions(KindName.WORKLOAD))
        reflector = mirror.reflectors[KindName.WORKLOAD]
        relisted, resets = reflector.resyncs_after_restart, reflector.state_resets
    finally:
        mirror.stop()
        if second is not None:
            second.stop()
        first.stop()
    assert names == ["new-0"]
    assert resets >= 1
    if identity_readable:
        assert ResetReason.CLUSTER in _resets(synced)
    else:  # noticed by the 504 and the older list alone
        assert relisted >= 1
        assert ResetReason.RESOURCE_VERSION in _resets(synced)


def test_a_server_restored_to_an_older_state_is_a_reset(tmp_path: Path) -> None:
    server = ApiServer(bookmark_interval_seconds=TEST_BOOKMARK_INTERVAL_SECONDS).start()
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    store = server.store
    store.create("namespaces", builders.namespace("team-a"))
    store.create("workloads", builders.workload("kept", "team-a"))
    snapshot = store.resource_version
    mirror = Mirror.connect(
        kubeconfig, retries=False, sleep=RecordingSleep(), settings=ReflectorSettings(watch_read_timeout_seconds=30)
    )
    synced: list[Transition] = []
    mirror.subscribe({TransitionKind.SYNCED}, sink=synced.append)
    try:
        mirror.start()
        mirror.wait_synced(WAIT_SECONDS)
        for i in range(5):
            store.create("workloads", builders.workload(f"late-{i}", "team-a"))
        wait_converged(store, mirror)
        seen = mirror.delivered_version(KindName.WORKLOAD)

        server.restart(lambda s: s.restore(snapshot))
        assert store.try_get("namespaces", IDENTITY_NAMESPACE) is not None  # the same cluster
        wait_converged(store, mirror)
        names = sorted(key.rpartition("/")[2] for key in mirror.store.resource_versions(KindName.WORKLOAD))
    finally:
        mirror.stop()
        server.stop()
    assert names == ["kept"]
    assert went_back(seen, str(snapshot))
    # Every kind that had seen a newer version (Workloads did) says why; none blames the cluster.
    assert ResetReason.RESOURCE_VERSION in _resets(synced)
    assert ResetReason.CLUSTER not in _resets(synced)

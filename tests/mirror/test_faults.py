"""Every injected fault, then convergence to exactly the server's state (``fake-apiserver.md``).

Each test arms a fault, lets the mirror meet it, writes more, and checks that the mirror
holds every object at the server's resourceVersion - and that recovery took the cheap path
(resume from the last resourceVersion) unless only a relist can help (410).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sky_kueue.mirror import Mirror, TransitionKind
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.sandbox.apiserver import ApiServer, FaultKind, ObjectStore
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, MirrorFactory, RecordingSleep, wait_converged


def _setup(store: ObjectStore) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq"))
    store.create("workloads", builders.workload("before", "team-a"))


def _churn(store: ObjectStore, prefix: str, count: int = 3) -> None:
    for i in range(count):
        store.create("workloads", builders.workload(f"{prefix}-{i}", "team-a"))
    builders.reserve_quota(store, f"{prefix}-0", "team-a", "cq")
    store.delete("workloads", f"{prefix}-1", "team-a")


def _workloads(mirror: Mirror) -> tuple[int, int]:
    reflector = mirror.reflectors[KindName.WORKLOAD]
    return reflector.lists, reflector.watches


@pytest.mark.parametrize("kind", [FaultKind.WATCH_CUT, FaultKind.WATCH_END])
def test_dropped_or_ended_watch_resumes_from_the_last_resource_version(
    kind: FaultKind, server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    fault = server.inject(kind, resource="workloads", after_events=1)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)

    _churn(store, "during")
    wait_converged(store, mirror)
    _churn(store, "after")
    wait_converged(store, mirror)

    assert fault.fired == 1
    assert _workloads(mirror) == (1, 2)  # resumed, never relisted


def test_watch_resumes_exactly_after_the_last_event_seen(tmp_path: Path) -> None:
    # No bookmarks here: the only event before the cut is the first Workload.
    with ApiServer(bookmark_interval_seconds=3600) as quiet:
        _setup(quiet.store)
        quiet.inject(FaultKind.WATCH_CUT, resource="workloads", after_events=1)
        quiet.inject(FaultKind.WATCH_END, resource="workloads", after_events=1)  # so the log records it
        with Mirror.connect(quiet.write_kubeconfig(tmp_path / "kubeconfig"), retries=False) as mirror:
            mirror.wait_synced(WAIT_SECONDS)
            first = quiet.store.create("workloads", builders.workload("first", "team-a"))
            quiet.store.create("workloads", builders.workload("second", "team-a"))
            wait_converged(quiet.store, mirror)

            # The log records a watch when it ends; the resumed one ends by the injected clean end.
            def two_watches(records: list[Any]) -> bool:
                return sum(1 for r in records if r.verb == "watch" and r.resource == "workloads") >= 2

            assert quiet.requests.wait_for(two_watches, WAIT_SECONDS)
            cut, resumed = quiet.requests.matching(verb="watch", resource="workloads")[:2]
            assert resumed.query["resourceVersion"] == first["metadata"]["resourceVersion"]
            assert (resumed.query.get("allowWatchBookmarks") or "").lower() == "true"
            assert int(cut.query["resourceVersion"]) < int(resumed.query["resourceVersion"])


@pytest.mark.parametrize("verb", ["list", "watch"])
def test_server_errors_are_retried_with_backoff(
    verb: str, server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory, sleep: RecordingSleep
) -> None:
    _setup(store)
    fault = server.inject(FaultKind.STATUS, verb=verb, resource="workloads", status_code=500, times=2)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    _churn(store, "after")

    wait_converged(store, mirror)
    assert fault.fired == 2
    assert len(sleep.delays) >= 2
    assert sleep.delays[1] > 0  # jittered, bounded exponential steps
    assert all(delay <= 30 for delay in sleep.delays)


@pytest.mark.parametrize("verb", ["list", "watch"])
def test_throttling_waits_at_least_retry_after(
    verb: str, server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory, sleep: RecordingSleep
) -> None:
    _setup(store)
    fault = server.inject(FaultKind.THROTTLE, verb=verb, resource="workloads", retry_after_seconds=7)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    _churn(store, "after")

    wait_converged(store, mirror)
    assert fault.fired == 1
    assert max(sleep.delays) >= 7


def test_expired_continue_token_restarts_the_list(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    _churn(store, "many", count=5)
    server.inject(FaultKind.DELAY, verb="list", resource="workloads", delay_seconds=0)  # the first page passes
    expired = server.inject(FaultKind.STATUS, verb="list", resource="workloads", status_code=410)
    mirror = make_mirror(settings=ReflectorSettings(page_size=2))
    mirror.wait_synced(WAIT_SECONDS)

    wait_converged(store, mirror)
    assert expired.fired == 1
    assert _workloads(mirror)[0] == 1  # one complete list, started over after the 410


def test_connection_dropped_before_the_answer_is_retried(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    fault = server.inject(FaultKind.DROP_CONNECTION, verb="list", resource="workloads")
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    _churn(store, "after")

    wait_converged(store, mirror)
    assert fault.fired == 1


def test_slow_watch_beyond_the_read_timeout_is_abandoned_and_resumed(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    server.inject(FaultKind.DELAY, verb="watch", resource="workloads", delay_seconds=1.5)
    server.inject(FaultKind.DELAY, verb="list", resource="clusterqueues", delay_seconds=0.2)  # slow but in time
    mirror = make_mirror(settings=ReflectorSettings(watch_read_timeout_seconds=1))
    mirror.wait_synced(WAIT_SECONDS)
    _churn(store, "after")

    wait_converged(store, mirror)
    assert _workloads(mirror) == (1, 2)


def test_error_410_event_makes_the_mirror_relist(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    fault = server.inject(FaultKind.WATCH_GONE, resource="workloads", after_events=1)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)

    _churn(store, "during")
    wait_converged(store, mirror)
    _churn(store, "after")
    wait_converged(store, mirror)

    assert fault.fired == 1
    assert _workloads(mirror)[0] == 2


def test_real_410_after_compaction_relists_and_reports_what_vanished(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory, sleep: RecordingSleep
) -> None:
    _setup(store)
    store.create("workloads", builders.workload("doomed", "team-a"))
    # The first Workload watch fails; while the reflector backs off, the cluster moves on
    # and history is compacted, so resuming from the list's version can only get 410.
    server.inject(FaultKind.STATUS, verb="watch", resource="workloads", status_code=503)
    gate = sleep.arm()
    mirror = make_mirror()
    deleted = mirror.subscribe({TransitionKind.DELETED})
    mirror.wait_synced(WAIT_SECONDS)
    assert sleep.sleeping.wait(WAIT_SECONDS)

    store.delete("workloads", "doomed", "team-a")
    _churn(store, "away")
    store.compact()
    gate.set()

    wait_converged(store, mirror)
    _churn(store, "after")
    wait_converged(store, mirror)
    assert _workloads(mirror)[0] == 2
    gone = [deleted.get(WAIT_SECONDS) for _ in range(2)]
    assert sorted(t.key for t in gone if t is not None) == ["team-a/after-1", "team-a/doomed"]
    statuses = [r.status for r in server.requests.matching(verb="watch", resource="workloads")]
    assert statuses[:2] == [503, 200]  # the second watch answered 200 with an ERROR 410 event


def test_faults_on_every_kind_at_once_still_converge(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    store.create("pods", builders.skypilot_pod("g", "team-a"))
    for resource in ("namespaces", "clusterqueues", "localqueues", "resourceflavors", "pods"):
        server.inject(FaultKind.WATCH_CUT, resource=resource, after_events=0)
        server.inject(FaultKind.STATUS, verb="list", resource=resource, status_code=502)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)

    store.create("clusterqueues", builders.cluster_queue("cq-2"))
    store.create("localqueues", builders.local_queue("lq-2", "team-a", "cq-2"))
    store.create("pods", builders.skypilot_pod("h", "team-a", job_id="8"))
    store.delete("pods", "g-head", "team-a")
    wait_converged(store, mirror)
    assert mirror.store.identity_of("team-a/h") is not None

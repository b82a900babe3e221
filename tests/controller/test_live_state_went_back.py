"""Nothing is lost when the API server's state goes back under a running controller.

Two ways it goes back (issue 36, item 4), both with the controller's Workload watch far
ahead of what the server now holds:

* **Restored** (an etcd snapshot restore): the same objects, UIDs and resourceVersions as
  at the snapshot; the server's newest version is older than the one the controller had
  handled. The relist after the server's "too large resource version" answer is older than
  the saved position.
* **Replaced** (a fresh cluster, or a sandbox restarted empty): another ``kube-system``
  UID; the new server has already passed the saved version, so a resumed watch is
  accepted and would silently skip every change the new server made before that version.

Meanwhile the team-b job's Workload is preempted by team-a, collected and relaunched, so
it is absent from every list the controller can make. The controller must log the reset,
count it, and record what happened to the Workload it last saw running: here nothing
remains that says how it ended, so it is recorded as an eviction of unknown kind, not
counted toward aging (never silently dropped).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller.metrics import ControllerMetrics
from sky_kueue.controller.vanished import UNKNOWN_END_KIND
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.seed import seed_setup

from .live_support import TEST_LEASE_SECONDS, WORKLOADS, Live, demo_aging, group_pod, live_sandbox

DEV = "dev-1-fcd1e5cf"
#: Writes of unrelated objects that move the resourceVersion well past the preemption's.
PADDING_WRITES = 60


def _pad(store: ObjectStore, prefix: str) -> None:
    for index in range(PADDING_WRITES):
        store.create("configmaps", {"metadata": {"name": f"{prefix}-{index}", "namespace": "default"}})


def _preempt_collect_and_relaunch(sandbox: Sandbox, live: Live) -> None:
    """team-a preempts the dev job, its Workload is collected, SkyPilot relaunches it."""
    sandbox.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2"))
    live.clock.advance(60)
    assert sandbox.step().preempted == [f"team-b/{DEV}"]
    sandbox.step()
    assert sandbox.store.try_get(WORKLOADS, DEV, "team-b") is None
    live.clock.advance(20)
    sandbox.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
    sandbox.step()


def _label(obj: dict[str, Any]) -> None:
    obj["metadata"].setdefault("labels", {})["example.com/touched"] = "true"


def _handle_far_ahead(live: Live) -> int:
    """Moves the server far ahead and lets the controller handle a Workload change there;
    returns the Workload version it handled."""
    _pad(live.sandbox.store, "ahead")
    live.sandbox.store.mutate(WORKLOADS, DEV, _label, "team-b")
    live.settle()
    handled = live.controller.handled_workload_version()
    assert handled is not None
    return handled


def _watch_again(live: Live, sandbox: Sandbox) -> None:
    """Point the harness's own change watch at the server's new state."""
    if live.changes is not None:
        live.changes.close()
    live.sandbox = sandbox
    live.changes = sandbox.store.watch(WORKLOADS)
    live.last_workload_change = 0


def _assert_reported(live: Live, first_uid: str, metrics: ControllerMetrics, reason: str) -> None:
    history = live.history("1")
    ends = [e for e in history.evictions if e.key.workload_uid == first_uid]
    assert [e.kind for e in ends] == [UNKNOWN_END_KIND]
    assert history.preemption_count == 0  # an unknown end does not age the relaunch
    resets = metrics.registry.get_sample_value("sky_kueue_controller_state_resets_total", {"reason": reason})
    unknown = metrics.registry.get_sample_value("sky_kueue_controller_unobserved_ends_total", {"outcome": "unknown"})
    assert resets is not None and resets >= 1
    assert unknown == 1


def test_a_restored_older_state_is_reconciled_and_the_vanished_workload_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with live_sandbox(tmp_path) as live:
        metrics = ControllerMetrics(clock=live.now)
        live.new_controller(demo_aging(), observers=[metrics.observe])
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]
        snapshot = live.sandbox.store.resource_version
        handled = _handle_far_ahead(live)
        assert handled > snapshot + PADDING_WRITES

        def restore_then_preempt(store: ObjectStore) -> None:
            store.restore(snapshot)
            _preempt_collect_and_relaunch(live.sandbox, live)
            assert store.resource_version < handled  # the server's state is older than the controller's

        live.sandbox.server.restart(restore_then_preempt)
        _watch_again(live, live.sandbox)
        live.settle()

        _assert_reported(live, first_uid, metrics, "resource-version")
        assert any("state went back" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


def test_a_fresh_cluster_that_passed_the_saved_version_is_relisted_and_the_vanished_workload_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with live_sandbox(tmp_path) as live:
        metrics = ControllerMetrics(clock=live.now)
        live.new_controller(demo_aging(), observers=[metrics.observe])
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]
        handled = _handle_far_ahead(live)

        old = live.sandbox
        fresh = Sandbox(port=old.server.port, clock=live.clock, run_emulator=False)
        try:
            # The new cluster runs the same jobs; its resourceVersions start over and pass the
            # controller's before it reconnects, so its changes up to there are never replayed.
            fresh.apply(seed_setup())
            fresh.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
            assert fresh.step().admitted == [f"team-b/{DEV}"]
            _preempt_collect_and_relaunch(fresh, live)
            assert fresh.store.resource_version < handled
            _pad(fresh.store, "fresh-1")
            _pad(fresh.store, "fresh-2")
            assert fresh.store.resource_version > handled
            old.stop()
            fresh.start()
            _watch_again(live, fresh)
            live.settle()
            _assert_reported(live, first_uid, metrics, "cluster")
            assert any("state went back" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)
        finally:
            fresh.stop()


def test_a_controller_restarted_on_a_fresh_cluster_does_not_resume_from_the_old_clusters_cursor(
    tmp_path: Path,
) -> None:
    with live_sandbox(tmp_path) as live:
        first = live.new_controller(demo_aging(), identity="first")
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]
        handled = _handle_far_ahead(live)
        first.stop()  # saves the cursor and the cluster it belongs to
        assert live.runtime.cursor("workloads") == str(handled)
        old_cluster = live.runtime.cursor("workloads-cluster")
        assert old_cluster is not None

        old = live.sandbox
        fresh = Sandbox(port=old.server.port, clock=live.clock, run_emulator=False)
        try:
            fresh.apply(seed_setup())
            fresh.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
            assert fresh.step().admitted == [f"team-b/{DEV}"]
            _preempt_collect_and_relaunch(fresh, live)
            _pad(fresh.store, "fresh-1")
            _pad(fresh.store, "fresh-2")
            assert fresh.store.resource_version > handled
            old.stop()
            fresh.start()
            _watch_again(live, fresh)
            metrics = ControllerMetrics(clock=live.now)
            live.new_controller(demo_aging(), identity="second", observers=[metrics.observe])
            _assert_reported(live, first_uid, metrics, "cluster")
            assert live.runtime.cursor("workloads-cluster") not in (None, old_cluster)
        finally:
            fresh.stop()


def test_a_workload_that_vanished_in_a_watch_gap_is_reported_too(tmp_path: Path) -> None:
    # Not a reset: the state moves forward, but the history the watch would resume from is
    # compacted (410 Gone), as after ``etcdutl snapshot restore --bump-revision --mark-compacted``.
    with live_sandbox(tmp_path) as live:
        metrics = ControllerMetrics(clock=live.now)
        live.new_controller(demo_aging(), observers=[metrics.observe])
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]

        def preempt_then_compact(store: ObjectStore) -> None:
            _preempt_collect_and_relaunch(live.sandbox, live)
            store.compact()

        live.sandbox.server.restart(preempt_then_compact)
        live.settle()

        history = live.history("1")
        assert [e.kind for e in history.evictions if e.key.workload_uid == first_uid] == [UNKNOWN_END_KIND]
        assert (
            metrics.registry.get_sample_value("sky_kueue_controller_unobserved_ends_total", {"outcome": "unknown"}) == 1
        )
        assert (
            metrics.registry.get_sample_value("sky_kueue_controller_state_resets_total", {"reason": "cluster"}) is None
        )


def test_a_controller_restarted_after_a_restore_finds_its_saved_position_ahead_of_the_list(tmp_path: Path) -> None:
    # The finding as reported: the saved cursor (1097 there) is ahead of the new list (1061).
    with live_sandbox(tmp_path) as live:
        first = live.new_controller(demo_aging(), identity="first")
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]
        snapshot = live.sandbox.store.resource_version
        handled = _handle_far_ahead(live)
        first.stop()

        def restore_then_preempt(store: ObjectStore) -> None:
            store.restore(snapshot)
            _preempt_collect_and_relaunch(live.sandbox, live)

        live.sandbox.server.restart(restore_then_preempt)
        _watch_again(live, live.sandbox)
        assert live.sandbox.store.resource_version < handled == int(live.runtime.cursor("workloads") or 0)
        metrics = ControllerMetrics(clock=live.now)
        second = live.new_controller(demo_aging(), identity="second", observers=[metrics.observe], start=False)
        assert not second.step()  # the restore brought first's Lease back: it must expire
        live.lease_clock.advance(TEST_LEASE_SECONDS[0] + 1)
        assert second.step()
        live.settle(second)
        _assert_reported(live, first_uid, metrics, "resource-version")
        assert live.runtime.cursor("workloads") == str(live.sandbox.store.resource_version)

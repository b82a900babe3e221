"""The safe-relaunch hold on real Kueue: ``spec.active: false`` and its release, with the
traces Kueue writes for them (``workload_controller.go``: a deactivated Workload is evicted
with reason ``Deactivated``, ``Requeued=False``; a reactivated one gets ``Requeued=True/
Reactivated``), none of which may count as a preemption.

The story of ``tests/controller/test_live_hold.py`` on the wall clock: team-b's own job runs in
its nominal quota, its dev job borrows team-a's, team-a's train job reclaims it; the relaunch
is held while only borrowed quota is free (train finished) and released once team-b's own
job finished (its nominal quota free), then admitted there.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller.hold import HOLD_ANNOTATION
from sky_kueue.controller.manager import Controller
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from tests.controller.live_support import demo_aging
from tests.controller.test_live_hold import hold_setup, team_b_holds
from tests.real_kueue.support import ADMISSION_GAP_SECONDS, KueueCluster, condition_true, conditions, running_controller
from tests.real_kueue.test_preemption import admitted, skypilot_pod

DEV = "dev-1-fcd1e5cf"


@pytest.fixture
def holding(kueue: KueueCluster, tmp_path: Path) -> Iterator[tuple[Controller, SqliteHistoryStore]]:
    with running_controller(
        kueue.cluster, tmp_path / "controller.db", demo_aging(), identity="real-kueue-hold", holds=team_b_holds()
    ) as running:
        yield running


def head(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["name"])


def test_a_held_relaunch_carries_kueues_deactivation_traces_and_is_released_into_nominal_quota(
    kueue: KueueCluster, holding: tuple[Controller, SqliteHistoryStore]
) -> None:
    _, store = holding
    kueue.apply(hold_setup())
    own = skypilot_pod("own", "3", "team-b", "dev-priority", cpu="4")
    kueue.create_pod(own)
    kueue.wait_workload("team-b", own["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"], admitted, "admitted")
    # the reclaim below must take dev (the most recent admission), never own: a clear second apart
    time.sleep(ADMISSION_GAP_SECONDS)
    dev = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="4")
    kueue.create_pod(dev)
    first = kueue.wait_workload("team-b", DEV, admitted, "admitted, borrowing team-a's quota")
    train = skypilot_pod("train", "2", "team-a", "prod-priority", cpu="6")
    kueue.create_pod(train)
    train_group = train["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.wait_workload("team-a", train_group, admitted, "admitted after reclaiming dev's borrowed quota")

    # SkyPilot's relaunch, once the preempted pod and its Workload are gone
    kueue.wait("the preempted dev pod gone", lambda: kueue.pod("team-b", head(dev)) is None)
    kueue.wait("the preempted Workload collected", lambda: kueue.workload("team-b", DEV) is None)
    kueue.create_pod(skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="4"))
    held = kueue.wait_workload(
        "team-b",
        DEV,
        lambda w: (
            w["metadata"]["uid"] != first["metadata"]["uid"]
            and w["spec"].get("active") is False
            and condition_true(w, "Evicted")
        ),
        "the relaunch held and Kueue's deactivation written",
    )
    traces = conditions(held)
    assert traces["Evicted"]["reason"] == "Deactivated", traces
    # Kueue v0.17.0 writes no Requeued condition for a deactivated pending Workload (later
    # releases write Requeued=False/Deactivated); either way it must not say requeued
    assert traces.get("Requeued", {}).get("status") != "True", traces
    assert held["metadata"]["annotations"][HOLD_ANNOTATION].startswith("held: waiting for nominal quota"), held
    assert {e["reason"]: e["count"] for e in held["status"]["schedulingStats"]["evictions"]} == {"Deactivated": 1}

    kueue.succeed_pod("team-a", head(train))  # borrowed quota frees: the hold stays
    kueue.wait_workload("team-a", train_group, lambda w: condition_true(w, "Finished"), "train finished")
    time.sleep(2)  # what the controller does with a change it must NOT act on: give it the chance
    still = kueue.workload("team-b", DEV)
    assert still is not None and still["spec"]["active"] is False, still

    kueue.succeed_pod("team-b", head(own))  # team-b's nominal quota frees: released
    readmitted = kueue.wait_workload("team-b", DEV, admitted, "released and admitted within nominal quota")
    after = conditions(readmitted)
    assert readmitted["spec"]["active"] is True and HOLD_ANNOTATION not in readmitted["metadata"].get("annotations", {})
    assert after["Evicted"]["status"] == "False", after  # re-admission clears Kueue's eviction

    history = store.load("managed-job/1")
    assert history is not None
    assert len(history.preemptions) == 1, history.preemptions  # the Deactivated eviction is not one
    (hold,) = history.holds
    assert hold.release_kind == "safe" and hold.released_at is not None, hold

"""The store's record of deleted Workloads: the final state by UID, bounded in count and age."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import DELETED, DELETED_WORKLOAD_TTL_SECONDS, MirrorStore, normalize
from sky_kueue.sandbox.apiserver import ManualClock
from tests.mirror import builders

START = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)
WL = KindName.WORKLOAD


def _workload(name: str, *, rv: str = "1", finished: bool = False) -> dict[str, Any]:
    obj = builders.workload(name, "team-a")
    obj["metadata"].update(uid=f"uid-{name}", resourceVersion=rv)
    if finished:
        obj["status"] = {"conditions": [{"type": "Finished", "status": "True", "reason": "Succeeded"}]}
    return normalize(WL, "kueue.x-k8s.io/v1beta2", obj)


def _listed(*names: str, clock: ManualClock | None = None, **bounds: Any) -> MirrorStore:
    store = MirrorStore(clock=clock or ManualClock(START), **bounds)
    store.replace(WL, [_workload(name) for name in names], "1")
    return store


def test_a_watched_deletion_keeps_the_events_final_state_by_uid() -> None:
    store = _listed("a")
    final = _workload("a", rv="2", finished=True)
    store.apply(WL, DELETED, final)

    assert store.get(WL, "team-a/a") is None
    assert store.deleted_workload("uid-a") == final  # the delete event's state, not the stored one
    assert store.deleted_workload("uid-unknown") is None


def test_a_relist_and_a_resumed_watch_record_deletions_too() -> None:
    store = _listed("a", "b")
    store.replace(WL, [_workload("b")], "5", gap=True)  # a vanished while the watch was cut
    assert store.deleted_workload("uid-a") == _workload("a")

    replayed = _workload("c", rv="3", finished=True)  # created and deleted while nobody watched
    store.replayed(WL, "ADDED", _workload("c", rv="2"))
    store.replayed(WL, DELETED, replayed)
    assert store.deleted_workload("uid-c") == replayed


def test_a_deletion_is_forgotten_after_the_ttl() -> None:
    clock = ManualClock(START)
    store = _listed("a", "b", clock=clock)
    store.apply(WL, DELETED, _workload("a"))
    clock.advance(DELETED_WORKLOAD_TTL_SECONDS)
    assert store.deleted_workload("uid-a") is not None
    clock.advance(1)
    assert store.deleted_workload("uid-a") is None
    store.apply(WL, DELETED, _workload("b"))  # a later deletion is kept as usual
    assert store.deleted_workload("uid-b") is not None


def test_only_the_latest_deletions_are_kept() -> None:
    names = [f"w{i}" for i in range(5)]
    store = _listed(*names, deleted_kept=2)
    for name in names:
        store.apply(WL, DELETED, _workload(name))
    assert [name for name in names if store.deleted_workload(f"uid-{name}") is not None] == ["w3", "w4"]


@pytest.mark.parametrize(("kept", "ttl"), [(-1, 60.0), (10, -1.0), (10, float("nan"))])
def test_negative_bounds_are_refused(kept: int, ttl: float) -> None:
    with pytest.raises(ValueError, match="deleted_kept and deleted_ttl_seconds must be >= 0"):
        MirrorStore(deleted_kept=kept, deleted_ttl_seconds=ttl)

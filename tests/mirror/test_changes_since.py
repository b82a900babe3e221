"""The store's journal of writes: which objects changed since a generation a consumer saw."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import DELETED, MirrorStore, normalize
from tests.mirror import builders

WL = KindName.WORKLOAD
CQ = KindName.CLUSTER_QUEUE
BOTH = frozenset({WL, CQ})


def _workload(name: str, *, rv: str = "1") -> dict[str, Any]:
    obj = builders.workload(name, "team-a")
    obj["metadata"].update(uid=f"uid-{name}", resourceVersion=rv)
    return normalize(WL, "kueue.x-k8s.io/v1beta2", obj)


def _cluster_queue(name: str, *, rv: str = "1") -> dict[str, Any]:
    obj = builders.cluster_queue(name)
    obj["metadata"]["resourceVersion"] = rv
    return normalize(CQ, "kueue.x-k8s.io/v1beta2", obj)


def _listed(*names: str, **bounds: Any) -> MirrorStore:
    store = MirrorStore(**bounds)
    store.replace(WL, [_workload(name) for name in names], "1")
    store.replace(CQ, [_cluster_queue("cq")], "1")
    return store


def test_without_a_generation_every_object_of_the_asked_kinds_is_handed_over() -> None:
    store = _listed("a", "b")
    changes = store.changes_since(None, {WL})
    assert changes.everything and changes.generation == store.generation
    assert changes.objects == {(WL, "team-a/a"): _workload("a"), (WL, "team-a/b"): _workload("b")}


def test_every_write_since_the_generation_is_reported_as_the_object_is_now() -> None:
    store = _listed("a", "b", "c")
    seen = store.generation
    assert store.changes_since(seen, BOTH).objects == {}

    store.apply(WL, "MODIFIED", _workload("a", rv="2"))
    store.apply(WL, "ADDED", _workload("d", rv="3"))
    store.apply(WL, "MODIFIED", _workload("d", rv="4"))  # twice: reported once, as it is now
    store.apply(WL, DELETED, _workload("b", rv="5"))
    store.apply(CQ, "MODIFIED", _cluster_queue("cq", rv="6"))
    store.bookmark(WL, "7")  # no object written
    changes = store.changes_since(seen, BOTH)

    assert not changes.everything and changes.generation == store.generation
    assert changes.objects == {
        (WL, "team-a/a"): _workload("a", rv="2"),
        (WL, "team-a/d"): _workload("d", rv="4"),
        (WL, "team-a/b"): None,
        (CQ, "cq"): _cluster_queue("cq", rv="6"),
    }
    assert store.changes_since(seen, {CQ}).objects == {(CQ, "cq"): _cluster_queue("cq", rv="6")}
    assert store.changes_since(changes.generation, BOTH).objects == {}


def test_a_relist_reports_what_it_changed_and_nothing_it_left_alone() -> None:
    store = _listed("a", "b")
    seen = store.generation
    store.replace(WL, [_workload("a"), _workload("c", rv="2")], "9", gap=True)  # b gone, c new, a same
    assert store.changes_since(seen, {WL}).objects == {(WL, "team-a/b"): None, (WL, "team-a/c"): _workload("c", rv="2")}


def test_a_consumer_further_behind_than_the_journal_gets_everything() -> None:
    store = _listed("a", "b", change_journal_entries=2)
    seen = store.generation
    store.apply(WL, "MODIFIED", _workload("a", rv="2"))
    store.apply(WL, "MODIFIED", _workload("b", rv="3"))
    assert not store.changes_since(seen, {WL}).everything  # two writes: still in the journal
    store.apply(WL, "ADDED", _workload("c", rv="4"))
    changes = store.changes_since(seen, {WL})
    assert changes.everything
    assert set(changes.objects) == {(WL, "team-a/a"), (WL, "team-a/b"), (WL, "team-a/c")}
    # one that kept up is still answered from the journal
    caught_up = store.generation
    store.apply(WL, DELETED, _workload("a", rv="5"))
    assert store.changes_since(caught_up, {WL}) == type(changes)(store.generation, {(WL, "team-a/a"): None}, False)


def test_the_journal_needs_room_for_one_write() -> None:
    with pytest.raises(ValueError, match="change_journal_entries"):
        MirrorStore(change_journal_entries=0)

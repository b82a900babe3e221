"""A mirror resumed from a consumer's resourceVersion replays what happened while the consumer
was away, deletions included; a version compacted away is relisted and marked as a gap."""

from __future__ import annotations

from collections.abc import Callable

from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.transitions import WORKLOAD_KINDS, ChangeSource, Transition, TransitionKind
from sky_kueue.sandbox.apiserver import ObjectStore
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, MirrorFactory

MARKERS = {TransitionKind.SYNCED, TransitionKind.CAUGHT_UP, TransitionKind.BOOKMARK}


def _setup(store: ObjectStore) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq"))


def _until(subscription_get: Callable[[float], Transition | None], stop: TransitionKind) -> list[Transition]:
    seen: list[Transition] = []
    while True:
        item = subscription_get(WAIT_SECONDS)
        assert item is not None, f"no {stop.value} marker; saw {[t.kind.value for t in seen]}"
        seen.append(item)
        if item.kind is stop:
            return seen


def test_a_resumed_mirror_replays_a_deletion_it_never_saw(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    store.create("workloads", builders.workload("kept", "team-a"))
    cursor = str(store.resource_version)
    store.create("workloads", builders.workload("gone", "team-a"))
    store.delete("workloads", "gone", "team-a")

    mirror = make_mirror(resume={KindName.WORKLOAD: cursor})
    subscription = mirror.subscribe(WORKLOAD_KINDS | MARKERS)
    mirror.start()
    seen = _until(subscription.get, TransitionKind.CAUGHT_UP)

    synced = [t for t in seen if t.kind is TransitionKind.SYNCED and t.object_kind is KindName.WORKLOAD]
    assert len(synced) == 1 and synced[0].resuming and synced[0].source is ChangeSource.LIST
    resumed = [(t.kind, t.name) for t in seen if t.source is ChangeSource.RESUMED]
    assert (TransitionKind.CREATED, "gone") in resumed and (TransitionKind.DELETED, "gone") in resumed
    assert all(name != "kept" for _, name in resumed)  # unchanged since the cursor
    assert mirror.store.get(KindName.WORKLOAD, "team-a/gone") is None  # the store stays current

    store.create("workloads", builders.workload("live", "team-a"))
    live = _until(subscription.get, TransitionKind.CREATED)
    assert live[-1].name == "live" and live[-1].source is ChangeSource.WATCH
    assert mirror.delivered_version(KindName.WORKLOAD) == live[-1].resource_version


def test_a_compacted_resume_version_is_relisted_as_a_gap(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    store.create("workloads", builders.workload("a", "team-a"))
    cursor = str(store.resource_version)
    store.create("workloads", builders.workload("b", "team-a"))
    store.compact()

    mirror = make_mirror(resume={KindName.WORKLOAD: cursor})
    subscription = mirror.subscribe(WORKLOAD_KINDS | MARKERS)
    mirror.start()
    seen = _until(subscription.get, TransitionKind.SYNCED)
    while not (seen[-1].object_kind is KindName.WORKLOAD and seen[-1].source is ChangeSource.RELIST):
        seen += _until(subscription.get, TransitionKind.SYNCED)
    assert not seen[-1].resuming
    assert not any(t.source is ChangeSource.RESUMED for t in seen)


def test_without_a_resume_version_nothing_is_replayed(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    store.create("workloads", builders.workload("a", "team-a"))
    mirror = make_mirror()
    subscription = mirror.subscribe(WORKLOAD_KINDS | MARKERS)
    mirror.start()
    mirror.wait_synced(WAIT_SECONDS)
    kinds = [t.kind for t in subscription.drain()]
    assert TransitionKind.CAUGHT_UP not in kinds
    assert kinds.count(TransitionKind.SYNCED) == len(mirror.reflectors)

"""Typed transitions, as Kueue moves a Workload through its lifecycle (``kueue.md`` §1.4)."""

from __future__ import annotations

import threading

from sky_kueue.mirror import ChangeSource, Subscription, Transition, TransitionKind
from sky_kueue.mirror.kinds import KindName
from sky_kueue.sandbox.apiserver import ApiServer, FaultKind, ObjectStore
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, MirrorFactory, RecordingSleep

K = TransitionKind


def _setup(store: ObjectStore) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("namespaces", builders.namespace("team-b"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq-a", cohort="shared"))
    store.create("clusterqueues", builders.cluster_queue("cq-b", cohort="shared"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq-a"))
    store.create("localqueues", builders.local_queue("lq", "team-b", "cq-b"))


def take(subscription: Subscription, count: int) -> list[Transition]:
    out: list[Transition] = []
    for _ in range(count):
        transition = subscription.get(WAIT_SECONDS)
        assert transition is not None, f"only {[(t.kind.value, t.key) for t in out]} arrived"
        out.append(transition)
    return out


def test_lifecycle_of_a_workload_yields_each_transition_once_in_order(
    store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _setup(store)
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    subscription = mirror.subscribe()

    store.create("workloads", builders.workload("job", "team-a"))
    builders.reserve_quota(store, "job", "team-a", "cq-a")
    builders.admit(store, "job", "team-a")
    builders.evict(store, "job", "team-a", "PodsReadyTimeout", "Exceeded the PodsReady timeout team-a/job")
    builders.requeue(store, "job", "team-a", reason="BackoffFinished")
    store.delete("workloads", "job", "team-a")

    got = take(subscription, 6)
    assert [(t.kind, t.reason) for t in got] == [
        (K.CREATED, ""),
        (K.QUOTA_RESERVED, "QuotaReserved"),
        (K.ADMITTED, "Admitted"),
        (K.EVICTED, "PodsReadyTimeout"),
        (K.REQUEUED, "BackoffFinished"),
        (K.DELETED, ""),
    ]
    assert [t.sequence for t in got] == sorted(t.sequence for t in got)
    assert all(t.source is ChangeSource.WATCH and t.key == "team-a/job" for t in got)
    assert got[1].cluster_queue == "cq-a"
    assert not any(t.preempted for t in got)  # PodsReadyTimeout is an eviction, not a preemption
    assert subscription.get(0.05) is None


def test_preemption_names_the_reason_and_resolves_the_preemptor(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    victim = store.create("workloads", builders.workload("victim", "team-b"))
    preemptor = store.create("workloads", builders.workload("prod", "team-a", priority=1000))
    builders.reserve_quota(store, "victim", "team-b", "cq-b")
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    subscription = mirror.subscribe({K.EVICTED, K.PREEMPTED, K.REQUEUED})

    builders.preempt(store, "victim", "team-b", preemptor_uid=preemptor["metadata"]["uid"])
    builders.requeue(store, "victim", "team-b")

    evicted, preempted, requeued = take(subscription, 3)
    assert (evicted.kind, evicted.reason) == (K.EVICTED, "Preempted")
    assert (preempted.kind, preempted.reason) == (K.PREEMPTED, "InCohortReclamation")
    assert preempted.uid == victim["metadata"]["uid"]
    assert preempted.preemptor is not None
    assert preempted.preemptor.uid == preemptor["metadata"]["uid"]
    assert preempted.preemptor.key == "team-a/prod"
    assert preempted.preemptor.cluster_queue == "cq-a"
    assert preempted.preemptor.job_uid is None
    assert preempted.preempted
    assert (requeued.kind, requeued.reason) == (K.REQUEUED, "Preempted")


def test_preempted_pod_group_that_finishes_and_vanishes_at_once_is_not_missed(
    store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    """SkyPilot groups are unretriable: preempted, pods deleted, Finished "0/N", then GC'd."""
    _setup(store)
    store.create("workloads", builders.workload("train-7-fcd1e5cf", "team-b"))
    store.create("pods", builders.skypilot_pod("train-7-fcd1e5cf", "team-b", job_id="7"))
    preemptor = store.create("workloads", builders.workload("prod", "team-a", priority=1000))
    builders.reserve_quota(store, "train-7-fcd1e5cf", "team-b", "cq-b")
    builders.admit(store, "train-7-fcd1e5cf", "team-b")
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    assert mirror.wait_for(lambda s: s.identity_of("team-b/train-7-fcd1e5cf") is not None, WAIT_SECONDS)
    stalled = threading.Event()
    all_seen = threading.Event()
    seen: list[Transition] = []

    def slow_subscriber(transition: Transition) -> None:
        stalled.wait(WAIT_SECONDS)  # a subscriber busy with something else while it all happens
        seen.append(transition)
        if transition.kind is K.DELETED:
            all_seen.set()

    mirror.subscribe(callback=slow_subscriber)
    done = mirror.subscribe({K.DELETED})

    builders.preempt(store, "train-7-fcd1e5cf", "team-b", preemptor_uid=preemptor["metadata"]["uid"])
    store.delete("pods", "train-7-fcd1e5cf-head", "team-b")
    builders.finish(store, "train-7-fcd1e5cf", "team-b")
    store.delete("workloads", "train-7-fcd1e5cf", "team-b")
    assert done.get(WAIT_SECONDS) is not None
    stalled.set()

    assert all_seen.wait(WAIT_SECONDS)
    assert [t.kind for t in seen] == [K.EVICTED, K.PREEMPTED, K.FINISHED, K.DELETED]
    finished = seen[2]
    assert (finished.reason, finished.message, finished.preempted) == ("Succeeded", "Pods succeeded: 0/1.", True)
    assert seen[1].preemptor is not None and seen[1].preemptor.key == "team-a/prod"
    for transition in seen:  # the pods were gone before Finished: the identity is kept
        assert transition.identity is not None and transition.identity.managed_job_id == "7"
    # Forgotten once the Workload and its pods are gone (pods arrive on their own stream).
    assert mirror.wait_for(lambda s: s.identity_of("team-b/train-7-fcd1e5cf") is None, WAIT_SECONDS)


def test_changes_made_while_the_watch_is_down_are_replayed_not_lost(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory, sleep: RecordingSleep
) -> None:
    _setup(store)
    store.create("workloads", builders.workload("victim", "team-b"))
    preemptor = store.create("workloads", builders.workload("prod", "team-a", priority=1000))
    builders.reserve_quota(store, "victim", "team-b", "cq-b")
    # The first Workload watch is cut at once; the next one fails with a 500, so the
    # reflector backs off - and the test changes the cluster while it waits.
    server.inject(FaultKind.WATCH_CUT, resource="workloads")
    server.inject(FaultKind.STATUS, verb="watch", resource="workloads", status_code=500)
    gate = sleep.arm()
    mirror = make_mirror()
    subscription = mirror.subscribe({K.PREEMPTED, K.FINISHED, K.DELETED})
    mirror.wait_synced(WAIT_SECONDS)
    assert sleep.sleeping.wait(WAIT_SECONDS)

    builders.preempt(store, "victim", "team-b", preemptor_uid=preemptor["metadata"]["uid"])
    builders.finish(store, "victim", "team-b")
    store.delete("workloads", "victim", "team-b")
    gate.set()

    assert [t.kind for t in take(subscription, 3)] == [K.PREEMPTED, K.FINISHED, K.DELETED]
    assert mirror.reflectors[KindName.WORKLOAD].lists == 1


def test_late_subscriber_can_replay_the_current_state_first(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    store.create("workloads", builders.workload("running", "team-a"))
    builders.reserve_quota(store, "running", "team-a", "cq-a")
    builders.admit(store, "running", "team-a")
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)

    subscription = mirror.subscribe(replay=True)
    store.create("workloads", builders.workload("new", "team-a"))

    got = take(subscription, 4)
    assert [(t.kind, t.key, t.source) for t in got] == [
        (K.CREATED, "team-a/running", ChangeSource.REPLAY),
        (K.QUOTA_RESERVED, "team-a/running", ChangeSource.REPLAY),
        (K.ADMITTED, "team-a/running", ChangeSource.REPLAY),
        (K.CREATED, "team-a/new", ChangeSource.WATCH),
    ]


def test_spec_changes_are_reported_as_updates(store: ObjectStore, make_mirror: MirrorFactory) -> None:
    _setup(store)
    store.create("workloads", builders.workload("waiting", "team-a", priority=100))
    mirror = make_mirror()
    mirror.wait_synced(WAIT_SECONDS)
    subscription = mirror.subscribe()

    store.patch("workloads", "waiting", {"spec": {"priority": 200}}, "team-a")

    (updated,) = take(subscription, 1)
    assert updated.kind is K.UPDATED
    assert updated.workload["spec"]["priority"] == 200

"""A kind mirrored one namespace at a time (``Mirror(per_namespace=...)``).

The controller reads SkyPilot's pods in the team namespaces only, so that its RBAC need not
grant reading every pod of the cluster (a pod's spec holds its environment). Each namespace
then has its own list, watch and resourceVersion: a namespace's relist must replace that
namespace's objects and no other's, the kind is synced once every namespace is, and a
namespace the API server refuses costs that namespace only.
"""

from __future__ import annotations

from typing import Any

from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from sky_kueue.sandbox.apiserver.faults import FaultKind
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, MirrorFactory

TEAMS = ("team-a", "team-b")


def _pod(name: str, namespace: str) -> dict[str, Any]:
    pod = builders.skypilot_pod(name, namespace)
    return {**pod, "metadata": {**pod["metadata"], "uid": f"uid-{namespace}-{name}", "resourceVersion": "1"}}


def _pod_keys(store: MirrorStore) -> set[str]:
    return set(store.resource_versions(KindName.POD))


def _seed(store: ObjectStore) -> None:
    for namespace in (*TEAMS, "payroll"):
        store.create("namespaces", builders.namespace(namespace))
        store.create("pods", builders.skypilot_pod(f"job-{namespace}", namespace))


def test_a_namespaced_list_replaces_that_namespace_only() -> None:
    store = MirrorStore()
    store.expect_namespaces(KindName.POD, TEAMS)
    store.replace(KindName.POD, [_pod("a1", "team-a"), _pod("a2", "team-a")], "10", namespace="team-a")
    assert store.is_synced(KindName.POD, "team-a") and not store.is_synced(KindName.POD, "team-b")
    assert not store.is_synced(KindName.POD), "synced only once every expected namespace is listed"
    store.replace(KindName.POD, [_pod("b1", "team-b")], "11", namespace="team-b")
    assert store.is_synced(KindName.POD)

    store.replace(KindName.POD, [_pod("a2", "team-a")], "12", gap=True, namespace="team-a")  # a1 gone
    assert _pod_keys(store) == {"team-a/a2-head", "team-b/b1-head"}


def test_pods_are_listed_and_watched_in_the_named_namespaces_only(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _seed(store)
    mirror = make_mirror(per_namespace={KindName.POD: TEAMS})
    assert {key for key in mirror.reflectors if isinstance(key, tuple)} == {(KindName.POD, ns) for ns in TEAMS}
    mirror.start()
    mirror.wait_synced(WAIT_SECONDS)
    assert _pod_keys(mirror.store) == {"team-a/job-team-a-head", "team-b/job-team-b-head"}

    store.create("pods", builders.skypilot_pod("late", "team-b"))
    store.create("pods", builders.skypilot_pod("late", "payroll"))
    store.delete("pods", "job-team-a-head", "team-a")
    assert mirror.wait_for(lambda s: _pod_keys(s) == {"team-b/job-team-b-head", "team-b/late-head"}, WAIT_SECONDS), (
        _pod_keys(mirror.store)
    )
    mirror.stop()  # the request log records a watch when it ends
    assert server.requests.wait_for(
        lambda records: sum(r.info.verb == "watch" and r.info.resource == "pods" for r in records) >= 2, WAIT_SECONDS
    )

    pod_requests = [r.info for r in server.requests.records() if r.info.resource == "pods"]
    assert {(i.verb, i.namespace) for i in pod_requests} == {(v, ns) for v in ("list", "watch") for ns in TEAMS}


def test_a_namespace_relisted_after_410_keeps_the_other_namespaces(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    _seed(store)
    mirror = make_mirror(per_namespace={KindName.POD: TEAMS})
    # Armed before the start: the fault counts events on a watch stream, and a watch opened
    # after the writes below would get them in its first batch, before the fault could fire.
    gone = server.inject(FaultKind.WATCH_GONE, resource="pods", namespace="team-a", after_events=1)
    mirror.start()
    mirror.wait_synced(WAIT_SECONDS)
    store.create("pods", builders.skypilot_pod("new", "team-a"))
    store.delete("pods", "job-team-a-head", "team-a")
    want = {"team-a/new-head", "team-b/job-team-b-head"}
    assert mirror.wait_for(lambda s: _pod_keys(s) == want, WAIT_SECONDS), _pod_keys(mirror.store)
    assert gone.fired == 1
    relisted = mirror.reflectors[(KindName.POD, "team-a")]
    assert relisted.lists == 2 and mirror.reflectors[(KindName.POD, "team-b")].lists == 1


def test_a_refused_namespace_costs_that_namespace_only(
    server: ApiServer, store: ObjectStore, make_mirror: MirrorFactory
) -> None:
    """No Role in one namespace (setup not run there): its pods are not mirrored, with a warning
    naming it; the mirror syncs, and the other namespaces' pods are there."""
    _seed(store)
    server.inject(FaultKind.STATUS, verb="list", resource="pods", namespace="team-b", status_code=403, times=100)
    mirror = make_mirror(per_namespace={KindName.POD: TEAMS})
    mirror.start()
    mirror.wait_synced(WAIT_SECONDS)
    assert _pod_keys(mirror.store) == {"team-a/job-team-a-head"}
    (warning,) = mirror.warnings
    assert warning.startswith("pods in team-b not mirrored: "), warning
    assert not mirror.store.is_synced(KindName.POD, "team-b")

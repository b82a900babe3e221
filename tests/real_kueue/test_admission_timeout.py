"""SkyPilot's admission timeout on real Kueue: a pod group still gated when
``kueue.admission_timeout`` runs out is deleted by SkyPilot; its pending Workload goes with it,
without ``Finished``, and the controller records no preemption and ages nothing."""

from __future__ import annotations

from sky_kueue.controller.manager import Controller
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from tests.real_kueue.support import KueueCluster, conditions
from tests.real_kueue.test_preemption import controller, seed, skypilot_pod  # noqa: F401 - the fixture


def test_a_group_deleted_while_waiting_leaves_no_preemption(
    kueue: KueueCluster,
    controller: tuple[Controller, SqliteHistoryStore],  # noqa: F811
) -> None:
    _, store = controller
    seed(kueue)
    # team-b may not borrow GPUs (borrowingLimit 0, nominal 0): it waits
    waiting = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="1")
    waiting["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }
    group = waiting["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.create_pod(waiting)
    pending = kueue.wait_workload(
        "team-b", group, lambda w: conditions(w).get("QuotaReserved", {}).get("reason") == "Pending", "pending"
    )
    assert (
        "insufficient" in conditions(pending)["QuotaReserved"]["message"]
        or "exceeds" in conditions(pending)["QuotaReserved"]["message"]
    )
    kueue.wait("the controller's record of the waiting job", lambda: store.load("managed-job/1"))

    kueue.delete_pod("team-b", waiting["metadata"]["name"])  # SkyPilot's admission timeout
    kueue.wait("the gated pod gone", lambda: kueue.pod("team-b", waiting["metadata"]["name"]) is None)
    kueue.wait("the pending Workload gone", lambda: kueue.workload("team-b", group) is None)
    history = store.load("managed-job/1")
    assert history is not None and history.preemptions == (), history
    assert all(step.boost == 0 for step in history.steps), history.steps  # waited at its own priority

"""Where a relaunch is queued (:mod:`sky_kueue.controller.lane_route`) and how a cluster's lanes
are read (:mod:`sky_kueue.mirror.lanes`), as pure functions."""

from __future__ import annotations

from typing import Any

from sky_kueue.controller.lane_route import Lanes, RouteKind, TeamLane, lane_config_overrides, route
from sky_kueue.mirror.lanes import MAX_WAITING_LISTED, lane_views

LANE = TeamLane(
    "team-b", ("team-b", "team-b-east"), "relaunch", 2, "team-b-cq-relaunch", {"cpu": 4000, "nvidia.com/gpu": 2}
)


def test_a_relaunch_enters_the_lane_at_k_preemptions_if_it_fits() -> None:
    assert route(None, 5, {"cpu": 1000}).kind is RouteKind.NO_LANE
    assert route(LANE, 1, {"cpu": 1000}).kind is RouteKind.NOT_YET
    entered = route(LANE, 2, {"cpu": 4000, "nvidia.com/gpu": 2, "memory": 0})
    assert entered.to_lane and entered.lane is LANE and entered.reason == "preempted 2 times (lane after 2)"
    misfit = route(LANE, 3, {"cpu": 1000, "nvidia.com/gpu": 3})
    assert misfit.kind is RouteKind.MISFIT and "it asks for 3 nvidia.com/gpu, the lane holds 2" in misfit.reason
    # a resource the lane has no quota of can never be admitted there
    assert route(LANE, 3, {"memory": 1}).kind is RouteKind.MISFIT
    # a lane whose quota the config does not record takes every relaunch due it
    assert route(TeamLane("t", ("t",), "relaunch", 1), 1, {"cpu": 10**6}).to_lane


def test_a_lane_queue_is_one_of_its_teams_namespaces_only() -> None:
    lanes = Lanes({"team-b": LANE})
    assert lanes.for_queue("team-b-east", "relaunch") is LANE
    assert lanes.for_queue("team-a", "relaunch") is None  # another team's namespace
    assert lanes.for_queue("team-b", "team-b-lq") is None and lanes.for_queue("team-b", None) is None
    assert lanes.for_team("team-b") is LANE and lanes.for_team(None) is None


def test_the_overrides_name_the_lane_where_kueue_and_skypilot_read_the_queue() -> None:
    assert lane_config_overrides("relaunch") == {
        "kubernetes": {
            "kueue": {"local_queue_name": "relaunch"},
            "pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "relaunch"}}},
        }
    }
    assert lane_config_overrides("relaunch", quota_queue=True)["kubernetes"]["quota"] == {"queue": "relaunch"}


def _cq(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {
            "cohort": "ab",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "4"}]}],
                }
            ],
        },
    }


def _wl(
    name: str, queue: str, created: str, *, admitted_in: str | None = None, finished: bool = False
) -> dict[str, Any]:
    conditions: list[dict[str, str]] = []
    status: dict[str, Any] = {"conditions": conditions}
    if admitted_in is not None:
        conditions.append({"type": "QuotaReserved", "status": "True"})
        status["admission"] = {
            "clusterQueue": admitted_in,
            "podSetAssignments": [{"name": "main", "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": "1500m"}}],
        }
    if finished:
        conditions.append({"type": "Finished", "status": "True"})
    return {
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "team-b", "creationTimestamp": created},
        "spec": {"queueName": queue, "priority": 100},
        "status": status,
    }


def test_lane_views_count_what_kueue_admitted_there_and_who_waits_longest_first() -> None:
    queues = [_cq("team-b-cq"), _cq("lane", {"sky-kueue.io/relaunch-lane": "team"}), _cq("unlabelled")]
    local = [
        {"metadata": {"namespace": "team-b", "name": "relaunch"}, "spec": {"clusterQueue": "lane"}},
        {"metadata": {"namespace": "team-b", "name": "other"}, "spec": {"clusterQueue": "unlabelled"}},
    ]
    workloads = [
        _wl("running", "relaunch", "2026-01-01T11:00:00Z", admitted_in="lane"),
        _wl("done", "relaunch", "2026-01-01T10:00:00Z", admitted_in="lane", finished=True),
        _wl("late", "relaunch", "2026-01-01T11:59:00Z"),
        _wl("early", "relaunch", "2026-01-01T11:50:00Z"),
        _wl("elsewhere", "team-b-lq", "2026-01-01T11:00:00Z"),
    ]
    noon = 1_767_268_800.0  # 2026-01-01T12:00:00Z
    (lane,) = lane_views(queues, local, workloads, now=noon)
    assert (lane.cluster_queue, lane.scope, lane.admitted, lane.waiting_count) == ("lane", "team", 1, 2)
    assert lane.occupancy_text() == "cpu 1500m/4"
    assert [(w.workload, w.wait_seconds) for w in lane.waiting] == [("team-b/early", 600.0), ("team-b/late", 60.0)]
    # a ClusterQueue the config names as a lane counts although unlabelled
    named = lane_views(queues, local, workloads, now=noon, names=["unlabelled"])
    assert [(v.cluster_queue, v.scope) for v in named] == [("lane", "team"), ("unlabelled", "unlabelled")]
    many = [_wl(f"w{i}", "relaunch", "2026-01-01T11:00:00Z") for i in range(MAX_WAITING_LISTED + 5)]
    (full,) = lane_views(queues, local, many, now=noon)
    assert full.waiting_count == MAX_WAITING_LISTED + 5 and len(full.waiting) == MAX_WAITING_LISTED

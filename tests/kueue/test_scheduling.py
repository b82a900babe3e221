"""Flavor assignment and preemption decisions on hand-written clusters.

Each test builds a small cluster, asks the predictor what Kueue does in the first cycle,
and checks the decision against the rule it illustrates.
"""

from __future__ import annotations

from typing import Any

from sky_kueue.kueue import predictor

from .builders import cq, flavor, lq, namespace, state, workload

T0 = "2026-01-01T10:00:00Z"


def _first_cycle(*docs: dict[str, Any]) -> dict[str, Any]:
    return predictor.predict(state(*docs)).to_json()["cycles"][0]


def _two_flavor_cluster(**fungibility: Any) -> list[dict[str, Any]]:
    """team-cq: on-demand cpu 2, spot cpu 10, in a cohort with a lender holding 8 on-demand."""
    return [
        namespace("team"),
        flavor("on-demand"),
        flavor("spot"),
        cq("team-cq", [{"on-demand": {"cpu": "2"}, "spot": {"cpu": "10"}}], cohort="c", **fungibility),
        cq("lender", [{"on-demand": {"cpu": "8"}, "spot": {"cpu": "0"}}], cohort="c"),
        lq("team", "q", "team-cq"),
        workload("job", "team", "q", {"cpu": "4"}, T0),
    ]


def test_may_stop_search_takes_the_first_flavor_even_if_it_borrows() -> None:
    cycle = _first_cycle(*_two_flavor_cluster())
    assert cycle["admitted"]["team/job"]["podSets"]["main"] == {"cpu": "on-demand"}


def test_try_next_flavor_prefers_a_flavor_without_borrowing() -> None:
    cycle = _first_cycle(*_two_flavor_cluster(when_can_borrow="TryNextFlavor"))
    assert cycle["admitted"]["team/job"]["podSets"]["main"] == {"cpu": "spot"}


def _preference_cluster(preference: str) -> list[dict[str, Any]]:
    """Flavor a needs preemption within nominal quota; flavor b fits only by borrowing."""
    return [
        namespace("team"),
        flavor("a"),
        flavor("b"),
        cq(
            "team-cq",
            [{"a": {"cpu": "4"}, "b": {"cpu": "0"}}],
            cohort="c",
            within="LowerPriority",
            when_can_borrow="TryNextFlavor",
            when_can_preempt="TryNextFlavor",
            preference=preference,
        ),
        cq("lender", [{"a": {"cpu": "0"}, "b": {"cpu": "8"}}], cohort="c"),
        lq("team", "q", "team-cq"),
        workload(
            "low",
            "team",
            "q",
            {"cpu": "4"},
            "2026-01-01T09:00:00Z",
            priority=1,
            admitted_to="team-cq",
            flavors={"cpu": "a"},
        ),
        workload("high", "team", "q", {"cpu": "4"}, T0, priority=100),
    ]


def test_borrowing_over_preemption_borrows() -> None:
    cycle = _first_cycle(*_preference_cluster("BorrowingOverPreemption"))
    assert cycle["admitted"]["team/high"]["podSets"]["main"] == {"cpu": "b"}
    assert cycle["preempted"] == {}


def test_preemption_over_borrowing_preempts_within_its_own_quota() -> None:
    cycle = _first_cycle(*_preference_cluster("PreemptionOverBorrowing"))
    assert cycle["admitted"] == {}
    assert cycle["preempted"] == {"team/low": {"by": "team/high", "reason": "InClusterQueue"}}


def _seed_like(team_b_jobs: list[dict[str, Any]], a_priority: int = 1000, threshold: int = 100) -> list[dict[str, Any]]:
    return [
        namespace("team-a"),
        namespace("team-b"),
        flavor("default"),
        cq(
            "team-a-cq",
            [{"default": {"cpu": "0"}}],
            cohort="ab",
            reclaim="Any",
            borrow="LowerPriority",
            threshold=threshold,
        ),
        cq("team-b-cq", [{"default": {"cpu": "0"}}], cohort="ab"),
        cq("shared-cq", [{"default": {"cpu": "10"}}], cohort="ab"),
        lq("team-a", "a", "team-a-cq"),
        lq("team-b", "b", "team-b-cq"),
        *team_b_jobs,
        workload("prod", "team-a", "a", {"cpu": "7"}, T0, priority=a_priority),
    ]


def test_fill_back_keeps_a_minimal_victim_set() -> None:
    jobs = [
        workload(
            "y",
            "team-b",
            "b",
            {"cpu": "5"},
            "2026-01-01T08:00:00Z",
            priority=100,
            admitted_to="team-b-cq",
            flavors={"cpu": "default"},
        ),
        workload(
            "x",
            "team-b",
            "b",
            {"cpu": "1"},
            "2026-01-01T09:00:00Z",
            priority=100,
            admitted_to="team-b-cq",
            flavors={"cpu": "default"},
        ),
    ]
    cycle = _first_cycle(*_seed_like(jobs))
    # x (newest) is tried first, but giving it back still leaves room: only y is preempted.
    assert cycle["preempted"] == {"team-b/y": {"by": "team-a/prod", "reason": "InCohortReclaimWhileBorrowing"}}


def test_victims_above_the_priority_threshold_are_safe() -> None:
    jobs = [
        workload(
            "b",
            "team-b",
            "b",
            {"cpu": "5"},
            "2026-01-01T08:00:00Z",
            priority=150,
            admitted_to="team-b-cq",
            flavors={"cpu": "default"},
        )
    ]
    cycle = _first_cycle(*_seed_like(jobs))
    assert cycle["preempted"] == {}
    assert cycle["pending"]["team-a/prod"] == (
        "couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor default, 2 more needed"
    )


def test_a_request_beyond_potential_capacity_never_fits() -> None:
    docs = _seed_like([])
    docs[-1] = workload("prod", "team-a", "a", {"cpu": "11"}, T0, priority=1000)
    result = predictor.predict(state(*docs))
    assert result.final_pending == ["team-a/prod"]
    assert result.to_json()["cycles"][0]["pending"]["team-a/prod"] == (
        "couldn't assign flavors to pod set main: insufficient quota for cpu in flavor default, previously "
        "considered podsets requests (0) + current podset request (11) > maximum capacity (10)"
    )


def test_uncovered_resource_blocks_admission() -> None:
    docs = _seed_like([])
    docs[-1] = workload("prod", "team-a", "a", {"cpu": "1", "nvidia.com/gpu": "1"}, T0, priority=1000)
    cycle = _first_cycle(*docs)
    assert cycle["pending"]["team-a/prod"] == (
        "couldn't assign flavors to pod set main: resource nvidia.com/gpu unavailable in ClusterQueue"
    )


def test_namespace_selector_is_enforced() -> None:
    docs = _seed_like([])
    docs[3] = cq("team-a-cq", [{"default": {"cpu": "0"}}], cohort="ab", selector={"matchLabels": {"team": "a"}})
    cycle = _first_cycle(*docs)
    assert cycle["pending"]["team-a/prod"] == "workload namespace doesn't match ClusterQueue selector"


def test_strict_fifo_blocks_behind_its_head_best_effort_does_not() -> None:
    def cluster(strategy: str) -> list[dict[str, Any]]:
        return [
            namespace("t"),
            flavor("f"),
            cq("solo", [{"f": {"cpu": "4"}}], strategy=strategy),
            lq("t", "q", "solo"),
            workload("big", "t", "q", {"cpu": "6"}, "2026-01-01T10:00:00Z", priority=10),
            workload("small", "t", "q", {"cpu": "1"}, "2026-01-01T10:01:00Z", priority=1),
        ]

    best_effort = predictor.predict(state(*cluster("BestEffortFIFO")))
    strict = predictor.predict(state(*cluster("StrictFIFO")))
    assert best_effort.final_admitted == ["t/small"]
    assert strict.final_admitted == []

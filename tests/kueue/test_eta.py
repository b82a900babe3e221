"""Admission ETAs from expected run times, simulated with the exact model."""

from __future__ import annotations

from typing import Any

from sky_kueue.kueue import eta

from .builders import cq, flavor, lq, namespace, state, workload

T0 = "2026-01-01T11:00:00Z"  # one hour before the default "now" (12:00)


def _cluster(*workloads: dict[str, Any]) -> list[dict[str, Any]]:
    return [namespace("t"), flavor("f"), cq("solo", [{"f": {"cpu": "10"}}]), lq("t", "q", "solo"), *workloads]


def _running(name: str, cpu: str, runtime_s: int) -> dict[str, Any]:
    doc = workload(name, "t", "q", {"cpu": cpu}, T0, admitted_to="solo", flavors={"cpu": "f"})
    doc["metadata"]["annotations"] = {eta.EXPECTED_RUNTIME_ANNOTATION: str(runtime_s)}
    return doc


def test_a_workload_that_fits_is_admitted_now() -> None:
    s = state(*_cluster(workload("new", "t", "q", {"cpu": "4"}, "2026-01-01T11:30:00Z")))
    got = eta.estimate(s, ["t/new"], eta.runtime_from_annotation())
    assert got["t/new"].seconds == 0


def test_admission_waits_for_the_first_holder_that_frees_enough() -> None:
    # 10 cpu in use: a (6 cpu) ends 2h after its start, b (4 cpu) 3h after; "new" needs 5.
    s = state(
        *_cluster(
            _running("a", "6", 3 * 3600),
            _running("b", "4", 4 * 3600),
            workload("new", "t", "q", {"cpu": "5"}, "2026-01-01T11:30:00Z"),
        )
    )
    got = eta.estimate(s, ["t/new"], eta.runtime_from_annotation())["t/new"]
    assert got.seconds == 2 * 3600
    assert got.waits_for == ["t/a"]


def test_unknown_run_times_give_no_estimate() -> None:
    s = state(
        *_cluster(
            workload("a", "t", "q", {"cpu": "10"}, T0, admitted_to="solo", flavors={"cpu": "f"}),
            workload("new", "t", "q", {"cpu": "5"}, "2026-01-01T11:30:00Z"),
        )
    )
    got = eta.estimate(s, ["t/new"], eta.runtime_from_annotation())["t/new"]
    assert got.seconds is None
    assert "no quota holder with a known run time" in got.reason

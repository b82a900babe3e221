"""Sizing the relaunch lane: issue 39's targets, the choice of the smallest lane, and
``sky-kueue simulate --lane-sweep`` (its output and its one-line errors)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sky_kueue.cli.main import cli
from sky_kueue.sim import lane_sizing
from sky_kueue.sim.lane import LaneScope
from sky_kueue.sim.lane_sizing import LaneFigures, SweepPoint, targets_met

BASE = LaneFigures(
    max_preemptions=8,
    relaunch_starved=10,
    p50_wait_after_preemption_s=1_000,
    p99_wait_after_preemption_s=30_000,
    goodput_pct=70.0,
    high_p95_wait_s=2_000,
)
GOOD = LaneFigures(
    max_preemptions=2,
    relaunch_starved=5,
    p50_wait_after_preemption_s=100,
    p99_wait_after_preemption_s=10_000,
    goodput_pct=69.0,
    high_p95_wait_s=2_100,
)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, ["simulate", *args])


def test_targets_at_their_edges() -> None:
    assert all(targets_met(GOOD, BASE).values())
    misses = {
        "max_preemptions": replace(GOOD, max_preemptions=3),
        "relaunch_starved": replace(GOOD, relaunch_starved=6),  # more than half of 10
        "p99_wait_after_preemption": replace(GOOD, p99_wait_after_preemption_s=10_001),
        "goodput": replace(GOOD, goodput_pct=68.9),
        "high_p95": replace(GOOD, high_p95_wait_s=2_101),
    }
    for target, figures in misses.items():
        met = targets_met(figures, BASE)
        assert [k for k, ok in met.items() if not ok] == [target]


def test_relaunch_starved_must_be_zero_where_the_baseline_has_two_or_fewer() -> None:
    base = replace(BASE, relaunch_starved=2)
    assert not targets_met(replace(GOOD, relaunch_starved=1), base)["relaunch_starved"]
    assert targets_met(replace(GOOD, relaunch_starved=0), base)["relaunch_starved"]


def test_a_small_high_p95_increase_is_within_the_slack() -> None:
    base = replace(BASE, high_p95_wait_s=1)
    assert targets_met(replace(GOOD, high_p95_wait_s=61), base)["high_p95"]
    assert not targets_met(replace(GOOD, high_p95_wait_s=62), base)["high_p95"]


def point(
    carved: int, after: int, scope: LaneScope, figures: LaneFigures, *, empties_donor: bool = False
) -> SweepPoint:
    return SweepPoint(
        policy="rank+lane",
        scope=scope,
        gpus=carved,
        after_preemptions=after,
        carved_gpus=carved,
        figures=figures,
        met=targets_met(figures, BASE),
        lane_entries=1,
        lane_misfits=0,
        lane_preempted=0,
        empties_donor=empties_donor,
    )


def test_smallest_is_the_cheapest_meeting_all_and_closest_the_fewest_misses() -> None:
    bad_one = replace(GOOD, goodput_pct=60.0)
    bad_two = replace(bad_one, max_preemptions=5)
    points = [
        point(16, 2, LaneScope.TEAM, GOOD),
        point(8, 1, LaneScope.COHORT, GOOD),
        point(8, 2, LaneScope.COHORT, GOOD),
        point(4, 2, LaneScope.TEAM, bad_one),
        point(2, 2, LaneScope.TEAM, bad_two),
    ]
    best = lane_sizing.smallest(points)
    assert best is not None and (best.carved_gpus, best.after_preemptions) == (8, 2)  # cheapest, then larger k
    near = lane_sizing.closest(points[3:])
    assert near is not None and near.carved_gpus == 4  # one miss beats a cheaper lane with two
    assert lane_sizing.smallest(points[3:]) is None


def test_a_lane_that_empties_its_donor_is_never_chosen() -> None:
    whole = point(4, 2, LaneScope.TEAM, GOOD, empties_donor=True)
    part = point(8, 2, LaneScope.TEAM, GOOD)
    best = lane_sizing.smallest([whole, part])
    assert best is part
    assert lane_sizing.smallest([whole]) is None and lane_sizing.closest([whole]) is None


def test_among_equal_misses_the_closest_keeps_the_bound() -> None:
    misses_bound = point(2, 2, LaneScope.TEAM, replace(GOOD, max_preemptions=5))
    misses_goodput = point(8, 2, LaneScope.TEAM, replace(GOOD, goodput_pct=60.0))
    assert lane_sizing.closest([misses_bound, misses_goodput]) is misses_goodput


def test_lane_sweep_reports_the_curve_and_a_choice() -> None:
    result = invoke(
        "--trace", "reclaim-storm", "--hours", "24", "--lane-sweep", "--lane-sweep-gpus", "4,8",
        "--lane-sweep-after", "2", "--output", "json", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [(p["scope"], p["gpus"], p["after_preemptions"]) for p in data["points"]] == [
        ("team", 4, 2),
        ("team", 8, 2),
        ("cohort", 4, 2),
        ("cohort", 8, 2),
    ]
    assert all(p["lane_preempted"] == 0 for p in data["points"])
    assert all(p["max_preemptions"] <= 2 for p in data["points"] if p["lane_misfits"] == 0)
    assert data["closest"] is not None
    assert set(data["baseline"]) >= {"max_preemptions", "p99_wait_after_preemption_s", "high_p95_wait_s", "starved"}
    # Every starved job is shown beside the relaunch-starved ones (a lane's cost to jobs preempted once).
    assert all(p["starved"] >= p["relaunch_starved"] for p in [data["baseline"], *data["points"]])


def test_lane_sweep_text_names_the_recommendation_or_the_closest() -> None:
    result = invoke(
        "--trace", "reclaim-storm", "--hours", "24", "--lane-sweep", "--policies", "rank+cohort-lane",
        "--lane-donor", "team-c-cq", "--lane-sweep-gpus", "8", "--lane-sweep-after", "2", "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "relaunch lane sweep on reclaim-storm" in result.output
    assert " starved " in result.output.splitlines()[2]
    assert "recommended: rank+cohort-lane with 8 GPUs" in result.output or "closest: rank+cohort-lane" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policies", "baseline,rank", "--lane-gpus", "4"), "apply to +lane/+cohort-lane policies"),
        (("--lane-sweep-gpus", "4"), "apply to --lane-sweep"),
        (("--lane-sweep", "--lane-sweep-gpus", "4,0"), "--lane-sweep-gpus: expected comma-separated integers >= 1"),
        (("--lane-sweep", "--lane-sweep-after", "x"), "--lane-sweep-after: expected comma-separated integers >= 1"),
        (("--lane-sweep", "--policies", "rank+lane,baseline+cohort-lane"), "must share one base policy"),
        (("--lane-sweep", "--lane-donor", "nope"), "donor ClusterQueue 'nope' is not a ClusterQueue in a cohort"),
        (("--policies", "rank+lane", "--lane-donor", "team-c-cq"), "--lane-donor applies to +cohort-lane"),
        (("--lane-reclaim", "LowerPriority"), "--lane-reclaim applies to +lane/+cohort-lane policies"),
        (("--policies", "rank+safe+lane"), "unknown policy 'rank+safe+lane'"),
    ],
)
def test_bad_lane_input_is_one_line_and_exit_2(args: tuple[str, ...], message: str) -> None:
    result = invoke("--trace", "reclaim-storm", "--hours", "2", "--quiet", *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.slow  # draws with matplotlib
def test_lane_sweep_plot_is_written(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    path = tmp_path / "lane.png"
    result = invoke(
        "--trace", "reclaim-storm", "--hours", "12", "--lane-sweep", "--lane-sweep-gpus", "4,8",
        "--lane-sweep-after", "2", "--plot", str(path), "--quiet",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 10_000

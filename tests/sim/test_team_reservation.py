"""The safe-relaunch rule's team-scoped nominal reservation: the decision, and the simulator applying it."""

from __future__ import annotations

import pytest

from sky_kueue.controller.aging.safe_relaunch import (
    Placement,
    SafeRelaunchInput,
    SafeRelaunchKind,
    SafeRelaunchSettings,
    SafeRelaunchSettingsError,
    TeamReservationScope,
    TeamWorkload,
    decide_safe_relaunch,
    team_work_to_hold,
)
from sky_kueue.sim import policies
from sky_kueue.sim.multicluster import MultiClusterSimulator, PlacementStrategy
from sky_kueue.sim.simulator import Simulator
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id, team_above_nominal

HEAD = SafeRelaunchSettings(safe_after_preemptions=2, team_reservation=TeamReservationScope.HEAD)
#: Borrowing now, no safe place predicted: without the reservation the relaunch is not held.
UNSAFE = Placement("c", admits_now=True, borrows=True, predicted_safe_wait_seconds=None)


def _job(reserved: Placement | None, held: float | None = None, own: Placement = UNSAFE) -> SafeRelaunchInput:
    return SafeRelaunchInput(preemptions=2, held_seconds=held, own=own, own_reserved=reserved)


def test_without_the_reservation_an_unpredicted_safe_place_is_not_held() -> None:
    plain = decide_safe_relaunch(_job(None), HEAD)
    assert plain.kind is SafeRelaunchKind.RUN_NOW
    assert not plain.reserves_team_quota


def test_holding_the_teams_work_back_makes_a_safe_place_predictable_and_the_relaunch_waits_for_it() -> None:
    reserved = Placement("c", admits_now=False, borrows=True, predicted_safe_wait_seconds=120.0)
    decision = decide_safe_relaunch(_job(reserved), HEAD)
    assert decision.kind is SafeRelaunchKind.HOLD
    assert decision.reserves_team_quota
    assert decision.predicted_wait_seconds == 120.0
    assert "team's newer work held back" in decision.reason


def test_a_relaunch_that_fits_once_its_teams_work_is_held_is_released_with_the_reservation() -> None:
    reserved = Placement("c", admits_now=True, borrows=False)
    decision = decide_safe_relaunch(_job(reserved, held=60.0), HEAD)
    assert decision.kind is SafeRelaunchKind.RELEASE_SAFE
    assert decision.reserves_team_quota  # the held work stays inactive until it is admitted


def test_the_reservation_ends_with_the_hold_bound_and_is_off_by_default() -> None:
    reserved = Placement("c", admits_now=False, borrows=True, predicted_safe_wait_seconds=120.0)
    timed_out = decide_safe_relaunch(_job(reserved, held=HEAD.safe_max_hold_seconds), HEAD)
    assert timed_out.kind is SafeRelaunchKind.RELEASE_TIMEOUT
    assert not timed_out.reserves_team_quota
    off = decide_safe_relaunch(_job(reserved), SafeRelaunchSettings(safe_after_preemptions=2))
    assert not off.reserves_team_quota and off.kind is SafeRelaunchKind.RUN_NOW


def test_min_wait_reserves_only_when_the_plain_safe_wait_is_long() -> None:
    settings = SafeRelaunchSettings(
        safe_after_preemptions=2, team_reservation=TeamReservationScope.HEAD, team_reservation_min_wait_seconds=600
    )
    reserved = Placement("c", admits_now=False, borrows=True, predicted_safe_wait_seconds=60.0)
    soon = Placement("c", admits_now=False, borrows=True, predicted_safe_wait_seconds=300.0)
    short = decide_safe_relaunch(_job(reserved, own=soon), settings)
    assert short.kind is SafeRelaunchKind.HOLD and not short.reserves_team_quota
    late = Placement("c", admits_now=False, borrows=True, predicted_safe_wait_seconds=1_200.0)
    long = decide_safe_relaunch(_job(reserved, own=late), settings)
    assert long.kind is SafeRelaunchKind.HOLD and long.reserves_team_quota
    assert long.predicted_wait_seconds == 60.0


def test_which_team_work_is_held_scope_class_and_cap() -> None:
    relaunch = TeamWorkload("r", class_priority=100, created_at=50.0)
    pending = [
        TeamWorkload("high", 200, 10.0),  # a higher class is never held
        TeamWorkload("older", 100, 10.0),
        TeamWorkload("older-low", 0, 20.0),
        TeamWorkload("newer", 100, 60.0),
        TeamWorkload("newer-2", 100, 70.0),
    ]
    assert team_work_to_hold(relaunch, pending, HEAD) == ("older", "older-low", "newer", "newer-2")
    newer = SafeRelaunchSettings(safe_after_preemptions=2, team_reservation=TeamReservationScope.NEWER)
    assert team_work_to_hold(relaunch, pending, newer) == ("newer", "newer-2")
    capped = SafeRelaunchSettings(
        safe_after_preemptions=2, team_reservation=TeamReservationScope.HEAD, team_reservation_max_held=2
    )
    assert team_work_to_hold(relaunch, pending, capped) == ("older", "older-low")
    assert team_work_to_hold(relaunch, pending, SafeRelaunchSettings(safe_after_preemptions=2)) == ()


def test_bad_reservation_settings_fail_with_the_key() -> None:
    with pytest.raises(SafeRelaunchSettingsError, match="team_reservation_max_held"):
        SafeRelaunchSettings(team_reservation_max_held=0)
    with pytest.raises(SafeRelaunchSettingsError, match="team_reservation_min_wait_seconds"):
        SafeRelaunchSettings(team_reservation_min_wait_seconds=-1.0)


def test_team_names_resolve_and_bad_ones_fail() -> None:
    policy = policies.resolve("rank+team")
    assert policy.name == "rank+team"
    assert policy.safe_relaunch is not None
    assert policy.safe_relaunch.team_reservation is TeamReservationScope.HEAD
    for bad in ("rank+safe+team", "rank+team+team", "nope+team"):
        with pytest.raises(policies.UnknownSimPolicyError):
            policies.resolve(bad)


def test_counter_example_the_reservation_gives_the_starved_job_its_safe_place_and_the_team_pays() -> None:
    """Where the plain hold finds no safe place, holding the team's own stream back does: the
    4-GPU job is admitted in nominal quota at its first relaunch and never reclaimed again. The
    wait moves onto the team's own small jobs (none waited before; every one that arrives during
    a reservation waits now, and their relaunches reserve in turn), which is what the benchmark
    measures at scale: on dev-starvation, where many relaunches starve at once, reservations
    follow each other and the team's fresh work starves (issue 24, benchmarks/README.md)."""
    trace = team_above_nominal()
    baseline = by_id(Simulator(trace, policies.resolve("baseline"), NO_DELAY).run())
    safe = SafeRelaunchSettings(safe_after_preemptions=1, safe_max_hold_seconds=900)
    run = Simulator(trace, policies.resolve("baseline+team", safe=safe), NO_DELAY).run()
    jobs = by_id(run)
    assert baseline["a-big"].preemptions >= 5
    assert jobs["a-big"].preemptions == 1
    assert jobs["a-big"].end_s is not None and baseline["a-big"].end_s is not None
    assert jobs["a-big"].end_s < baseline["a-big"].end_s - 3_000
    assert run.safe.team_reservations >= 1 and run.safe.team_held_back >= 1
    smalls = [job for job_id, job in jobs.items() if job_id.startswith("a-small")]
    baseline_smalls = [job for job_id, job in baseline.items() if job_id.startswith("a-small")]
    assert sum(job.wait_s for job in baseline_smalls) == 0
    assert sum(job.wait_s for job in smalls) > 10 * jobs["a-big"].duration_s
    # Other teams are never held: the owners wait no longer than without the rule.
    assert all(jobs[f"b-owner-{i}"].wait_s <= baseline[f"b-owner-{i}"].wait_s + 1 for i in range(10))


def test_the_reservation_is_modelled_in_one_cluster_only() -> None:
    trace = team_above_nominal()
    with pytest.raises(ValueError, match="one cluster"):
        MultiClusterSimulator(
            trace,
            policies.resolve("rank+team"),
            [trace.cluster, trace.cluster],
            PlacementStrategy.FIXED_ORDER,
            NO_DELAY,
        )


def test_counter_example_nominal_quota_does_not_shield_from_the_teams_own_higher_class() -> None:
    """Why the reservation cannot halve the storms' max preemptions: 30-50 % of the hot storm's
    top-job preemptions (0-75 % on ``reclaim-storm``, seeds 0-4; benchmarks/README.md, "Where the
    top job's preemptions come from") are InClusterQueue, by its own team's higher class, and a place in nominal
    quota is no shield against that (``withinClusterQueue: LowerPriority``). The reservation never
    holds a higher class back (no harm to it), so every one of a's high-class arrivals still
    preempts the relaunch that was released into nominal quota."""
    builder = TraceBuilder().team("a", gpus=4, cohort="org").team("b", gpus=4, cohort="org")
    builder.job("a-big", at=0, gpus=4, run=3000, team="a")
    for index in range(5):
        builder.job(f"a-high-{index}", at=500 + 700 * index, gpus=4, run=200, klass="high", team="a")
    builder.job("b-owner", at=0, gpus=4, run=6000, klass="high", team="b")
    trace = builder.trace()
    safe = SafeRelaunchSettings(safe_after_preemptions=1, safe_max_hold_seconds=900)
    baseline = Simulator(trace, policies.resolve("baseline"), NO_DELAY).run()
    run = Simulator(trace, policies.resolve("baseline+team", safe=safe), NO_DELAY).run()
    assert run.safe.released_safe >= 4  # each relaunch waited for, and got, nominal quota...
    assert by_id(run)["a-big"].preemptions == by_id(baseline)["a-big"].preemptions == 5  # ...and was preempted anyway
    assert run.preemptions_by_reason == {"InClusterQueue": 5}
    assert all(by_id(run)[f"a-high-{i}"].wait_s <= 1 for i in range(5))

"""The safe-relaunch rule: hold a repeatedly preempted relaunch until it would not borrow."""

from __future__ import annotations

import pytest

from sky_kueue.controller.aging.safe_relaunch import (
    Placement,
    SafeRelaunchInput,
    SafeRelaunchKind,
    SafeRelaunchSettings,
    SafeRelaunchSettingsError,
    decide_safe_relaunch,
    format_duration,
    placement_from_verdict,
)
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.whatif import quick_verdict
from sky_kueue.sim.cluster import (
    ClusterSpec,
    SimCluster,
    TeamSpec,
    at,
    build_cluster,
    fresh_state,
    make_workload,
)

ON = SafeRelaunchSettings(safe_after_preemptions=2, safe_max_hold_seconds=1800.0, hold_only_when_predicted=False)
#: The default: hold only when a safe place is predicted within the hold.
PREDICTED = SafeRelaunchSettings(safe_after_preemptions=2, safe_max_hold_seconds=1800.0)
BORROWS = Placement("c1", admits_now=True, borrows=True, predicted_safe_wait_seconds=240.0)
SAFE = Placement("c1", admits_now=True, borrows=False)


def job(preemptions: int = 2, held: float | None = None, own: Placement = BORROWS, **kw: object) -> SafeRelaunchInput:
    return SafeRelaunchInput(preemptions=preemptions, held_seconds=held, own=own, **kw)  # type: ignore[arg-type]


def test_off_by_default_runs_now_whatever_the_placement() -> None:
    decision = decide_safe_relaunch(job(preemptions=9), SafeRelaunchSettings())
    assert decision.kind is SafeRelaunchKind.RUN_NOW
    assert decision.cluster == "c1"
    assert not decision.holds


def test_below_the_preemption_count_runs_now() -> None:
    decision = decide_safe_relaunch(job(preemptions=1), ON)
    assert decision.kind is SafeRelaunchKind.RUN_NOW
    assert decision.reason == "preempted 1x, safe relaunch after 2"


def test_a_borrowing_admission_is_held_with_the_predicted_wait() -> None:
    decision = decide_safe_relaunch(job(), ON)
    assert decision.kind is SafeRelaunchKind.HOLD
    assert decision.holds
    assert decision.reason == "held: waiting for nominal quota (predicted 4m)"
    assert decision.predicted_wait_seconds == 240.0
    assert decision.release_by_seconds == 1800.0


def test_pending_but_nominal_enters_the_queue_a_hold_would_only_delay_it() -> None:
    pending = Placement("c1", admits_now=False, borrows=False)
    decision = decide_safe_relaunch(job(own=pending), ON)
    assert decision.kind is SafeRelaunchKind.RUN_NOW
    assert decision.reason == "queued for nominal quota"
    released = decide_safe_relaunch(job(own=pending, held=60.0), ON)
    assert released.kind is SafeRelaunchKind.RELEASE_SAFE
    assert released.reason == "released: queued for nominal quota of c1 after 1m held"


def test_pending_without_a_prediction_is_held_and_says_unknown() -> None:
    pending = Placement("c1", admits_now=False, borrows=True)
    decision = decide_safe_relaunch(job(own=pending, held=600.0), ON)
    assert decision.kind is SafeRelaunchKind.HOLD
    assert decision.reason == "held: waiting for nominal quota (predicted wait unknown)"
    assert decision.release_by_seconds == 1200.0


def test_safe_now_runs_at_once_or_is_released_once_held() -> None:
    assert decide_safe_relaunch(job(own=SAFE), ON).kind is SafeRelaunchKind.RUN_NOW
    released = decide_safe_relaunch(job(own=SAFE, held=300.0), ON)
    assert released.kind is SafeRelaunchKind.RELEASE_SAFE
    assert released.cluster == "c1"
    assert released.reason == "released: fits in nominal quota of c1 after 5m held"


def test_another_cluster_of_the_team_with_nominal_room_takes_it() -> None:
    other_borrows = Placement("c2", admits_now=True, borrows=True)
    other_safe = Placement("c3", admits_now=True, borrows=False)
    decision = decide_safe_relaunch(job(others=(other_borrows, other_safe)), ON)
    assert decision.kind is SafeRelaunchKind.RELEASE_SAFE
    assert decision.cluster == "c3"


def test_by_default_a_hold_that_can_only_time_out_is_not_made() -> None:
    assert PREDICTED.hold_only_when_predicted
    assert decide_safe_relaunch(job(), PREDICTED).kind is SafeRelaunchKind.HOLD  # predicted 4m < 30m
    late = Placement("c1", admits_now=True, borrows=True, predicted_safe_wait_seconds=2400.0)
    decision = decide_safe_relaunch(job(own=late), PREDICTED)
    assert decision.kind is SafeRelaunchKind.RUN_NOW
    assert decision.reason == "not held: safe place predicted in 40m, beyond the hold left (30m)"
    unknown = Placement("c1", admits_now=True, borrows=True)
    released = decide_safe_relaunch(job(own=unknown, held=600.0), PREDICTED)
    assert released.kind is SafeRelaunchKind.RELEASE_TIMEOUT
    assert released.reason == "released: no safe place predicted, beyond the hold left (20m)"


def test_the_hold_is_bounded() -> None:
    decision = decide_safe_relaunch(job(held=1800.0), ON)
    assert decision.kind is SafeRelaunchKind.RELEASE_TIMEOUT
    assert decision.cluster == "c1"
    assert decision.reason == "released: held 30m >= safe_max_hold_seconds 30m"


def test_burst_when_the_predicted_safe_wait_exceeds_the_limit() -> None:
    settings = SafeRelaunchSettings(safe_after_preemptions=2, burst_max_predicted_wait_seconds=120.0)
    decision = decide_safe_relaunch(job(burst_clouds=("aws", "gcp")), settings)
    assert decision.kind is SafeRelaunchKind.BURST
    assert decision.cloud == "aws"
    assert decision.reason == "burst to aws: predicted safe wait 4m > limit 2m"
    # Within the limit: hold; no cloud: hold even beyond it.
    short = Placement("c1", admits_now=True, borrows=True, predicted_safe_wait_seconds=60.0)
    assert decide_safe_relaunch(job(own=short, burst_clouds=("aws",)), settings).kind is SafeRelaunchKind.HOLD
    assert decide_safe_relaunch(job(), settings).kind is SafeRelaunchKind.HOLD


def test_the_shortest_safe_wait_over_clusters_is_reported() -> None:
    other = Placement("c2", admits_now=False, borrows=True, predicted_safe_wait_seconds=90.0)
    decision = decide_safe_relaunch(job(others=(other,)), ON)
    assert decision.kind is SafeRelaunchKind.HOLD
    assert decision.predicted_wait_seconds == 90.0


def test_per_team_overrides() -> None:
    settings = SafeRelaunchSettings(safe_after_preemptions=None, teams={"dev": 1, "prod": None})
    assert settings.enabled
    assert decide_safe_relaunch(job(preemptions=1, team="dev"), settings).kind is SafeRelaunchKind.HOLD
    assert decide_safe_relaunch(job(preemptions=5, team="prod"), settings).kind is SafeRelaunchKind.RUN_NOW
    assert decide_safe_relaunch(job(preemptions=5, team="other"), settings).kind is SafeRelaunchKind.RUN_NOW
    assert settings.for_team("dev").safe_after_preemptions == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"safe_after_preemptions": 0},
            "safe_relaunch.safe_after_preemptions: expected an integer >= 1 or null, got 0",
        ),
        ({"safe_max_hold_seconds": -1}, "safe_relaunch.safe_max_hold_seconds: expected a finite number"),
        ({"teams": {"dev": "x"}}, "safe_relaunch.teams.dev: expected an integer >= 1 or null, got 'x'"),
        ({"safe_after": 2}, "safe_relaunch: unknown key 'safe_after'"),
    ],
)
def test_bad_settings_are_one_line_errors(data: dict[str, object], message: str) -> None:
    with pytest.raises(SafeRelaunchSettingsError) as err:
        SafeRelaunchSettings.from_mapping(data)
    assert str(err.value).startswith(message)


def test_settings_round_trip() -> None:
    settings = SafeRelaunchSettings(safe_after_preemptions=3, burst_max_predicted_wait_seconds=60.0, teams={"a": 1})
    assert SafeRelaunchSettings.from_mapping(settings.to_mapping()) == settings


def test_format_duration() -> None:
    assert [format_duration(s) for s in (0, 45, 240, 3900)] == ["0s", "45s", "4m", "1h05m"]


def _engine_with_team_a_full() -> tuple[Engine, SimCluster]:
    """Two teams of 4 GPUs in one cohort; team a's nominal quota is fully used."""
    cluster = build_cluster(ClusterSpec(teams=(TeamSpec("a", gpus=4), TeamSpec("b", gpus=4))))
    engine = Engine(fresh_state(cluster.state), at(0.0))
    running = make_workload(
        name="a-run", queue=cluster.queues["a"], created_at=0.0, priority=50, priority_class="low",
        gpus=4, cpu_milli=4000, memory_bytes=4 * 2**30,
    )  # fmt: skip
    engine.add_workload(running)
    result = engine.cycle()
    engine.settle_events(result)
    assert [e.info.key for e in result.admitted] == [running.key]
    return engine, cluster


def test_the_model_says_whether_an_admission_borrows() -> None:
    engine, cluster = _engine_with_team_a_full()
    queues = cluster.queues

    def relaunch(team: str) -> Placement:
        wl = make_workload(
            name=f"{team}-relaunch", queue=queues[team], created_at=1.0, priority=50, priority_class="low",
            gpus=2, cpu_milli=2000, memory_bytes=2 * 2**30,
        )  # fmt: skip
        return placement_from_verdict(team, quick_verdict(engine, wl), predicted_safe_wait_seconds=None)

    in_a = relaunch("a")  # fits only in team b's idle quota: a borrowed, reclaimable admission
    assert in_a.admits_now and in_a.borrows and not in_a.safe_now
    in_b = relaunch("b")  # team b's own nominal quota
    assert in_b.admits_now and not in_b.borrows and in_b.safe_now
    decision = decide_safe_relaunch(SafeRelaunchInput(preemptions=2, held_seconds=None, own=in_a, others=(in_b,)), ON)
    assert decision.kind is SafeRelaunchKind.RELEASE_SAFE
    assert decision.cluster == "b"

"""The hold's crash and edge cases, on the engine with a scripted predictor; its config.

The live path (sandbox API server, mirror, predictor) is ``test_live_hold.py``; here each
case a live run rarely shows: a hold stored but not patched (crash, transient error), a
release stored but not patched, a Workload someone else reactivated, a team that turned the
rule off while a relaunch was held, a team that bursts rather than holds.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sky_kueue.controller.actuators import ActuationOutcome
from sky_kueue.controller.aging.safe_relaunch import DEFAULT_SAFE_MAX_HOLD_SECONDS, Placement, SafeRelaunchSettings
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.config_file import ConfigFileError
from sky_kueue.controller.detection import WorkloadFacts
from sky_kueue.controller.engine import AgingEngine
from sky_kueue.controller.hold import HOLD_ANNOTATION, HoldAction, HoldKeeper, HoldTeams, TeamHold
from sky_kueue.controller.hold_config import hold_teams, load_hold_teams
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.skypilot import config as plugin_config

from .fakes import RecordingActuator, transient
from .test_engine import SETTINGS, Cluster, preempt_and_relaunch

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sky-kueue.yaml"


class ScriptedProbe:
    """Answers every question with ``placement`` (change it between reconciles)."""

    def __init__(self, placement: Placement | None) -> None:
        self.placement_now = placement
        self.asked: list[str] = []

    def placement(self, facts: WorkloadFacts, cluster: str, protected_level: int | None = None) -> Placement | None:
        self.asked.append(facts.uid)
        return self.placement_now


BORROWS = Placement("this cluster", admits_now=True, borrows=True)
SAFE = Placement("this cluster", admits_now=True, borrows=False)


def _engine(
    store: SqliteHistoryStore,
    clock: ManualClock,
    probe: ScriptedProbe,
    actuator: RecordingActuator,
    team: TeamHold | None = None,
) -> AgingEngine:
    teams = HoldTeams({} if team is None else {"team-b": team})
    keeper = HoldKeeper(store, actuator, teams, probe)
    return AgingEngine(store, actuator, SETTINGS, clock=clock, holds=keeper)


def _team(**settings: object) -> TeamHold:
    values: dict[str, object] = {
        "safe_after_preemptions": 1,
        "safe_max_hold_seconds": 600.0,
        "hold_only_when_predicted": False,
    }
    values.update(settings)
    clouds = ("aws",) if values.get("burst_max_predicted_wait_seconds") is not None else ()
    return TeamHold("team-b", SafeRelaunchSettings(**values), burst_clouds=clouds)  # type: ignore[arg-type]


def _held_relaunch(store: SqliteHistoryStore, clock: ManualClock, actuator: RecordingActuator) -> tuple[Cluster, str]:
    cluster = Cluster(clock)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, _team())
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert outcome.hold is not None and outcome.hold.action is HoldAction.HELD
    return cluster, nxt


def test_a_hold_stored_but_not_patched_is_patched_by_the_next_reconcile_and_stored_once(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    actuator = RecordingActuator([ActuationOutcome.APPLIED, transient()])  # the aging patch lands, the hold's fails
    cluster = Cluster(clock)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, _team())
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    first = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert first.hold is not None and first.hold.actuation is None and "will retry" in first.hold.notes[0]

    again = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))  # still active: the patch did not land

    assert again.hold is not None and again.hold.action is HoldAction.STILL_HELD
    holds = [p.body for p in actuator.patches if "active" in p.body.get("spec", {})]
    assert len(holds) == 2 and holds[0] == holds[1]
    assert holds[1]["spec"] == {"active": False} and holds[1]["metadata"]["uid"] == nxt
    history = store.load("managed-job/17")
    assert history is not None and [h.workload_uid for h in history.holds] == [nxt]


def test_a_workload_reactivated_by_someone_else_is_recorded_released_and_not_held_again(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    actuator = RecordingActuator()
    cluster, nxt = _held_relaunch(store, clock, actuator)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, _team())
    patches = len(actuator.patches)
    reactivated = cluster.pending(nxt, 1_010).annotation(HOLD_ANNOTATION, "held: ...")  # active, our annotation

    outcome = engine.reconcile(cluster.detect(reactivated))
    later = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))

    assert outcome.hold is not None and outcome.hold.release_kind is not None
    assert outcome.hold.release_kind.value == "reactivated" and later.hold is None
    assert len(actuator.patches) == patches  # nothing sent back: the Workload is someone else's call now
    history = store.load("managed-job/17")
    assert history is not None and history.holds[0].release_kind == "reactivated"


def test_a_release_stored_but_not_patched_is_sent_again(store: SqliteHistoryStore, clock: ManualClock) -> None:
    actuator = RecordingActuator()
    cluster, nxt = _held_relaunch(store, clock, actuator)
    held = cluster.pending(nxt, 1_010).inactive().annotation(HOLD_ANNOTATION, "held: ...")
    engine = _engine(store, clock, ScriptedProbe(SAFE), actuator, _team())
    released = engine.reconcile(cluster.detect(held))
    assert released.hold is not None and released.hold.action is HoldAction.RELEASED

    resent = engine.reconcile(cluster.detect(held))  # a snapshot still held: the release did not land

    assert resent.hold is not None and resent.hold.action is HoldAction.RELEASED
    bodies = [p.body for p in actuator.patches[-2:]]
    assert (
        bodies[0]
        == bodies[1]
        == {
            "metadata": {"uid": nxt, "annotations": {HOLD_ANNOTATION: None}},
            "spec": {"active": True},
        }
    )
    history = store.load("managed-job/17")
    assert history is not None and history.holds[0].release_kind == "safe"


def test_a_team_that_turns_the_rule_off_gets_its_held_relaunch_released(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    actuator = RecordingActuator()
    cluster, nxt = _held_relaunch(store, clock, actuator)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, team=None)  # config reloaded without it

    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010).inactive().annotation(HOLD_ANNOTATION, "x")))

    assert outcome.hold is not None and outcome.hold.release_kind is not None
    assert outcome.hold.release_kind.value == "disabled"
    assert actuator.patches[-1].body["spec"] == {"active": True}


def test_below_k_preemptions_the_predictor_is_not_even_asked(store: SqliteHistoryStore, clock: ManualClock) -> None:
    probe = ScriptedProbe(BORROWS)
    actuator = RecordingActuator()
    cluster = Cluster(clock)
    engine = _engine(store, clock, probe, actuator, _team(safe_after_preemptions=2))
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)

    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))

    assert outcome.hold is None and probe.asked == []


def test_the_preempted_pod_group_itself_is_never_held_only_its_relaunch(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    # Real Kueue: once the preempted group's pods are gone its Workload waits, quota released,
    # until Kueue writes Finished; it is not a relaunch and is never admitted again.
    actuator = RecordingActuator()
    cluster = Cluster(clock)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, _team())
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)

    dying = engine.reconcile(cluster.detect(cluster.pending("w0", 0), with_pods=False))
    relaunch = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))

    assert dying.hold is None
    assert relaunch.hold is not None and relaunch.hold.action is HoldAction.HELD
    history = store.load("managed-job/17")
    assert history is not None and [h.workload_uid for h in history.holds] == [nxt]


def test_a_team_that_may_burst_bursts_instead_of_holding_when_no_safe_place_is_predicted(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    actuator = RecordingActuator()
    cluster = Cluster(clock)
    engine = _engine(store, clock, ScriptedProbe(BORROWS), actuator, _team(burst_max_predicted_wait_seconds=900.0))
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)

    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))

    assert outcome.hold is not None and outcome.hold.action is HoldAction.BURST
    assert outcome.burst is not None and outcome.burst.reason == "predicted-safe-wait"
    assert outcome.burst.detail == "burst to aws: no safe place predicted > limit 15m"
    history = store.load("managed-job/17")
    assert history is not None and history.holds == () and history.burst is not None
    assert all("active" not in p.body.get("spec", {}) for p in actuator.patches)


# --- config ---------------------------------------------------------------------------------


def test_the_plugin_default_is_the_rules_default() -> None:
    assert plugin_config.DEFAULT_SAFE_MAX_HOLD_SECONDS == DEFAULT_SAFE_MAX_HOLD_SECONDS


def test_hold_teams_maps_each_teams_namespace_and_leaves_the_others_out() -> None:
    data = plugin_config.load_config(CONFIG).model_dump()
    data["teams"]["team-b"]["safe_after_preemptions"] = 2
    data["teams"]["team-b"]["safe_max_hold_seconds"] = 900
    teams = hold_teams(plugin_config.validate_config(data))
    team_b = teams.for_namespace("team-b")
    assert team_b is not None and team_b.settings.safe_after_preemptions == 2
    assert team_b.settings.safe_max_hold_seconds == 900.0 and team_b.burst_clouds == ()
    assert teams.for_namespace("team-a") is None and teams.enabled


def test_the_shipped_config_holds_nothing() -> None:
    assert not load_hold_teams(CONFIG).enabled


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("safe_after_preemptions", 0, "teams.team-b.safe_after_preemptions"),
        ("safe_max_hold_seconds", -5, "teams.team-b.safe_max_hold_seconds"),
        ("safe_max_hold", 60, "teams.team-b.safe_max_hold"),
    ],
)
def test_bad_safe_relaunch_settings_are_one_line_errors_naming_the_key(
    tmp_path: Path, key: str, value: int, expected: str
) -> None:
    text = CONFIG.read_text().replace(
        "    admission_timeout_seconds: 86400\n    # Safe relaunch",
        f"    admission_timeout_seconds: 86400\n    {key}: {value}\n    # Safe relaunch",
    )
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as caught:
        load_hold_teams(path)
    message = str(caught.value)
    assert expected in message and "\n" not in message and str(path) in message


def test_by_default_a_relaunch_is_held_only_when_nominal_quota_is_predicted_within_the_hold(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    actuator = RecordingActuator()
    cluster = Cluster(clock)
    probe = ScriptedProbe(Placement("this cluster", admits_now=True, borrows=True, predicted_safe_wait_seconds=240))
    team = TeamHold("team-b", SafeRelaunchSettings(safe_after_preemptions=1))  # hold_only_when_predicted: default
    engine = _engine(store, clock, probe, actuator, team)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)

    held = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert held.hold is not None and held.hold.record is not None
    assert held.hold.record.reason == "held: waiting for nominal quota (predicted 4m)"

    probe.placement_now = BORROWS  # no prediction: a later relaunch is not held
    other = preempt_and_relaunch(cluster, engine, "w1", 2_000)
    assert engine.reconcile(cluster.detect(cluster.pending(other, 3_010))).hold is None

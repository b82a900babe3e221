"""The teams' burst gates from sky-kueue.yaml: a team with a ``burst:`` section is gated, per namespace."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.config_file import ConfigFileError, load_controller_config
from sky_kueue.controller.detection import WorkloadFacts
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedWaitKind
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

from .test_engine import SETTINGS as ENGINE_SETTINGS
from .test_engine import Cluster, engine_for, preempt_and_relaunch

SHIPPED_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "sky-kueue.yaml"


def _config(tmp_path: Path, **burst: object) -> Path:
    data = yaml.safe_load(SHIPPED_CONFIG.read_text())
    data["teams"]["team-a"]["burst"].update(burst)
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_shipped_config_gates_the_team_that_may_burst_with_the_defaults() -> None:
    gates = load_controller_config(SHIPPED_CONFIG).burst_gates
    assert gates.for_namespace("team-a") == PredictedBurstSettings(600.0, 300.0)
    assert gates.for_namespace("team-b") is None  # no burst section: the count alone, as before


def test_a_teams_keys_set_its_gate(tmp_path: Path) -> None:
    gates = load_controller_config(
        _config(tmp_path, cloud_startup_seconds=240, predicted_wait_margin_seconds=0)
    ).burst_gates
    gate = gates.for_namespace("team-a")
    assert gate is not None and gate.threshold_seconds == 240.0


def test_an_unknown_team_gets_the_strictest_gate_and_no_gate_without_burst_teams() -> None:
    gates = BurstGates({"a": PredictedBurstSettings(600.0, 0.0), "b": PredictedBurstSettings(600.0, 900.0)})
    assert gates.for_namespace(None) == PredictedBurstSettings(600.0, 900.0)
    assert gates.for_namespace("c") is None
    assert BurstGates().for_namespace(None) is None and not BurstGates().enabled


def test_an_unknown_team_gets_the_most_stays_any_team_allows() -> None:
    one, three = PredictedBurstSettings(600.0, 900.0, max_stays=1), PredictedBurstSettings(600.0, 0.0, max_stays=3)
    gate = BurstGates({"a": one, "b": three}).for_namespace(None)
    assert gate == PredictedBurstSettings(600.0, 900.0, max_stays=3)
    unbounded = BurstGates({"a": one, "b": PredictedBurstSettings(max_stays=None)}).for_namespace(None)
    assert unbounded is not None and unbounded.max_stays is None


def test_a_teams_stay_bound_reaches_its_gate_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    gate = load_controller_config(_config(tmp_path, predicted_wait_gate_max_stays=3)).burst_gates.for_namespace(
        "team-a"
    )
    assert gate is not None and gate.max_stays == 3
    gate = load_controller_config(_config(tmp_path, predicted_wait_gate_max_stays=None)).burst_gates.for_namespace(
        "team-a"
    )
    assert gate is not None and gate.max_stays is None
    with pytest.raises(ConfigFileError, match=r"teams\.team-a\.burst\.predicted_wait_gate_max_stays"):
        load_controller_config(_config(tmp_path, predicted_wait_gate_max_stays=-1))


def test_a_negative_margin_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="predicted_wait_margin_seconds"):
        load_controller_config(_config(tmp_path, predicted_wait_margin_seconds=-1))


def test_predicted_wait_gate_false_leaves_the_team_ungated(tmp_path: Path) -> None:
    # team-a is the shipped config's only team with a burst section: with its gate off no
    # namespace is gated, so the controller does not ask the predictor (nor watch queue kinds).
    gates = load_controller_config(_config(tmp_path, predicted_wait_gate=False)).burst_gates
    assert gates.for_namespace("team-a") is None and not gates.enabled
    assert gates.by_team == {"team-a": None, "team-b": None}
    assert gates.for_namespace(None, team="team-a") is None
    assert gates.for_namespace(None) is None


def test_predicted_wait_gate_true_is_the_default_gate(tmp_path: Path) -> None:
    gates = load_controller_config(_config(tmp_path, predicted_wait_gate=True)).burst_gates
    assert gates.for_namespace("team-a") == PredictedBurstSettings(600.0, 300.0)
    assert gates.by_team["team-a"] == PredictedBurstSettings(600.0, 300.0)


def test_an_unknown_namespace_takes_its_teams_gate_when_the_team_is_known() -> None:
    strict = PredictedBurstSettings(600.0, 900.0)
    gates = BurstGates({"b": strict}, {"a": None, "b": strict})
    assert gates.for_namespace(None, team="a") is None  # gate off: the count alone
    assert gates.for_namespace(None, team="b") == strict
    assert gates.for_namespace(None, team="unknown") == strict  # not a team of the config: strictest
    assert gates.for_namespace("a", team="b") is None  # a known namespace wins over the label


@pytest.mark.parametrize("bad", ["maybe", 2, [True], None])
def test_a_bad_predicted_wait_gate_is_refused_naming_the_key(tmp_path: Path, bad: object) -> None:
    path = _config(tmp_path, predicted_wait_gate=bad)
    said = r"teams\.team-a\.burst\.predicted_wait_gate: Input should be a valid boolean"
    with pytest.raises(ConfigFileError, match=said):
        load_controller_config(path)
    result = CliRunner().invoke(cli, ["check-config", "--no-skypilot", str(path)])
    assert result.exit_code == 2
    assert "teams.team-a.burst.predicted_wait_gate" in result.output


class _OnPremSoon:
    """The predictor's answer for every relaunch: admitted on-prem in a minute."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def relaunch_wait(self, facts: WorkloadFacts, priority: int, kind: PredictedWaitKind) -> float | None:
        self.asked.append(facts.name)
        return 60.0


@pytest.mark.parametrize("gate", [True, False])
def test_the_controller_bursts_a_gate_off_teams_job_on_its_preemption_count(
    store: SqliteHistoryStore, clock: ManualClock, tmp_path: Path, gate: bool
) -> None:
    # team-b (the engine tests' namespace) may burst to AWS after one preemption. Gated, the
    # predictor's 60-s on-prem wait keeps its preempted job in Kueue; with
    # predicted_wait_gate: false the predictor is not asked and the count bursts it.
    data = yaml.safe_load(SHIPPED_CONFIG.read_text())
    data["teams"]["team-b"]["burst"] = {"max_queue_wait_seconds": 900, "clouds": ["aws"], "predicted_wait_gate": gate}
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    waits = _OnPremSoon()
    engine, _ = engine_for(
        store,
        clock,
        settings=replace(ENGINE_SETTINGS, burst_after_preemptions=1),
        burst_gates=load_controller_config(path).burst_gates,
        relaunch_wait=waits,
    )
    cluster = Cluster(clock)
    relaunch = preempt_and_relaunch(cluster, engine, "w0", 0)
    engine.reconcile(cluster.detect(cluster.pending(relaunch, 1_010)))
    history = store.load("managed-job/17")
    assert history is not None
    if gate:
        assert history.burst is None and waits.asked  # asked, and on-prem is sooner than the cloud
    else:
        assert waits.asked == []
        assert history.burst is not None and history.burst.reason == "preemptions"

"""The teams' burst gates from sky-kueue.yaml: a team with a ``burst:`` section is gated, per namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.config_file import ConfigFileError, load_controller_config
from sky_kueue.controller.predicted_burst import PredictedBurstSettings

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


def test_a_negative_margin_is_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError, match="predicted_wait_margin_seconds"):
        load_controller_config(_config(tmp_path, predicted_wait_margin_seconds=-1))

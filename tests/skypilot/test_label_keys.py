"""A misspelled ``sky-kueue.io/`` label key in a task is refused with the key it resembles,
by the admin policy and by ``predict --task``; it used to be ignored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.skypilot.decision import MESSAGE_PREFIX, Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.label_keys import misspelled_label
from tests.skypilot.builders import PRODUCTION_CONFIG, SEED_SCENARIO, config, request, task

#: carol belongs to team-a through her workspace: a task needs no team label to be placed.
VISION = config(teams={"team-a": {"workspaces": ["vision"]}, "team-b": {"users": ["bob"]}})


def test_a_known_key_is_read_as_before() -> None:
    decision = decide(request(task(team="team-a", labels={"sky-kueue.io/expected-runtime": "90m"})), VISION)
    assert isinstance(decision, Placement), decision
    assert decision.expected_runtime.seconds == 5400


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (
            {"sky-kueue.io/teem": "team-b"},
            "label 'sky-kueue.io/teem' in resources.labels is not a sky-kueue label: did you mean sky-kueue.io/team?",
        ),
        ({"sky-kueue.io/expected-runtme": "90m"}, "did you mean sky-kueue.io/expected-runtime?"),
        (
            {"sky-kueue.io/color": "red"},
            "sky-kueue reads sky-kueue.io/team, sky-kueue.io/burst, sky-kueue.io/expected-runtime",
        ),
    ],
)
def test_the_policy_rejects_a_misspelled_key_instead_of_ignoring_it(labels: dict[str, str], expected: str) -> None:
    decision = decide(request(task(team=None, labels=labels), user="carol", workspace="vision"), VISION)
    assert isinstance(decision, Rejection), decision
    assert decision.code is RejectionCode.BAD_LABEL
    assert decision.message.startswith(MESSAGE_PREFIX) and expected in decision.message


def test_pod_labels_are_checked_too_and_other_prefixes_are_not() -> None:
    pods: dict[str, Any] = {"kubernetes": {"pod_config": {"metadata": {"labels": {"sky-kueue.io/burts": "true"}}}}}
    problem = misspelled_label([{"labels": {"example.com/teem": "x"}, "_cluster_config_overrides": pods}])
    assert (
        problem == "label 'sky-kueue.io/burts' in pod labels is not a sky-kueue label: did you mean sky-kueue.io/burst?"
    )


def test_predict_task_refuses_a_misspelled_key(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(task(team=None, labels={"sky-kueue.io/teem": "team-a"})))
    result = CliRunner(mix_stderr=False).invoke(
        cli,
        ["predict", "--snapshot", str(SEED_SCENARIO), "--task", str(path), "--task-queue", "team-a/team-a-lq"],
        env={"SKY_KUEUE_CONFIG": str(PRODUCTION_CONFIG)},
    )
    assert result.exit_code == 2
    assert (
        result.stderr == f"error: {path}: label 'sky-kueue.io/teem' in resources.labels is not a sky-kueue label: "
        "did you mean sky-kueue.io/team?\n"
    )

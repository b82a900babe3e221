"""``sky-kueue aging explain``: the computation from the durable history, and one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from sky_kueue.cli.main import SUBCOMMANDS, cli
from sky_kueue.controller.history import PreemptionRecord, StepDecision, Transition, TransitionCause, transition_key
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.mirror.identity import JobIdentity

JOB = JobIdentity("team-b", pod_group="train-17-ab", managed_job_id="17", skypilot_owned=True)
T = 1_767_225_600.0
AT = str(T + 10_000)


def runner() -> CliRunner:
    try:
        return CliRunner(mix_stderr=False)  # click < 8.2
    except TypeError:
        return CliRunner()


def invoke(*args: str) -> Result:
    return runner().invoke(cli, ["aging", *args], catch_exceptions=False)


@pytest.fixture
def state(tmp_path: Path) -> Path:
    path = tmp_path / "history.db"
    with SqliteHistoryStore(path) as store:
        store.ensure_job(JOB, 100, T)
        for i in range(4):
            uid, start = f"w{i}", T + i * 2_000
            for cause, at in ((TransitionCause.QUEUED, start), (TransitionCause.ADMITTED, start + 100)):
                store.record_transition(JOB, Transition(transition_key(EpisodeKey(uid, 0), cause), cause, at, uid))
            store.record_preemption(
                JOB,
                PreemptionRecord(EpisodeKey(uid, 1), start + 1_900, "train-17-ab", "InClusterQueue", "p", None, 1000),
            )
        store.decide_step(JOB, StepDecision(EpisodeKey("w4", 0), "team-b", "train-17-ab", "bounded", 200, T + 8_000))
    return path


VALID_CONFIG = """\
priority_classes:
  dev: 100
  dev-aged-1: 200
teams:
  team-b:
    namespace: team-b
    local_queue: dev
    priority_classes:
      allowed: [dev]
      default: dev
aging:
  enabled: true
  ladder: [dev, dev-aged-1]
  parameters:
    policy: bounded
    preemptions_per_step: 1
    age_weight: 0
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """A whole ``sky-kueue.yaml``; the aging tunables sit under ``aging.parameters``."""
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(VALID_CONFIG)
    return path


def test_the_aging_command_is_registered_lazily() -> None:
    assert SUBCOMMANDS["aging"] == "sky_kueue.cli.aging_cmd:aging"


def test_explain_prints_each_rule_of_the_computation(state: Path) -> None:
    result = invoke("explain", "--job", "17", "--state", str(state), "--at", AT, "--policy", "bounded")
    assert result.exit_code == 0, result.output
    for text in ("managed-job/17", "How the boost is computed", "preemption steps", "result", "Recorded aging steps"):
        assert text in result.output


def test_explain_json_reports_the_decision_and_the_recorded_history(state: Path, config: Path) -> None:
    result = invoke(
        "explain",
        "--job",
        "train-17-ab",
        "--state",
        str(state),
        "--config",
        str(config),
        "--at",
        AT,
        "--output",
        "json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["job"] == "managed-job/17"
    assert (report["decision"]["boost"], report["decision"]["counted_preemptions"]) == (400, 4)  # 4 steps x 100
    assert report["settings"]["preemptions_per_step"] == 1
    assert report["settings"]["priority_class_ladder"] == [
        {"name": "dev", "value": 100},
        {"name": "dev-aged-1", "value": 200},
    ]
    assert [p["key"] for p in report["history"]["preemptions"]] == ["w0#1", "w1#1", "w2#1", "w3#1"]
    assert report["recorded_steps"][0]["state"] == "decided"


def test_explain_can_compare_another_policy(state: Path) -> None:
    result = invoke("explain", "--job", "17", "--state", str(state), "--at", AT, "--policy", "none", "--output", "json")
    assert json.loads(result.output)["decision"]["boost"] == 0


def test_policies_lists_the_registry() -> None:
    result = invoke("policies", "--output", "json")
    assert {"bounded", "ladder", "age", "none"} <= {row["name"] for row in json.loads(result.output)}


def bad_input_cases(tmp_path: Path, state: Path) -> list[tuple[list[str], str]]:
    not_db = tmp_path / "notes.txt"
    not_db.write_text("not a database\n" * 50)
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("teams:\n  team-b: [1,\n")
    top_list = tmp_path / "list.yaml"
    top_list.write_text("- 1\n")
    bad_key = tmp_path / "key.yaml"
    bad_key.write_text(VALID_CONFIG.replace("age_weight: 0", "max_age: 3600"))
    bad_value = tmp_path / "value.yaml"
    bad_value.write_text(VALID_CONFIG.replace("age_weight: 0", "decay_factor: 2"))
    s = str(state)
    return [
        (["explain", "--state", s], "--job is required"),
        (["explain", "--job", "17"], "--state is required"),
        (["explain", "--job", "17", "--state", str(tmp_path / "missing.db")], "does not exist"),
        (["explain", "--job", "17", "--state", str(tmp_path)], "is a directory"),
        (["explain", "--job", "17", "--state", str(not_db)], "not a usable sky-kueue history store"),
        (["explain", "--job", "99", "--state", s], "no job matching '99' in"),
        (["explain", "--job", "17", "--state", s, "--config", str(tmp_path / "nope.yaml")], "config file"),
        (["explain", "--job", "17", "--state", s, "--config", str(bad_yaml)], "bad.yaml:3: not valid YAML"),
        (["explain", "--job", "17", "--state", s, "--config", str(top_list)], "must be a YAML mapping"),
        (
            ["explain", "--job", "17", "--state", s, "--config", str(bad_key)],
            "aging.parameters: unknown key 'max_age' (did you mean 'max_age_seconds'?)",
        ),
        (
            ["explain", "--job", "17", "--state", s, "--config", str(bad_value)],
            "aging.parameters.decay_factor: expected a value <= 1.0, got 2",
        ),
        (["explain", "--job", "17", "--state", s, "--at", "soon"], "--at: expected POSIX seconds"),
        (["explain", "--job", "17", "--state", s, "--policy", "fifo"], "--policy: unknown aging policy 'fifo'"),
        (["explain", "--job", "17", "--state", s, "--output", "xml"], "Invalid value for '--output'"),
        (["explain", "--bogus"], "No such option: --bogus"),
        (["nope"], "No such command 'nope'"),
    ]


def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, state: Path) -> None:
    for args, expected in bad_input_cases(tmp_path, state):
        result = invoke(*args)
        stderr = result.stderr.strip()
        assert result.exit_code == 2, (args, result.output, stderr)
        assert expected in stderr, (args, stderr)
        assert "\n" not in stderr and "Traceback" not in stderr, (args, stderr)
        assert result.stdout == "", args


def test_the_installed_command_shows_no_traceback_on_bad_input(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", "aging", "explain", "--job", "1", "--state", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0 and "Traceback" not in proc.stderr

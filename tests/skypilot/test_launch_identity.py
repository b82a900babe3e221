"""The dry run answers for the user SkyPilot's client would send (issue 22, part 4).

``sky-kueue launch --dry-run`` and ``sky_kueue.predict`` take the user name and id from
SkyPilot's own functions (``$SKYPILOT_USER``, else the OS user; ``~/.sky/user_hash``) and the
workspace from SkyPilot's config, print them, and let the shipped config
(``configs/sky-kueue.yaml``: team-a is ``users: [alice]``, team-b ``users: [bob]``) decide.
The subprocess tests run the real command with a fresh ``HOME`` (so SkyPilot reads its hash
file from there) and the OS user set through ``LOGNAME``/``USER``, as ``getpass`` reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

import sky_kueue
from sky_kueue.cli.main import cli
from tests.skypilot.builders import PRODUCTION_CONFIG, SEED_SCENARIO, TEMPLATES
from tests.skypilot.conftest import SkyEnv

USER_HASH = "abcd1234"
#: Variables that would name the user, the SkyPilot config or the API server from outside.
OUTSIDE = (
    "SKYPILOT_USER",
    "SKYPILOT_USER_ID",
    "SKYPILOT_CONFIG",
    "SKYPILOT_API_SERVER_ENDPOINT",
    "SKYPILOT_DEBUG",
    "SKY_KUEUE_CONFIG",
)


def skypilot_home(tmp_path: Path, global_config: str = "") -> dict[str, str]:
    """An environment with its own HOME (holding SkyPilot's user hash) and SkyPilot config."""
    home = tmp_path / "home"
    (home / ".sky").mkdir(parents=True)
    (home / ".sky" / "user_hash").write_text(USER_HASH)
    global_path = tmp_path / "global-config.yaml"
    global_path.write_text(global_config)
    project_path = tmp_path / "project-config.yaml"
    project_path.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in OUTSIDE}
    env.update(
        HOME=str(home),
        SKYPILOT_GLOBAL_CONFIG=str(global_path),
        SKYPILOT_PROJECT_CONFIG=str(project_path),
        SKY_KUEUE_CONFIG=str(PRODUCTION_CONFIG),
        PYTHONUNBUFFERED="1",
    )
    return env


def run_as(os_user: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", *args],
        env={**env, "LOGNAME": os_user, "USER": os_user},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def dry_run(template: str, *extra: str) -> list[str]:
    return ["launch", str(TEMPLATES / template), "--dry-run", "--snapshot", str(SEED_SCENARIO), *extra]


def test_a_user_the_config_maps_gets_the_prediction(tmp_path: Path) -> None:
    done = run_as("alice", skypilot_home(tmp_path), *dry_run("team-a-gpu-train.yaml"))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"as user 'alice' (id {USER_HASH}), workspace 'default'"
    assert lines[1] == "team:       team-a"
    assert lines[2] == "queue:      team-a/team-a-lq on context sky-kueue-sandbox"
    assert any(line.startswith("prediction: ") for line in lines)
    assert done.stderr == ""


def test_a_user_the_config_does_not_map_gets_one_rejection_line(tmp_path: Path) -> None:
    done = run_as("carol", skypilot_home(tmp_path), *dry_run("team-a-gpu-train.yaml"))
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"as user 'carol' (id {USER_HASH}), workspace 'default'",
        "rejected: sky-kueue: user 'carol' may not submit as team 'team-a' "
        "(teams you may use: none; an admin adds 'carol' to teams.team-a.users in the sky-kueue config)",
    ]
    assert done.stderr == ""


# --- in-process: SkyPilot's hash file was read when SkyPilot was first imported, so the id
# --- comes from SkyPilot's own override, $SKYPILOT_USER_ID ------------------------------------


@pytest.fixture()
def as_user(sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """The OS user is set per test (``LOGNAME``/``USER``); the id is pinned to :data:`USER_HASH`."""
    monkeypatch.delenv("SKYPILOT_USER", raising=False)
    monkeypatch.setenv("SKYPILOT_USER_ID", USER_HASH)
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(PRODUCTION_CONFIG))
    yield monkeypatch


def invoke(monkeypatch: pytest.MonkeyPatch, os_user: str, *args: str) -> tuple[int, str]:
    monkeypatch.setenv("LOGNAME", os_user)
    monkeypatch.setenv("USER", os_user)
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_a_member_of_another_team_is_told_which_teams_it_may_use(as_user: pytest.MonkeyPatch) -> None:
    code, output = invoke(as_user, "bob", *dry_run("team-a-gpu-train.yaml"))
    assert code == 1
    assert output.splitlines() == [
        f"as user 'bob' (id {USER_HASH}), workspace 'default'",
        "rejected: sky-kueue: user 'bob' may not submit as team 'team-a' (teams you may use: team-b)",
    ]


def test_skypilot_user_overrides_the_os_user_as_skypilot_does(as_user: pytest.MonkeyPatch) -> None:
    as_user.setenv("SKYPILOT_USER", "alice")
    code, output = invoke(as_user, "carol", *dry_run("team-a-gpu-train.yaml", "-o", "json"))
    assert code == 0, output
    described = json.loads(output)
    assert described["identity"] == {"user": "alice", "user_id": USER_HASH, "workspace": "default"}
    assert (described["decision"], described["team"]) == ("placed", "team-a")


def test_the_active_workspace_comes_from_skypilots_config(
    as_user: pytest.MonkeyPatch, sky_env: SkyEnv, tmp_path: Path
) -> None:
    from sky import skypilot_config

    global_config = tmp_path / "global.yaml"
    global_config.write_text("active_workspace: team-b\n")
    as_user.setenv("SKYPILOT_GLOBAL_CONFIG", str(global_config))
    skypilot_config.reload_config()
    try:
        code, output = invoke(as_user, "carol", *dry_run("team-b-cpu-dev.yaml"))
    finally:
        as_user.setenv("SKYPILOT_GLOBAL_CONFIG", str(sky_env.global_config))
        skypilot_config.reload_config()
    assert code == 0, output
    assert output.splitlines()[:2] == [f"as user 'carol' (id {USER_HASH}), workspace 'team-b'", "team:       team-b"]


def test_predict_names_the_identity_it_planned_for(as_user: pytest.MonkeyPatch) -> None:
    as_user.setenv("LOGNAME", "alice")
    as_user.setenv("USER", "alice")
    task = TEMPLATES / "team-a-gpu-train.yaml"
    got = sky_kueue.predict(task, snapshot=[SEED_SCENARIO])
    assert got["identity"] == {"user": "alice", "user_id": USER_HASH, "workspace": "default"}
    assert got["decision"] == "placed" and got["team"] == "team-a"
    as_user.setenv("LOGNAME", "carol")
    as_user.setenv("USER", "carol")
    refused = sky_kueue.predict(task, snapshot=[SEED_SCENARIO])
    assert refused["decision"] == "rejected"
    assert "teams.team-a.users" in refused["message"]

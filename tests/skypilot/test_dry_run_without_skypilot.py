"""``launch --dry-run`` answers without importing SkyPilot, and with the same answer (issue 35,
item 6): the task, the user and SkyPilot's config are read from their files
(:mod:`sky_kueue.skypilot.task_reader`, :mod:`sky_kueue.skypilot.client_identity`); what the
readers leave to SkyPilot is read by SkyPilot, with nothing more printed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from sky_kueue.cli import launch_cmd
from sky_kueue.cli.main import cli
from tests.skypilot.builders import DEMO_CONFIG, REPO, SEED_SCENARIO, TEMPLATES
from tests.skypilot.conftest import SkyEnv

TASK_FILES = sorted([*TEMPLATES.glob("*.yaml"), *(REPO / "tests" / "e2e" / "tasks").glob("*.yaml")])
USER_HASH = "ab12cd34"


def dry_run_args(task: Path, *extra: str) -> list[str]:
    return ["launch", str(task), "--dry-run", "--config", str(DEMO_CONFIG), "--snapshot", str(SEED_SCENARIO), *extra]


def test_a_dry_run_imports_neither_skypilot_nor_the_kubernetes_client(tmp_path: Path) -> None:
    """Every shipped task, in one fresh process; the snapshot needs no cluster client either."""
    (tmp_path / ".sky").mkdir()
    (tmp_path / ".sky" / "user_hash").write_text(USER_HASH)
    (tmp_path / "global.yaml").write_text("kubernetes: {allowed_contexts: [sky-kueue-sandbox]}\n")
    probe = (
        "import sys\n"
        "from sky_kueue.cli.main import cli\n"
        f"for args in {[dry_run_args(task) for task in TASK_FILES]!r}:\n"
        "    try:\n"
        "        cli(args)\n"
        "    except SystemExit as done:\n"
        "        print('exit', done.code)\n"
        "print('imported:', sorted({m.split('.')[0] for m in sys.modules} & {'sky', 'kubernetes'}))\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "LOGNAME": "alice",
        "KUBECONFIG": str(tmp_path / "no-kubeconfig"),
        "SKYPILOT_GLOBAL_CONFIG": str(tmp_path / "global.yaml"),
        "SKYPILOT_PROJECT_CONFIG": str(tmp_path / "global.yaml"),
        "PYTHONPATH": str(REPO),
    }
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.stderr == ""
    lines = done.stdout.splitlines()
    assert lines.count(f"as user 'alice' (id {USER_HASH}), workspace 'default'") == len(TASK_FILES)
    assert lines.count("exit 0") == len(TASK_FILES)
    assert lines[-1] == "imported: []"


@pytest.mark.parametrize("output", ["text", "json"])
@pytest.mark.parametrize("task", TASK_FILES, ids=lambda p: p.name)
def test_the_answer_is_the_one_skypilots_parser_gives(
    sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch, task: Path, output: str
) -> None:
    runner = CliRunner(mix_stderr=False)
    ours = runner.invoke(cli, dry_run_args(task, "-o", output))
    monkeypatch.setattr(launch_cmd, "own_task", lambda path: None)  # SkyPilot's parser reads it
    skypilots = runner.invoke(cli, dry_run_args(task, "-o", output))
    assert (ours.exit_code, ours.stdout, ours.stderr) == (skypilots.exit_code, skypilots.stdout, skypilots.stderr)
    if output == "json":
        described = json.loads(ours.stdout)
        assert described["decision"] == "placed" and described["task"]["_user_specified_yaml"] == task.read_text()


def test_a_task_the_reader_leaves_is_read_by_skypilot_with_nothing_more_printed(
    sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(
        (TEMPLATES / "team-a-gpu-train.yaml").read_text().replace("  cpus: 7\n", "  cpus: 7\n  disk_size: 100\n")
    )
    asked: list[Path] = []

    def skypilot_task(task_path: Path) -> dict[str, object]:
        asked.append(task_path)
        return original(task_path)

    original = launch_cmd.skypilot_task
    monkeypatch.setattr(launch_cmd, "skypilot_task", skypilot_task)
    result = CliRunner(mix_stderr=False).invoke(cli, dry_run_args(path))
    assert result.exit_code == 0, result.output
    assert asked == [path]
    assert result.stderr == ""
    assert result.stdout.splitlines()[1:3] == [
        "team:       team-a",
        "queue:      team-a/team-a-lq on context sky-kueue-sandbox",
    ]
    assert "  disk_size: 100\n" in result.stdout  # SkyPilot's reading (an int), as the policy rewrote it
    verbose = CliRunner(mix_stderr=False).invoke(cli, ["-v", *dry_run_args(path)])
    assert f"{path} is read by SkyPilot's parser: resources.disk_size is not read" in verbose.stderr

"""CLI output for people (issue 22, part 5): one line per message in the CLI's own voice.

No command prints Python's raw logging form (``INFO:sky_kueue.skypilot.engine:...``), even
though importing SkyPilot calls ``logging.basicConfig``; warnings and errors are
``warning: ...``/``error: ...``; ``sky-kueue -v`` adds sky-kueue's debug records with the
logger's name; the policy server's request log carries a timestamp and no level.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from sky_kueue.cli import console
from sky_kueue.cli.main import cli

REPO = Path(__file__).resolve().parent.parent.parent
DEMO_CONFIG = REPO / "configs" / "sky-kueue-demo.yaml"
TASK = REPO / "task_templates" / "team-a-gpu-train.yaml"
#: The seed cluster's Kueue objects, so a dry run has a cluster to predict on.
SEED = REPO / "configs" / "kueue" / "seed-setup.yaml"
#: Python's default logging form (``LEVEL:logger.name:message``).
RAW_LOGGING = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]+:", re.MULTILINE)


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """HOME and SkyPilot's configs in ``tmp_path``; the OS user is alice."""
    home = tmp_path / "home"
    home.mkdir()
    (tmp_path / "global.yaml").write_text("")
    (tmp_path / "project.yaml").write_text("")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKYPILOT_", "SKY_KUEUE_"))}
    env.update(
        HOME=str(home),
        SKYPILOT_GLOBAL_CONFIG=str(tmp_path / "global.yaml"),
        SKYPILOT_PROJECT_CONFIG=str(tmp_path / "project.yaml"),
        LOGNAME="alice",
        USER="alice",
        PYTHONUNBUFFERED="1",
    )
    return env


def sky_kueue(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", *args],
        env=isolated_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.slow  # a SkyPilot-importing process
def test_launch_prints_its_answer_and_no_log_lines(tmp_path: Path) -> None:
    done = sky_kueue(tmp_path, "launch", str(TASK), "--dry-run", "--config", str(DEMO_CONFIG), "--snapshot", str(SEED))
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert not RAW_LOGGING.search(done.stdout)
    assert "sky_kueue." not in done.stdout
    assert done.stdout.startswith("as user 'alice' (id ")


@pytest.mark.slow  # a SkyPilot-importing process
def test_verbose_adds_debug_lines_with_logger_names(tmp_path: Path) -> None:
    done = sky_kueue(
        tmp_path, "-v", "launch", str(TASK), "--dry-run", "--config", str(DEMO_CONFIG), "--snapshot", str(SEED)
    )
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert any(
        line.startswith("debug: sky_kueue.skypilot.client_identity: SkyPilot identity: user 'alice' from the OS user")
        for line in lines
    ), lines
    assert any(line.startswith("sky_kueue.skypilot.engine: sky-kueue: jobs.launch for team-a-train") for line in lines)
    assert not RAW_LOGGING.search(done.stderr)
    # only sky-kueue's own loggers are verbose; imported libraries stay at warnings
    assert all(line.split(": ", 2)[1].startswith("sky_kueue.") for line in lines if line.startswith("debug: "))


def test_policy_server_log_has_a_time_and_no_level(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "sky_kueue.cli.main", "policy-server", "--port", "0", "--config", str(DEMO_CONFIG)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=isolated_env(tmp_path),
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().split("admin_policy: ", 1)[1].strip()
        assert requests.get(url.replace("/policy", "/health"), timeout=10).status_code == 200
    finally:
        process.terminate()
        _, stderr = process.communicate(timeout=10)
    assert re.search(r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d 127\.0\.0\.1 "GET /health HTTP/1\.1" 200', stderr, re.M), stderr
    assert not RAW_LOGGING.search(stderr)


# --- the formatter and the configuration, in-process ------------------------------------------


def record(level: int, message: str, name: str = "sky_kueue.x", exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
    return logging.LogRecord(name, level, __file__, 1, message, None, exc_info)


def test_messages_are_one_line_in_the_clis_voice() -> None:
    plain = console.ConsoleFormatter()
    assert plain.format(record(logging.INFO, "listening")) == "listening"
    assert plain.format(record(logging.WARNING, "token file is\n  readable")) == "warning: token file is readable"
    try:
        raise ValueError("boom\nmore")
    except ValueError as exc:
        failed = record(logging.ERROR, "internal error", exc=exc)
    assert plain.format(failed) == "error: internal error: ValueError: boom"


def test_verbose_messages_name_the_logger_and_keep_the_traceback() -> None:
    verbose = console.ConsoleFormatter(verbose=True)
    assert verbose.format(record(logging.DEBUG, "listed 3")) == "debug: sky_kueue.x: listed 3"
    assert verbose.format(record(logging.INFO, "listening")) == "sky_kueue.x: listening"
    try:
        raise ValueError("boom")
    except ValueError as exc:
        failed = record(logging.ERROR, "internal error", exc=exc)
    # the traceback follows on the next lines (its frames unless sys.tracebacklimit hides them)
    shown = verbose.format(failed)
    assert shown.startswith("error: sky_kueue.x: internal error\n") and shown.endswith("\nValueError: boom")
    stamped = console.ConsoleFormatter(timestamps=True).format(record(logging.INFO, "GET /health"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d GET /health", stamped)


@pytest.fixture()
def basic_config_handler() -> Iterator[logging.Handler]:
    """What ``logging.basicConfig`` leaves on the root logger (SkyPilot calls it on import)."""
    root = logging.getLogger()
    handler = logging.StreamHandler(sys.stderr)
    root.addHandler(handler)
    try:
        yield handler
    finally:
        root.removeHandler(handler)


def test_configure_sets_basic_config_aside_and_restores_it(basic_config_handler: logging.Handler) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("sky_kueue").level)
    undo = console.configure(verbose=True)
    try:
        assert basic_config_handler not in root.handlers
        assert any(isinstance(h, console.ConsoleHandler) for h in root.handlers)
        assert logging.getLogger("sky_kueue").getEffectiveLevel() == logging.DEBUG
        assert root.level == logging.WARNING
    finally:
        undo()
    assert (list(root.handlers), root.level, logging.getLogger("sky_kueue").level) == before


def test_an_in_process_command_leaves_logging_as_it_found_it() -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level, logging.getLogger("sky_kueue").level)
    result = CliRunner().invoke(cli, ["-v", "check-config", "--no-skypilot", str(DEMO_CONFIG)])
    assert result.exit_code == 0, result.output
    assert (list(root.handlers), root.level, logging.getLogger("sky_kueue").level) == before


def test_a_logged_warning_reaches_stderr_as_one_line() -> None:
    import click

    @click.command("warn")
    def warn() -> None:
        logging.getLogger("sky_kueue.test").warning("cluster %s is\nslow", "east")
        logging.getLogger("sky_kueue.test").info("not shown without -v")

    cli.add_command(warn)
    try:
        result = CliRunner(mix_stderr=False).invoke(cli, ["warn"])
    finally:
        cli.commands.pop("warn")
    assert result.exit_code == 0
    assert (result.stdout, result.stderr) == ("", "warning: cluster east is slow\n")


def test_skypilot_is_quiet_while_asked_and_speaks_again_for_a_submission(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in isolated_env(tmp_path).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SKYPILOT_DEBUG", raising=False)
    import sky  # noqa: F401 - SkyPilot's logging is set up on import

    skypilot = logging.getLogger(console.SKYPILOT_LOGGER)
    before = skypilot.level
    assert before < logging.WARNING  # SkyPilot's own setting: its info lines reach stdout
    undo = console.configure()
    try:
        console.quiet_skypilot()
        assert skypilot.level == logging.WARNING
        console.restore_skypilot()
        assert skypilot.level == before
        console.quiet_skypilot()
    finally:
        undo()
    assert skypilot.level == before
    verbose_undo = console.configure(verbose=True)
    try:
        console.quiet_skypilot()
        assert skypilot.level == before
    finally:
        verbose_undo()

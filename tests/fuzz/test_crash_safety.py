"""Inputs that once killed the interpreter (issue 17: four segfaults on 100,000-deep
nesting) are refused with one line. These run in subprocesses: a crash must fail the test,
not take the test run down with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fuzz import targets

#: Nesting depth that segfaulted libyaml's recursive composer.
CRASH_DEPTH = 100_000
#: Generous: a subprocess starts the CLI (about a second on this machine) and refuses.
SUBPROCESS_TIMEOUT_SECONDS = 60


def _deep_yaml(prefix: str) -> str:
    return prefix + "[" * CRASH_DEPTH + "]" * CRASH_DEPTH + "\n"


CLI_CASES = {
    "predict --snapshot": (lambda f: ["predict", "--snapshot", str(f)], "apiVersion: v1\nkind: Namespace\nx: "),
    "check-config": (lambda f: ["check-config", str(f)], "teams: "),
    "setup --teams": (lambda f: ["setup", "--teams", str(f), "--output", str(f.parent / "out")], "teams: "),
}


@pytest.mark.parametrize("entry", sorted(CLI_CASES))
def test_deep_nesting_does_not_crash_the_cli(tmp_path: Path, entry: str) -> None:
    args, prefix = CLI_CASES[entry]
    path = tmp_path / "deep.yaml"
    path.write_text(_deep_yaml(prefix), encoding="utf-8")
    code = "from sky_kueue.cli.main import main; import sys; sys.argv = ['sky-kueue', *sys.argv[1:]]; main()"
    proc = subprocess.run(
        [sys.executable, "-c", code, *args(path)],
        capture_output=True,
        text=True,
        timeout=SUBPROCESS_TIMEOUT_SECONDS,
        cwd=targets.ROOT,
    )
    assert proc.returncode == 2, f"exit {proc.returncode} (negative: killed by a signal): {proc.stderr[-300:]}"
    lines = proc.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and "nested deeper than" in lines[0], proc.stderr[-300:]


def test_deep_nesting_in_a_policy_request_does_not_crash_the_server() -> None:
    """Deep YAML inside the task, and deep JSON as the body itself."""
    code = (
        "import json, sys\n"
        "from sky_kueue.skypilot.wire import WireError, decode_request\n"
        f"deep_yaml = 'name: x\\nextra: ' + '[' * {CRASH_DEPTH} + ']' * {CRASH_DEPTH}\n"
        f"deep_json = b'[' * {CRASH_DEPTH} + b']' * {CRASH_DEPTH}\n"
        "bodies = [json.dumps({'task': deep_yaml, 'request_name': 'launch'}).encode(), deep_json]\n"
        "for body in bodies:\n"
        "    try:\n"
        "        decode_request(body)\n"
        "    except WireError as exc:\n"
        "        print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_SECONDS
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-300:]}"
    lines = proc.stdout.rstrip("\n").split("\n")
    assert len(lines) == 2, proc.stdout
    assert "nested deeper than" in lines[0] and "too deeply" in lines[1], proc.stdout

"""Files that are not regular files, or too large, are refused with one line by every
entry point that reads a file: no blocking on a FIFO, no reading ``/dev/zero`` forever."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from sky_kueue.inputs.files import MAX_INPUT_BYTES
from tests.fuzz import targets

ENTRY_POINTS: dict[str, Callable[[Path, Path], list[str]]] = {
    "predict --snapshot": lambda f, tmp: ["predict", "--snapshot", str(f)],
    "predict --add": lambda f, tmp: [
        "predict",
        "--snapshot",
        str(targets.ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"),
        "--add",
        str(f),
    ],
    "check-config": lambda f, tmp: ["check-config", str(f)],
    "setup --teams": lambda f, tmp: ["setup", "--teams", str(f), "--output", str(tmp / "out")],
    "simulate --trace": lambda f, tmp: ["simulate", "--trace", str(f), "--policies", "baseline", "--quiet"],
}


def _fifo(tmp: Path) -> Path:
    path = tmp / "fifo.yaml"
    os.mkfifo(path)
    return path


def _oversized(tmp: Path) -> Path:
    path = tmp / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_INPUT_BYTES + 1)  # sparse: nothing is written
    return path


def _directory(tmp: Path) -> Path:
    path = tmp / "dir.yaml"
    path.mkdir()
    return path


def _link_to_zero(tmp: Path) -> Path:
    path = tmp / "zero.yaml"
    path.symlink_to("/dev/zero")
    return path


def _missing(tmp: Path) -> Path:
    return tmp / "missing.yaml"


SPECIAL_FILES: dict[str, Callable[[Path], Path]] = {
    "FIFO without a writer": _fifo,
    "/dev/zero": lambda tmp: Path("/dev/zero"),
    "symlink to /dev/zero": _link_to_zero,
    "/dev/null": lambda tmp: Path("/dev/null"),
    "directory": _directory,
    f"sparse file of {MAX_INPUT_BYTES + 1} bytes": _oversized,
    "missing file": _missing,
}


@pytest.mark.parametrize("special", sorted(SPECIAL_FILES))
@pytest.mark.parametrize("entry", sorted(ENTRY_POINTS))
def test_special_file_is_refused_with_one_line(tmp_path: Path, entry: str, special: str) -> None:
    path = SPECIAL_FILES[special](tmp_path)
    outcome = targets.run_cli(ENTRY_POINTS[entry](path, tmp_path))
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.seconds < targets.MUTANT_TIME_LIMIT_SECONDS
    assert outcome.code == 2, outcome.stderr
    lines = outcome.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), outcome.stderr
    assert "Traceback" not in outcome.stderr

"""A damaged state file is refused at start with one line that names it and says what to do."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.history import StoreError
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.sandbox.apiserver import ApiServer

PAGE_BYTES = 4096


def _store(path: Path) -> Path:
    SqliteHistoryStore(path).close()
    return path


def test_a_healthy_store_reopens(tmp_path: Path) -> None:
    SqliteHistoryStore(_store(tmp_path / "state.db")).close()


def test_garbage_over_a_page_is_refused(tmp_path: Path) -> None:
    path = _store(tmp_path / "state.db")
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * PAGE_BYTES
    data[2 * PAGE_BYTES : 3 * PAGE_BYTES] = b"\xa5" * PAGE_BYTES
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError) as failure:
        SqliteHistoryStore(path)
    message = str(failure.value)
    assert str(path) in message and "restore it from a backup, or move it aside" in message
    assert "\n" not in message


def test_a_store_missing_its_tables_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = _store(tmp_path / "state.db")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE steps")
    with pytest.raises(StoreError, match=r"is damaged \(missing tables steps\)"):
        SqliteHistoryStore(path)


def test_controller_run_refuses_a_damaged_state_file_in_one_line(tmp_path: Path) -> None:
    path = _store(tmp_path / "state.db")
    data = bytearray(path.read_bytes())
    data[PAGE_BYTES : 2 * PAGE_BYTES] = b"\x00\xff" * (PAGE_BYTES // 2)
    path.write_bytes(bytes(data))
    with ApiServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        config = Path(__file__).resolve().parents[2] / "configs" / "sky-kueue.yaml"
        args = ["--kubeconfig", str(kubeconfig), "--state", str(path), "--config", str(config)]
        result = CliRunner().invoke(cli, ["controller", "run", *args, "--lease-namespace", "default"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "move it aside" in lines[0]
    assert "Traceback" not in result.output

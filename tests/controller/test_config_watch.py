"""The controller notices a changed config file, and only a valid change counts."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from sky_kueue.controller.config_watch import ConfigWatch

#: How long the polling thread may take to notice a change (it polls every 0.02 s here).
NOTICE_SECONDS = 10.0


def _valid(path: Path) -> str | None:
    return None if "teams:" in path.read_text() else "teams: missing"


def _watch(path: Path, calls: list[int], poll: float = 3600.0) -> ConfigWatch:
    return ConfigWatch(path, _valid, lambda: calls.append(1), poll_seconds=poll)


def test_the_same_content_is_no_change_and_a_valid_edit_is_one(tmp_path: Path) -> None:
    path = tmp_path / "sky-kueue.yaml"
    path.write_text("teams: {a: {}}\n")
    calls: list[int] = []
    watch = _watch(path, calls)
    path.write_text("teams: {a: {}}\n")  # rewritten, same bytes (a ConfigMap sync)
    assert not watch.check() and calls == []
    path.write_text("teams: {a: {}, b: {}}\n")
    assert watch.check() and watch.changed and calls == [1]
    assert watch.check() and calls == [1]  # once


def test_a_broken_edit_is_logged_once_and_the_old_config_stays(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "sky-kueue.yaml"
    path.write_text("teams: {a: {}}\n")
    calls: list[int] = []
    watch = _watch(path, calls)
    path.write_text("temas: {a: {}}\n")
    with caplog.at_level(logging.ERROR, logger="sky_kueue.controller"):
        assert not watch.check()
        assert not watch.check()
    broken = [r for r in caplog.records if "not valid" in r.getMessage()]
    assert len(broken) == 1 and broken[0].fields["error"] == "teams: missing"  # type: ignore[attr-defined]
    assert calls == [] and not watch.changed
    path.write_text("teams: {a: {}, b: {}}\n")  # fixed
    assert watch.check() and calls == [1]


def test_an_unreadable_file_is_a_warning_not_a_change(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "sky-kueue.yaml"
    path.write_text("teams: {a: {}}\n")
    calls: list[int] = []
    watch = _watch(path, calls)
    path.unlink()
    with caplog.at_level(logging.WARNING, logger="sky_kueue.controller"):
        assert not watch.check() and not watch.check()
    assert sum("unreadable" in r.getMessage() for r in caplog.records) == 1
    assert calls == []


def test_the_thread_notices_a_change_and_stops_after_it(tmp_path: Path) -> None:
    path = tmp_path / "sky-kueue.yaml"
    path.write_text("teams: {a: {}}\n")
    noticed = threading.Event()
    watch = ConfigWatch(path, _valid, noticed.set, poll_seconds=0.02).start()
    try:
        path.write_text("teams: {a: {}, b: {}}\n")
        assert noticed.wait(NOTICE_SECONDS)
    finally:
        watch.stop()
    assert watch.changed


def test_a_poll_interval_must_be_positive(tmp_path: Path) -> None:
    path = tmp_path / "sky-kueue.yaml"
    path.write_text("teams: {}\n")
    with pytest.raises(ValueError, match="positive"):
        ConfigWatch(path, _valid, lambda: None, poll_seconds=0)

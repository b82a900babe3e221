"""Fixtures shared by the controller's unit tests: a manual clock and a history store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

from .builders import T0


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteHistoryStore]:
    s = SqliteHistoryStore(tmp_path / "history.db")
    yield s
    s.close()

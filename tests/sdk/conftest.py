"""SkyPilot isolation for the SDK tests.

``sky_kueue.predict``/``launch`` ask SkyPilot who the user is and read its config, so every
test here runs with ``HOME``, ``SKYPILOT_GLOBAL_CONFIG`` and ``SKYPILOT_PROJECT_CONFIG`` in a
temporary directory and the user id pinned by SkyPilot's own ``SKYPILOT_USER_ID`` (SkyPilot
reads ``~/.sky/user_hash`` from the HOME it was first imported under).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

#: The user id every SDK test plans as.
USER_ID = "abcd1234"


@pytest.fixture(autouse=True)
def isolated_skypilot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    home = tmp_path / "home"
    home.mkdir()
    global_config = tmp_path / "global-config.yaml"
    global_config.write_text("")
    project_config = tmp_path / "project-config.yaml"
    project_config.write_text("")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("SKYPILOT_GLOBAL_CONFIG", str(global_config))
    monkeypatch.setenv("SKYPILOT_PROJECT_CONFIG", str(project_config))
    monkeypatch.setenv("SKYPILOT_USER_ID", USER_ID)
    for name in ("SKYPILOT_CONFIG", "SKYPILOT_API_SERVER_ENDPOINT", "SKYPILOT_USER", "SKY_KUEUE_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    _reload_skypilot_config()
    yield
    monkeypatch.undo()
    _reload_skypilot_config()


def _reload_skypilot_config() -> None:
    if "sky.skypilot_config" in sys.modules:
        sys.modules["sky.skypilot_config"].reload_config()

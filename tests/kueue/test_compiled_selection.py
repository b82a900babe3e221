"""The compiled model is used only for the very sources it was built from (issue 38).

A stale build must never shadow an edited module: :func:`compiled.search_path` puts the build
first only when its stamp matches the sources as they are now, and never with
``SKY_KUEUE_PURE=1``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from sky_kueue.kueue import compiled


@pytest.fixture
def package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the compiled modules' sources with a build stamp made for them."""
    for name in compiled.MODULES:
        shutil.copy2(compiled.PACKAGE_DIR / f"{name}.py", tmp_path / f"{name}.py")
    build = tmp_path / "_compiled"
    build.mkdir()
    monkeypatch.setattr(compiled, "PACKAGE_DIR", tmp_path)
    monkeypatch.setattr(compiled, "BUILD_DIR", build)
    monkeypatch.setattr(compiled, "STAMP", build / "build.json")
    stamp = {
        "sources": compiled.sources_digest(),
        "stat": compiled.sources_stat(),
        "python": sys.implementation.cache_tag,
    }
    (build / "build.json").write_text(json.dumps(stamp))
    monkeypatch.delenv(compiled.PURE_ENV, raising=False)
    return tmp_path


def test_a_matching_build_comes_first(package: Path) -> None:
    assert compiled.build_matches()
    assert compiled.search_path(["pkg"]) == [str(package / "_compiled"), "pkg"]


def test_an_edited_source_makes_the_build_stale(package: Path) -> None:
    source = package / "tree.py"
    source.write_text(source.read_text() + "\n# edited\n")
    assert not compiled.build_matches()
    assert compiled.search_path(["pkg"]) == ["pkg"]


def test_a_touched_but_unchanged_source_keeps_the_build(package: Path) -> None:
    source = package / "scheduler.py"
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert compiled.build_matches()


def test_another_python_or_no_stamp_means_pure(package: Path) -> None:
    stamp = json.loads((package / "_compiled" / "build.json").read_text())
    (package / "_compiled" / "build.json").write_text(json.dumps({**stamp, "python": "cpython-299"}))
    assert not compiled.build_matches()
    (package / "_compiled" / "build.json").unlink()
    assert compiled.search_path(["pkg"]) == ["pkg"]


def test_pure_is_forced_by_the_environment(package: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.PURE_ENV, "1")
    assert compiled.build_matches()
    assert compiled.search_path(["pkg"]) == ["pkg"]

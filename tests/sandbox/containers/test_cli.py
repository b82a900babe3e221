"""``sandbox up --containers`` without root or tools: one line, exit 2, nothing started."""

from __future__ import annotations

import pathlib

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.sandbox.containers import node


def test_not_root_is_one_line_and_exit_2(monkeypatch: pytest.MonkeyPatch, tmp_path: pathlib.Path) -> None:
    monkeypatch.setattr(node.os, "geteuid", lambda: 1000)
    kubeconfig = str(tmp_path / "kc")
    result = CliRunner().invoke(cli, ["sandbox", "up", "--containers", "--kubeconfig", kubeconfig])
    assert result.exit_code == 2
    assert result.output.strip() == "error: --containers needs root (network namespaces, mounts); run it as root"


def test_a_missing_tool_names_its_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(node.os, "geteuid", lambda: 0)
    monkeypatch.setattr(node.shutil, "which", lambda tool: None if tool == "debootstrap" else f"/usr/bin/{tool}")
    with pytest.raises(node.ContainersUnavailable, match=r"debootstrap \(package debootstrap\)"):
        node.preflight()

"""SkyPilot's enabled Kubernetes contexts read from its files agree with SkyPilot's own answer
(``Kubernetes.existing_allowed_contexts``), and ``check-config`` no longer imports SkyPilot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot import skypilot_files
from tests.skypilot.builders import PRODUCTION_CONFIG
from tests.skypilot.conftest import SkyEnv

CONTEXTS = ("alpha", "beta", "ssh-pool")


def kubeconfig(path: Path, current: str = "alpha") -> Path:
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in CONTEXTS],
                "current-context": current,
            }
        )
    )
    return path


SETUPS: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, str]]] = {
    # name: (global config, project config, extra environment)
    "unset: the current context": ({}, {}, {}),
    "a list, with a missing and an ssh context": (
        {"kubernetes": {"allowed_contexts": ["beta", "gone", "ssh-pool"]}},
        {},
        {},
    ),
    "all": ({"kubernetes": {"allowed_contexts": "all"}}, {}, {}),
    "the allow-all variable": ({}, {}, {"SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS": "true"}),
    "the project config wins": (
        {"kubernetes": {"allowed_contexts": ["alpha"]}},
        {"kubernetes": {"allowed_contexts": ["beta"]}},
        {},
    ),
    "the workspace's list wins": (
        {
            "active_workspace": "w",
            "kubernetes": {"allowed_contexts": ["alpha"]},
            "workspaces": {"w": {"kubernetes": {"allowed_contexts": ["beta"]}}},
        },
        {},
        {},
    ),
    "nothing enabled": ({"kubernetes": {"allowed_contexts": ["gone"]}}, {}, {}),
}


@pytest.mark.parametrize("setup", sorted(SETUPS))
def test_the_files_give_skypilots_own_answer(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setup: str
) -> None:
    from sky import skypilot_config
    from sky.clouds import kubernetes as sky_kubernetes
    from sky.utils import annotations

    global_config, project_config, extra = SETUPS[setup]
    (tmp_path / "global.yaml").write_text(yaml.safe_dump(global_config))
    (tmp_path / "project.yaml").write_text(yaml.safe_dump(project_config))
    monkeypatch.setenv("SKYPILOT_GLOBAL_CONFIG", str(tmp_path / "global.yaml"))
    monkeypatch.setenv("SKYPILOT_PROJECT_CONFIG", str(tmp_path / "project.yaml"))
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kubeconfig")))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    for name, value in extra.items():
        monkeypatch.setenv(name, value)
    skypilot_config.reload_config()
    annotations.clear_request_level_cache()
    try:
        skypilots = tuple(c for c in sky_kubernetes.Kubernetes.existing_allowed_contexts(silent=True) if c) or None
    finally:
        monkeypatch.undo()
        skypilot_config.reload_config()
    environ = {
        "KUBECONFIG": str(tmp_path / "kubeconfig"),
        "SKYPILOT_GLOBAL_CONFIG": str(tmp_path / "global.yaml"),
        "SKYPILOT_PROJECT_CONFIG": str(tmp_path / "project.yaml"),
        **extra,
    }
    ours = skypilot_files.enabled_contexts(environ)
    # as sets: with every context allowed, SkyPilot lists them in the order of a Python set of
    # strings (sky/clouds/kubernetes.py existing_allowed_contexts), which varies per process
    assert (None if ours is None else set(ours)) == (None if skypilots is None else set(skypilots))


def test_a_named_config_that_does_not_exist_skips_the_check(tmp_path: Path) -> None:
    environ = {"SKYPILOT_GLOBAL_CONFIG": str(tmp_path / "none.yaml"), "KUBECONFIG": str(kubeconfig(tmp_path / "k"))}
    assert skypilot_files.enabled_contexts(environ) is None


def test_check_config_answers_without_importing_skypilot(tmp_path: Path) -> None:
    global_config = tmp_path / "global.yaml"
    global_config.write_text(yaml.safe_dump({"kubernetes": {"allowed_contexts": ["alpha"]}}))
    probe = (
        "import sys\n"
        "from sky_kueue.cli.main import cli\n"
        "try:\n"
        f"    cli(['check-config', {str(PRODUCTION_CONFIG)!r}])\n"
        "except SystemExit as done:\n"
        "    print('exit', done.code)\n"
        "print('sky imported:', 'sky' in sys.modules)\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "KUBECONFIG": str(kubeconfig(tmp_path / "kubeconfig")),
        "SKYPILOT_GLOBAL_CONFIG": str(global_config),
        "SKYPILOT_PROJECT_CONFIG": str(tmp_path / "absent-project.yaml"),
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
    }
    (tmp_path / "absent-project.yaml").write_text("")
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert "exit 0" in proc.stdout, proc.stdout + proc.stderr
    assert "sky imported: False" in proc.stdout
    # the shipped config's context is not among SkyPilot's here, and check-config says so
    assert "context 'sky-kueue-sandbox' (teams team-a, team-b) is not enabled in SkyPilot here (enabled: alpha)" in (
        proc.stderr
    )

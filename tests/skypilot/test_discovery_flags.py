"""Discovery as kubectl and SkyPilot find clusters: ``allowed_contexts: all`` yields every
context, ``launch --kubeconfig/--context``, and ``predict`` with ``$KUBECONFIG`` alone."""

from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.skypilot.cluster_discovery import allows_all_contexts, discovered_contexts
from sky_kueue.skypilot.config_cache import with_kubeconfig_contexts
from sky_kueue.skypilot.decision import Placement, decide
from sky_kueue.skypilot.kubeconfig_contexts import kubeconfig_contexts
from tests.skypilot.builders import DEMO_CONFIG, config, request, task


def kubeconfig(path: Path, contexts: tuple[str, ...], current: str | None = None, port: int = 1) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": current or contexts[0],
                "clusters": [{"name": f"c-{c}", "cluster": {"server": f"https://127.0.0.1:{port}"}} for c in contexts],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": c, "context": {"cluster": f"c-{c}", "user": "u"}} for c in contexts],
            }
        )
    )
    return path


def test_allowed_contexts_all_means_every_context_skypilot_or_the_kubeconfig_offers() -> None:
    every = {"kubernetes": {"allowed_contexts": "all"}}
    assert allows_all_contexts(every)
    assert allows_all_contexts({}, environ={"SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS": "true"})
    assert not allows_all_contexts({"kubernetes": {"allowed_contexts": ["a"]}})
    in_workspace = {"workspaces": {"w": {"kubernetes": {"allowed_contexts": ["w1"]}}}, **every}
    assert not allows_all_contexts(in_workspace, "w")  # the workspace's list beats the global 'all'
    assert discovered_contexts(every, None, ("a", "b"), ("k",)) == ("a", "b")  # SkyPilot's own answer first
    assert discovered_contexts(every, None, None, ("k1", "k2")) == ("k1", "k2")
    assert discovered_contexts({}, None, ("a", "b"), ("k1", "k2")) == ()  # unset: the current context
    assert discovered_contexts(in_workspace, "w", None, ("k1",)) == ("w1",)


def test_kubeconfig_lists_merge_as_kubectl_merges_them(tmp_path: Path) -> None:
    first = kubeconfig(tmp_path / "one", ("ctx-1",))
    second = kubeconfig(tmp_path / "two", ("ctx-2", "ctx-3"))
    env = {"KUBECONFIG": os.pathsep.join([str(first), str(tmp_path / "missing"), str(second)])}
    assert kubeconfig_contexts(None, env) == ("ctx-1", "ctx-2", "ctx-3")
    assert kubeconfig_contexts(str(second), env) == ("ctx-2", "ctx-3")  # cluster.kubeconfig wins
    assert kubeconfig_contexts(None, {"KUBECONFIG": str(tmp_path / "missing")}) == ()


def test_a_team_without_contexts_is_placed_over_every_context_with_allowed_contexts_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = kubeconfig(tmp_path / "kc", ("ctx-1", "ctx-2", "ctx-3"))
    monkeypatch.setenv("KUBECONFIG", str(path))
    plain = config(kubernetes={"contexts": []}, cluster={"discover": False})
    asked = request(task(), skypilot_config={"kubernetes": {"allowed_contexts": "all"}})
    decision = decide(with_kubeconfig_contexts(asked, plain), plain)
    assert isinstance(decision, Placement)
    assert [t.context for t in decision.targets] == ["ctx-1", "ctx-2", "ctx-3"]
    # Without 'all', SkyPilot enables the current context only, and so does the policy.
    unset = decide(with_kubeconfig_contexts(request(task()), plain), plain)
    assert isinstance(unset, Placement) and [t.context for t in unset.targets] == [None]
    # On the API server SkyPilot's own list is in the request and is not replaced.
    server = dataclasses.replace(asked, enabled_contexts=("ctx-2",))
    assert with_kubeconfig_contexts(server, plain).kubeconfig_contexts is None


def test_launch_context_pins_the_task_and_kubeconfig_is_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky_kueue.cli.launch_cmd import pinned_to_context

    pinned = pinned_to_context({"name": "t", "resources": {"infra": "kubernetes", "cpus": "2"}}, "ctx-2")
    assert pinned["resources"]["infra"] == "kubernetes/ctx-2"
    cloud = pinned_to_context({"name": "t", "resources": {"ordered": [{"infra": "gcp"}, {"cpus": "2"}]}}, "ctx-2")
    assert cloud["resources"]["ordered"] == [{"infra": "gcp"}, {"cpus": "2", "infra": "kubernetes/ctx-2"}]

    from sky_kueue.cli.main import cli

    task_path = tmp_path / "task.yaml"
    task_path.write_text("name: t\nresources: {infra: kubernetes, cpus: 2}\nrun: echo\n")
    missing = CliRunner().invoke(
        cli,
        ["launch", str(task_path), "--dry-run", "--config", str(DEMO_CONFIG), "--kubeconfig", str(tmp_path / "nope")],
    )
    assert missing.exit_code == 2
    assert f"--kubeconfig: no such file: {tmp_path / 'nope'}" in missing.output
    path = kubeconfig(tmp_path / "kc", ("ctx-1", "ctx-2"))
    unknown = CliRunner().invoke(
        cli,
        [
            "launch",
            str(task_path),
            "--dry-run",
            "--config",
            str(DEMO_CONFIG),
            "--kubeconfig",
            str(path),
            "--context",
            "ctx-9",
        ],
    )
    assert unknown.exit_code == 2
    assert "--context: 'ctx-9' is not a context of the kubeconfig (available: ctx-1, ctx-2)" in unknown.output


def test_predict_reads_the_cluster_kubeconfig_names_without_a_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``$KUBECONFIG`` alone is a live prediction: here its server is down, so the command says
    that (exit 1), instead of asking for a snapshot (exit 2)."""
    from sky_kueue.cli.main import cli

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path / "kc", ("dead",), port=port)))
    result = CliRunner().invoke(cli, ["predict"])
    assert result.exit_code == 1, result.output
    assert f"127.0.0.1:{port}" in result.output
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    nothing = CliRunner().invoke(cli, ["predict"])
    assert nothing.exit_code == 2
    assert "or set $KUBECONFIG as for kubectl" in nothing.output

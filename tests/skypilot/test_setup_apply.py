"""``sky-kueue setup --apply`` against the sandbox: created once, unchanged the second time,
and the applied cluster behaves as the model predicts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from sky_kueue.cli.setup_cmd import setup
from sky_kueue.kueue import parse, predictor
from sky_kueue.sandbox.sandbox import Sandbox

REPO = Path(__file__).resolve().parent.parent.parent
TEAMS = REPO / "configs" / "teams.yaml"
KUEUE_RESOURCES = ("resourceflavors", "workloadpriorityclasses", "clusterqueues", "localqueues")


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(run_emulator=False) as box:
        yield box


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(setup, list(args))
    return result.exit_code, result.output


def test_apply_is_idempotent_and_the_cluster_predicts_like_the_seed(sandbox: Sandbox) -> None:
    code, out = _run("--teams", str(TEAMS), "--apply", "--kubeconfig", str(sandbox.kubeconfig_path))
    assert code == 0, out
    assert "ClusterQueue team-a-cq: created" in out
    code, again = _run("--teams", str(TEAMS), "--apply", "--kubeconfig", str(sandbox.kubeconfig_path))
    assert code == 0, again
    assert "created" not in again and "updated" not in again
    docs = []
    for plural in KUEUE_RESOURCES:
        rtype = sandbox.store.resource(f"{plural}.kueue.x-k8s.io")
        for obj in sandbox.store.list(rtype).items:
            docs.append({**obj, "apiVersion": rtype.api_version(), "kind": rtype.kind})
    docs += [{**ns, "apiVersion": "v1", "kind": "Namespace"} for ns in sandbox.store.list("namespaces").items]
    seed = REPO / "tests" / "oracle" / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"
    from sky_kueue.kueue import loader

    workloads = [d for d in loader.load_documents(seed.read_text()) if d["kind"] == "Workload"]
    got = predictor.predict(parse.parse_documents(docs + workloads)).to_json()
    assert got["final"] == {
        "admitted": ["team-a/team-a-prod-job"],
        "preempted": ["team-b/team-b-dev-job"],
        "pending": [],
    }


def test_apply_reports_an_unreachable_server_in_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"
    )
    code, out = _run("--teams", str(TEAMS), "--apply", "--kubeconfig", str(kubeconfig))
    assert code == 1  # as `queue` on the same cluster (docs/exit-codes.md)
    assert (
        out
        == "error: Namespace team-a: cannot reach the Kubernetes API server at http://127.0.0.1:9: connection refused\n"
    )


def test_apply_puts_the_controllers_team_roles_back(sandbox: Sandbox) -> None:
    """The Role setup renders in each team namespace is created, and a widened one is put back
    (rules replaced) on the next apply; its RoleBinding names the controller's ServiceAccount."""
    kubeconfig = str(sandbox.kubeconfig_path)
    code, out = _run("--teams", str(TEAMS), "--apply", "--kubeconfig", kubeconfig)
    assert code == 0, out
    assert (
        "Role team-a/sky-kueue-controller: created" in out and "RoleBinding team-b/sky-kueue-controller: created" in out
    )
    roles = "roles.rbac.authorization.k8s.io"
    wide = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    sandbox.store.mutate(roles, "sky-kueue-controller", lambda o: o.update(rules=[wide]), "team-a")
    code, again = _run("--teams", str(TEAMS), "--apply", "--kubeconfig", kubeconfig)
    assert code == 0, again
    assert (
        "Role team-a/sky-kueue-controller: updated" in again and "Role team-b/sky-kueue-controller: unchanged" in again
    )
    rules = sandbox.store.get(roles, "sky-kueue-controller", "team-a")["rules"]
    assert wide not in rules and {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]} in rules
    binding = sandbox.store.get("rolebindings.rbac.authorization.k8s.io", "sky-kueue-controller", "team-b")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "sky-kueue-controller", "namespace": "sky-kueue-system"}
    ]

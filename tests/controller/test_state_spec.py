"""``--state``: its forms, its one-line errors, and ``controller migrate`` into the cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.history import BurstRecord, StepDecision
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.controller.state_spec import (
    DEFAULT_KUBERNETES_NAMESPACE,
    StateKind,
    StateSpec,
    parse_state_spec,
    resolve_namespace,
)
from sky_kueue.sandbox.apiserver import ApiServer

from .conftest import STORE_NAMESPACE, kubernetes_store
from .test_sqlite_store import GROUP_ONLY, JOB, preemption, queued


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "sqlite:/var/lib/sky-kueue/controller.db",
            StateSpec(StateKind.SQLITE, Path("/var/lib/sky-kueue/controller.db")),
        ),
        ("/tmp/c.db", StateSpec(StateKind.SQLITE, Path("/tmp/c.db"))),  # a bare path stays accepted
        ("relative/dir:with-colon.db", StateSpec(StateKind.SQLITE, Path("relative/dir:with-colon.db"))),
        ("kubernetes", StateSpec(StateKind.KUBERNETES)),
        ("kubernetes:sky-kueue-system", StateSpec(StateKind.KUBERNETES, namespace="sky-kueue-system")),
        ("KUBERNETES:team-a", StateSpec(StateKind.KUBERNETES, namespace="team-a")),
    ],
)
def test_the_accepted_forms(text: str, expected: StateSpec) -> None:
    assert parse_state_spec(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--state is empty"),
        ("sqlite:", "sqlite: needs a file path"),
        ("kubernetes:Team_A", "'Team_A' is not a namespace name"),
        ("postgres:db", "unknown store 'postgres'"),
    ],
)
def test_malformed_specs_say_what_is_accepted(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as failure:
        parse_state_spec(text)
    assert "\n" not in str(failure.value)


def test_kubernetes_without_a_namespace_uses_the_pods_then_the_default(tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert resolve_namespace(StateSpec(StateKind.KUBERNETES), str(namespace_file)) == DEFAULT_KUBERNETES_NAMESPACE
    namespace_file.write_text("ops\n")
    assert resolve_namespace(StateSpec(StateKind.KUBERNETES), str(namespace_file)) == "ops"
    assert resolve_namespace(StateSpec(StateKind.KUBERNETES, namespace="x"), str(namespace_file)) == "x"


@pytest.mark.parametrize(
    "args",
    [
        ["controller", "status", "--state", "kubernetes:Bad_NS"],
        ["controller", "run", "--state", "postgres:db"],
        ["aging", "explain", "--job", "17", "--state", "sqlite:"],
        ["controller", "migrate", "--from", "kubernetes", "--to", "kubernetes"],
        ["controller", "migrate", "--from", "sqlite:/x.db", "--to", "sqlite:/y.db"],
    ],
)
def test_bad_specs_are_one_line_and_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert len(result.output.strip().splitlines()) == 1 and "Traceback" not in result.output


def test_a_cluster_without_the_crd_is_one_line(tmp_path: Path) -> None:
    with ApiServer() as server:
        kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
        server.inject("status", verb="list", resource="jobhistories", status_code=404, times=100)
        result = CliRunner().invoke(
            cli, ["controller", "status", "--state", "kubernetes:nowhere", "--kubeconfig", str(kubeconfig)]
        )
    # Exit 1, as for Kueue itself not installed (docs/exit-codes.md): the cluster's problem, not the command line's.
    assert result.exit_code == 1 and len(result.output.strip().splitlines()) == 1
    assert "jobhistory-crd.yaml" in result.output


def test_migrate_moves_a_history_and_status_and_explain_read_it(tmp_path: Path) -> None:
    db = tmp_path / "controller.db"
    with SqliteHistoryStore(db) as sqlite:
        sqlite.ensure_job(GROUP_ONLY, 100, 0.0)
        sqlite.record_transition(GROUP_ONLY, queued("w0", 0.0))
        sqlite.record_preemption(GROUP_ONLY, preemption("w0", 50.0))
        sqlite.record_transition(JOB, queued("w1", 60.0))  # merges the pod group into managed-job/17
        step = sqlite.decide_step(JOB, StepDecision(EpisodeKey("w1", 0), "team-b", "train-17-ab", "bounded", 5, 61.0))
        sqlite.mark_actuated(step.key, 5, 0, 62.0, "kubernetes")
        sqlite.record_burst(JOB, BurstRecord(63.0, "preemptions", "preempted once", 1))
        want = sqlite.load("managed-job/17")
    with ApiServer() as server:
        kubernetes_store(server)  # the namespace
        kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
        target = f"kubernetes:{STORE_NAMESPACE}"
        runner = CliRunner()
        args = ["controller", "migrate", "--from", f"sqlite:{db}", "--to", target, "--kubeconfig", kubeconfig]
        first = runner.invoke(cli, args)
        assert first.exit_code == 0, first.output
        assert "migrated 1 jobs (1 preemptions, 1 aging steps; 1 written, 0 already there)" in first.output
        again = runner.invoke(cli, args)
        assert again.exit_code == 0 and "0 written, 1 already there" in again.output, again.output

        got = kubernetes_store(server).load("pod-group/team-b/train-17-ab")  # the alias moved too
        assert got is not None and want is not None
        assert (got.key, got.preemptions, got.transitions, got.steps, got.burst) == (
            want.key,
            want.preemptions,
            want.transitions,
            want.steps,
            want.burst,
        )
        status = runner.invoke(
            cli, ["controller", "status", "--state", target, "--kubeconfig", kubeconfig, "--output", "json"]
        )
        assert status.exit_code == 0, status.output
        (job,) = json.loads(status.output)["jobs"]
        assert (job["job"], job["preemptions"], job["boost"], job["burst"]["reason"]) == (
            "managed-job/17",
            1,
            5,
            "preemptions",
        )
        explain = runner.invoke(
            cli,
            ["aging", "explain", "--job", "train-17-ab", "--state", target, "--kubeconfig", kubeconfig, "--at", "100"],
        )
        assert explain.exit_code == 0, explain.output
        assert "managed-job/17" in explain.output

"""``sky-kueue queue`` shows each pending Workload's ETA and where its run times came from,
against the sandbox's API server, in text and ``-o json``; and the wording of the ETA."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sky_kueue.cli.main import cli
from sky_kueue.cli.queue_eta import NEVER_FITS, NO_RUN_TIMES, NOT_QUEUED, PendingEta, duration_text, from_model
from sky_kueue.kueue import eta as model_eta
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.eta import Eta
from sky_kueue.sandbox.apiserver import ApiServer
from tests.kueue import builders as kueue_builders
from tests.mirror import builders

RUNTIME = "sky-kueue.io/expected-runtime-seconds"
SOURCE = "sky-kueue.io/expected-runtime-source"
#: The holder in team-a declared an hour and has run ten minutes: the waiter's ETA is ~50m.
DECLARED_SECONDS = 3_600
RAN_SECONDS = 600
T0 = "2026-01-01T11:00:00Z"


def _rfc3339(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _hold_quota_since(server: ApiServer, name: str, ns: str, cq: str, since: datetime) -> None:
    builders.reserve_quota(server.store, name, ns, cq, cpu="2")
    builders.admit(server.store, name, ns)

    def stamp(obj: dict[str, Any]) -> None:
        for condition in obj["status"]["conditions"]:
            condition["lastTransitionTime"] = _rfc3339(since)

    server.store.mutate("workloads", name, stamp, ns, subresource="status")


def _pod(group: str, ns: str, annotations: dict[str, str]) -> dict[str, Any]:
    pod = builders.skypilot_pod(group, ns)
    pod["metadata"]["annotations"].update(annotations)
    return pod


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Path]:
    """Two full ClusterQueues, each with a Workload waiting behind a holder: team-a's holder
    declared its run time (on its pods, as the policy writes it), team-b's has none."""
    since = datetime.now(timezone.utc) - timedelta(seconds=RAN_SECONDS)
    with ApiServer() as server:
        docs = [builders.namespace("team-a"), builders.namespace("team-b"), builders.flavor()]
        docs += [builders.cluster_queue("cq-a", cpu="2"), builders.cluster_queue("cq-b", cpu="2")]
        docs += [builders.local_queue("lq", "team-a", "cq-a"), builders.local_queue("lq", "team-b", "cq-b")]
        docs += [
            builders.workload(f"{name}-{ns[-1]}", ns, cpu="2")
            for ns in ("team-a", "team-b")
            for name in ("run", "wait")
        ]
        builders.apply_documents(server.store, docs)
        _hold_quota_since(server, "run-a", "team-a", "cq-a", since)
        _hold_quota_since(server, "run-b", "team-b", "cq-b", since)
        server.store.create("pods", _pod("run-a", "team-a", {RUNTIME: str(DECLARED_SECONDS), SOURCE: "declared"}))
        server.store.create("pods", _pod("run-b", "team-b", {}))
        yield server.write_kubeconfig(tmp_path / "kubeconfig")


def _run(*args: str) -> Result:
    return CliRunner(mix_stderr=False).invoke(cli, list(args))


def _pending(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["workload"]: row for cq in document["clusterQueues"] for row in cq["pending"]}


def test_queue_json_gives_each_pending_workload_its_eta_and_basis(cluster: Path) -> None:
    result = _run("queue", "--kubeconfig", str(cluster), "-o", "json")

    assert result.exit_code == 0, result.stderr
    pending = _pending(json.loads(result.stdout))
    declared = pending["team-a/wait-a"]["eta"]
    # The holder's hour minus the ten minutes it ran (less the seconds this test took).
    assert DECLARED_SECONDS - RAN_SECONDS - 30 <= declared["seconds"] <= DECLARED_SECONDS - RAN_SECONDS
    assert (declared["basis"], declared["unknownReason"]) == ("declared", None)
    assert declared["text"] == "ETA 50m (declared)"
    unknown = pending["team-b/wait-b"]["eta"]
    assert unknown == {
        "seconds": None,
        "basis": None,
        "unknownReason": NO_RUN_TIMES,
        "text": "ETA unknown: no run times",
    }
    admitted = {row["workload"] for cq in json.loads(result.stdout)["clusterQueues"] for row in cq["admitted"]}
    assert admitted == {"team-a/run-a", "team-b/run-b"}


def test_queue_text_has_an_eta_column_for_pending_workloads(cluster: Path) -> None:
    result = _run("queue", "--kubeconfig", str(cluster))

    assert result.exit_code == 0, result.stderr
    assert " ETA " in result.stdout
    line_a = next(line for line in result.stdout.splitlines() if line.startswith("team-a/wait-a"))
    line_b = next(line for line in result.stdout.splitlines() if line.startswith("team-b/wait-b"))
    assert "50m (declared)" in line_a
    assert "unknown: no run times" in line_b


def test_without_predictions_there_is_no_eta(cluster: Path) -> None:
    text = _run("queue", "--kubeconfig", str(cluster), "--no-predict")
    document = _run("queue", "--kubeconfig", str(cluster), "--no-predict", "-o", "json")

    assert text.exit_code == 0 and document.exit_code == 0, text.stderr + document.stderr
    assert " ETA " not in text.stdout and "(declared)" not in text.stdout
    assert {row["eta"] for row in _pending(json.loads(document.stdout)).values()} == {None}


def test_the_eta_says_its_wait_and_where_the_run_times_came_from() -> None:
    assert [duration_text(s) for s in (0, 45, 720, 3_600, 7_500)] == ["0s", "45s", "12m", "1h", "2h05m"]
    history = from_model(Eta("ns/w", 720.0, waits_for=["a", "b"], runtime_sources=["history(n=7)", "declared"]))
    assert history.text() == "ETA 12m (history of 7 runs and declared)"
    assert from_model(Eta("ns/w", 0.0)).text() == "ETA now"
    no_run_times = Eta(
        "ns/w", None, reason="no quota holder with a known run time frees room: full", waits_on_unknown_runtime=True
    )
    assert from_model(no_run_times) == PendingEta(None, unknown_reason=NO_RUN_TIMES)
    assert from_model(Eta("ns/w", None, reason="not a pending workload of this cluster")).unknown_reason == NOT_QUEUED
    assert (
        from_model(Eta("ns/w", None, reason="not admitted within 168h")).text()
        == "ETA unknown: not admitted within 168h"
    )


def _one_full_queue(holder_runtime_s: int | None) -> o.ClusterState:
    """ClusterQueue "a" (4 cpu) held by "run"; "huge" asks for 5 cpu, more than "a" ever has."""
    holder = kueue_builders.workload("run", "t", "q", {"cpu": "4"}, T0, admitted_to="a", flavors={"cpu": "f"})
    if holder_runtime_s is not None:
        holder["metadata"]["annotations"] = {RUNTIME: str(holder_runtime_s)}
    return kueue_builders.state(
        kueue_builders.namespace("t"),
        kueue_builders.flavor("f"),
        kueue_builders.cq("a", [{"f": {"cpu": "4"}}]),
        kueue_builders.lq("t", "q", "a"),
        holder,
        kueue_builders.workload("huge", "t", "q", {"cpu": "5"}, T0),
    )


def test_a_workload_nothing_in_its_cohort_will_make_room_for_never_fits_rather_than_lacks_run_times() -> None:
    runtime = model_eta.runtime_from_annotation()
    # the holder's run time is known: once it finishes there is still no room
    never = from_model(model_eta.estimate(_one_full_queue(600), ["t/huge"], runtime)["t/huge"])
    assert never == PendingEta(None, unknown_reason=NEVER_FITS)
    assert never.text() == "ETA unknown: never fits: nothing in its cohort frees room"
    # the holder's run time is unknown: the estimate waits on it, and says so
    waiting = from_model(model_eta.estimate(_one_full_queue(None), ["t/huge"], runtime)["t/huge"])
    assert waiting == PendingEta(None, unknown_reason=NO_RUN_TIMES)

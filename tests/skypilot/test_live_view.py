"""The policy validates and predicts against the live cluster through the queue mirror."""

from __future__ import annotations

import datetime
from collections.abc import Iterator

import pytest
import yaml

from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.skypilot import cluster_view
from sky_kueue.skypilot.demand import WorkloadDemand
from sky_kueue.skypilot.verdict import AdmissionOutcome
from tests.skypilot.builders import SEED_SCENARIO, config


@pytest.fixture
def cluster() -> Iterator[Sandbox]:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    with Sandbox(clock=clock, run_emulator=False) as box:
        docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
        box.apply([d for d in docs if d["metadata"]["name"] != "team-a-prod-job"])
        yield box


def test_live_cluster_view_sees_the_borrowing_dev_job(cluster: Sandbox) -> None:
    live = config(cluster={"kubeconfig": str(cluster.kubeconfig_path)})
    try:
        view = cluster_view.build_view(live)
        assert isinstance(view, cluster_view.LiveClusterView)
        assert view.source == "the live cluster (current context)"
        team_a = view.local_queue("team-a", "team-a-lq")
        assert team_a is not None
        verdict = view.predict(team_a, WorkloadDemand(1, {"cpu": 7000, "nvidia.com/gpu": 2}), "prod-priority")
        assert verdict.outcome is AdmissionOutcome.ADMIT_AFTER_PREEMPTION
        assert verdict.preempts == ("team-b/team-b-dev-job",)
    finally:
        cluster_view.close_live_mirrors()


def test_an_unreachable_cluster_falls_back_to_the_offline_view(tmp_path: object) -> None:
    from pathlib import Path

    kubeconfig = Path(str(tmp_path)) / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"
    )
    view = cluster_view.build_view(config(cluster={"kubeconfig": str(kubeconfig)}))
    try:
        assert view.source.endswith("(the live cluster (current context) unreachable)")
        assert view.local_queue("team-a", "team-a-lq") is not None  # the plugin config's answer
    finally:
        cluster_view.close_live_mirrors()


def test_burst_decisions_on_the_live_sandbox_state(cluster: Sandbox) -> None:
    """Admit-after-preemption keeps Kubernetes; a long wait gets the ordered cloud fallback;
    a request beyond the queue's capacity skips Kubernetes."""
    from sky_kueue.skypilot.burst import BurstAction
    from sky_kueue.skypilot.decision import Placement
    from sky_kueue.skypilot.engine import evaluate
    from sky_kueue.skypilot.task_yaml import candidates
    from tests.skypilot.builders import CONTEXT, request, task

    bursty = config(
        cluster={"kubeconfig": str(cluster.kubeconfig_path)},
        teams={
            "team-a": {"burst": {"opt_in": False}},
            "team-b": {"limits": {"max_cpus": 32}, "burst": {"max_queue_wait_seconds": 600, "clouds": ["aws"]}},
        },
    )
    try:
        view = cluster_view.build_view(bursty)
        keep = evaluate(request(task(team="team-a", cpus="7", accelerators={"A100": 2})), bursty, view)
        assert isinstance(keep.decision, Placement)
        assert keep.decision.burst.action is BurstAction.KEEP_KUBERNETES
        wait = evaluate(request(task(team="team-b", cpus="7")), bursty, view)
        assert isinstance(wait.decision, Placement)
        assert wait.decision.burst.action is BurstAction.ADD_CLOUD_FALLBACK
        assert [c["infra"] for c in candidates(wait.task)] == [f"kubernetes/{CONTEXT}", "aws"]
        never = evaluate(request(task(team="team-b", cpus="17")), bursty, view)
        assert isinstance(never.decision, Placement)
        assert never.decision.burst.action is BurstAction.SKIP_KUBERNETES
        assert [c["infra"] for c in candidates(never.task)] == ["aws"]
    finally:
        cluster_view.close_live_mirrors()


def test_the_live_view_follows_the_cluster_after_it_was_built(cluster: Sandbox) -> None:
    """A LocalQueue deleted after the policy started is no longer accepted (and a new one is)."""
    from sky_kueue.skypilot.decision import Rejection, RejectionCode, decide
    from tests.skypilot.builders import request, task

    live = config(cluster={"kubeconfig": str(cluster.kubeconfig_path)})
    view = cluster_view.build_view(live)
    try:
        assert view.local_queue("team-b", "team-b-lq") is not None
        cluster.store.delete("localqueues.kueue.x-k8s.io", "team-b-lq", "team-b")

        def gone() -> bool:
            return view.local_queue("team-b", "team-b-lq") is None

        assert _eventually(gone)
        decision = decide(request(task(team="team-b")), live, view)
        assert isinstance(decision, Rejection) and decision.code is RejectionCode.QUEUE_MISSING
    finally:
        cluster_view.close_live_mirrors()


def test_a_policy_started_while_the_cluster_was_down_connects_later(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    from pathlib import Path

    from sky_kueue.sandbox.apiserver import ApiServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kubeconfig = Path(str(tmp_path)) / "kubeconfig"
    kubeconfig.write_text(
        f"apiVersion: v1\nkind: Config\nclusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{port}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\nusers: [{name: u, user: {}}]\n"
    )
    now = [1000.0]
    monkeypatch.setattr(cluster_view, "LIVE_SYNC_TIMEOUT_SECONDS", 5.0)
    view = cluster_view.LiveClusterView(
        config(cluster={"kubeconfig": str(kubeconfig)}), cluster_view.build_view(config()), clock=lambda: now[0]
    )
    try:
        assert "unreachable" in view.source
        with ApiServer("127.0.0.1", port) as server:
            docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d and d["kind"] != "Workload"]
            for doc in docs:
                server.store.create(_resource(doc), doc)
            now[0] += cluster_view.LIVE_RECONNECT_INTERVAL_SECONDS - 1
            assert "not connected; retrying" in view.source  # not before the retry interval
            now[0] += 2

            def live() -> bool:
                now[0] += cluster_view.LIVE_STATE_MAX_AGE_SECONDS
                return view.source == "the live cluster (current context)"

            assert _eventually(live)
    finally:
        cluster_view.close_live_mirrors()


def _resource(doc: dict[str, object]) -> str:
    kind = str(doc["kind"])
    return "namespaces" if kind == "Namespace" else f"{kind.lower()}s.kueue.x-k8s.io".replace("classs", "classes")


def _eventually(predicate: object, timeout_seconds: float = 10.0) -> bool:
    import time

    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False

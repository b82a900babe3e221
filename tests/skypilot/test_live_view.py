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
        assert isinstance(view, cluster_view.ModelClusterView)
        assert "live cluster" in view.source
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
    assert not isinstance(view, cluster_view.ModelClusterView) or "live cluster" not in view.source


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

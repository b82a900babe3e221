"""The model-backed cluster view over Kueue manifests, and burst decisions on the seed's
cluster states: admit now, admit after preemption, long wait, never fits."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot.burst import BurstAction
from sky_kueue.skypilot.cluster_view import (
    ManifestError,
    ModelClusterView,
    build_view,
    hypothetical_workload,
    load_manifests,
    view_from_documents,
)
from sky_kueue.skypilot.config_view import ConfigClusterView
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.demand import WorkloadDemand
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.task_yaml import candidates
from sky_kueue.skypilot.verdict import AdmissionOutcome
from tests.skypilot.builders import CONTEXT, SEED_SCENARIO, SEED_SETUP, config, request, task

GPU_JOB = WorkloadDemand(1, {"cpu": 7000, "nvidia.com/gpu": 2})


def scenario_without(*names: str) -> list[dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
    return [d for d in docs if d["metadata"]["name"] not in names]


@pytest.fixture(scope="module")
def empty_cluster() -> ModelClusterView:
    return view_from_documents(load_manifests([str(SEED_SETUP)]), "seed setup")


@pytest.fixture(scope="module")
def busy_cluster() -> ModelClusterView:
    """team-b's 5-CPU dev job is admitted (borrowing); team-a's job is not submitted yet."""
    return view_from_documents(scenario_without("team-a-prod-job"), "seed scenario")


def test_queue_facts_and_priority_classes(empty_cluster: ModelClusterView) -> None:
    facts = empty_cluster.local_queue("team-a", "team-a-lq")
    assert facts is not None
    assert (facts.cluster_queue, facts.cluster_queue_exists, facts.cluster_queue_active) == ("team-a-cq", True, True)
    assert facts.selects_namespace is True
    assert empty_cluster.local_queue("team-a", "team-b-lq") is None
    assert empty_cluster.priority_classes() == {"prod-priority": 1000, "dev-priority": 100}


def test_capacity_uses_potential_quota(empty_cluster: ModelClusterView) -> None:
    team_a = empty_cluster.local_queue("team-a", "team-a-lq")
    team_b = empty_cluster.local_queue("team-b", "team-b-lq")
    assert team_a is not None and team_b is not None
    assert empty_cluster.capacity(team_a, GPU_JOB).fits is True
    too_big = empty_cluster.capacity(team_a, WorkloadDemand(3, {"cpu": 4000}))
    assert [(s.resource, s.requested, s.potential) for s in too_big.exceeding] == [("cpu", 12000, 10000)]
    no_gpu = empty_cluster.capacity(team_b, WorkloadDemand(1, {"cpu": 1000, "nvidia.com/gpu": 1}))
    assert [(s.resource, s.potential) for s in no_gpu.exceeding] == [("nvidia.com/gpu", 0)]
    uncovered = empty_cluster.capacity(team_a, WorkloadDemand(1, {"cpu": 1000, "example.com/fpga": 1}))
    assert uncovered.uncovered == ("example.com/fpga",)


def test_predictions_on_the_seed_states(empty_cluster: ModelClusterView, busy_cluster: ModelClusterView) -> None:
    team_a = busy_cluster.local_queue("team-a", "team-a-lq")
    team_b = busy_cluster.local_queue("team-b", "team-b-lq")
    assert team_a is not None and team_b is not None
    assert empty_cluster.predict(team_a, GPU_JOB, "prod-priority").outcome is AdmissionOutcome.ADMIT_NOW
    after = busy_cluster.predict(team_a, GPU_JOB, "prod-priority")
    assert after.outcome is AdmissionOutcome.ADMIT_AFTER_PREEMPTION
    assert after.preempts == ("team-b/team-b-dev-job",)
    waits = busy_cluster.predict(team_b, WorkloadDemand(1, {"cpu": 7000}), "dev-priority")
    assert waits.outcome is AdmissionOutcome.WAIT and "insufficient unused quota for cpu" in waits.reason
    never = busy_cluster.predict(team_b, WorkloadDemand(1, {"cpu": 17000}), "dev-priority")
    assert never.outcome is AdmissionOutcome.NEVER_FITS and "maximum capacity" in never.reason


BURSTY = config(
    teams={
        "team-a": {"burst": {"opt_in": False}},
        "team-b": {
            "limits": {"max_cpus": 32},
            "burst": {"max_queue_wait_seconds": 600, "clouds": ["aws"]},
        },
    }
)


def test_burst_admit_after_preemption_stays_on_kubernetes(busy_cluster: ModelClusterView) -> None:
    result = evaluate(request(task(team="team-a", cpus="7", accelerators={"A100": 2})), BURSTY, busy_cluster)
    assert isinstance(result.decision, Placement)
    assert result.decision.burst.action is BurstAction.KEEP_KUBERNETES
    assert [c["infra"] for c in candidates(result.task)] == [f"kubernetes/{CONTEXT}"]


def test_burst_long_wait_gets_ordered_fallback(busy_cluster: ModelClusterView) -> None:
    result = evaluate(request(task(team="team-b", cpus="7")), BURSTY, busy_cluster)
    assert isinstance(result.decision, Placement)
    assert result.decision.burst.action is BurstAction.ADD_CLOUD_FALLBACK
    assert result.decision.admission_timeout_seconds == 600
    assert [c["infra"] for c in candidates(result.task)] == [f"kubernetes/{CONTEXT}", "aws"]


def test_burst_never_fits_skips_kubernetes(busy_cluster: ModelClusterView) -> None:
    result = evaluate(request(task(team="team-b", cpus="17")), BURSTY, busy_cluster)
    assert isinstance(result.decision, Placement)
    assert result.decision.burst.action is BurstAction.SKIP_KUBERNETES
    assert [c["infra"] for c in candidates(result.task)] == ["aws"]
    without_burst = decide(
        request(task(team="team-b", cpus="17")), config(teams={"team-b": {"limits": {"max_cpus": 32}}}), busy_cluster
    )
    assert isinstance(without_burst, Rejection) and without_burst.code is RejectionCode.EXCEEDS_CAPACITY
    assert "can hold at most 10" in without_burst.message


def test_hypothetical_workload_document() -> None:
    doc = hypothetical_workload(
        "team-a",
        "team-a-lq",
        "prod-priority",
        WorkloadDemand(2, {"cpu": 1500, "memory": 3 * 10**9}),
        datetime(2026, 1, 1, 12, tzinfo=timezone.utc),
    )
    assert doc["metadata"]["creationTimestamp"] == "2026-01-01T12:00:00Z"
    assert doc["spec"]["queueName"] == "team-a-lq"
    assert doc["spec"]["priorityClassName"] == "prod-priority"
    (pod_set,) = doc["spec"]["podSets"]
    assert pod_set["count"] == 2
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "1500m",
        "memory": "3000000000",
    }


def test_build_view_uses_manifests_when_configured(tmp_path: Path) -> None:
    assert isinstance(build_view(config()), ConfigClusterView)
    assert isinstance(build_view(config(cluster={"manifests": [str(SEED_SETUP)]})), ModelClusterView)
    with pytest.raises(ManifestError, match="cannot read"):
        build_view(config(cluster={"manifests": [str(tmp_path / "missing.yaml")]}))
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Gadget\nmetadata: {name: x}\n")
    with pytest.raises(ManifestError, match="unknown kind 'Gadget'"):
        build_view(config(cluster={"manifests": [str(invalid)]}))


def test_a_wait_gets_an_estimate_when_run_times_are_known() -> None:
    """team-b's dev job (5 CPU) is expected to run 2 h after its admission at 10:00:01."""
    docs = scenario_without("team-a-prod-job")
    for doc in docs:
        if doc["metadata"]["name"] == "team-b-dev-job":
            doc["metadata"]["annotations"] = {"sky-kueue.io/expected-runtime-seconds": "7200"}
    view = view_from_documents(docs, "seed scenario with run times")
    view.state.now = datetime(2026, 1, 1, 11, 0, 1, tzinfo=timezone.utc)
    team_b = view.local_queue("team-b", "team-b-lq")
    assert team_b is not None
    waits = view.predict(team_b, WorkloadDemand(1, {"cpu": 7000}), "dev-priority")
    assert waits.outcome is AdmissionOutcome.WAIT
    assert waits.expected_wait_seconds == 3600  # the dev job ends at 12:00:01, an hour from "now"

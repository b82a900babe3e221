"""Cloud burst: the rule from verdicts to plans, and how a plan rewrites the resources."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.skypilot.burst import BurstAction, plan_burst
from sky_kueue.skypilot.config import BurstSettings
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.task_yaml import candidates, resource_group
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict
from tests.skypilot.builders import CONTEXT, config, fake_view, kueue_settings, pod_labels, request, task

BURST = BurstSettings(max_queue_wait_seconds=900, clouds=("aws", "gcp/us-central1"))
DEFAULT_TIMEOUT_SECONDS = 86400
SEED = config()


@pytest.mark.parametrize(
    ("verdict", "action", "timeout"),
    [
        (AdmissionVerdict(AdmissionOutcome.ADMIT_NOW), BurstAction.KEEP_KUBERNETES, DEFAULT_TIMEOUT_SECONDS),
        (
            AdmissionVerdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("team-b/dev",)),
            BurstAction.KEEP_KUBERNETES,
            DEFAULT_TIMEOUT_SECONDS,
        ),
        (
            AdmissionVerdict(AdmissionOutcome.WAIT, expected_wait_seconds=900),
            BurstAction.KEEP_KUBERNETES,
            DEFAULT_TIMEOUT_SECONDS,
        ),
        (AdmissionVerdict(AdmissionOutcome.WAIT, expected_wait_seconds=901), BurstAction.ADD_CLOUD_FALLBACK, 900),
        (AdmissionVerdict(AdmissionOutcome.WAIT), BurstAction.ADD_CLOUD_FALLBACK, 900),
        (AdmissionVerdict(AdmissionOutcome.UNKNOWN), BurstAction.ADD_CLOUD_FALLBACK, 900),
        (
            AdmissionVerdict(AdmissionOutcome.NEVER_FITS, "too big"),
            BurstAction.SKIP_KUBERNETES,
            DEFAULT_TIMEOUT_SECONDS,
        ),
    ],
)
def test_plan_from_verdict(verdict: AdmissionVerdict, action: BurstAction, timeout: int) -> None:
    plan = plan_burst(verdict, BURST, DEFAULT_TIMEOUT_SECONDS)
    assert plan.action is action
    assert plan.admission_timeout_seconds == timeout
    if action is not BurstAction.KEEP_KUBERNETES:
        assert plan.clouds == ("aws", "gcp/us-central1")
        assert plan.message


def test_plan_messages_explain_the_choice() -> None:
    after = plan_burst(AdmissionVerdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("team-b/dev",)), BURST, 60)
    assert "team-b/dev" in after.message
    never = plan_burst(AdmissionVerdict(AdmissionOutcome.NEVER_FITS, "cpu 17 > 10"), BURST, 60)
    assert "cpu 17 > 10" in never.message and "aws, gcp/us-central1" in never.message
    slow = plan_burst(AdmissionVerdict(AdmissionOutcome.WAIT, expected_wait_seconds=3600), BURST, 60)
    assert "3600s exceeds the team's limit of 900s" in slow.message


def test_without_burst_settings_kubernetes_is_always_kept() -> None:
    for outcome in AdmissionOutcome:
        plan = plan_burst(AdmissionVerdict(outcome), None, 123)
        assert plan.action is BurstAction.KEEP_KUBERNETES and plan.admission_timeout_seconds == 123


def burst_task(**resources: Any) -> dict[str, object]:
    return task(team="team-a", labels={"sky-kueue.io/burst": "true"}, **resources)


def test_cloud_fallback_rewrites_to_ordered_kubernetes_then_clouds() -> None:
    result = evaluate(request(burst_task(accelerators={"L4": 1}, instance_type="4CPU--16GB")), SEED)
    assert resource_group(result.task) == "ordered"
    ordered = candidates(result.task)
    assert [c["infra"] for c in ordered] == [f"kubernetes/{CONTEXT}", "aws", "gcp"]
    assert ordered[0]["instance_type"] == "4CPU--16GB"
    assert all("instance_type" not in c for c in ordered[1:])
    for candidate in ordered:
        assert candidate["accelerators"] == {"L4": 1}
        assert "labels" not in candidate  # no "/" keys left for GCP to reject
        assert kueue_settings(candidate)["admission_timeout"] == 900
        assert pod_labels(candidate)["sky-kueue.io/burst"] == "true"


def test_cloud_fallback_is_idempotent() -> None:
    first = evaluate(request(burst_task()), SEED)
    second = evaluate(request(first.task, skypilot_config=first.skypilot_config), SEED)
    assert second.task == first.task


def test_skip_kubernetes_keeps_only_clouds() -> None:
    view = fake_view()
    view.verdict = AdmissionVerdict(AdmissionOutcome.NEVER_FITS, "request > maximum capacity")
    result = evaluate(request(burst_task()), SEED, view)
    assert [c["infra"] for c in candidates(result.task)] == ["aws", "gcp"]
    placement = result.decision
    assert isinstance(placement, Placement) and "running on aws, gcp instead" in placement.burst.message


def test_predicted_admission_keeps_kubernetes_only() -> None:
    view = fake_view()
    view.verdict = AdmissionVerdict(AdmissionOutcome.ADMIT_AFTER_PREEMPTION, preempts=("team-b/team-b-dev-job",))
    result = evaluate(request(burst_task()), SEED, view)
    (only,) = candidates(result.task)
    assert only["infra"] == f"kubernetes/{CONTEXT}"
    assert kueue_settings(only)["admission_timeout"] == 86400


def test_opt_in_team_needs_the_label_and_false_opts_out() -> None:
    plain = evaluate(request(task(team="team-a")), SEED)
    assert len(candidates(plain.task)) == 1
    opted_out = evaluate(
        request(task(team="team-a", labels={"sky-kueue.io/burst": "false"})),
        config(teams={"team-a": {"burst": {"opt_in": False}}}),
    )
    assert len(candidates(opted_out.task)) == 1
    everyone = evaluate(request(task(team="team-a")), config(teams={"team-a": {"burst": {"opt_in": False}}}))
    assert [c["infra"] for c in candidates(everyone.task)][1:] == ["aws", "gcp"]


def test_bad_burst_label() -> None:
    decision = decide(request(task(team="team-a", labels={"sky-kueue.io/burst": "maybe"})), SEED)
    assert isinstance(decision, Rejection) and decision.code is RejectionCode.BAD_LABEL


def test_user_listed_clouds_are_not_duplicated() -> None:
    raw = task(team="team-a", labels={"sky-kueue.io/burst": "true"})
    resources = raw.pop("resources")
    raw["resources"] = {"ordered": [resources, {"infra": "aws", "cpus": "2"}]}
    result = evaluate(request(raw), SEED)
    assert [c["infra"] for c in candidates(result.task)] == [f"kubernetes/{CONTEXT}", "aws", "gcp"]

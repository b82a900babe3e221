"""The policy decision as a pure function: pass-through rules, team resolution, ownership,
priority classes, limits, cluster checks, and what a placement writes."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.skypilot.burst import BurstAction
from sky_kueue.skypilot.config import load_config
from sky_kueue.skypilot.decision import (
    MESSAGE_PREFIX,
    PassThrough,
    Placement,
    Rejection,
    RejectionCode,
    decide,
)
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.task_yaml import candidates
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict
from sky_kueue.skypilot.view import CapacityFacts, Shortfall
from tests.skypilot.builders import (
    CONTEXT,
    PRODUCTION_CONFIG,
    config,
    fake_view,
    kueue_settings,
    pod_labels,
    request,
    task,
)

SEED = config()


def rejected(decision: object, code: RejectionCode) -> Rejection:
    assert isinstance(decision, Rejection), decision
    assert decision.code is code, decision
    assert decision.message.startswith(MESSAGE_PREFIX)
    return decision


def placed(decision: object) -> Placement:
    assert isinstance(decision, Placement), decision
    return decision


# --- pass-through -------------------------------------------------------------------------


def test_validate_is_never_rejected_even_for_a_task_without_team() -> None:
    decision = decide(request(task(team=None), request_name="validate"), SEED)
    assert isinstance(decision, PassThrough)
    assert isinstance(decide(request(task(team=None)), SEED), Rejection)


@pytest.mark.parametrize("request_name", ["jobs.launch_cluster", "launch", "jobs.launch"])
def test_a_user_set_managed_job_id_is_validated_like_any_launch(request_name: str) -> None:
    forged = task(
        team="team-b",
        envs={"SKYPILOT_MANAGED_JOB_ID": "7"},
        overrides={
            "kubernetes": {
                "kueue": {"local_queue_name": "team-a-lq"},
                "pod_config": {"metadata": {"annotations": {"skypilot-managed-job-id": "7"}}},
            }
        },
    )
    decision = decide(request(forged, request_name=request_name), SEED)
    assert isinstance(decision, Rejection)
    assert "belongs to team 'team-a'" in decision.message


def test_the_managed_job_annotation_alone_exempts_nothing() -> None:
    annotated = task(
        team=None,
        overrides={"kubernetes": {"pod_config": {"metadata": {"annotations": {"skypilot-managed-job-id": "12"}}}}},
    )
    decision = decide(request(annotated, request_name="launch"), SEED)
    assert isinstance(decision, Rejection)
    assert decision.code is RejectionCode.NO_TEAM


def test_validate_of_a_relaunch_passes_whatever_it_carries() -> None:
    relaunch = task(
        team="team-b",
        envs={"SKYPILOT_MANAGED_JOB_ID": "7"},
        overrides={"kubernetes": {"kueue": {"local_queue_name": "team-a-lq"}}},
    )
    assert isinstance(decide(request(relaunch, request_name="validate"), SEED), PassThrough)


@pytest.mark.parametrize("request_name", ["exec", "jobs.launch_controller", "optimize", "serve.up"])
def test_requests_outside_labeled_requests_pass_through(request_name: str) -> None:
    assert isinstance(decide(request(task(team=None), request_name=request_name), SEED), PassThrough)


def test_cloud_only_tasks_pass_through() -> None:
    aws = task(team=None, infra="aws")
    assert isinstance(decide(request(aws), SEED), PassThrough)
    unpinned = task(team=None)
    del unpinned["resources"]["infra"]
    assert isinstance(decide(request(unpinned), SEED), Rejection)
    strict = config(kubernetes={"route_unpinned_tasks": False})
    assert isinstance(decide(request(unpinned), strict), PassThrough)


# --- team resolution ----------------------------------------------------------------------


def test_no_team_asks_for_the_label() -> None:
    decision = rejected(decide(request(task(team=None)), SEED), RejectionCode.NO_TEAM)
    assert "sky-kueue.io/team: <team>" in decision.message
    assert "team-a, team-b" in decision.message


def test_unknown_team_lists_known_teams() -> None:
    decision = rejected(decide(request(task(team="team-z")), SEED), RejectionCode.UNKNOWN_TEAM)
    assert "'team-z'" in decision.message and "known teams: team-a, team-b" in decision.message


RESTRICTED = config(
    teams={
        "team-a": {"users": ["alice"], "workspaces": ["vision"]},
        "team-b": {"users": ["alice", "bob"], "workspaces": ["research"]},
    }
)


def test_label_is_honoured_only_for_members() -> None:
    assert placed(decide(request(task(team="team-a"), user="alice"), RESTRICTED)).team == "team-a"
    decision = rejected(decide(request(task(team="team-a"), user="bob"), RESTRICTED), RejectionCode.NOT_A_MEMBER)
    assert "user 'bob' may not submit as team 'team-a'" in decision.message
    assert "teams you may use: team-b" in decision.message
    anonymous = decide(request(task(team="team-a"), user=None, workspace=None), RESTRICTED)
    rejected(anonymous, RejectionCode.NOT_A_MEMBER)


def test_user_id_counts_as_membership() -> None:
    by_id = config(teams={"team-a": {"users": ["id-carol"]}, "team-b": {"users": []}})
    assert placed(decide(request(task(team="team-a"), user="carol"), by_id)).team == "team-a"


def test_team_follows_from_workspace_then_user_without_label() -> None:
    assert placed(decide(request(task(team=None), user="alice", workspace="research"), RESTRICTED)).team == "team-b"
    assert placed(decide(request(task(team=None), user="bob", workspace="default"), RESTRICTED)).team == "team-b"
    decision = rejected(
        decide(request(task(team=None), user="alice", workspace="default"), RESTRICTED), RejectionCode.AMBIGUOUS_TEAM
    )
    assert "several teams (team-a, team-b)" in decision.message


def test_candidates_naming_different_teams_are_rejected() -> None:
    both = task(team="team-a")
    both["resources"] = {
        "ordered": [
            {"infra": "kubernetes", "labels": {"sky-kueue.io/team": "team-a"}},
            {"infra": "kubernetes", "labels": {"sky-kueue.io/team": "team-b"}},
        ]
    }
    rejected(decide(request(both), SEED), RejectionCode.TEAM_CONFLICT)


# --- a team never uses another team's queue, namespace or context ---------------------------


@pytest.mark.parametrize(
    "where",
    [
        {"overrides": {"kubernetes": {"kueue": {"local_queue_name": "team-a-lq"}}}},
        {"overrides": {"kubernetes": {"quota": {"queue": "team-a-lq"}}}},
        {
            "overrides": {
                "kubernetes": {"pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a-lq"}}}}
            }
        },
        {"labels": {"kueue.x-k8s.io/queue-name": "team-a-lq"}},
    ],
)
def test_a_team_cannot_use_another_teams_queue(where: dict[str, Any]) -> None:
    decision = rejected(decide(request(task(team="team-b", **where)), SEED), RejectionCode.FOREIGN_QUEUE)
    assert "asks for queue 'team-a-lq', which belongs to team 'team-a'" in decision.message
    assert "team-b/team-b-lq" in decision.message


def test_own_queue_named_explicitly_is_fine() -> None:
    own = task(team="team-b", overrides={"kubernetes": {"kueue": {"local_queue_name": "team-b-lq"}}})
    assert placed(decide(request(own), SEED)).local_queue == "team-b-lq"


def test_foreign_namespace_and_context_are_rejected() -> None:
    ns = task(team="team-b", overrides={"kubernetes": {"pod_config": {"metadata": {"namespace": "team-a"}}}})
    decision = rejected(decide(request(ns), SEED), RejectionCode.FOREIGN_NAMESPACE)
    assert "namespace 'team-a'" in decision.message
    ctx = task(team="team-b", infra="kubernetes/prod-cluster")
    decision = rejected(decide(request(ctx), SEED), RejectionCode.FOREIGN_CONTEXT)
    assert f"k8s/{CONTEXT}" in decision.message


# --- priority classes -----------------------------------------------------------------------


def test_default_priority_class_per_team() -> None:
    assert placed(decide(request(task(team="team-a")), SEED)).priority_class == "prod-priority"
    assert placed(decide(request(task(team="team-b")), SEED)).priority_class == "dev-priority"
    asked = task(team="team-a", priority_class="dev-priority")
    assert placed(decide(request(asked), SEED)).priority_class == "dev-priority"


def test_priority_class_not_allowed_for_team() -> None:
    decision = rejected(
        decide(request(task(team="team-b", priority_class="prod-priority")), SEED), RejectionCode.PRIORITY_NOT_ALLOWED
    )
    assert "'prod-priority' is not allowed for team 'team-b' (allowed: dev-priority)" in decision.message


def test_conflicting_priority_classes() -> None:
    both = task(team="team-a", priority_class="prod-priority", labels={"kueue.x-k8s.io/priority-class": "dev-priority"})
    rejected(decide(request(both), SEED), RejectionCode.PRIORITY_CONFLICT)


def test_priority_class_missing_on_the_cluster() -> None:
    view = fake_view()
    view.classes = {"dev-priority": 100}
    decision = rejected(decide(request(task(team="team-a")), SEED, view), RejectionCode.PRIORITY_CLASS_MISSING)
    assert "'prod-priority' does not exist according to the fake cluster" in decision.message


# --- team limits ----------------------------------------------------------------------------


def test_gpu_limit() -> None:
    decision = rejected(
        decide(request(task(team="team-b", accelerators={"A100": 2})), SEED), RejectionCode.LIMIT_EXCEEDED
    )
    assert "at most 0 GPUs per job, but the task asks for 2 (2 per node x 1 node)" in decision.message


def test_cpu_limit_counts_every_node() -> None:
    decision = rejected(decide(request(task(team="team-b", num_nodes=3, cpus="4")), SEED), RejectionCode.LIMIT_EXCEEDED)
    assert "at most 10 CPUs per job, but the task asks for 12 (4 per node x 3 nodes)" in decision.message
    assert isinstance(decide(request(task(team="team-b", num_nodes=3, cpus="3+")), SEED), Placement)


def test_unreadable_resources() -> None:
    decision = rejected(decide(request(task(team="team-a", memory="lots")), SEED), RejectionCode.UNREADABLE_RESOURCES)
    assert "memory 'lots'" in decision.message


# --- cluster checks through the view --------------------------------------------------------


def test_missing_local_queue() -> None:
    view = fake_view()
    del view.queues[("team-a", "team-a-lq")]
    decision = rejected(decide(request(task(team="team-a")), SEED, view), RejectionCode.QUEUE_MISSING)
    assert (
        "LocalQueue team-a/team-a-lq of team 'team-a' does not exist according to the fake cluster" in decision.message
    )


@pytest.mark.parametrize(
    ("facts", "code", "text"),
    [
        ({"cluster_queue_exists": False}, RejectionCode.CLUSTER_QUEUE_MISSING, "which does not exist"),
        ({"cluster_queue_active": False}, RejectionCode.CLUSTER_QUEUE_INACTIVE, "is not active"),
        ({"selects_namespace": False}, RejectionCode.NAMESPACE_NOT_SELECTED, "does not select namespace 'team-a'"),
    ],
)
def test_cluster_queue_problems(facts: dict[str, bool], code: RejectionCode, text: str) -> None:
    decision = rejected(decide(request(task(team="team-a")), SEED, fake_view(**facts)), code)
    assert text in decision.message and "'team-a-cq'" in decision.message


def test_uncovered_resource() -> None:
    view = fake_view()
    view.capacity_answer = CapacityFacts(known=True, uncovered=("nvidia.com/gpu",))
    decision = rejected(
        decide(request(task(team="team-a", accelerators={"A100": 1})), SEED, view), RejectionCode.NOT_COVERED
    )
    assert "provides no nvidia.com/gpu, but the task asks for 1 nvidia.com/gpu per node" in decision.message


def test_exceeding_potential_capacity_without_burst_is_rejected() -> None:
    view = fake_view()
    view.capacity_answer = CapacityFacts(known=True, exceeding=(Shortfall("cpu", 12000, 10000),))
    decision = rejected(
        decide(request(task(team="team-b", num_nodes=3, cpus="3")), SEED, view), RejectionCode.EXCEEDS_CAPACITY
    )
    assert "needs 12 cpu in total (3 x 3), but ClusterQueue 'team-b-cq' can hold at most 10" in decision.message
    assert view.seen_demands[0].pod_count == 3 and view.seen_demands[0].per_pod["cpu"] == 3000


def test_predicted_never_fits_without_burst_is_rejected() -> None:
    view = fake_view()
    view.verdict = AdmissionVerdict(AdmissionOutcome.NEVER_FITS, "request > maximum capacity (12 > 10)")
    decision = rejected(decide(request(task(team="team-b")), SEED, view), RejectionCode.EXCEEDS_CAPACITY)
    assert "maximum capacity (12 > 10)" in decision.message


def test_exceeding_capacity_with_burst_skips_kubernetes() -> None:
    view = fake_view()
    view.capacity_answer = CapacityFacts(known=True, exceeding=(Shortfall("nvidia.com/gpu", 3, 2),))
    burst = task(team="team-a", accelerators={"A100": 2}, labels={"sky-kueue.io/burst": "true"})
    placement = placed(decide(request(burst), SEED, view))
    assert placement.burst.action is BurstAction.SKIP_KUBERNETES
    assert placement.verdict.outcome is AdmissionOutcome.NEVER_FITS


# --- what a placement writes ----------------------------------------------------------------


def test_placement_writes_queue_labels_namespace_and_timeout() -> None:
    result = evaluate(request(task(team="team-a", labels={"project": "llm"})), SEED)
    (candidate,) = candidates(result.task)
    assert candidate["infra"] == f"kubernetes/{CONTEXT}"
    assert candidate["labels"] == {"project": "llm"}
    assert candidate["priority_class"] == "prod-priority"
    assert "job_recovery" not in candidate  # the demo config names no recovery strategy
    assert pod_labels(candidate) == {
        "kueue.x-k8s.io/queue-name": "team-a-lq",
        "kueue.x-k8s.io/priority-class": "prod-priority",
        "sky-kueue.io/team": "team-a",
    }
    assert kueue_settings(candidate) == {"local_queue_name": "team-a-lq", "admission_timeout": 86400}
    assert result.skypilot_config["kubernetes"]["context_configs"][CONTEXT]["namespace"] == "team-a"


def test_recovery_strategy_only_for_managed_jobs_and_keeps_other_settings() -> None:
    with_strategy = config(aging={"strategy": "KUEUE_AGING"})
    cluster = evaluate(request(task(team="team-a"), request_name="launch"), with_strategy)
    assert "job_recovery" not in candidates(cluster.task)[0]
    own = task(team="team-a", job_recovery={"strategy": "FAILOVER", "max_restarts_on_errors": 3})
    managed = evaluate(request(own), with_strategy)
    assert candidates(managed.task)[0]["job_recovery"] == {"strategy": "KUEUE_AGING", "max_restarts_on_errors": 3}
    no_aging = evaluate(request(own), config(aging={"enabled": False, "strategy": "KUEUE_AGING"}))
    assert candidates(no_aging.task)[0]["job_recovery"]["strategy"] == "FAILOVER"


def test_a_job_admitted_now_keeps_its_burst_targets_for_the_recovery_strategy() -> None:
    """KUEUE_AGING bursts a relaunch by keeping only the burst targets: they must be in the task
    even when Kueue admits it at once (after the team's queue, so the first launch is unchanged)."""
    view = fake_view()
    view.verdict = AdmissionVerdict(AdmissionOutcome.ADMIT_NOW)
    burst = task(team="team-a", labels={"sky-kueue.io/burst": "true"})
    with_strategy = evaluate(request(burst), config(aging={"strategy": "KUEUE_AGING"}), view)
    assert placed(with_strategy.decision).burst.action is BurstAction.KEEP_KUBERNETES
    infras = [c["infra"] for c in candidates(with_strategy.task)]
    assert infras == [f"kubernetes/{CONTEXT}", "aws", "gcp"]
    assert kueue_settings(candidates(with_strategy.task)[0])["admission_timeout"] == 86400  # not the burst limit
    without = evaluate(request(burst), SEED, view)
    assert [c["infra"] for c in candidates(without.task)] == [f"kubernetes/{CONTEXT}"]


def test_applying_twice_changes_nothing() -> None:
    first = evaluate(request(task(team="team-a", labels={"sky-kueue.io/burst": "true"})), SEED)
    second = evaluate(request(first.task, skypilot_config=first.skypilot_config), SEED)
    assert isinstance(second.decision, Placement)
    assert second.task == first.task
    assert second.skypilot_config == first.skypilot_config


def test_quota_queue_spelling_in_skypilot_config_is_overridden_at_task_level() -> None:
    skypilot_config = {"kubernetes": {"context_configs": {CONTEXT: {"quota": {"queue": "legacy"}}}}}
    result = evaluate(request(task(team="team-a"), skypilot_config=skypilot_config), SEED)
    overrides = candidates(result.task)[0]["_cluster_config_overrides"]["kubernetes"]
    assert overrides["quota"] == {"queue": "team-a-lq"}
    plain = evaluate(request(task(team="team-a")), SEED)
    assert "quota" not in candidates(plain.task)[0]["_cluster_config_overrides"]["kubernetes"]


def test_workspace_namespace_is_overwritten() -> None:
    skypilot_config = {"active_workspace": "ml", "workspaces": {"ml": {"kubernetes": {"namespace": "shared"}}}}
    result = evaluate(request(task(team="team-b"), workspace=None, skypilot_config=skypilot_config), SEED)
    assert result.skypilot_config["workspaces"]["ml"]["kubernetes"]["namespace"] == "team-b"


def test_a_shorter_admission_timeout_from_the_task_is_kept() -> None:
    short = task(team="team-a", overrides={"kubernetes": {"kueue": {"admission_timeout": 120}}})
    assert placed(decide(request(short), SEED)).admission_timeout_seconds == 120
    long = task(team="team-a", overrides={"kubernetes": {"kueue": {"admission_timeout": 10**7}}})
    assert placed(decide(request(long), SEED)).admission_timeout_seconds == 86400


def test_unpinned_task_is_pinned_to_the_team_context() -> None:
    unpinned = task(team="team-b")
    del unpinned["resources"]["infra"]
    result = evaluate(request(unpinned), SEED)
    assert candidates(result.task)[0]["infra"] == f"kubernetes/{CONTEXT}"


def test_top_level_config_block_is_folded_into_the_candidates() -> None:
    raw = task(team="team-a")
    raw["config"] = {"kubernetes": {"provision_timeout": 600}, "hooks": [{"run": "echo bye"}]}
    result = evaluate(request(raw), SEED)
    assert result.task["config"] == {"hooks": [{"run": "echo bye"}]}
    overrides = result.task["resources"]["_cluster_config_overrides"]["kubernetes"]
    assert overrides["provision_timeout"] == 600
    assert overrides["kueue"]["local_queue_name"] == "team-a-lq"


# --- the production-shaped config: teams from SkyPilot workspaces and users --------------------


def test_production_config_maps_workspaces_and_users_and_honours_labels_of_members_only() -> None:
    production = load_config(PRODUCTION_CONFIG)
    by_workspace = decide(request(task(team=None), workspace="team-b", user="carol"), production)
    assert isinstance(by_workspace, Placement) and by_workspace.team == "team-b"
    by_user = decide(request(task(team=None), workspace="default", user="alice"), production)
    assert isinstance(by_user, Placement) and by_user.team == "team-a"
    claim = decide(request(task(team="team-a"), workspace="team-b", user="bob"), production)
    assert isinstance(claim, Rejection) and claim.code is RejectionCode.NOT_A_MEMBER
    assert "user 'bob' may not submit as team 'team-a' (teams you may use: team-b)" in claim.message
    stranger = decide(request(task(team=None), workspace="default", user="mallory"), production)
    assert isinstance(stranger, Rejection) and stranger.code is RejectionCode.NO_TEAM

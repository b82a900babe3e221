"""Launching a task through the front door: apply the policy, predict, then submit.

Why a client-side path next to the admin policy: the policy runs inside SkyPilot and can
only accept, rewrite or reject. A user deciding whether to submit wants to see *before*
submitting what the policy will do (team, queue, priority class, burst) and what Kueue is
likely to do (admit now, preempt whom, wait and why). :func:`plan_launch` answers that
without SkyPilot or a cluster; :func:`submit` hands the planned task to
``sky.jobs.launch`` (SkyPilot's API server re-applies its own policy, which gives the same
answer because the decision is idempotent).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sky_kueue.skypilot import labels
from sky_kueue.skypilot.config import PluginConfig
from sky_kueue.skypilot.decision import PassThrough, Placement, Rejection
from sky_kueue.skypilot.engine import PolicyResult, evaluate
from sky_kueue.skypilot.placement import Standing
from sky_kueue.skypilot.request import JOBS_LAUNCH, PolicyRequest, UserIdentity
from sky_kueue.skypilot.runtime_estimate import PastRun
from sky_kueue.skypilot.skypilot_files import K8S_MERGED_KEYS
from sky_kueue.skypilot.task_yaml import candidates, resource_group, with_candidates
from sky_kueue.skypilot.view import ClusterView, ContextViews


def with_choices(task: Mapping[str, Any], team: str | None = None, priority: str | None = None) -> dict[str, Any]:
    """The task with ``--team``/``--priority`` applied to every candidate.

    ``team`` replaces the ``sky-kueue.io/team`` label; ``priority`` replaces
    ``resources.priority_class`` and drops any Kueue priority label, so the choice is not
    reported as a conflict.
    """
    if team is None and priority is None:
        return copy.deepcopy(dict(task))
    updated = []
    for candidate in candidates(task):
        if team is not None:
            candidate["labels"] = {**(candidate.get("labels") or {}), labels.TEAM_LABEL: team}
        if priority is not None:
            candidate["priority_class"] = priority
            if isinstance(candidate.get("labels"), dict):
                candidate["labels"].pop(labels.KUEUE_PRIORITY_CLASS_LABEL, None)
            pod_labels = (
                candidate.get("_cluster_config_overrides", {})
                .get("kubernetes", {})
                .get("pod_config", {})
                .get("metadata", {})
                .get("labels")
            )
            if isinstance(pod_labels, dict):
                pod_labels.pop(labels.KUEUE_PRIORITY_CLASS_LABEL, None)
        updated.append(candidate)
    return with_candidates(task, resource_group(task), updated)


def plan_launch(
    task: Mapping[str, Any],
    config: PluginConfig,
    view: ClusterView | ContextViews | None = None,
    team: str | None = None,
    priority: str | None = None,
    user: UserIdentity | None = None,
    workspace: str | None = None,
    skypilot_config: Mapping[str, Any] | None = None,
    past_runs: tuple[PastRun, ...] = (),
    kubeconfig_contexts: tuple[str, ...] | None = None,
) -> PolicyResult:
    """What the policy does with a managed-job submission of ``task``.

    Args:
        task: the task in YAML form (``Task.to_yaml_config()``).
        config: the plugin config.
        view: cluster knowledge, one view or one per context (default: the plugin config alone).
        team: ``--team`` override.
        priority: ``--priority`` (WorkloadPriorityClass) override.
        user: the submitting user, if known.
        workspace: the active SkyPilot workspace, if known.
        skypilot_config: the SkyPilot config the submission would carry (its
            ``kubernetes.allowed_contexts`` names the clusters when the plugin config does not).
        past_runs: finished runs from the controller's history (run-time estimate).
        kubeconfig_contexts: every kubeconfig context, when ``allowed_contexts`` is ``all``.

    Returns:
        The policy result (decision, mutated task and SkyPilot config).
    """
    sent = copy.deepcopy(dict(skypilot_config or {}))
    if workspace:
        sent["active_workspace"] = workspace
    request = PolicyRequest(
        task=with_choices(task, team, priority),
        skypilot_config=sent,
        request_name=JOBS_LAUNCH,
        at_client_side=True,
        user=user,
        past_runs=past_runs,
        kubeconfig_contexts=kubeconfig_contexts,
    )
    return evaluate(request, config, view)


def summary(result: PolicyResult) -> dict[str, Any]:
    """A JSON-ready description of a result (what ``--output json`` prints)."""
    decision = result.decision
    if isinstance(decision, Rejection):
        return {"decision": "rejected", "code": decision.code.value, "message": decision.message}
    if isinstance(decision, PassThrough):
        return {"decision": "unchanged", "reason": decision.reason, "task": result.task}
    assert isinstance(decision, Placement)
    verdict = decision.verdict
    plan = decision.burst
    return {
        "decision": "placed",
        "team": decision.team,
        "namespace": decision.namespace,
        "local_queue": decision.local_queue,
        "context": decision.context,
        "priority_class": decision.priority_class,
        "admission_timeout_seconds": decision.admission_timeout_seconds,
        "prediction": {
            "outcome": verdict.outcome.value,
            "reason": verdict.reason,
            "preempts": list(verdict.preempts),
            "expected_wait_seconds": verdict.expected_wait_seconds,
            "expected_wait_basis": verdict.expected_wait_basis,
        },
        "expected_runtime": {
            "seconds": decision.expected_runtime.seconds,
            "source": decision.expected_runtime.source,
        },
        "burst": {
            "action": plan.action.value,
            "clouds": list(plan.clouds),
            "message": plan.message,
        },
        "placement": placement_rows(decision),
        "notes": list(decision.notes),
        "task": result.task,
        "skypilot_config": result.skypilot_config,
    }


def placement_rows(decision: Placement) -> list[dict[str, Any]]:
    """The team's clusters in rank order (then those left out), as ``--output json`` shows them.

    Each row: ``context``, ``outcome`` (``admit-now``, ``admit-after-preemption``, ``wait``,
    ``unknown``, ``never-fits``, ``unreachable`` or ``excluded``), ``expected_wait_seconds``,
    ``reason``, and ``ordered`` (whether the cluster is in ``resources.ordered``).
    """
    return [
        {
            "context": ranked.cluster.context,
            "outcome": ranked.outcome,
            "expected_wait_seconds": ranked.verdict.expected_wait_seconds,
            "expected_wait_basis": ranked.verdict.expected_wait_basis,
            "reason": ranked.reason,
            "namespace": ranked.cluster.namespace,
            "local_queue": ranked.cluster.local_queue,
            "preempts": list(ranked.verdict.preempts),
            "ordered": ranked.standing is Standing.RANKED,
        }
        for ranked in decision.ranking.clusters
    ]


def submission_overrides(result: PolicyResult) -> dict[str, Any]:
    """What :func:`submit` lays over SkyPilot's loaded config: the ``kubernetes`` section the
    policy returned (each cluster's namespace and queue in its scope), without
    :data:`~sky_kueue.skypilot.skypilot_files.K8S_MERGED_KEYS` (SkyPilot merges them list item by
    list item, so laying the user's own value over itself would repeat unnamed items such as
    ``tolerations``; the policy never writes them in the SkyPilot config). The planned config is
    the user's own plus the policy's changes, so laying it over the user's config sets exactly
    those changes; SkyPilot replaces
    the other lists and merges mappings, which repeats nothing."""
    kubernetes = result.skypilot_config.get("kubernetes")
    if not isinstance(kubernetes, Mapping):
        return {}
    return {"kubernetes": {k: copy.deepcopy(v) for k, v in kubernetes.items() if k not in K8S_MERGED_KEYS}}


def submit(result: PolicyResult, name: str | None = None) -> Any:
    """Submit a planned task with ``sky.jobs.launch`` and wait for the request to finish.

    Args:
        result: a placement or pass-through result of :func:`plan_launch`.
        name: managed-job name (default: the task's name).

    Returns:
        What ``sky.jobs.launch`` returns through ``sky.stream_and_get`` (job ids, handle).

    Raises:
        ValueError: ``result`` is a rejection.
        Exception: whatever SkyPilot raises (no API server, rejection by its policy, ...).
    """
    if isinstance(result.decision, Rejection):
        raise ValueError(result.decision.message)
    import sky
    from sky import skypilot_config

    task = sky.Task.from_yaml_config(copy.deepcopy(result.task))
    merged = skypilot_config.overlay_skypilot_config(
        original_config=skypilot_config.to_dict(), override_configs=sky.Config(submission_overrides(result))
    )
    with skypilot_config.replace_skypilot_config(merged):
        request_id = sky.jobs.launch(task, name=name)
        return sky.stream_and_get(request_id)

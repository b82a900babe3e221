"""The policy's decision: label a task for its team's queue, reject it, or leave it alone.

Why pure: this is the part of sky-kueue that users meet first, and every branch of it must be
explainable and testable without SkyPilot, a cluster or a network. :func:`decide` is a
function of the request (plain data), the plugin config and a :class:`ClusterView`; it
returns a :class:`Placement` (what to write, applied by ``rewrite``), a :class:`Rejection`
(a message the user can act on) or a :class:`PassThrough` (not ours to touch).

Rules, in order:

1. ``validate`` requests are never rejected and never labeled: SkyPilot discards their
   mutations (``sky/server/server.py``, the ``/validate`` handler); a relaunch's ``sdk.launch``
   validates first (``sky/client/sdk.py``), and rejecting that would keep a preempted job in
   backoff forever. Nothing is lost: whatever a validated request carries must pass a labeled
   request (``launch``/``jobs.launch``/``jobs.launch_cluster``) before anything is created.
2. Nothing in the task exempts it. A ``SKYPILOT_MANAGED_JOB_ID`` env, a
   ``skypilot-managed-job-id`` annotation, the cluster name and the ``jobs.launch_cluster``
   request name (``is_launched_by_jobs_controller`` is a field of the HTTP body,
   ``sky/server/requests/payloads.py``) are all the caller's. A dedicated jobs controller
   relaunches under a config without ``admin_policy`` (``sky/utils/controller_utils.py``), so
   the policy never sees that relaunch; in jobs consolidation mode the controller relaunches
   through the API server itself (``sky/jobs/recovery_strategy.py``, ``sdk.launch``), whose
   policy sees it as ``jobs.launch_cluster`` with the ``KUEUE_AGING`` strategy's lane queue and
   ladder rung. Such a request may keep them only by :func:`relaunch_grant`: from
   ``request.relaunch``, the facts SkyPilot's own managed-jobs state and the strategy's history
   give about the job it names (``managed_relaunch``: RECOVERING, the requesting user's, the
   same task and cluster name, submitted for this team), the lane if the job is due it and the
   rung the strategy computes, both recomputed here. Everything else is validated like any
   launch; an unverifiable request's rejection says why it could not be verified.
3. Only the request names in ``policy.labeled_requests`` (plus ``jobs.launch_cluster``) are
   labeled, and only tasks that can land on Kubernetes.
4. The team comes from ``teams.resolve_team``; the queue, namespace and context always come
   from the team, so a task that asks for another team's queue is rejected rather than
   silently moved. A task's own pod fields (``kubernetes.pod_config`` and
   ``custom_metadata``) must be ones its team may set and none that Kueue, SkyPilot or the
   policy own (``pod_config_boundary``): rejected with the field's name, never overwritten.
5. Priority class, per-job limits, then, on each of the team's clusters
   (``PluginConfig.team_clusters``) whose context SkyPilot enables (``enabled_contexts``;
   the others are left out with a note), the checks that cluster's view can answer and the
   admission prediction; the clusters are ranked by ``placement.rank`` and the best one
   comes first in ``resources.ordered``.
6. Cloud burst (``burst.plan_burst``) from the best cluster's admission prediction.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.skypilot import labels, pod_config_boundary
from sky_kueue.skypilot.burst import BurstAction, BurstPlan, plan_burst
from sky_kueue.skypilot.cluster_discovery import discovered_contexts
from sky_kueue.skypilot.config import (
    ADMISSION_TIMEOUT_FOREVER,
    IDENTIFY_BY_ID,
    LABELABLE_REQUEST_NAMES,
    PluginConfig,
    TeamCluster,
    TeamConfig,
)
from sky_kueue.skypilot.config_view import ConfigClusterView
from sky_kueue.skypilot.demand import CPU, DemandError, WorkloadDemand, format_quantity, pod_requests
from sky_kueue.skypilot.enabled_contexts import describe_enabled, enabled_contexts, not_enabled
from sky_kueue.skypilot.label_keys import misspelled_label
from sky_kueue.skypilot.placement import NO_RANKING, ClusterAssessment, Ranking, Standing, rank
from sky_kueue.skypilot.request import JOBS_LAUNCH, JOBS_LAUNCH_CLUSTER, VALIDATE, PolicyRequest
from sky_kueue.skypilot.runtime_estimate import (
    NO_ESTIMATE,
    RuntimeDeclarationError,
    RuntimeEstimate,
    estimate_runtime,
    source_description,
    written_estimate,
)
from sky_kueue.skypilot.task_yaml import OVERRIDES_KEY, candidates, get_path, parse_infra
from sky_kueue.skypilot.teams import TeamChoice, resolve_team
from sky_kueue.skypilot.verdict import UNKNOWN_VERDICT, AdmissionOutcome, AdmissionVerdict
from sky_kueue.skypilot.view import (
    ClusterView,
    ContextHealth,
    ContextView,
    ContextViews,
    QueueFacts,
    as_context_views,
)

#: Prefix of every rejection message, so users can tell who rejected their task.
MESSAGE_PREFIX = "sky-kueue: "

_TRUE_VALUES = frozenset({"true", "yes", "1"})
_FALSE_VALUES = frozenset({"false", "no", "0"})


class RejectionCode(enum.Enum):
    """Why a task was rejected (stable identifiers for tests and logs)."""

    NO_TEAM = "no-team"
    UNKNOWN_TEAM = "unknown-team"
    TEAM_CONFLICT = "team-conflict"
    AMBIGUOUS_TEAM = "ambiguous-team"
    NOT_A_MEMBER = "not-a-member"
    FOREIGN_QUEUE = "foreign-queue"
    LANE_QUEUE = "lane-queue"
    FOREIGN_NAMESPACE = "foreign-namespace"
    FOREIGN_CONTEXT = "foreign-context"
    BAD_LABEL = "bad-label"
    PRIORITY_CONFLICT = "priority-conflict"
    PRIORITY_NOT_ALLOWED = "priority-not-allowed"
    PRIORITY_CLASS_MISSING = "priority-class-missing"
    UNREADABLE_RESOURCES = "unreadable-resources"
    LIMIT_EXCEEDED = "limit-exceeded"
    QUEUE_MISSING = "queue-missing"
    CLUSTER_QUEUE_MISSING = "cluster-queue-missing"
    CLUSTER_QUEUE_INACTIVE = "cluster-queue-inactive"
    NAMESPACE_NOT_SELECTED = "namespace-not-selected"
    NOT_COVERED = "not-covered"
    CONTEXT_NOT_ENABLED = "context-not-enabled"
    EXCEEDS_CAPACITY = "exceeds-capacity"
    MISCONFIGURED = "misconfigured"
    POD_FIELD_OWNED = "pod-field-owned"
    POD_FIELD_NOT_ALLOWED = "pod-field-not-allowed"


_TEAM_PROBLEM_CODES = {
    "unknown": RejectionCode.UNKNOWN_TEAM,
    "conflict": RejectionCode.TEAM_CONFLICT,
    "not-member": RejectionCode.NOT_A_MEMBER,
    "ambiguous": RejectionCode.AMBIGUOUS_TEAM,
    "none": RejectionCode.NO_TEAM,
}
#: Team problems that depend on who the requester is (not on the task alone).
_IDENTITY_PROBLEMS = frozenset({"not-member", "ambiguous", "none"})


@dataclass(frozen=True)
class Rejection:
    """The task is refused.

    Attributes:
        code: machine-readable reason.
        message: what is wrong and what to do, starting with :data:`MESSAGE_PREFIX`.
    """

    code: RejectionCode
    message: str


@dataclass(frozen=True)
class PassThrough:
    """The task is returned unchanged.

    Attributes:
        reason: why the policy does not touch it.
    """

    reason: str


@dataclass(frozen=True)
class Placement:
    """Where and how a task is queued; applied to the task by ``rewrite.apply_placement``.

    Attributes:
        team: team name.
        namespace: the team's namespace.
        local_queue: the team's LocalQueue.
        context: Kubernetes context to pin to (None = any).
        priority_class: WorkloadPriorityClass for the pod label and ``priority_class``.
        admission_timeout_seconds: value for ``kubernetes.kueue.admission_timeout``.
        burst: the burst plan (its timeout is already folded into the field above).
        verdict: the admission prediction the plan was made from.
        burst_label: the task's burst opt-in/out (``"true"``/``"false"``) to persist, if any.
        recovery_strategy: job-recovery strategy to write (aging), or None.
        pin_unpinned: also pin candidates that name no cloud to Kubernetes.
        set_quota_queue: also write ``kubernetes.quota.queue``, because the SkyPilot config
            sets that spelling somewhere and it would otherwise win over ours.
        notes: human-readable notes (team choice, placement, burst choice).
        ranking: how the team's clusters were ranked (one entry for a single-cluster team).
        targets: the Kubernetes targets in ``resources.ordered`` order, best first; the first
            is the one named by ``namespace``, ``local_queue`` and ``context``.
        expected_runtime: the task's expected run time and its source, written on its pods
            (``runtime_estimate``).
        lane_queue: the team's relaunch-lane LocalQueue a verified relaunch keeps (rule 2):
            candidates that name it stay there, the others get ``local_queue``; None otherwise.
    """

    team: str
    namespace: str
    local_queue: str
    context: str | None
    priority_class: str
    admission_timeout_seconds: int
    burst: BurstPlan
    verdict: AdmissionVerdict
    burst_label: str | None = None
    recovery_strategy: str | None = None
    pin_unpinned: bool = True
    set_quota_queue: bool = False
    notes: tuple[str, ...] = ()
    ranking: Ranking = NO_RANKING
    targets: tuple[TeamCluster, ...] = ()
    expected_runtime: RuntimeEstimate = NO_ESTIMATE
    lane_queue: str | None = None


Decision = Placement | Rejection | PassThrough


@dataclass
class _Findings:
    """What the task itself asks for, gathered over all candidates."""

    team_labels: set[str] = field(default_factory=set)
    burst_labels: set[str] = field(default_factory=set)
    queues: set[str] = field(default_factory=set)
    namespaces: set[str] = field(default_factory=set)
    priority_classes: set[str] = field(default_factory=set)
    contexts: set[str] = field(default_factory=set)
    admission_timeouts: set[int] = field(default_factory=set)
    #: values of the run-time label (``runtime_estimate.RUNTIME_LABEL``)
    declared_runtimes: list[str] = field(default_factory=list)
    #: the estimate a previous application of the policy wrote on the pods, if any
    written_runtime: RuntimeEstimate | None = None


def _server_knows_better(request: PolicyRequest, config: PluginConfig, problem_kind: str) -> bool:
    """Whether a team problem found on a client is the API server's to decide.

    Why: SkyPilot's client passes its policy no user (``sky/utils/admin_policy_utils.py``
    ``apply``), so the in-process policy uses the user the client sends
    (``request.user_is_local``). Without authentication the server sees that same user and
    the client's answer is the server's. With ``policy.identify_users_by: id`` the server
    authenticates and swaps in the authenticated user's id, which the client cannot know: a
    rejection there would refuse a launch the server accepts, so it applies only on the server.
    """
    return (
        request.user_is_local
        and config.policy.identify_users_by == IDENTIFY_BY_ID
        and problem_kind in _IDENTITY_PROBLEMS
    )


def targets_kubernetes(candidate: Mapping[str, Any], config: PluginConfig) -> bool:
    """Whether a candidate may land on Kubernetes and is therefore the policy's business."""
    infra = parse_infra(candidate)
    return infra.is_kubernetes or (infra.cloud is None and config.kubernetes.route_unpinned_tasks)


def decide(request: PolicyRequest, config: PluginConfig, view: ClusterView | ContextViews | None = None) -> Decision:
    """Decide what to do with one admin-policy request.

    Args:
        request: the request as plain data.
        config: the plugin config.
        view: what is known about the clusters: one view for every context, or a view per
            context; defaults to the plugin config alone.

    Returns:
        A :class:`Placement`, :class:`Rejection` or :class:`PassThrough`.
    """
    views = as_context_views(view if view is not None else ConfigClusterView(config))
    early = early_pass_through(request)
    if early is not None:
        return early
    if request.request_name not in config.policy.labeled_requests and request.request_name != JOBS_LAUNCH_CLUSTER:
        return PassThrough(f"request {request.request_name!r} is not labeled (policy.labeled_requests)")
    all_candidates = candidates(request.task)
    k8s = [c for c in all_candidates if targets_kubernetes(c, config)]
    if not k8s:
        return PassThrough("the task cannot run on Kubernetes")

    findings = _scan(all_candidates, k8s)
    misspelled = misspelled_label(all_candidates)
    if misspelled is not None:
        return _reject(RejectionCode.BAD_LABEL, misspelled)
    choice = resolve_team(request, config, findings.team_labels)
    if not isinstance(choice, TeamChoice):
        if _server_knows_better(request, config, choice.kind):
            return PassThrough(f"left to the API server, which authenticates the user ({choice.message})")
        return _reject(_TEAM_PROBLEM_CODES[choice.kind], choice.message)
    team = choice.team
    clusters = config.team_clusters(
        team,
        discovered_contexts(
            request.skypilot_config, request.workspace, request.enabled_contexts, request.kubeconfig_contexts
        ),
    )

    grant = relaunch_grant(request, choice)
    problem = _check_ownership(choice, config, findings, clusters, request, grant) or _check_pod_fields(
        choice, all_candidates
    )
    if problem is not None:
        return problem
    if findings.contexts and all(c.context is not None for c in clusters):
        # The task pins contexts (or carries a placement written before): stay within them.
        clusters = tuple(c for c in clusters if c.context in findings.contexts)
    runtime = _expected_runtime(request, findings, clusters)
    if isinstance(runtime, Rejection):
        return runtime
    burst_label = _single_burst_label(findings)
    if isinstance(burst_label, Rejection):
        return burst_label
    priority_class = _choose_priority_class(choice, findings, request, grant)
    if isinstance(priority_class, Rejection):
        return priority_class

    demands: list[WorkloadDemand] = []
    num_nodes = _num_nodes(request.task)
    for candidate in k8s:
        try:
            per_pod = pod_requests(candidate, config.kubernetes.gpu_resource)
        except DemandError as exc:
            return _reject(RejectionCode.UNREADABLE_RESOURCES, f"{exc}; fix the task's resources")
        demands.append(WorkloadDemand(pod_count=num_nodes, per_pod=per_pod))
    for demand in demands:
        limit_problem = _check_limits(choice, demand, config.kubernetes.gpu_resource)
        if limit_problem is not None:
            return limit_problem

    burst_settings = team.burst if _bursts(team, burst_label) else None
    enabled = enabled_contexts(request)
    refused = set(not_enabled((c.context for c in clusters), enabled))
    views.warm(c.context for c in clusters if c.context not in refused)
    assessed = [
        _not_enabled(choice, cluster, enabled or ())
        if cluster.context in refused
        else _assess(
            choice,
            cluster,
            views.lookup(cluster.context),
            demands,
            priority_class,
            burst_settings is not None,
            granted_class=grant.priority_class,
        )
        for cluster in clusters
    ]
    ranking = rank([a for a, _ in assessed])
    ranked = ranking.ranked
    if not ranked:
        rejections = [r for _, r in assessed if r is not None]
        if rejections and (burst_settings is None or len(rejections) == len(assessed)):
            return rejections[0]
    verdict = ranked[0].verdict if ranked else _never_fits(ranking)
    first = ranked[0].cluster if ranked else clusters[0]
    if verdict.outcome is AdmissionOutcome.NEVER_FITS and burst_settings is None:
        return _reject(
            RejectionCode.EXCEEDS_CAPACITY,
            f"Kueue could never admit this task in LocalQueue {first.namespace}/{first.local_queue}: "
            f"{verdict.reason or 'it exceeds the ClusterQueue potential capacity'}; reduce the request",
        )
    plan = plan_burst(verdict, burst_settings, team.admission_timeout_seconds)
    timeout = _combine_timeouts(plan.admission_timeout_seconds, findings.admission_timeouts)
    if plan.action is BurstAction.ADD_CLOUD_FALLBACK and timeout != plan.admission_timeout_seconds:
        plan = BurstPlan(plan.action, timeout, plan.clouds, plan.message)
    notes = [f"team {choice.name} (from {choice.how})"]
    if len(clusters) > 1:
        order = ", ".join(f"{c.context_name} ({c.outcome})" for c in ranked) or "none"
        notes.append(f"placement: {order}")
    notes.extend(ranking.notes)
    if plan.message:
        notes.append(f"burst: {plan.message}")
    if runtime.seconds is not None:
        notes.append(f"expected run time {runtime.seconds}s ({source_description(runtime.source)})")
    if grant.note:
        notes.append(grant.note)
    strategy = config.aging.strategy if config.aging.enabled and request.request_name == JOBS_LAUNCH else None
    if plan.action is BurstAction.KEEP_KUBERNETES and burst_settings is not None and strategy is not None:
        # The recovery strategy bursts a preempted job's relaunch by keeping only the task's
        # burst targets (controller/skypilot_plugin.py): they must be in the task for that, even
        # when Kueue admits it now. After the team's own queue they change no first launch.
        plan = BurstPlan(plan.action, plan.admission_timeout_seconds, tuple(burst_settings.clouds), plan.message)
    return Placement(
        team=choice.name,
        namespace=first.namespace,
        local_queue=first.local_queue,
        context=first.context,
        priority_class=priority_class,
        admission_timeout_seconds=timeout,
        burst=plan,
        verdict=verdict,
        burst_label=burst_label,
        recovery_strategy=strategy,
        pin_unpinned=config.kubernetes.route_unpinned_tasks,
        set_quota_queue=config_sets_quota_queue(request.skypilot_config),
        notes=tuple(notes),
        ranking=ranking,
        targets=tuple(c.cluster for c in ranked) if ranked else (first,),
        expected_runtime=runtime,
        lane_queue=grant.lane_queue if grant.lane_queue in findings.queues else None,
    )


def _never_fits(ranking: Ranking) -> AdmissionVerdict:
    """The verdict when no cluster is ranked: the first never-fits one, if any."""
    for ranked in ranking.clusters:
        if ranked.standing is Standing.NEVER_FITS:
            return ranked.verdict
    return AdmissionVerdict(AdmissionOutcome.NEVER_FITS, "no cluster of the team can take it")


def _not_enabled(
    choice: TeamChoice, cluster: TeamCluster, enabled: tuple[str, ...]
) -> tuple[ClusterAssessment, Rejection | None]:
    """A cluster whose context SkyPilot would refuse: left out of ``ordered``, never contacted.

    Why: SkyPilot's optimizer fails the whole task when any Kubernetes candidate names a
    context it does not enable, even if an earlier candidate is fine (``enabled_contexts``).
    """
    reason = f"not enabled in SkyPilot ({describe_enabled(enabled)}); add it to kubernetes.allowed_contexts"
    rejection = _reject(
        RejectionCode.CONTEXT_NOT_ENABLED, f"context {cluster.context!r} of team {choice.name!r} is {reason}"
    )
    return ClusterAssessment(cluster, UNKNOWN_VERDICT, excluded_because=reason), rejection


def _assess(
    choice: TeamChoice,
    cluster: TeamCluster,
    context_view: ContextView,
    demands: list[WorkloadDemand],
    priority_class: str,
    may_burst: bool,
    granted_class: str | None = None,
) -> tuple[ClusterAssessment, Rejection | None]:
    """Check and predict the task on one of the team's clusters.

    Returns:
        The assessment, and the rejection a single-cluster team would get (None when the
        cluster is a candidate).
    """
    view = context_view.view

    def excluded(rejection: Rejection) -> tuple[ClusterAssessment, Rejection | None]:
        reason = rejection.message.removeprefix(MESSAGE_PREFIX)
        assessment = ClusterAssessment(
            cluster, UNKNOWN_VERDICT, context_view.health, context_view.detail, excluded_because=reason
        )
        return assessment, rejection

    if priority_class not in cluster.allowed_priority_classes and priority_class != granted_class:
        return excluded(
            _reject(
                RejectionCode.PRIORITY_NOT_ALLOWED,
                f"priority class {priority_class!r} is not allowed for team {choice.name!r} on context "
                f"{cluster.context!r} (allowed there: {', '.join(cluster.allowed_priority_classes)})",
            )
        )
    known = view.priority_classes()
    if known is not None and priority_class not in known:
        return excluded(
            _reject(
                RejectionCode.PRIORITY_CLASS_MISSING,
                f"WorkloadPriorityClass {priority_class!r} does not exist according to {view.source}; "
                "ask an admin to create it",
            )
        )
    queue = view.local_queue(cluster.namespace, cluster.local_queue)
    queue_problem = _check_queue(choice, cluster, queue, view.source)
    if queue_problem is not None:
        return excluded(queue_problem)
    assert queue is not None  # _check_queue rejects a missing queue

    def assessment(verdict: AdmissionVerdict) -> ClusterAssessment:
        return ClusterAssessment(cluster, verdict, context_view.health, context_view.detail)

    for demand in demands:
        capacity = view.capacity(queue, demand)
        if capacity.uncovered or capacity.exceeding:
            code, message = _capacity_problem(queue, demand, capacity.uncovered, capacity.exceeding)
            never = assessment(AdmissionVerdict(AdmissionOutcome.NEVER_FITS, message))
            return never, None if may_burst else _reject(code, message)
    if context_view.health is ContextHealth.NOT_SYNCED:
        return assessment(UNKNOWN_VERDICT), None
    verdict = view.predict(queue, demands[0], priority_class)
    if verdict.outcome is AdmissionOutcome.NEVER_FITS and not may_burst:
        return assessment(verdict), _reject(
            RejectionCode.EXCEEDS_CAPACITY,
            f"Kueue could never admit this task in LocalQueue {cluster.namespace}/{cluster.local_queue}: "
            f"{verdict.reason or 'it exceeds the ClusterQueue potential capacity'}; reduce the request",
        )
    return assessment(verdict), None


def early_pass_through(request: PolicyRequest) -> PassThrough | None:
    """Rule 1 and never-labeled request names: answers that need no config at all.

    Adapters call this before loading the plugin config, so that a broken config can never
    block a relaunch ``validate``.
    """
    if request.request_name == VALIDATE:
        return PassThrough("validate requests are never rejected (SkyPilot discards their mutations)")
    if request.request_name not in LABELABLE_REQUEST_NAMES and request.request_name != JOBS_LAUNCH_CLUSTER:
        return PassThrough(f"request {request.request_name!r} is never labeled")
    return None


def config_sets_quota_queue(skypilot_config: Mapping[str, Any]) -> bool:
    """Whether the SkyPilot config sets ``kubernetes.quota.queue`` at any scope.

    Within one scope SkyPilot prefers ``quota.queue`` to ``kueue.local_queue_name``
    (``_QUEUE_NAME_KEYS`` in ``sky/skypilot_config.py``), so the policy must then write that
    spelling too.
    """
    scopes: list[Any] = [skypilot_config.get("kubernetes")]
    workspaces = skypilot_config.get("workspaces")
    if isinstance(workspaces, Mapping):
        scopes.extend(get_path(ws, "kubernetes") for ws in workspaces.values())
    for scope in scopes:
        if not isinstance(scope, Mapping):
            continue
        if get_path(scope, "quota", "queue") is not None:
            return True
        contexts = scope.get("context_configs")
        if isinstance(contexts, Mapping) and any(
            get_path(ctx, "quota", "queue") is not None for ctx in contexts.values()
        ):
            return True
    return False


def _reject(code: RejectionCode, message: str) -> Rejection:
    return Rejection(code, MESSAGE_PREFIX + message)


def named_queues(candidate: Mapping[str, Any]) -> set[str]:
    """Every LocalQueue a candidate names: the queue label on the task or its pods, and SkyPilot's
    ``kubernetes.kueue.local_queue_name`` / ``kubernetes.quota.queue`` settings (``rewrite``
    reads it too, to keep a verified relaunch's lane on the candidates that name it)."""
    found: set[str] = set()
    overrides = candidate.get(OVERRIDES_KEY) or {}
    pod_labels = get_path(overrides, "kubernetes", "pod_config", "metadata", "labels") or {}
    for source in (candidate.get("labels") or {}, pod_labels):
        if isinstance(source, Mapping):
            _add(found, source.get(labels.KUEUE_QUEUE_LABEL))
    kubernetes = get_path(overrides, "kubernetes") or {}
    _add(found, get_path(kubernetes, "kueue", "local_queue_name"))
    _add(found, get_path(kubernetes, "quota", "queue"))
    return found


def _scan(all_candidates: list[dict[str, Any]], k8s: list[dict[str, Any]]) -> _Findings:
    found = _Findings()
    for candidate in all_candidates:
        task_labels = candidate.get("labels") or {}
        overrides = candidate.get(OVERRIDES_KEY) or {}
        pod_labels = get_path(overrides, "kubernetes", "pod_config", "metadata", "labels") or {}
        if isinstance(task_labels, Mapping) and task_labels.get(labels.RUNTIME_LABEL) is not None:
            found.declared_runtimes.append(str(task_labels[labels.RUNTIME_LABEL]))
        written = _written_runtime(get_path(overrides, "kubernetes", "pod_config", "metadata", "annotations"))
        found.written_runtime = found.written_runtime or written
        for source in (task_labels, pod_labels):
            if not isinstance(source, Mapping):
                continue
            _add(found.team_labels, source.get(labels.TEAM_LABEL))
            _add(found.burst_labels, source.get(labels.BURST_LABEL), lower=True)
            _add(found.priority_classes, source.get(labels.KUEUE_PRIORITY_CLASS_LABEL))
        _add(found.priority_classes, candidate.get("priority_class"))
        found.queues |= named_queues(candidate)
        kubernetes = get_path(overrides, "kubernetes") or {}
        _add(found.namespaces, get_path(kubernetes, "pod_config", "metadata", "namespace"))
        _add(found.namespaces, get_path(kubernetes, "namespace"))
        timeout = get_path(kubernetes, "kueue", "admission_timeout")
        if isinstance(timeout, int) and not isinstance(timeout, bool):
            found.admission_timeouts.add(timeout)
    for candidate in k8s:
        infra = parse_infra(candidate)
        if infra.is_kubernetes and infra.region is not None:
            found.contexts.add(infra.region)
    return found


def _expected_runtime(
    request: PolicyRequest, findings: _Findings, clusters: tuple[TeamCluster, ...]
) -> RuntimeEstimate | Rejection:
    """The task's expected run time: its label, else what an earlier application wrote on its
    pods (so applying twice gives the same task), else the team's history of the task's name."""
    if not findings.declared_runtimes and findings.written_runtime is not None:
        return findings.written_runtime
    try:
        return estimate_runtime(
            findings.declared_runtimes,
            str(request.task.get("name") or "") or None,
            {c.namespace for c in clusters},
            request.past_runs,
        )
    except RuntimeDeclarationError as exc:
        return _reject(RejectionCode.BAD_LABEL, f"{exc}; fix the task's resources.labels")


def _written_runtime(annotations: object) -> RuntimeEstimate | None:
    """The estimate an earlier application wrote on the pods (applying twice changes nothing)."""
    if not isinstance(annotations, Mapping):
        return None
    return written_estimate(
        annotations.get(labels.RUNTIME_SECONDS_ANNOTATION), annotations.get(labels.RUNTIME_SOURCE_ANNOTATION)
    )


def _add(target: set[str], value: object, lower: bool = False) -> None:
    if value is None or value == "":
        return
    text = str(value).strip()
    target.add(text.lower() if lower else text)


def _check_ownership(
    choice: TeamChoice,
    config: PluginConfig,
    findings: _Findings,
    clusters: tuple[TeamCluster, ...],
    request: PolicyRequest,
    grant: RelaunchGrant,
) -> Rejection | None:
    """Reject a task that names a queue, namespace or context that is not its team's.

    Why reject rather than overwrite: a task that names another team's queue is either a
    mistake the user should hear about or an attempt to use someone else's share; either
    way it must not be silently moved (nor placed there).
    """
    queues = {c.local_queue for c in clusters}
    namespaces = {c.namespace for c in clusters}
    first = clusters[0]
    lane = _lane_queue_problem(choice, config, findings, request, grant)
    if lane is not None:
        return lane
    for queue in sorted(findings.queues):
        if queue not in queues and queue != grant.lane_queue:
            owner = next(
                (
                    n
                    for n, t in config.teams.items()
                    if n != choice.name and any(c.local_queue == queue for c in config.team_clusters(t))
                ),
                None,
            )
            whose = f", which belongs to team {owner!r}" if owner else ""
            return _reject(
                RejectionCode.FOREIGN_QUEUE,
                f"team {choice.name!r} submits to LocalQueue {first.namespace}/{_one_of(sorted(queues))}, "
                f"but the task asks for queue {queue!r}{whose}. Remove the queue setting; sky-kueue sets it",
            )
    for namespace in sorted(findings.namespaces):
        if namespace not in namespaces:
            return _reject(
                RejectionCode.FOREIGN_NAMESPACE,
                f"pods of team {choice.name!r} run in namespace {_one_of(sorted(namespaces))!r}, but the task asks "
                f"for namespace {namespace!r}. Remove the namespace setting; sky-kueue sets it",
            )
    contexts = [c.context for c in clusters]
    if None not in contexts:
        for asked in sorted(findings.contexts):
            if asked not in contexts:
                where = (
                    f"context {contexts[0]!r}" if len(contexts) == 1 else f"contexts {', '.join(map(repr, contexts))}"
                )
                return _reject(
                    RejectionCode.FOREIGN_CONTEXT,
                    f"team {choice.name!r} runs on Kubernetes {where}, but the task asks for "
                    f"{asked!r}. Use infra: k8s (or k8s/{contexts[0]})",
                )
    return None


def _lane_queue_problem(
    choice: TeamChoice, config: PluginConfig, findings: _Findings, request: PolicyRequest, grant: RelaunchGrant
) -> Rejection | None:
    """Reject a task that names a relaunch lane's queue, its team's or another's, unless it is the
    verified relaunch of a job due its team's lane (rule 2, :func:`relaunch_grant`).

    Why: the lane is nominal quota no reclaim can take, kept for relaunches of jobs Kueue
    preempted ``after_preemptions`` times. Only SkyPilot's own relaunch may enter it; the
    ``KUEUE_AGING`` recovery strategy sets the lane's queue on it from the job's history. In
    dedicated mode that relaunch never reaches the policy (rule 1); in consolidation mode it
    does, as ``jobs.launch_cluster``, and only the facts SkyPilot's own state gives about the
    job it names (``request.relaunch``) can let it in: the request itself proves nothing.
    """
    for queue in sorted(findings.queues):
        owners = [n for n, t in config.teams.items() if t.lane is not None and t.lane.local_queue == queue]
        if not owners or queue == grant.lane_queue:
            continue
        own = choice.team.lane
        if own is not None and own.local_queue == queue:
            whose = f"team {choice.name!r}'s relaunch lane"
            after = f"{own.after_preemptions} time{'s' if own.after_preemptions != 1 else ''}"
        else:
            whose = f"the relaunch lane of team {', '.join(map(repr, owners))}"
            after = "repeatedly"
        return _reject(
            RejectionCode.LANE_QUEUE,
            f"the task asks for queue {queue!r}, {whose}: only SkyPilot's relaunch of a job Kueue preempted {after} "
            "enters it (sky-kueue's KUEUE_AGING recovery strategy moves it there). Remove the queue setting; "
            f"sky-kueue sets it{_unverifiable(request)}",
        )
    return None


def _unverifiable(request: PolicyRequest) -> str:
    """Why a ``jobs.launch_cluster`` could not even be checked against SkyPilot's state (empty:
    it was, or it is another request). A refused check adds nothing: the message stays the same."""
    if request.request_name != JOBS_LAUNCH_CLUSTER:
        return ""
    relaunch = request.relaunch
    if relaunch is None:
        return (
            " (sky-kueue cannot tell a managed job's relaunch from a forged one here: only the in-process "
            "admin policy of an API server in jobs consolidation mode reads SkyPilot's managed-jobs state)"
        )
    if not relaunch.readable:
        return f" (sky-kueue cannot tell a managed job's relaunch from a forged one here: {relaunch.problem})"
    return ""


@dataclass(frozen=True)
class RelaunchGrant:
    """What a verified relaunch of a managed job may carry beyond a launch (rule 2).

    Attributes:
        lane_queue: the team's relaunch-lane LocalQueue, when the job is due it.
        priority_class: the ladder rung the recovery strategy gives the job, if any.
        note: one line for the placement's notes.
    """

    lane_queue: str | None = None
    priority_class: str | None = None
    note: str = ""


NO_GRANT = RelaunchGrant()


def relaunch_grant(request: PolicyRequest, choice: TeamChoice) -> RelaunchGrant:
    """The lane and rung a ``jobs.launch_cluster`` may keep: only what the job SkyPilot's own
    state verified (``request.relaunch``, read by ``managed_relaunch``) is due, recomputed here
    from its history, and only for the team it was submitted for."""
    facts = request.relaunch
    if request.request_name != JOBS_LAUNCH_CLUSTER or request.at_client_side or facts is None:
        return NO_GRANT
    if not facts.verified or facts.team != choice.name:
        return NO_GRANT
    lane = choice.team.lane
    due = lane is not None and facts.preemptions >= lane.after_preemptions
    lane_queue = lane.local_queue if due and lane is not None else None
    if lane_queue is None and facts.aged_class is None:
        return NO_GRANT
    granted = [f"lane {lane_queue}"] if lane_queue else []
    granted += [f"class {facts.aged_class}"] if facts.aged_class else []
    note = (
        f"relaunch of managed job {facts.job_id} verified in SkyPilot's state: {', '.join(granted)} "
        f"({facts.preemptions} preemptions, {facts.history})"
    )
    return RelaunchGrant(lane_queue, facts.aged_class, note)


def _check_pod_fields(choice: TeamChoice, all_candidates: list[dict[str, Any]]) -> Rejection | None:
    """Reject a task whose config sets a pod field its team may not (``pod_config_boundary``).

    Why reject rather than drop or overwrite: a field the task asked for and did not get is a
    surprise at best, and a forged priority, Kueue label or host namespace is an attempt the
    user (and the metrics, by code) should see refused.
    """
    allowed = choice.team.allowed_pod_fields()
    for candidate in all_candidates:
        overrides = candidate.get(OVERRIDES_KEY)
        if not isinstance(overrides, Mapping):
            continue
        found = pod_config_boundary.overrides_problem(overrides, allowed)
        if found is None:
            continue
        if found.owned:
            return _reject(
                RejectionCode.POD_FIELD_OWNED,
                f"the task's {found.field} is not a task's to set ({found.reason}); remove it from the task's config",
            )
        return _reject(
            RejectionCode.POD_FIELD_NOT_ALLOWED,
            f"the task's {found.field} is not among the pod fields team {choice.name!r} may set "
            f"(teams.{choice.name}.pod_config_allowed: "
            f"{', '.join(choice.team.pod_config_allowed) or 'none'}); remove it, or ask an admin to allow it",
        )
    return None


def _one_of(values: list[str]) -> str:
    return values[0] if len(values) == 1 else "{" + ", ".join(values) + "}"


def _single_burst_label(findings: _Findings) -> str | Rejection | None:
    values = findings.burst_labels
    for value in sorted(values):
        if value not in _TRUE_VALUES | _FALSE_VALUES:
            return _reject(
                RejectionCode.BAD_LABEL,
                f'label {labels.BURST_LABEL} must be "true" or "false", not {value!r}',
            )
    normalized = {"true" if v in _TRUE_VALUES else "false" for v in values}
    if len(normalized) > 1:
        return _reject(RejectionCode.BAD_LABEL, f"label {labels.BURST_LABEL} is both true and false; set it once")
    return next(iter(normalized), None)


def _bursts(team: TeamConfig, burst_label: str | None) -> bool:
    if team.burst is None or burst_label == "false":
        return False
    return burst_label == "true" or not team.burst.opt_in


def _choose_priority_class(
    choice: TeamChoice, findings: _Findings, request: PolicyRequest, grant: RelaunchGrant
) -> str | Rejection:
    """The task's class (or the team's default) if the team may use it; each cluster then
    checks that it exists there (``_assess``).

    A verified relaunch (rule 2) may carry the rung its job is due: the recovery strategy puts
    it on the pods' label while ``resources.priority_class`` keeps the class the job was
    submitted with, so the rung wins over that one class the team may use.
    """
    team = choice.team
    asked = sorted(findings.priority_classes)
    granted = grant.priority_class
    if granted is not None and granted in asked:
        others = [c for c in asked if c != granted]
        if len(others) <= 1 and all(c in team.priority_classes.allowed for c in others):
            return granted
    if len(asked) > 1:
        return _reject(
            RejectionCode.PRIORITY_CONFLICT,
            f"the task asks for several priority classes ({', '.join(asked)}); set only resources.priority_class"
            f"{_unverifiable(request)}",
        )
    chosen = asked[0] if asked else team.priority_classes.default
    allowed = team.priority_classes.allowed
    if chosen not in allowed:
        return _reject(
            RejectionCode.PRIORITY_NOT_ALLOWED,
            f"priority class {chosen!r} is not allowed for team {choice.name!r} (allowed: {', '.join(allowed)})"
            f"{_unverifiable(request)}",
        )
    return chosen


def _num_nodes(task: Mapping[str, Any]) -> int:
    value = task.get("num_nodes")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


def _check_limits(choice: TeamChoice, demand: WorkloadDemand, gpu_resource: str) -> Rejection | None:
    limits = choice.team.limits
    nodes = demand.pod_count
    shape = f"{{per}} per node x {nodes} node{'s' if nodes != 1 else ''}"
    if limits.max_gpus is not None and demand.total(gpu_resource) > limits.max_gpus:
        return _reject(
            RejectionCode.LIMIT_EXCEEDED,
            f"team {choice.name!r} may use at most {limits.max_gpus} GPUs per job, but the task asks for "
            f"{demand.total(gpu_resource)} ({shape.format(per=demand.per_pod.get(gpu_resource, 0))}). "
            "Reduce accelerators or num_nodes",
        )
    if limits.max_cpus is not None and demand.total(CPU) > limits.max_cpus * 1000:
        return _reject(
            RejectionCode.LIMIT_EXCEEDED,
            f"team {choice.name!r} may use at most {limits.max_cpus} CPUs per job, but the task asks for "
            f"{format_quantity(CPU, demand.total(CPU))} "
            f"({shape.format(per=format_quantity(CPU, demand.per_pod.get(CPU, 0)))}). "
            "Reduce cpus or num_nodes",
        )
    return None


def _check_queue(choice: TeamChoice, cluster: TeamCluster, queue: QueueFacts | None, source: str) -> Rejection | None:
    where = f"LocalQueue {cluster.namespace}/{cluster.local_queue}"
    if queue is None:
        return _reject(
            RejectionCode.QUEUE_MISSING,
            f"{where} of team {choice.name!r} does not exist according to {source}; "
            "ask an admin to create it (sky-kueue setup)",
        )
    cq = repr(queue.cluster_queue) if queue.cluster_queue else "its ClusterQueue"
    if queue.cluster_queue_exists is False:
        return _reject(
            RejectionCode.CLUSTER_QUEUE_MISSING,
            f"{where} points at ClusterQueue {cq}, which does not exist; ask an admin to create it",
        )
    if queue.cluster_queue_active is False:
        return _reject(
            RejectionCode.CLUSTER_QUEUE_INACTIVE,
            f"ClusterQueue {cq} behind {where} is not active (stopped, or a flavor is missing); "
            "Kueue would not admit the job. Ask an admin",
        )
    if queue.selects_namespace is False:
        return _reject(
            RejectionCode.NAMESPACE_NOT_SELECTED,
            f"ClusterQueue {cq} behind {where} does not select namespace {cluster.namespace!r} "
            "(namespaceSelector); Kueue would not admit the job. Ask an admin",
        )
    return None


def _capacity_problem(
    queue: QueueFacts, demand: WorkloadDemand, uncovered: tuple[str, ...], exceeding: tuple[Any, ...]
) -> tuple[RejectionCode, str]:
    cq = repr(queue.cluster_queue) if queue.cluster_queue else f"behind LocalQueue {queue.namespace}/{queue.name}"
    if uncovered:
        asked = ", ".join(f"{format_quantity(r, demand.per_pod.get(r, 0))} {r} per node" for r in sorted(uncovered))
        return (
            RejectionCode.NOT_COVERED,
            f"ClusterQueue {cq} provides no {', '.join(sorted(uncovered))}, but the task asks for {asked}. "
            "Drop that request or ask an admin to add the resource to the ClusterQueue",
        )
    first = exceeding[0]
    per = format_quantity(first.resource, demand.per_pod.get(first.resource, 0))
    return (
        RejectionCode.EXCEEDS_CAPACITY,
        f"the task needs {format_quantity(first.resource, first.requested)} {first.resource} in total "
        f"({demand.pod_count} x {per}), but ClusterQueue {cq} can hold at most "
        f"{format_quantity(first.resource, first.potential)} even when borrowing from its cohort; "
        "reduce the request or num_nodes",
    )


def _combine_timeouts(policy_seconds: int, asked: set[int]) -> int:
    """The policy's timeout, shortened (never lengthened) by one the task asks for."""
    usable = [t for t in asked if t > 0]
    if not usable:
        return policy_seconds
    shortest = min(usable)
    if policy_seconds == ADMISSION_TIMEOUT_FOREVER:
        return shortest
    return min(policy_seconds, shortest)

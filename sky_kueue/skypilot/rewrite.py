"""Apply a :class:`~sky_kueue.skypilot.decision.Placement` to a task and its SkyPilot config.

Where each setting goes, and why (SkyPilot 0.14.1: ``sky/skypilot_config.py`` and
``sky/clouds/kubernetes.py``):

* ``kubernetes.kueue.local_queue_name`` and ``kubernetes.kueue.admission_timeout`` go into
  the task's own config override (``_cluster_config_overrides``, i.e. the task YAML's
  ``config:``), which SkyPilot merges into every config scope, so they beat global and
  workspace settings and travel with the managed job to every relaunch.
* The Kueue pod labels ``kueue.x-k8s.io/queue-name`` and ``kueue.x-k8s.io/priority-class``
  (and the team label) go under ``kubernetes.pod_config.metadata.labels``: pod-only, merged
  after SkyPilot's own labels, and never validated against other clouds. ``resources.labels``
  would be rejected by GCP (no ``/`` or ``.`` in keys) when a task bursts, so our keys are
  removed from there.
* The namespace is not a task-overridable key, so it goes into the request's SkyPilot config
  (``kubernetes.context_configs.<ctx>.namespace``), which for ``jobs.launch`` becomes the
  job's frozen controller config.
* A team on several clusters gets one Kubernetes candidate per cluster in rank order in
  ``resources.ordered``, each pinned to its context (``infra: k8s/<ctx>``) and carrying that
  cluster's LocalQueue; each context's namespace goes into its ``context_configs`` scope.
* The expected run time (``runtime_estimate``) goes under
  ``kubernetes.pod_config.metadata.annotations`` as ``sky-kueue.io/expected-runtime-seconds``
  and ``sky-kueue.io/expected-runtime-source``; the task's ``sky-kueue.io/expected-runtime``
  label is removed from ``resources.labels`` like the team label.
* ``resources.priority_class`` is set to the same class, so ``sky jobs queue`` shows it and
  SkyPilot's managed-job consistency check (one class per task) holds.

Applying a placement twice gives the same task (the decision reads back what it wrote).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from sky_kueue.skypilot import labels
from sky_kueue.skypilot.burst import BurstAction
from sky_kueue.skypilot.config import TeamCluster
from sky_kueue.skypilot.decision import Placement, named_queues
from sky_kueue.skypilot.task_yaml import (
    KUBERNETES_CLOUD,
    OVERRIDES_KEY,
    Infra,
    candidates,
    get_path,
    parse_infra,
    resource_group,
    set_path,
    with_candidates,
    with_infra,
)

#: ``instance_type`` marker of SkyPilot's virtual Kubernetes instance types (``4CPU--16GB``).
_K8S_INSTANCE_MARKER = "CPU--"


def apply_placement(
    task: Mapping[str, Any], skypilot_config: Mapping[str, Any], placement: Placement
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Rewrite a task (YAML form) and its SkyPilot config for a placement.

    Args:
        task: the task in YAML form.
        skypilot_config: the request's SkyPilot config.
        placement: the decision.

    Returns:
        The new task and the new SkyPilot config (inputs are not modified).
    """
    group = resource_group(task)
    targets = placement.targets or (TeamCluster(placement.context, placement.namespace, placement.local_queue, ()),)
    rewritten: list[tuple[bool, dict[str, Any]]] = []
    for candidate in candidates(task):
        infra = parse_infra(candidate)
        is_k8s = infra.is_kubernetes or (infra.cloud is None and placement.pin_unpinned)
        if not is_k8s:
            rewritten.append((False, _labeled(candidate, placement, targets[0])))
            continue
        for target in targets:
            if infra.region is not None and target.context is not None and infra.region != target.context:
                continue  # pinned to another of the team's clusters: that one's copy stays
            new = _labeled(candidate, placement, target)
            rewritten.append((True, with_infra(new, Infra(KUBERNETES_CLOUD, infra.region or target.context))))
    if len(targets) > 1:
        rewritten = _cluster_major(rewritten, targets)
        group = "ordered"
    k8s = [c for is_k8s, c in rewritten if is_k8s]
    present = {_cloud_key(parse_infra(c)) for is_k8s, c in rewritten if not is_k8s}
    plan = placement.burst
    added = [_cloud_candidate(k8s[0], cloud) for cloud in plan.clouds if cloud not in present] if k8s else []
    if plan.action in (BurstAction.ADD_CLOUD_FALLBACK, BurstAction.KEEP_KUBERNETES) and added:
        # KEEP_KUBERNETES carries targets only for the recovery strategy (decision.py)
        final = [c for _, c in rewritten] + added
        group = "ordered"
    elif plan.action is BurstAction.SKIP_KUBERNETES:
        final = [c for is_k8s, c in rewritten if not is_k8s] + added
        group = "ordered"
    else:
        final = [c for _, c in rewritten]
    return with_candidates(task, group, final), _with_cluster_scopes(skypilot_config, placement, targets)


def _cluster_major(
    rewritten: list[tuple[bool, dict[str, Any]]], targets: tuple[TeamCluster, ...]
) -> list[tuple[bool, dict[str, Any]]]:
    """The Kubernetes candidates grouped by cluster in rank order, where the first stood.

    Why: SkyPilot tries ``ordered`` front to back, so every candidate of the best cluster must
    come before any of the next one's; other clouds keep their place after them.
    """
    k8s = [c for is_k8s, c in rewritten if is_k8s]
    rank_of = {t.context: i for i, t in enumerate(targets)}
    k8s.sort(key=lambda c: rank_of.get(parse_infra(c).region, len(targets)))
    out: list[tuple[bool, dict[str, Any]]] = []
    placed = False
    for is_k8s, candidate in rewritten:
        if not is_k8s:
            out.append((False, candidate))
        elif not placed:
            out.extend((True, c) for c in k8s)
            placed = True
    return out


def _labeled(candidate: Mapping[str, Any], placement: Placement, target: TeamCluster) -> dict[str, Any]:
    new = copy.deepcopy(dict(candidate))
    if placement.lane_queue is not None and placement.lane_queue in named_queues(new):
        # A verified relaunch the recovery strategy moved to its team's lane (decision.py):
        # the candidates it moved keep the lane, the others their team's queue.
        target = dataclasses.replace(target, local_queue=placement.lane_queue)
    task_labels = {
        k: v
        for k, v in (new.get("labels") or {}).items()
        if k not in (labels.TEAM_LABEL, labels.BURST_LABEL, labels.RUNTIME_LABEL)
        and not k.startswith(labels.KUEUE_LABEL_PREFIX)
    }
    if task_labels:
        new["labels"] = task_labels
    else:
        new.pop("labels", None)
    new["priority_class"] = placement.priority_class
    if placement.recovery_strategy is not None:
        recovery = new.get("job_recovery")
        settings = dict(recovery) if isinstance(recovery, Mapping) else {}
        settings["strategy"] = placement.recovery_strategy
        new["job_recovery"] = settings
    overrides = copy.deepcopy(new.get(OVERRIDES_KEY) or {})
    set_path(overrides, ("kubernetes", "kueue", "local_queue_name"), target.local_queue)
    set_path(overrides, ("kubernetes", "kueue", "admission_timeout"), placement.admission_timeout_seconds)
    if placement.set_quota_queue or get_path(overrides, "kubernetes", "quota", "queue") is not None:
        set_path(overrides, ("kubernetes", "quota", "queue"), target.local_queue)
    pod_labels = {
        labels.KUEUE_QUEUE_LABEL: target.local_queue,
        labels.KUEUE_PRIORITY_CLASS_LABEL: placement.priority_class,
        labels.TEAM_LABEL: placement.team,
    }
    if placement.burst_label is not None:
        pod_labels[labels.BURST_LABEL] = placement.burst_label
    existing = get_path(overrides, "kubernetes", "pod_config", "metadata", "labels")
    merged = {**(existing if isinstance(existing, Mapping) else {}), **pod_labels}
    set_path(overrides, ("kubernetes", "pod_config", "metadata", "labels"), merged)
    runtime = placement.expected_runtime
    if runtime.seconds is not None:
        existing = get_path(overrides, "kubernetes", "pod_config", "metadata", "annotations")
        annotations = {
            **(existing if isinstance(existing, Mapping) else {}),
            labels.RUNTIME_SECONDS_ANNOTATION: str(runtime.seconds),
            labels.RUNTIME_SOURCE_ANNOTATION: runtime.source,
        }
        set_path(overrides, ("kubernetes", "pod_config", "metadata", "annotations"), annotations)
    new[OVERRIDES_KEY] = overrides
    return new


def _cloud_key(infra: Infra) -> str:
    return infra.to_infra_string()


def _cloud_candidate(k8s_candidate: Mapping[str, Any], cloud: str) -> dict[str, Any]:
    """A cloud copy of a Kubernetes candidate: same request, different infra."""
    new = {k: copy.deepcopy(v) for k, v in k8s_candidate.items() if k != "infra"}
    instance_type = new.get("instance_type")
    if isinstance(instance_type, str) and _K8S_INSTANCE_MARKER in instance_type:
        new.pop("instance_type")
    new["infra"] = cloud
    return new


def _with_cluster_scopes(
    skypilot_config: Mapping[str, Any], placement: Placement, targets: tuple[TeamCluster, ...]
) -> dict[str, Any]:
    """The SkyPilot config with each cluster's namespace (and, where the config names a queue
    that would beat the task's, that cluster's queue) in the cluster's own scope.

    SkyPilot resolves both per context, most specific first: workspace context scope,
    workspace, global context scope, global (``_get_effective_scoped_config_value`` in
    SkyPilot 0.14.1 ``sky/skypilot_config.py``), and a task's ``config:`` only fills the
    global levels, so a queue an admin set in a context scope would otherwise win.
    """
    out = copy.deepcopy(dict(skypilot_config))
    workspace = out.get("active_workspace")
    workspace_k8s = get_path(out, "workspaces", str(workspace), "kubernetes") if workspace else None
    for target in targets:
        context = target.context
        scope = ("kubernetes", "context_configs", context) if context else ("kubernetes",)
        set_path(out, (*scope, "namespace"), target.namespace)
        if context:
            _overwrite_queue(out.get("kubernetes"), context, target.local_queue)
        if isinstance(workspace_k8s, dict):
            # Workspace scopes beat the global one; overwrite a namespace set there.
            if workspace_k8s.get("namespace") is not None and target is targets[0]:
                workspace_k8s["namespace"] = target.namespace
            if context and get_path(workspace_k8s, "context_configs", context, "namespace") is not None:
                set_path(workspace_k8s, ("context_configs", context, "namespace"), target.namespace)
            if context:
                _overwrite_queue(workspace_k8s, context, target.local_queue)
    return out


def _overwrite_queue(kubernetes: Any, context: str, local_queue: str) -> None:
    """Write ``local_queue`` into ``context``'s scope of ``kubernetes`` for every queue
    spelling set there (those beat the task's own setting)."""
    if not isinstance(kubernetes, dict):
        return
    scope = get_path(kubernetes, "context_configs", context)
    if not isinstance(scope, dict):
        return
    for spelling in (("kueue", "local_queue_name"), ("quota", "queue")):
        if get_path(scope, *spelling) is not None:
            set_path(scope, spelling, local_queue)

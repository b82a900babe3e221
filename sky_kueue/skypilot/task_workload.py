"""A SkyPilot task YAML, as the pod-group Workload Kueue would create for it.

It lives with the SkyPilot integration (it reads SkyPilot's task form and pod sizing,
:mod:`.task_yaml`, :mod:`.demand`); the mirror never imports SkyPilot-side modules, so the
two packages depend one way only (``skypilot`` -> ``mirror``).

Why: "what happens if I launch this?" is asked before anything exists on the cluster, so
``sky-kueue predict --task TASK.yaml`` must build the Workload Kueue's pod-group integration
would build from SkyPilot's pods (SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``, Kueue
``pkg/controller/jobs/pod/pod_controller.go`` (pod groups, ``retriable-in-group``)):

* one Workload per SkyPilot cluster, named after the pod group (SkyPilot's
  ``cluster_name_on_cloud``; before launch we use ``<task name>-what-if``), annotated
  ``kueue.x-k8s.io/is-group-workload: "true"``;
* one pod set per distinct pod *role* (a hash of the pod's scheduling shape), named by that
  hash and counted; SkyPilot's head and workers share one shape, so a task with
  ``num_nodes: N`` gives one pod set of N pods;
* per-pod requests as SkyPilot 0.14.1 sizes them (:mod:`sky_kueue.skypilot.demand`);
* queue and namespace from the task's ``config.kubernetes`` (``kueue.local_queue_name``, or
  ``quota.queue`` which wins, and ``namespace``), unless given explicitly;
* the priority from the pod label ``kueue.x-k8s.io/priority-class`` in
  ``config.kubernetes.pod_config.metadata.labels`` (SkyPilot itself never sets one), as a
  ``priorityClassRef`` the model resolves to the class's value.

The role hash imitates Kueue's (first 8 hex digits of a SHA-256 over the pod's scheduling
shape) but is not byte-identical to it; pod-set names do not affect admission.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.kueue.api import IS_GROUP_WORKLOAD_ANNOTATION, KUEUE_GROUP, PRIORITY_CLASS_LABEL
from sky_kueue.kueue.errors import ModelError
from sky_kueue.skypilot import demand, task_yaml

#: SkyPilot's container name in its pod template.
SKYPILOT_CONTAINER_NAME = "ray-node"
#: GPU resource SkyPilot requests for ``accelerators`` by default.
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
#: Suffix of the what-if Workload's name.
WHAT_IF_SUFFIX = "what-if"
#: Kubernetes' limit on a Workload name we build.
MAX_NAME_CHARS = 63
#: Digits of the role hash (Kueue: 8).
ROLE_HASH_HEX_DIGITS = 8


def load_task(path: str | Path) -> dict[str, Any]:
    """Read a SkyPilot task YAML file.

    Raises:
        ModelError: unreadable, invalid YAML, or not a mapping.
    """
    try:
        documents = yaml_reader.load_all(files.read_text(path, "SkyPilot task YAML"), str(path))
    except InputError as exc:
        raise ModelError(str(exc)) from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ModelError(f"{path}: expected one SkyPilot task (a YAML mapping)")
    return documents[0]


def _name(task: Mapping[str, Any]) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", str(task.get("name") or "sky").lower()).strip("-") or "sky"
    return f"{base[: MAX_NAME_CHARS - len(WHAT_IF_SUFFIX) - 1].rstrip('-')}-{WHAT_IF_SUFFIX}"


def kubernetes_candidate(task: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The task's candidate that runs on Kubernetes (else its first unpinned one).

    Raises:
        ModelError: the task has no such candidate.
    """
    candidates = task_yaml.candidates(task)
    for candidate in candidates:
        if task_yaml.parse_infra(candidate).is_kubernetes:
            return candidate
    for candidate in candidates:
        if task_yaml.parse_infra(candidate).cloud is None:
            return candidate
    raise ModelError(f"{source}: resources: no Kubernetes candidate (infra: k8s) to place on the cluster")


def queue_of(overrides: Mapping[str, Any]) -> str | None:
    """The LocalQueue a candidate's config overrides name, or None."""
    # Within one scope, kubernetes.quota.queue wins over kubernetes.kueue.local_queue_name.
    for keys in (("kubernetes", "quota", "queue"), ("kubernetes", "kueue", "local_queue_name")):
        value = task_yaml.get_path(overrides, *keys)
        if value:
            return str(value)
    return None


def role_hash(pod_spec: Mapping[str, Any]) -> str:
    """A stable short hash of a pod's scheduling shape (see the module docstring)."""
    shape = {
        key: pod_spec.get(key)
        for key in ("containers", "initContainers", "nodeSelector", "affinity", "tolerations", "priority")
    }
    digest = hashlib.sha256(json.dumps(shape, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    return digest[:ROLE_HASH_HEX_DIGITS]


def workload_from_task(
    task: Mapping[str, Any],
    *,
    source: str = "<task>",
    namespace: str | None = None,
    local_queue: str | None = None,
    priority_class: str | None = None,
    gpu_resource: str = DEFAULT_GPU_RESOURCE,
    name: str | None = None,
    created_at: datetime | None = None,
    default_namespace: str = "default",
) -> dict[str, Any]:
    """The v1beta2 Workload document SkyPilot's pods of ``task`` would lead Kueue to create.

    Args:
        task: the task in YAML form.
        source: the file name, for messages.
        namespace, local_queue, priority_class: override what the task's config says.
        gpu_resource: the cluster's accelerator resource name.
        name: Workload name (default ``<task name>-what-if``).
        created_at: creation time (default now: a new job is the newest of its priority).
        default_namespace: namespace when neither the task nor ``namespace`` names one.

    Raises:
        ModelError: no Kubernetes candidate, no LocalQueue, or unreadable resources.
    """
    candidate = kubernetes_candidate(task, source)
    overrides = candidate.get(task_yaml.OVERRIDES_KEY) or {}
    queue = local_queue or queue_of(overrides)
    if not queue:
        raise ModelError(
            f"{source}: names no Kueue LocalQueue: set config.kubernetes.kueue.local_queue_name in the task, "
            "or pass --task-queue NAMESPACE/LOCALQUEUE"
        )
    ns = namespace or task_yaml.get_path(overrides, "kubernetes", "namespace") or default_namespace
    pod_labels = task_yaml.get_path(overrides, "kubernetes", "pod_config", "metadata", "labels") or {}
    wpc = priority_class or (pod_labels.get(PRIORITY_CLASS_LABEL) if isinstance(pod_labels, Mapping) else None)
    try:
        per_pod = demand.pod_requests(candidate, gpu_resource)
    except demand.DemandError as exc:
        raise ModelError(f"{source}: resources: {exc}") from exc
    try:
        count = int(task.get("num_nodes") or 1)
    except (TypeError, ValueError) as exc:
        raise ModelError(f"{source}: num_nodes: expected a whole number") from exc
    if count < 1:
        raise ModelError(f"{source}: num_nodes: must be at least 1")
    requests = {resource: demand.format_quantity(resource, amount) for resource, amount in sorted(per_pod.items())}
    container: dict[str, Any] = {"name": SKYPILOT_CONTAINER_NAME, "resources": {"requests": requests}}
    if gpu_resource in requests:
        container["resources"]["limits"] = {gpu_resource: requests[gpu_resource]}
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
    workload_name = name or _name(task)
    created = (created_at or datetime.now(timezone.utc)).astimezone(timezone.utc)
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [{"name": role_hash(pod_spec), "count": count, "template": {"spec": pod_spec}}],
    }
    if wpc:
        spec["priorityClassRef"] = {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": str(wpc)}
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": workload_name,
            "namespace": str(ns),
            "uid": f"what-if-{ns}.{workload_name}",
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "annotations": {IS_GROUP_WORKLOAD_ANNOTATION: "true"},
        },
        "spec": spec,
    }

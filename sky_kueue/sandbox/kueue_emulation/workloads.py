"""Workload manifests for pods, pod groups and Jobs, shaped as Kueue's integrations shape them.

* a **pod group** (label ``kueue.x-k8s.io/pod-group-name`` plus annotation
  ``kueue.x-k8s.io/pod-group-total-count``) gets one Workload named after the group, once all
  its pods exist; one pod set per distinct pod shape (role hash), sorted by name; every pod
  is an owner (``pkg/controller/jobs/pod/pod_controller.go``);
* a **single pod** gets ``pod-<name>-<hash5>`` with one pod set ``main``;
* a **batch/v1 Job** gets ``job-<name>-<hash5>`` with one pod set ``main`` of
  ``parallelism`` pods.

The ``kueue.x-k8s.io/priority-class`` label selects a WorkloadPriorityClass whose value
becomes ``spec.priority``, as Kueue's integrations do.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.sandbox.kueue_emulation import naming

KUEUE_GROUP = kueue_api.KUEUE_GROUP
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
POD_GROUP_NAME_LABEL = "kueue.x-k8s.io/pod-group-name"
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
ROLE_HASH_ANNOTATION = "kueue.x-k8s.io/role-hash"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
ADMISSION_GATE = "kueue.x-k8s.io/admission"
MANAGED_FINALIZER = "kueue.x-k8s.io/managed"
MANAGED_LABEL = "kueue.x-k8s.io/managed"

Obj = dict[str, Any]


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata") or {}
    return meta if isinstance(meta, Mapping) else {}


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def queue_name(obj: Mapping[str, Any]) -> str | None:
    value = labels_of(obj).get(QUEUE_NAME_LABEL)
    return str(value) if value else None


def group_name(pod: Mapping[str, Any]) -> str | None:
    value = annotations_of(pod).get(POD_GROUP_NAME_LABEL) or labels_of(pod).get(POD_GROUP_NAME_LABEL)
    return str(value) if value else None


def group_total_count(pod: Mapping[str, Any]) -> int | None:
    value = annotations_of(pod).get(POD_GROUP_TOTAL_COUNT_ANNOTATION)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _pod_template_spec(pod_spec: Mapping[str, Any]) -> Obj:
    keep = ("containers", "initContainers", "nodeSelector", "tolerations", "affinity", "overhead", "priorityClassName")
    spec = {k: copy.deepcopy(pod_spec[k]) for k in keep if k in pod_spec}
    spec.setdefault("containers", [])
    return spec


def _priority_fields(obj: Mapping[str, Any], classes: Mapping[str, int]) -> Obj:
    name = labels_of(obj).get(PRIORITY_CLASS_LABEL)
    if name and name in classes:
        return {
            "priorityClassRef": {"group": KUEUE_GROUP, "kind": "WorkloadPriorityClass", "name": name},
            "priority": classes[name],
        }
    return {}


def _workload(name: str, namespace: str, queue: str, pod_sets: list[Obj], owners: list[Obj], extra: Obj) -> Obj:
    meta: Obj = {"name": name, "namespace": namespace, "ownerReferences": owners}
    meta.update(extra.pop("metadata", {}))
    return {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": meta,
        "spec": {"queueName": queue, "podSets": pod_sets, "active": True, **extra},
    }


def _owner(obj: Mapping[str, Any], api_version: str, kind: str, controller: bool) -> Obj:
    meta = _meta(obj)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": controller,
        "blockOwnerDeletion": True,
    }


def for_pod_group(pods: Iterable[Mapping[str, Any]], classes: Mapping[str, int]) -> Obj:
    """The Workload of a complete pod group (all ``total-count`` pods exist)."""
    members = sorted(pods, key=lambda p: str(_meta(p).get("name")))
    first = members[0]
    by_role: dict[str, list[Mapping[str, Any]]] = {}
    for pod in members:
        by_role.setdefault(naming.role_hash(pod.get("spec") or {}), []).append(pod)
    pod_sets = [
        {"name": role, "count": len(group), "template": {"spec": _pod_template_spec(group[0].get("spec") or {})}}
        for role, group in sorted(by_role.items())
    ]
    extra: Obj = _priority_fields(first, classes)
    extra["metadata"] = {"annotations": {IS_GROUP_WORKLOAD_ANNOTATION: "true"}}
    name = group_name(first)
    assert name is not None
    return _workload(
        name,
        str(_meta(first).get("namespace")),
        str(queue_name(first)),
        pod_sets,
        [_owner(p, "v1", "Pod", False) for p in members],
        extra,
    )


def for_single_pod(pod: Mapping[str, Any], classes: Mapping[str, int]) -> Obj:
    meta = _meta(pod)
    extra: Obj = _priority_fields(pod, classes)
    extra["metadata"] = {"labels": {JOB_UID_LABEL: str(meta.get("uid"))}}
    return _workload(
        naming.workload_name("Pod", "", str(meta.get("name")), str(meta.get("uid"))),
        str(meta.get("namespace")),
        str(queue_name(pod)),
        [{"name": "main", "count": 1, "template": {"spec": _pod_template_spec(pod.get("spec") or {})}}],
        [_owner(pod, "v1", "Pod", True)],
        extra,
    )


def for_job(job: Mapping[str, Any], classes: Mapping[str, int]) -> Obj:
    meta = _meta(job)
    spec = job.get("spec") or {}
    template = (spec.get("template") or {}).get("spec") or {}
    parallelism = int(spec.get("parallelism", 1) or 1)
    extra: Obj = _priority_fields(job, classes)
    extra["metadata"] = {"labels": {JOB_UID_LABEL: str(meta.get("uid"))}}
    return _workload(
        naming.workload_name("Job", "batch", str(meta.get("name")), str(meta.get("uid"))),
        str(meta.get("namespace")),
        str(queue_name(job)),
        [{"name": "main", "count": parallelism, "template": {"spec": _pod_template_spec(template)}}],
        [_owner(job, "batch/v1", "Job", True)],
        extra,
    )

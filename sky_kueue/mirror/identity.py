"""Who a pod group belongs to in SkyPilot's terms, read from its pods.

Why from pods: Kueue names a pod group's Workload after the group (Kueue
``pkg/controller/jobs/pod/pod_controller.go`` (pod groups, ``retriable-in-group``)) and copies
pod labels onto it only for keys an admin lists in ``integrations.labelKeysToCopy``; the
SkyPilot facts live on the pods (SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``): annotations
``skypilot-managed-job-id`` and ``skypilot-managed-job-name`` (managed jobs), labels
``skypilot-cluster-name`` (and the deprecated ``skypilot-cluster``) and ``skypilot-user``
(sanitized; the raw user name is the annotation of the same key), and Kueue's
``kueue.x-k8s.io/pod-group-name``. The Workload of group ``g`` in namespace ``ns`` is
``ns/g``.

A preempted SkyPilot group's pods are deleted before its Workload finishes and is
garbage-collected, so the store keeps the last identity of a group until its Workload is gone.
Pure functions over plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sky_kueue.mirror.kinds import POD_GROUP_NAME_KEY

MANAGED_JOB_ID_ANNOTATION = "skypilot-managed-job-id"
MANAGED_JOB_NAME_ANNOTATION = "skypilot-managed-job-name"
CLUSTER_NAME_LABEL = "skypilot-cluster-name"
#: Deprecated spelling of :data:`CLUSTER_NAME_LABEL`, still set by SkyPilot 0.14.1.
LEGACY_CLUSTER_LABEL = "skypilot-cluster"
USER_KEY = "skypilot-user"

#: Annotation prefixes worth keeping on mirrored pods (everything else is dropped to save memory).
KEPT_ANNOTATION_PREFIXES: tuple[str, ...] = ("skypilot-", "kueue.x-k8s.io/")


@dataclass(frozen=True)
class SkyPilotIdentity:
    """The SkyPilot job behind a pod group; any field may be unknown (None)."""

    pod_group: str
    namespace: str
    managed_job_id: str | None = None
    managed_job_name: str | None = None
    cluster: str | None = None
    user: str | None = None

    @property
    def key(self) -> str:
        """``namespace/pod-group``: the key of the group's Workload."""
        return f"{self.namespace}/{self.pod_group}"

    def display(self) -> str:
        """A short label for tables: ``job-name (#id)``, else the cluster name."""
        if self.managed_job_id or self.managed_job_name:
            name = self.managed_job_name or "job"
            return f"{name} (#{self.managed_job_id})" if self.managed_job_id else name
        return self.cluster or ""

    def to_json(self) -> dict[str, Any]:
        return {
            "podGroup": self.pod_group,
            "namespace": self.namespace,
            "managedJobId": self.managed_job_id,
            "managedJobName": self.managed_job_name,
            "cluster": self.cluster,
            "user": self.user,
        }


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def pod_group_of(pod: Mapping[str, Any]) -> str | None:
    """The pod's Kueue pod-group name (the annotation, when present, takes precedence)."""
    meta = _meta(pod)
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    value = annotations.get(POD_GROUP_NAME_KEY) or labels.get(POD_GROUP_NAME_KEY)
    return str(value) if value else None


def _first(values: Iterable[str | None]) -> str | None:
    return next((v for v in values if v), None)


def identity_from_pods(namespace: str, pod_group: str, pods: Iterable[Mapping[str, Any]]) -> SkyPilotIdentity:
    """Merge what the pods of one group say (the first non-empty value of each fact wins)."""
    metas = [_meta(pod) for pod in pods]
    annotations = [m.get("annotations") or {} for m in metas]
    labels = [m.get("labels") or {} for m in metas]
    return SkyPilotIdentity(
        pod_group=pod_group,
        namespace=namespace,
        managed_job_id=_first(str(a.get(MANAGED_JOB_ID_ANNOTATION) or "") for a in annotations),
        managed_job_name=_first(str(a.get(MANAGED_JOB_NAME_ANNOTATION) or "") for a in annotations),
        cluster=_first(str(lbl.get(CLUSTER_NAME_LABEL) or lbl.get(LEGACY_CLUSTER_LABEL) or "") for lbl in labels),
        user=_first(str(a.get(USER_KEY) or "") for a in annotations)
        or _first(str(lbl.get(USER_KEY) or "") for lbl in labels),
    )


def identity_from_workload(workload: Mapping[str, Any]) -> SkyPilotIdentity | None:
    """What a Workload itself says (labels copied by ``labelKeysToCopy``, or annotations)."""
    meta = _meta(workload)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    merged = {**labels, **annotations}
    facts = (
        merged.get(MANAGED_JOB_ID_ANNOTATION),
        merged.get(MANAGED_JOB_NAME_ANNOTATION),
        merged.get(CLUSTER_NAME_LABEL) or merged.get(LEGACY_CLUSTER_LABEL),
        merged.get(USER_KEY),
    )
    if not any(facts):
        return None
    return SkyPilotIdentity(
        pod_group=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        managed_job_id=str(facts[0]) if facts[0] else None,
        managed_job_name=str(facts[1]) if facts[1] else None,
        cluster=str(facts[2]) if facts[2] else None,
        user=str(facts[3]) if facts[3] else None,
    )


def trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a pod the mirror keeps: identity, group, phase, scheduling gates and Kueue's
    pod conditions.

    A full pod is ~10 KB of JSON; this is a few hundred bytes.
    """
    meta = _meta(pod)
    raw_status = pod.get("status")
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    kept_meta: dict[str, Any] = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels")
        if key in meta
    }
    annotations = meta.get("annotations") or {}
    kept_annotations = {k: v for k, v in annotations.items() if str(k).startswith(KEPT_ANNOTATION_PREFIXES)}
    if kept_annotations:
        kept_meta["annotations"] = kept_annotations
    conditions = [
        c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "TerminationTarget"
    ]
    kept_status: dict[str, Any] = {"phase": status.get("phase")}
    if conditions:
        kept_status["conditions"] = conditions
    trimmed: dict[str, Any] = {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": kept_meta,
        "status": kept_status,
    }
    raw_spec = pod.get("spec")
    gates = raw_spec.get("schedulingGates") if isinstance(raw_spec, dict) else None
    if gates:
        trimmed["spec"] = {"schedulingGates": gates}  # the relaunch race: pods Kueue holds back
    return trimmed

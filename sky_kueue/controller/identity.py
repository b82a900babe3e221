"""Who a Kueue Workload belongs to, in SkyPilot's terms.

Why a job identity at all: when Kueue preempts a SkyPilot pod group, SkyPilot marks the
pods ``kueue.x-k8s.io/retriable-in-group: "false"``, so the Workload ends ``Finished`` and
is garbage-collected; SkyPilot's relaunch then creates a *new* Workload (new UID, fresh
``creationTimestamp``, fresh ``schedulingStats``) under the same name. Everything aging
needs (preemption count, accumulated wait, current boost) must therefore be keyed by the
job, not by the Workload (Kueue ``pkg/controller/jobs/pod/pod_controller.go``: pod groups and
``retriable-in-group``).

The key, most specific first:

* ``managed-job/<id>`` when the pods carry SkyPilot's ``skypilot-managed-job-id``
  annotation (set through ``pod_config`` on every launch and relaunch of a managed job).
  Managed-job ids are allocated by one SkyPilot API server, so they are unique per server;
  a cluster shared by several API servers would need the server in the key (known gap).
* ``pod-group/<namespace>/<name>`` otherwise: the Kueue pod-group name, which equals the
  Workload name and SkyPilot's ``cluster_name_on_cloud``, stable across recoveries.

When both are known the store links the pod-group key to the managed-job key, so history
recorded before the pods were seen is not split across two jobs.

This module is pure: it reads plain ``dict`` objects as returned by the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

#: Pod annotation SkyPilot's jobs controller sets on every pod of a managed job.
MANAGED_JOB_ID_ANNOTATION = "skypilot-managed-job-id"
#: Pod annotation with the managed job's task name.
MANAGED_JOB_NAME_ANNOTATION = "skypilot-managed-job-name"
#: Pod label with SkyPilot's ``cluster_name_on_cloud``.
CLUSTER_NAME_LABEL = "skypilot-cluster-name"
#: Deprecated spelling of :data:`CLUSTER_NAME_LABEL`, still set by SkyPilot 0.14.1.
LEGACY_CLUSTER_LABEL = "skypilot-cluster"
#: Pod label (sanitized) and annotation (raw) naming the SkyPilot user.
USER_KEY = "skypilot-user"
#: Pod label ``parent: skypilot`` marks every SkyPilot pod.
PARENT_LABEL = "parent"
PARENT_LABEL_VALUE = "skypilot"
#: Kueue pod-group membership: a label, or (beta ``WorkloadIdentifierAnnotations``) an
#: annotation of the same key, which then takes precedence.
POD_GROUP_NAME_KEY = "kueue.x-k8s.io/pod-group-name"
#: Workload annotation Kueue sets on pod-group Workloads.
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"

MANAGED_JOB_KEY_PREFIX = "managed-job/"
POD_GROUP_KEY_PREFIX = "pod-group/"


class IdentitySource(str, Enum):
    """Which fact the job key was derived from."""

    MANAGED_JOB = "managed-job"
    POD_GROUP = "pod-group"


@dataclass(frozen=True)
class JobIdentity:
    """A SkyPilot job as seen through its Kueue Workload and pods.

    Only ``namespace``, ``pod_group`` and ``managed_job_id`` take part in equality; the
    other fields are informational and may be missing on some observations.
    """

    namespace: str
    pod_group: str | None = None
    managed_job_id: str | None = None
    managed_job_name: str | None = field(default=None, compare=False)
    user: str | None = field(default=None, compare=False)
    cluster_name: str | None = field(default=None, compare=False)
    #: True when a SkyPilot marker (label, annotation) was seen on a pod or the Workload.
    skypilot_owned: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.pod_group is None and self.managed_job_id is None:
            raise ValueError("a job identity needs a managed-job id or a pod-group name")

    @property
    def source(self) -> IdentitySource:
        return IdentitySource.MANAGED_JOB if self.managed_job_id else IdentitySource.POD_GROUP

    @property
    def key(self) -> str:
        """The durable key history is stored under (see the module docstring)."""
        if self.managed_job_id:
            return managed_job_key(self.managed_job_id)
        assert self.pod_group is not None
        return pod_group_key(self.namespace, self.pod_group)

    @property
    def pod_group_key(self) -> str | None:
        """The pod-group key, which the store keeps as an alias of :attr:`key`."""
        return pod_group_key(self.namespace, self.pod_group) if self.pod_group else None


def managed_job_key(job_id: str) -> str:
    return f"{MANAGED_JOB_KEY_PREFIX}{job_id}"


def pod_group_key(namespace: str, name: str) -> str:
    return f"{POD_GROUP_KEY_PREFIX}{namespace}/{name}"


def _meta(obj: Mapping[str, Any], field_name: str) -> Mapping[str, str]:
    metadata = obj.get("metadata") or {}
    value = metadata.get(field_name) or {}
    return value if isinstance(value, Mapping) else {}


def _first(objs: Sequence[Mapping[str, Any]], field_name: str, key: str) -> str | None:
    for obj in objs:
        value = _meta(obj, field_name).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _is_skypilot(obj: Mapping[str, Any]) -> bool:
    labels = _meta(obj, "labels")
    annotations = _meta(obj, "annotations")
    return (
        labels.get(PARENT_LABEL) == PARENT_LABEL_VALUE
        or CLUSTER_NAME_LABEL in labels
        or LEGACY_CLUSTER_LABEL in labels
        or MANAGED_JOB_ID_ANNOTATION in annotations
        or MANAGED_JOB_ID_ANNOTATION in labels
    )


def identify_job(workload: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] = ()) -> JobIdentity | None:
    """Derives the job identity of a Workload from the Workload and its group's pods.

    Pods are read in name order so the result does not depend on list order. The Workload's
    own labels and annotations are read too (Kueue copies pod labels listed in
    ``integrations.labelKeysToCopy``). Without pods, a pod-group Workload (annotation
    ``kueue.x-k8s.io/is-group-workload: "true"``) is identified by its name.

    Returns:
        The identity, or None when neither a managed-job id nor a pod-group name is known
        (e.g. a batch/v1 Job's Workload: not ours to age).
    """
    ordered = sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name", "")))
    sources: list[Mapping[str, Any]] = [*ordered, *([workload] if workload is not None else [])]
    namespace = ""
    for obj in sources:
        ns = (obj.get("metadata") or {}).get("namespace")
        if isinstance(ns, str) and ns:
            namespace = ns
            break
    job_id = _first(sources, "annotations", MANAGED_JOB_ID_ANNOTATION) or _first(
        sources, "labels", MANAGED_JOB_ID_ANNOTATION
    )
    group = _first(ordered, "annotations", POD_GROUP_NAME_KEY) or _first(ordered, "labels", POD_GROUP_NAME_KEY)
    is_group = workload is not None and _meta(workload, "annotations").get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"
    if group is None and workload is not None and is_group:
        name = (workload.get("metadata") or {}).get("name")
        group = name if isinstance(name, str) and name else None
    if job_id is None and group is None:
        return None
    return JobIdentity(
        namespace=namespace,
        pod_group=group,
        managed_job_id=job_id,
        managed_job_name=_first(sources, "annotations", MANAGED_JOB_NAME_ANNOTATION),
        user=_first(sources, "annotations", USER_KEY) or _first(sources, "labels", USER_KEY),
        cluster_name=_first(sources, "labels", CLUSTER_NAME_LABEL) or _first(sources, "labels", LEGACY_CLUSTER_LABEL),
        skypilot_owned=any(_is_skypilot(obj) for obj in sources),
    )

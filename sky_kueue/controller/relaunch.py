"""The relaunch race: a finished Workload that would swallow a SkyPilot relaunch.

Why this exists (Kueue ``pkg/controller/jobs/pod/pod_controller.go`` (pod groups, ``retriable-in-group``)): when
Kueue preempts a
SkyPilot pod group (``kueue.x-k8s.io/retriable-in-group: "false"``), the Workload ends
``Finished`` ("Pods succeeded: 0/N.") and is garbage-collected once its pods are gone.
SkyPilot relaunches under the *same* group name. If the new pods arrive while the finished
Workload still exists, Kueue's ``FindMatchingWorkloads`` accepts the finished Workload as
theirs and adds them as its owners (so GC never removes it), and the pods stay behind the
``kueue.x-k8s.io/admission`` scheduling gate forever: the job hangs until SkyPilot's
``admission_timeout`` fires, or forever with the default of 24 h.

The fix is to delete the stale Workload: Kueue then creates a fresh one for the waiting
pods. The controller first records what the stale object says (its preemption may not have
been seen yet), then deletes it with a UID precondition so it can never remove the fresh
Workload that replaces it.

This module only *recognises* the situation; it is pure (plain dicts in, a frozen verdict
out). The verdict requires all of:

* the Workload is a pod-group Workload and ``Finished=True``;
* a pod of the same group is alive (no ``deletionTimestamp``, phase neither ``Succeeded``
  nor ``Failed``) and still carries Kueue's admission gate: Kueue will never ungate it,
  because the Workload it was matched to is finished;
* the group is unretriable or SkyPilot's (a retriable group waits for replacement pods
  through ``WaitingForReplacementPods`` instead of finishing; we leave other people's
  Workloads alone).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import (
    CLUSTER_NAME_LABEL,
    IS_GROUP_WORKLOAD_ANNOTATION,
    LEGACY_CLUSTER_LABEL,
    MANAGED_JOB_ID_ANNOTATION,
    pod_group_of,
)

ADMISSION_GATE = kueue_api.ADMISSION_GATE
RETRIABLE_IN_GROUP_ANNOTATION = kueue_api.RETRIABLE_IN_GROUP_ANNOTATION
_TERMINAL_POD_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class StaleWorkload:
    """A finished Workload that holds back newly created pods of its group."""

    namespace: str
    name: str
    uid: str
    resource_version: str | None
    waiting_pods: tuple[str, ...]

    @property
    def reason(self) -> str:
        pods = ", ".join(self.waiting_pods)
        return (
            f"Workload {self.namespace}/{self.name} (uid {self.uid}) is Finished but pods {pods} of its "
            "group wait behind the admission gate: Kueue matched the relaunch to the finished Workload"
        )


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _map(obj: Mapping[str, Any], field: str) -> Mapping[str, Any]:
    value = _meta(obj).get(field)
    return value if isinstance(value, Mapping) else {}


def _finished(workload: Mapping[str, Any]) -> bool:
    status = workload.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions or ():
        if isinstance(condition, Mapping) and condition.get("type") == kueue_api.CONDITION_FINISHED:
            return str(condition.get("status", "")).lower() == "true"
    return False


def is_gated_and_alive(pod: Mapping[str, Any]) -> bool:
    """The pod waits for Kueue's admission and is not on its way out."""
    if _meta(pod).get("deletionTimestamp"):
        return False
    status = pod.get("status")
    if isinstance(status, Mapping) and status.get("phase") in _TERMINAL_POD_PHASES:
        return False
    spec = pod.get("spec")
    gates = spec.get("schedulingGates") if isinstance(spec, Mapping) else None
    return any(isinstance(g, Mapping) and g.get("name") == ADMISSION_GATE for g in gates or ())


def _ours(pod: Mapping[str, Any]) -> bool:
    labels, annotations = _map(pod, "labels"), _map(pod, "annotations")
    return (
        annotations.get(RETRIABLE_IN_GROUP_ANNOTATION) == "false"
        or CLUSTER_NAME_LABEL in labels
        or LEGACY_CLUSTER_LABEL in labels
        or MANAGED_JOB_ID_ANNOTATION in annotations
    )


def stale_workload(workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> StaleWorkload | None:
    """Whether ``workload`` is a finished Workload holding back new pods of its group.

    Args:
        workload: the Workload as last observed.
        pods: the pods of the group (same namespace, pod-group name = Workload name).

    Returns:
        The verdict, or None when nothing needs to be done.
    """
    meta = _meta(workload)
    name, namespace, uid = meta.get("name"), meta.get("namespace"), meta.get("uid")
    if not (isinstance(name, str) and isinstance(namespace, str) and isinstance(uid, str)):
        return None
    if meta.get("deletionTimestamp") or not _finished(workload):
        return None
    if _map(workload, "annotations").get(IS_GROUP_WORKLOAD_ANNOTATION) != "true":
        return None
    waiting = sorted(
        str(_meta(p).get("name"))
        for p in pods
        if _meta(p).get("namespace") == namespace and pod_group_of(p) == name and is_gated_and_alive(p) and _ours(p)
    )
    if not waiting:
        return None
    version = meta.get("resourceVersion")
    return StaleWorkload(namespace, name, uid, str(version) if version else None, tuple(waiting))

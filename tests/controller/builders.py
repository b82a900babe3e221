"""Builders for realistic Kueue Workload and SkyPilot pod dicts, shaped like the API's.

In the style of Kueue's ``MakeWorkload("a", "ns").Priority(1)...``: each method returns
the builder, ``obj()`` returns a deep copy. Conditions, reasons and messages are written
the way Kueue writes them (``docs/kueue.md`` §1.2-1.6), so detection is tested against
what a real cluster shows.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z

HUMAN = {
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def rfc3339(at: float) -> str:
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def preemption_message(
    preemptor_uid: str,
    reason: str = "InClusterQueue",
    job_uid: str = "UNKNOWN",
    preemptor_path: str = "/prod-cq",
    preemptee_path: str = "/dev-cq",
) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {job_uid}) due to {HUMAN[reason]}; "
        f"preemptor path: {preemptor_path}; preemptee path: {preemptee_path}"
    )


class WorkloadBuilder:
    def __init__(self, name: str, namespace: str = "team-b", *, uid: str | None = None, version: str = "v1beta2"):
        self._version = version
        self._obj: dict[str, Any] = {
            "apiVersion": f"kueue.x-k8s.io/{version}",
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or f"uid-{name}",
                "creationTimestamp": rfc3339(T0),
                "annotations": {},
                "labels": {},
            },
            "spec": {"queueName": "dev", "podSets": [{"name": "a1b2c3", "count": 2}]},
            "status": {},
        }

    # metadata / spec ----------------------------------------------------------------
    def uid(self, uid: str) -> WorkloadBuilder:
        self._obj["metadata"]["uid"] = uid
        return self

    def created(self, at: float) -> WorkloadBuilder:
        self._obj["metadata"]["creationTimestamp"] = rfc3339(at)
        return self

    def pod_group(self) -> WorkloadBuilder:
        self._obj["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] = "true"
        return self

    def annotation(self, key: str, value: str) -> WorkloadBuilder:
        self._obj["metadata"]["annotations"][key] = value
        return self

    def boost(self, value: int | str) -> WorkloadBuilder:
        return self.annotation("kueue.x-k8s.io/priority-boost", str(value))

    def priority(self, value: int, class_name: str | None = "dev") -> WorkloadBuilder:
        spec = self._obj["spec"]
        spec["priority"] = value
        if class_name is not None:
            if self._version == "v1beta1":
                spec["priorityClassName"] = class_name
                spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
            else:
                spec["priorityClassRef"] = {
                    "group": "kueue.x-k8s.io",
                    "kind": "WorkloadPriorityClass",
                    "name": class_name,
                }
        return self

    def inactive(self) -> WorkloadBuilder:
        self._obj["spec"]["active"] = False
        return self

    # status -------------------------------------------------------------------------
    def condition(self, type_: str, status: bool, reason: str, message: str, at: float) -> WorkloadBuilder:
        conditions = [c for c in self._obj["status"].setdefault("conditions", []) if c["type"] != type_]
        conditions.append(
            {
                "type": type_,
                "status": "True" if status else "False",
                "reason": reason,
                "message": message,
                "lastTransitionTime": rfc3339(at),
                "observedGeneration": 1,
            }
        )
        self._obj["status"]["conditions"] = conditions
        return self

    def pending(self, at: float, reason: str = "WaitingForQuota") -> WorkloadBuilder:
        return self.condition(
            "QuotaReserved",
            False,
            reason,
            "couldn't assign flavors to pod set a1b2c3: insufficient unused quota for cpu in flavor default",
            at,
        )

    def quota_reserved(self, at: float, cluster_queue: str = "dev-cq") -> WorkloadBuilder:
        self._obj["status"]["admission"] = {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [{"name": "a1b2c3", "flavors": {"cpu": "default"}, "count": 2}],
        }
        return self.condition(
            "QuotaReserved", True, "QuotaReserved", f"Quota reserved in ClusterQueue {cluster_queue}", at
        )

    def admitted(self, at: float, cluster_queue: str = "dev-cq") -> WorkloadBuilder:
        self.quota_reserved(at, cluster_queue)
        return self.condition("Admitted", True, "Admitted", "The workload is admitted", at)

    def released(self, at: float, message: str) -> WorkloadBuilder:
        """Quota released after an eviction (pods gone): the workload is pending again."""
        self._obj["status"].pop("admission", None)
        self.condition("QuotaReserved", False, "PendingEvaluation", message, at)
        return self.condition("Admitted", False, "NoReservation", "The workload has no reservation", at)

    def finished(self, at: float, reason: str = "Succeeded", message: str = "Pods succeeded: 2/2.") -> WorkloadBuilder:
        return self.condition("Finished", True, reason, message, at)

    def evictions(self, **counts: int) -> WorkloadBuilder:
        self._obj["status"]["schedulingStats"] = {
            "evictions": [{"reason": reason, "underlyingCause": "", "count": n} for reason, n in counts.items()]
        }
        return self

    def _bump(self, reason: str, cause: str = "") -> None:
        stats = self._obj["status"].setdefault("schedulingStats", {"evictions": []})
        for entry in stats["evictions"]:
            if entry["reason"] == reason:
                entry["count"] += 1
                return
        stats["evictions"].append({"reason": reason, "underlyingCause": cause, "count": 1})

    def evicted(self, reason: str, message: str, at: float, cause: str = "") -> WorkloadBuilder:
        self._bump(reason, cause)
        return self.condition("Evicted", True, reason, message, at)

    def preempted(
        self,
        at: float,
        *,
        preemptor_uid: str = "uid-prod-1",
        reason: str = "InClusterQueue",
        job_uid: str = "UNKNOWN",
    ) -> WorkloadBuilder:
        message = preemption_message(preemptor_uid, reason, job_uid)
        self.evicted("Preempted", message, at)
        return self.condition("Preempted", True, reason, message, at)

    def readmitted_after_preemption(self, at: float, preemptor_uid: str = "uid-prod-1") -> WorkloadBuilder:
        message = "Previously: " + preemption_message(preemptor_uid)
        self.condition("Evicted", False, "QuotaReserved", message, at)
        self.condition("Preempted", False, "QuotaReserved", message, at)
        return self.admitted(at)

    def obj(self) -> dict[str, Any]:
        return copy.deepcopy(self._obj)


def skypilot_pod(
    name: str,
    group: str,
    namespace: str = "team-b",
    *,
    job_id: str | None = "17",
    user: str = "alice",
    group_as_annotation: bool = False,
    termination: tuple[str, str, float] | None = None,
) -> dict[str, Any]:
    """A pod as SkyPilot 0.14.1 renders it for a managed job with a Kueue queue."""
    labels = {
        "parent": "skypilot",
        "skypilot-cluster": group,
        "skypilot-cluster-name": group,
        "skypilot-user": user,
        "ray-cluster-name": group,
        "kueue.x-k8s.io/queue-name": "dev",
    }
    annotations = {
        "skypilot-user": user,
        "skypilot-cluster-name": group.rsplit("-", 1)[0],
        "skypilot-workspace": "default",
        "kueue.x-k8s.io/retriable-in-group": "false",
        "kueue.x-k8s.io/pod-group-total-count": "2",
    }
    if group_as_annotation:
        annotations["kueue.x-k8s.io/pod-group-name"] = group
    else:
        labels["kueue.x-k8s.io/pod-group-name"] = group
    if job_id is not None:
        annotations["skypilot-managed-job-id"] = job_id
        annotations["skypilot-managed-job-name"] = "train"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels,
            "annotations": annotations,
        },
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
    }
    if termination is not None:
        reason, message, at = termination
        pod["status"]["conditions"].append(
            {
                "type": "TerminationTarget",
                "status": "True",
                "reason": f"WorkloadEvictedDueTo{reason}",
                "message": message,
                "lastTransitionTime": rfc3339(at),
            }
        )
    return pod

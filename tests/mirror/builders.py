"""Builders for mirror tests: Kueue objects and Workload status written the way Kueue writes it.

Objects go straight into the sandbox's store (storage version, v1beta2); status changes use
the conditions, reasons and messages of ``kueue.md`` §1 so the mirror sees what a real
cluster shows.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import yaml

from sky_kueue.sandbox.apiserver import ManualClock, ObjectStore
from sky_kueue.sandbox.apiserver.conversion import KUEUE_GROUP, to_storage

SEEDS = Path(__file__).resolve().parent.parent / "oracle" / "seeds"
SEED_SCENARIO = SEEDS / "scenarios" / "a-gpu-borrow-preempt.yaml"
SEED_EXPECTED = SEEDS / "expected" / "a-gpu-borrow-preempt.json"
#: Fixed transition time written into conditions.
LTT = "2026-01-01T10:00:00Z"

_PLURALS = {
    "Namespace": "namespaces",
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
    "Pod": "pods",
}


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(timezone.utc)


def apply_documents(store: ObjectStore, docs: Iterable[Mapping[str, Any]], clock: ManualClock | None = None) -> None:
    """Create documents (any Kueue version) in the store, then write their status.

    With a manual clock, each object is created at its ``creationTimestamp`` (the store
    assigns creation times and UIDs itself).
    """
    for doc in docs:
        kind = str(doc["kind"])
        version = str(doc["apiVersion"]).rpartition("/")[2]
        obj = copy.deepcopy(dict(doc))
        if str(doc["apiVersion"]).startswith(KUEUE_GROUP):
            obj = to_storage(obj, kind, version)
        meta = obj.setdefault("metadata", {})
        created = meta.pop("creationTimestamp", None)
        meta.pop("uid", None)
        status = obj.pop("status", None)
        if clock is not None and created:
            clock.advance((parse_time(str(created)) - clock.now()).total_seconds())
        plural = _PLURALS[kind]
        if plural == "namespaces" and store.try_get("namespaces", meta["name"]) is not None:
            continue
        created_obj = store.create(plural, obj)
        if status:
            created_obj["status"] = status
            store.update_status(plural, created_obj)


def load_yaml(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def cluster_queue(name: str, *, cohort: str = "", cpu: str = "10") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, namespace: str, cq: str) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def flavor(name: str = "default-flavor") -> dict[str, Any]:
    return {"apiVersion": f"{KUEUE_GROUP}/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def workload(name: str, ns: str = "team-a", *, queue: str = "lq", cpu: str = "1", priority: int = 0) -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": ns, "annotations": {"kueue.x-k8s.io/is-group-workload": "true"}},
        "spec": {
            "queueName": queue,
            "priority": priority,
            "podSets": [
                {
                    "name": "a1b2c3d4",
                    "count": 1,
                    "template": {
                        "spec": {"containers": [{"name": "ray-node", "resources": {"requests": {"cpu": cpu}}}]}
                    },
                }
            ],
        },
    }


def _requests(cpu: str) -> dict[str, Any]:
    return {"resources": {"requests": {"cpu": cpu}}}


def skypilot_pod(
    group: str, ns: str = "team-a", *, index: int = 0, job_id: str = "7", job_name: str = "train", user: str = "alice"
) -> dict[str, Any]:
    """A SkyPilot pod-group member with the labels and annotations of ``skypilot.md`` §2.3."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-head" if index == 0 else f"{group}-worker{index}",
            "namespace": ns,
            "labels": {
                "parent": "skypilot",
                "skypilot-cluster": group,
                "skypilot-cluster-name": group,
                "skypilot-user": user,
                "kueue.x-k8s.io/queue-name": "lq",
                "kueue.x-k8s.io/pod-group-name": group,
            },
            "annotations": {
                "skypilot-user": user,
                "skypilot-managed-job-id": job_id,
                "skypilot-managed-job-name": job_name,
                "kueue.x-k8s.io/retriable-in-group": "false",
                "kueue.x-k8s.io/pod-group-total-count": "1",
            },
        },
        "spec": {"containers": [{"name": "ray-node", "image": "skypilot", "resources": {"requests": {"cpu": "1"}}}]},
    }


# --- Workload status, as Kueue writes it (kueue.md §1) ------------------------------------------


def condition(ctype: str, status: str, reason: str, message: str = "") -> dict[str, Any]:
    return {"type": ctype, "status": status, "reason": reason, "message": message, "lastTransitionTime": LTT}


def set_conditions(obj: dict[str, Any], *conds: dict[str, Any]) -> None:
    """Replace conditions of the same type, keep the others."""
    status = obj.setdefault("status", {})
    existing = [c for c in status.get("conditions") or [] if c["type"] not in {n["type"] for n in conds}]
    status["conditions"] = [*existing, *conds]


def reserve_quota(store: ObjectStore, name: str, ns: str, cq: str, cpu: str = "1") -> dict[str, Any]:
    def change(obj: dict[str, Any]) -> None:
        obj.setdefault("status", {})["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "a1b2c3d4", "count": 1, "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}}
            ],
        }
        set_conditions(obj, condition("QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"))

    return store.mutate("workloads", name, change, ns, subresource="status")


def admit(store: ObjectStore, name: str, ns: str) -> dict[str, Any]:
    return store.mutate(
        "workloads",
        name,
        lambda obj: set_conditions(obj, condition("Admitted", "True", "Admitted", "The workload is admitted")),
        ns,
        subresource="status",
    )


def preemption_message(preemptor_uid: str, human: str = "reclamation within the cohort") -> str:
    return f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: UNKNOWN) due to {human}"


def preempt(store: ObjectStore, name: str, ns: str, *, preemptor_uid: str, reason: str = "InCohortReclamation") -> None:
    """Step 1 of ``kueue.md`` §1.4: Evicted=True/Preempted, Preempted=True/<reason>, counters."""
    human = {
        "InClusterQueue": "prioritization in the ClusterQueue",
        "InCohortReclamation": "reclamation within the cohort",
        "InCohortFairSharing": "Fair Sharing within the cohort",
        "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
    }[reason]
    message = preemption_message(preemptor_uid, human)

    def change(obj: dict[str, Any]) -> None:
        set_conditions(
            obj,
            condition("Evicted", "True", "Preempted", message),
            condition("Preempted", "True", reason, message),
        )
        stats = obj["status"].setdefault("schedulingStats", {"evictions": []})
        stats["evictions"] = [*stats["evictions"], {"reason": "Preempted", "underlyingCause": "", "count": 1}]

    store.mutate("workloads", name, change, ns, subresource="status")


def evict(store: ObjectStore, name: str, ns: str, reason: str, message: str) -> None:
    store.mutate(
        "workloads",
        name,
        lambda obj: set_conditions(obj, condition("Evicted", "True", reason, message)),
        ns,
        subresource="status",
    )


def requeue(store: ObjectStore, name: str, ns: str, reason: str = "Preempted") -> None:
    """Step 3 of ``kueue.md`` §1.4: quota released, Requeued=True."""

    def change(obj: dict[str, Any]) -> None:
        obj["status"].pop("admission", None)
        message = next((c["message"] for c in obj["status"]["conditions"] if c["type"] == "Evicted"), "")
        set_conditions(
            obj,
            condition("QuotaReserved", "False", "PendingEvaluation", message),
            condition("Admitted", "False", "NoReservation", "The workload has no reservation"),
            condition("Requeued", "True", reason, message),
        )

    store.mutate("workloads", name, change, ns, subresource="status")


def finish(store: ObjectStore, name: str, ns: str, pods: int = 1) -> None:
    """An unretriable SkyPilot group whose pods are gone: Finished=True/Succeeded "Pods succeeded: 0/N."."""
    store.mutate(
        "workloads",
        name,
        lambda obj: set_conditions(obj, condition("Finished", "True", "Succeeded", f"Pods succeeded: 0/{pods}.")),
        ns,
        subresource="status",
    )


def admitted_status(cluster_queue: str, cpu: str, at: str) -> dict[str, Any]:
    """``status`` of a Workload Kueue admitted at ``at`` (QuotaReserved, then Admitted) with its
    one pod set ``main`` on ``default-flavor``, using ``cpu``: what the safety probe and the
    policy's ETA read as an admission (``kueue.md`` §1)."""
    return {
        "admission": {
            "clusterQueue": cluster_queue,
            "podSetAssignments": [
                {"name": "main", "count": 1, "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}}
            ],
        },
        "conditions": [
            {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": at}
            for kind in ("QuotaReserved", "Admitted")
        ],
    }

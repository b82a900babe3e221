"""Manifest builders for the sandbox tests: plain dicts, so a test reads like the YAML it sends."""

from __future__ import annotations

from typing import Any

KUEUE_GROUP = "kueue.x-k8s.io"


def pod(
    name: str, namespace: str = "default", *, labels: dict[str, str] | None = None, **metadata: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}, **metadata},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def config_map(name: str, namespace: str = "default", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace},
        "data": data,
    }


def job(name: str, namespace: str = "default", *, suspend: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "suspend": suspend,
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]}},
        },
    }


def lease(name: str, namespace: str = "default", holder: str = "a") -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15},
    }


def cluster_queue(name: str, *, cohort: str = "", version: str = "v1beta2", cpu: str = "10") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
            }
        ],
    }
    if cohort:
        spec["cohort" if version == "v1beta1" else "cohortName"] = cohort
    return {
        "apiVersion": f"{KUEUE_GROUP}/{version}",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def local_queue(name: str, namespace: str, cluster_queue_name: str, version: str = "v1beta2") -> dict[str, Any]:
    return {
        "apiVersion": f"{KUEUE_GROUP}/{version}",
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def workload(
    name: str,
    namespace: str = "default",
    *,
    queue: str = "lq",
    priority: int | None = None,
    labels: dict[str, str] | None = None,
    version: str = "v1beta2",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": [
            {
                "name": "main",
                "count": 1,
                "template": {
                    "spec": {
                        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
                    }
                },
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    return {
        "apiVersion": f"{KUEUE_GROUP}/{version}",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
    }


def admitted_condition(status: str = "True") -> dict[str, Any]:
    return {
        "type": "Admitted",
        "status": status,
        "reason": "Admitted",
        "message": "The workload is admitted",
        "lastTransitionTime": "2025-01-01T00:00:00Z",
    }

"""Builders for Kueue objects as plain manifests, so tests read like specifications.

``cq("a", cohort="c", quotas={"default": {"cpu": "4"}}, reclaim="Any")`` builds the
manifest a user would apply; :func:`state` parses a list of them through the same code
path as a snapshot file.
"""

from __future__ import annotations

from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import parse

V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"

Quota = dict[str, Any]


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def flavor(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": V1B1, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {"apiVersion": V1B1, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def _groups(groups: list[dict[str, dict[str, Quota | str]]]) -> list[dict[str, Any]]:
    """``[{"flavor": {"cpu": "4", "memory": {"nominalQuota": "8Gi", "lendingLimit": "2Gi"}}}]``."""
    result = []
    for group in groups:
        covered: list[str] = []
        flavors = []
        for fname, resources in group.items():
            res_list = []
            for rname, quota in resources.items():
                if rname not in covered:
                    covered.append(rname)
                entry = {"name": rname, "nominalQuota": quota} if isinstance(quota, str) else {"name": rname, **quota}
                res_list.append(entry)
            flavors.append({"name": fname, "resources": res_list})
        result.append({"coveredResources": covered, "flavors": flavors})
    return result


def cq(
    name: str,
    groups: list[dict[str, dict[str, Quota | str]]],
    cohort: str | None = None,
    within: str = "Never",
    reclaim: str = "Never",
    borrow: str = "Never",
    threshold: int | None = None,
    strategy: str = "BestEffortFIFO",
    when_can_borrow: str = "MayStopSearch",
    when_can_preempt: str = "TryNextFlavor",
    preference: str | None = None,
    selector: dict[str, Any] | None = None,
    weight: str | None = None,
    api: str = V1B1,
) -> dict[str, Any]:
    bwc: dict[str, Any] = {"policy": borrow}
    if threshold is not None:
        bwc["maxPriorityThreshold"] = threshold
    fung: dict[str, Any] = {"whenCanBorrow": when_can_borrow, "whenCanPreempt": when_can_preempt}
    if preference:
        fung["preference"] = preference
    spec: dict[str, Any] = {
        "namespaceSelector": {} if selector is None else selector,
        "queueingStrategy": strategy,
        "preemption": {"withinClusterQueue": within, "reclaimWithinCohort": reclaim, "borrowWithinCohort": bwc},
        "flavorFungibility": fung,
        "resourceGroups": _groups(groups),
    }
    if cohort:
        spec["cohortName" if api == V1B2 else "cohort"] = cohort
    if weight is not None:
        spec["fairSharing"] = {"weight": weight}
    return {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def cohort(
    name: str, parent: str | None = None, groups: list[dict[str, dict[str, Quota | str]]] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if parent:
        spec["parentName"] = parent
    if groups:
        spec["resourceGroups"] = _groups(groups)
    return {"apiVersion": V1B1, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


def lq(namespace_name: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": V1B1,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace_name},
        "spec": {"clusterQueue": cluster_queue},
    }


def workload(
    name: str,
    namespace_name: str,
    queue: str,
    requests: dict[str, str],
    created: str,
    priority: int | None = None,
    count: int = 1,
    admitted_to: str | None = None,
    flavors: dict[str, str] | None = None,
    pod_sets: list[dict[str, Any]] | None = None,
    api: str = V1B1,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "queueName": queue,
        "podSets": pod_sets
        or [
            {
                "name": "main",
                "count": count,
                "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": dict(requests)}}]}},
            }
        ],
    }
    if priority is not None:
        spec["priority"] = priority
    doc: dict[str, Any] = {
        "apiVersion": api,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": namespace_name, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": spec,
    }
    if admitted_to is not None:
        from sky_kueue.kueue import quantity

        usage = {r: str(quantity.parse_quantity(v) * count) for r, v in requests.items()}
        doc["status"] = {
            "admission": {
                "clusterQueue": admitted_to,
                "podSetAssignments": [
                    {"name": "main", "count": count, "flavors": dict(flavors or {}), "resourceUsage": usage}
                ],
            },
            "conditions": [
                {"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved", "lastTransitionTime": created},
                {"type": "Admitted", "status": "True", "reason": "Admitted", "lastTransitionTime": created},
            ],
        }
    return doc


def state(*docs: dict[str, Any], config: o.KueueConfig | None = None) -> o.ClusterState:
    return parse.parse_documents(list(docs), config)

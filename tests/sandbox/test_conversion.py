"""Kueue v1beta1 <-> v1beta2 field conversion (facts from Kueue's *_conversion.go)."""

from __future__ import annotations

import copy
from typing import Any

from sky_kueue.sandbox.apiserver.conversion import from_storage, to_storage


def _obj(kind: str, version: str, **sections: Any) -> dict[str, Any]:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": kind, "metadata": {"name": "x"}, **sections}


def test_cluster_queue_up() -> None:
    v1beta1 = _obj(
        "ClusterQueue",
        "v1beta1",
        spec={
            "cohort": "team-ab",
            "admissionChecks": ["prov"],
            "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"},
        },
        status={
            "pendingWorkloadsStatus": {"clusterQueuePendingWorkload": []},
            "fairSharing": {"weightedShare": 3, "admissionFairSharingStatus": {}},
        },
    )

    stored = to_storage(v1beta1, "ClusterQueue", "v1beta1")

    assert stored["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert stored["spec"] == {
        "cohortName": "team-ab",
        "admissionChecksStrategy": {"admissionChecks": [{"name": "prov"}]},
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"},
    }
    assert stored["status"] == {"fairSharing": {"weightedShare": 3}}
    assert v1beta1["spec"]["cohort"] == "team-ab"  # input untouched


def test_cluster_queue_down_drops_concurrent_admission_policy() -> None:
    stored = _obj("ClusterQueue", "v1beta2", spec={"cohortName": "c", "concurrentAdmissionPolicy": {"migration": {}}})

    served = from_storage(stored, "ClusterQueue", "v1beta1")

    assert served["spec"] == {"cohort": "c"}
    assert served["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert from_storage(stored, "ClusterQueue", "v1beta2") is stored


def test_workload_priority_class_reference_round_trip() -> None:
    v1beta1 = _obj(
        "Workload",
        "v1beta1",
        spec={
            "priorityClassName": "high",
            "priorityClassSource": "scheduling.k8s.io/priorityclass",
            "priority": 5,
        },
        status={"accumulatedPastExexcutionTimeSeconds": 30},
    )

    stored = to_storage(v1beta1, "Workload", "v1beta1")
    back = from_storage(stored, "Workload", "v1beta1")

    assert stored["spec"] == {
        "priorityClassRef": {"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "high"},
        "priority": 5,
    }
    assert stored["status"] == {"accumulatedPastExecutionTimeSeconds": 30}
    assert back["spec"] == v1beta1["spec"]
    assert back["status"] == v1beta1["status"]


def test_workload_down_drops_preemption_gates() -> None:
    stored = _obj("Workload", "v1beta2", spec={"preemptionGates": [{"name": "g"}]}, status={"preemptionGates": []})

    served = from_storage(stored, "Workload", "v1beta1")

    assert served["spec"] == {}
    assert served["status"] == {}


def test_topology_assignment_domains_and_slices_round_trip() -> None:
    domains = [{"values": ["block-a", "rack-1"], "count": 2}, {"values": ["block-a", "rack-2"], "count": 2}]
    v1beta1 = _obj(
        "Workload",
        "v1beta1",
        status={
            "admission": {
                "podSetAssignments": [
                    {"name": "main", "topologyAssignment": {"levels": ["block", "rack"], "domains": domains}}
                ]
            }
        },
    )

    stored = to_storage(v1beta1, "Workload", "v1beta1")
    back = from_storage(stored, "Workload", "v1beta1")

    topology = stored["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]
    assert topology["slices"] == [
        {
            "domainCount": 2,
            "valuesPerLevel": [{"universal": "block-a"}, {"individual": {"roots": ["rack-1", "rack-2"]}}],
            "podCounts": {"universal": 2},
        }
    ]
    assert back["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"] == domains


def test_topology_slices_with_prefix_and_suffix_expand() -> None:
    stored = _obj(
        "Workload",
        "v1beta2",
        status={
            "admission": {
                "podSetAssignments": [
                    {
                        "topologyAssignment": {
                            "levels": ["host"],
                            "slices": [
                                {
                                    "domainCount": 2,
                                    "valuesPerLevel": [
                                        {
                                            "individual": {
                                                "prefix": "node-",
                                                "suffix": ".local",
                                                "roots": ["1", "2"],
                                            }
                                        }
                                    ],
                                    "podCounts": {"individual": [3, 1]},
                                }
                            ],
                        }
                    }
                ]
            }
        },
    )

    served = from_storage(stored, "Workload", "v1beta1")

    assert served["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"] == [
        {"values": ["node-1.local"], "count": 3},
        {"values": ["node-2.local"], "count": 1},
    ]


def test_local_queue_flavor_usage_and_admission_check_retry_delay() -> None:
    local_queue = to_storage(
        _obj("LocalQueue", "v1beta1", status={"flavorUsage": [{"name": "f"}], "flavors": [{"name": "f"}]}),
        "LocalQueue",
        "v1beta1",
    )
    admission_check = to_storage(
        _obj("AdmissionCheck", "v1beta1", spec={"controllerName": "c", "retryDelayMinutes": 15}),
        "AdmissionCheck",
        "v1beta1",
    )

    assert local_queue["status"] == {"flavorsUsage": [{"name": "f"}]}
    assert from_storage(local_queue, "LocalQueue", "v1beta1")["status"] == {"flavorUsage": [{"name": "f"}]}
    assert admission_check["spec"] == {"controllerName": "c"}


def test_converting_down_never_modifies_the_stored_object() -> None:
    stored = _obj(
        "Workload",
        "v1beta2",
        spec={
            "priorityClassRef": {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "p"},
            "podSets": [{"name": "main", "topologyRequest": {"podsetSliceRequiredTopologyConstraints": [{}]}}],
        },
        status={
            "admission": {
                "podSetAssignments": [
                    {
                        "topologyAssignment": {
                            "levels": ["h"],
                            "slices": [
                                {
                                    "domainCount": 1,
                                    "valuesPerLevel": [{"universal": "n"}],
                                    "podCounts": {"universal": 1},
                                }
                            ],
                        }
                    }
                ]
            }
        },
    )
    snapshot = copy.deepcopy(stored)

    served = from_storage(stored, "Workload", "v1beta1")

    assert stored == snapshot
    assert served["spec"]["podSets"] == [{"name": "main", "topologyRequest": {}}]
    assert served["status"]["admission"]["podSetAssignments"][0]["topologyAssignment"]["domains"] == [
        {"values": ["n"], "count": 1}
    ]

"""Kueue ``v1beta1`` <-> ``v1beta2`` conversion of the fields that differ.

Why: Kueue serves both versions from one storage version (``v1beta2``) and converts through a
webhook, so a client that writes ``spec.cohort`` under v1beta1 reads ``spec.cohortName`` under
v1beta2 and vice versa. Our mirror must cope with clusters on either version, so the sandbox
serves both from one store and converts the way Kueue does. Facts taken from Kueue's
``apis/kueue/v1beta1/*_conversion.go`` and the generated conversion's list of fields without
a peer (those fields are dropped when converting, as Kueue drops them):

* ClusterQueue: ``spec.cohort`` <-> ``spec.cohortName``; v1beta1 ``spec.admissionChecks``
  (names) becomes ``spec.admissionChecksStrategy.admissionChecks[{name}]`` (overriding any
  strategy given alongside); v1beta1-only flavor fungibility values ``Borrow``/``Preempt``
  become ``MayStopSearch``; v1beta2 ``spec.concurrentAdmissionPolicy`` is dropped going down;
  v1beta1 ``status.pendingWorkloadsStatus`` and ``status.fairSharing.admissionFairSharingStatus``
  are dropped going up.
* Cohort: ``status.fairSharing.admissionFairSharingStatus`` dropped going up.
* LocalQueue: ``status.flavorUsage`` (v1beta1) <-> ``status.flavorsUsage`` (v1beta2); v1beta1
  ``status.flavors`` dropped going up.
* Workload: ``spec.priorityClassName`` + ``spec.priorityClassSource`` (v1beta1) <->
  ``spec.priorityClassRef{group,kind,name}`` (v1beta2); ``spec.preemptionGates`` and
  ``status.preemptionGates`` dropped going down; ``status.accumulatedPastExexcutionTimeSeconds``
  (sic, v1beta1) <-> ``status.accumulatedPastExecutionTimeSeconds``; the topology assignment
  in ``status.admission.podSetAssignments[]`` is ``{levels, domains[{values,count}]}`` in
  v1beta1 and ``{levels, slices[...]}`` in v1beta2; ``podSets[].topologyRequest
  .podsetSliceRequiredTopologyConstraints`` dropped going down.
* AdmissionCheck: ``spec.retryDelayMinutes`` dropped going up.

Topology slices are produced in an uncompressed but equivalent form (one slice with
per-domain values, ``universal`` where all domains share a value); Kueue compresses common
prefixes and suffixes, which a reader must treat the same.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from sky_kueue.kueue import api as kueue_api

KUEUE_GROUP = kueue_api.KUEUE_GROUP
STORAGE_VERSION = "v1beta2"
LEGACY_VERSION = "v1beta1"

WORKLOAD_PRIORITY_CLASS_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"
_PRIORITY_REFS: dict[str, tuple[str, str]] = {
    WORKLOAD_PRIORITY_CLASS_SOURCE: (kueue_api.KUEUE_GROUP, "WorkloadPriorityClass"),
    POD_PRIORITY_CLASS_SOURCE: ("scheduling.k8s.io", "PriorityClass"),
}
_DEPRECATED_FUNGIBILITY = {"Borrow", "Preempt"}

Obj = dict[str, Any]


def _section(obj: Obj, key: str) -> Obj:
    value = obj.get(key)
    return value if isinstance(value, dict) else {}


def _rename(section: Obj, old: str, new: str) -> None:
    if old in section:
        value = section.pop(old)
        if value not in (None, ""):
            section[new] = value


def _drop_fair_sharing_afs(status: Obj) -> None:
    fair_sharing = status.get("fairSharing")
    if isinstance(fair_sharing, dict):
        fair_sharing.pop("admissionFairSharingStatus", None)


# ---- ClusterQueue ---------------------------------------------------------------------------


def _cluster_queue_up(obj: Obj) -> None:
    spec = _section(obj, "spec")
    _rename(spec, "cohort", "cohortName")
    checks = spec.pop("admissionChecks", None)
    if checks:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": name} for name in checks]}
    fungibility = spec.get("flavorFungibility")
    if isinstance(fungibility, dict):
        for field in ("whenCanBorrow", "whenCanPreempt"):
            if fungibility.get(field) in _DEPRECATED_FUNGIBILITY:
                fungibility[field] = "MayStopSearch"
    status = _section(obj, "status")
    status.pop("pendingWorkloadsStatus", None)
    _drop_fair_sharing_afs(status)


def _cluster_queue_down(obj: Obj) -> None:
    spec = _section(obj, "spec")
    _rename(spec, "cohortName", "cohort")
    spec.pop("concurrentAdmissionPolicy", None)


# ---- Cohort, LocalQueue, AdmissionCheck -----------------------------------------------------


def _cohort_up(obj: Obj) -> None:
    _drop_fair_sharing_afs(_section(obj, "status"))


def _local_queue_up(obj: Obj) -> None:
    status = _section(obj, "status")
    _rename(status, "flavorUsage", "flavorsUsage")
    status.pop("flavors", None)


def _local_queue_down(obj: Obj) -> None:
    _rename(_section(obj, "status"), "flavorsUsage", "flavorUsage")


def _admission_check_up(obj: Obj) -> None:
    _section(obj, "spec").pop("retryDelayMinutes", None)


# ---- Workload -------------------------------------------------------------------------------


def _domains_to_slices(assignment: Obj) -> None:
    domains = assignment.pop("domains", None) or []
    levels = assignment.get("levels") or []
    if not domains:
        assignment["slices"] = []
        return
    values_per_level: list[Obj] = []
    for level in range(len(levels)):
        values = [domain.get("values", [])[level] for domain in domains]
        if len(set(values)) == 1:
            values_per_level.append({"universal": values[0]})
        else:
            values_per_level.append({"individual": {"roots": values}})
    counts = [domain.get("count", 0) for domain in domains]
    pod_counts: Obj = {"universal": counts[0]} if len(set(counts)) == 1 else {"individual": counts}
    assignment["slices"] = [{"domainCount": len(domains), "valuesPerLevel": values_per_level, "podCounts": pod_counts}]


def _slices_to_domains(assignment: Obj) -> None:
    slices = assignment.pop("slices", None) or []
    domains: list[Obj] = []
    for slice_ in slices:
        count = int(slice_.get("domainCount", 0))
        pod_counts = slice_.get("podCounts") or {}
        for index in range(count):
            values: list[str] = []
            for level_values in slice_.get("valuesPerLevel") or []:
                if "universal" in level_values:
                    values.append(level_values["universal"])
                else:
                    individual = level_values.get("individual") or {}
                    values.append(
                        (individual.get("prefix") or "")
                        + individual.get("roots", [""] * count)[index]
                        + (individual.get("suffix") or "")
                    )
            if "universal" in pod_counts:
                pods = pod_counts["universal"]
            else:
                pods = (pod_counts.get("individual") or [0] * count)[index]
            domains.append({"values": values, "count": pods})
    assignment["domains"] = domains


def _each_topology_assignment(obj: Obj, convert: Callable[[Obj], None]) -> None:
    admission = _section(_section(obj, "status"), "admission")
    for assignment in admission.get("podSetAssignments") or []:
        topology = assignment.get("topologyAssignment")
        if isinstance(topology, dict):
            convert(topology)


def _workload_up(obj: Obj) -> None:
    spec = _section(obj, "spec")
    name = spec.pop("priorityClassName", None)
    source = spec.pop("priorityClassSource", None)
    if name and source in _PRIORITY_REFS:
        group, kind = _PRIORITY_REFS[source]
        spec["priorityClassRef"] = {"group": group, "kind": kind, "name": name}
    _rename(_section(obj, "status"), "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")
    _each_topology_assignment(obj, _domains_to_slices)


def _workload_down(obj: Obj) -> None:
    spec = _section(obj, "spec")
    ref = spec.pop("priorityClassRef", None)
    if isinstance(ref, dict):
        for source, (group, kind) in _PRIORITY_REFS.items():
            if ref.get("group") == group and ref.get("kind") == kind:
                spec["priorityClassSource"] = source
                spec["priorityClassName"] = ref.get("name", "")
    spec.pop("preemptionGates", None)
    pod_sets = spec.get("podSets")
    if isinstance(pod_sets, list) and any(
        "podsetSliceRequiredTopologyConstraints" in (pod_set.get("topologyRequest") or {}) for pod_set in pod_sets
    ):
        spec["podSets"] = copy.deepcopy(pod_sets)
        for pod_set in spec["podSets"]:
            (pod_set.get("topologyRequest") or {}).pop("podsetSliceRequiredTopologyConstraints", None)
    status = _section(obj, "status")
    status.pop("preemptionGates", None)
    _rename(status, "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
    admission = status.get("admission")
    if isinstance(admission, dict) and any(
        "topologyAssignment" in assignment for assignment in admission.get("podSetAssignments") or []
    ):
        status["admission"] = copy.deepcopy(admission)
        _each_topology_assignment(obj, _slices_to_domains)


_UP: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cluster_queue_up,
    "Cohort": _cohort_up,
    "LocalQueue": _local_queue_up,
    "AdmissionCheck": _admission_check_up,
    "Workload": _workload_up,
}
_DOWN: dict[str, Callable[[Obj], None]] = {
    "ClusterQueue": _cluster_queue_down,
    "LocalQueue": _local_queue_down,
    "Workload": _workload_down,
}


def to_storage(obj: Obj, kind: str, version: str) -> Obj:
    """Converts ``obj`` written in Kueue API ``version`` to the storage version (a new dict)."""
    converted = copy.deepcopy(obj)
    if version == LEGACY_VERSION and kind in _UP:
        _UP[kind](converted)
    converted["apiVersion"] = f"{KUEUE_GROUP}/{STORAGE_VERSION}"
    return converted


def from_storage(obj: Obj, kind: str, version: str) -> Obj:
    """Converts a stored object to Kueue API ``version``.

    Returns ``obj`` itself when no conversion is needed (the storage version), and otherwise a
    new object that shares unconverted parts with ``obj``: callers must treat the result as
    read-only. (Copying only what changes keeps a 10,000-item v1beta1 list cheap.)
    """
    if version == STORAGE_VERSION:
        return obj
    converted = dict(obj)
    for section in ("spec", "status"):
        if isinstance(converted.get(section), dict):
            converted[section] = dict(converted[section])
    if kind in _DOWN:
        _DOWN[kind](converted)
    converted["apiVersion"] = f"{KUEUE_GROUP}/{version}"
    return converted

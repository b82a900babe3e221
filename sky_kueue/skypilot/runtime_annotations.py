"""The policy's run-time annotations, carried from a pod group's pods onto its Workload (pure).

Why a join: the policy writes the expected run time on the task's pods
(``kubernetes.pod_config.metadata.annotations``), the only place SkyPilot lets it write, but
Kueue builds a pod group's Workload from the pods' spec alone and copies no annotation
(``pkg/controller/jobs/pod/pod_controller.go``, ``constructPodSet``). The Workload is named
after the pod group (``ConstructComposableWorkload``), so the ETA model, which reads
``metadata.annotations`` of Workloads (:mod:`sky_kueue.kueue.eta`), gets them by joining on
the pod-group name within the namespace. An annotation already on the Workload wins.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.skypilot import labels

#: The annotations carried over, in this order of precedence on a conflict (none: first pod wins).
CARRIED_ANNOTATIONS: tuple[str, ...] = (labels.RUNTIME_SECONDS_ANNOTATION, labels.RUNTIME_SOURCE_ANNOTATION)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _group_of(pod: Mapping[str, Any]) -> str | None:
    """The pod's group: Kueue's annotation beats the label (``WorkloadIdentifierAnnotations``)."""
    meta = _meta(pod)
    for field in ("annotations", "labels"):
        values = meta.get(field)
        if isinstance(values, Mapping) and values.get(kueue_api.POD_GROUP_NAME_KEY):
            return str(values[kueue_api.POD_GROUP_NAME_KEY])
    return None


def pod_runtime_annotations(pods: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, str]]:
    """Per (namespace, pod group), the run-time annotations its pods carry (first pod wins)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for pod in pods:
        group = _group_of(pod)
        annotations = _meta(pod).get("annotations")
        if group is None or not isinstance(annotations, Mapping):
            continue
        carried = {k: str(annotations[k]) for k in CARRIED_ANNOTATIONS if annotations.get(k) is not None}
        if carried:
            slot = found.setdefault((str(_meta(pod).get("namespace", "")), group), {})
            for key, value in carried.items():
                slot.setdefault(key, value)
    return found


def with_pod_runtimes(
    documents: Sequence[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """``documents`` with each Workload given its pod group's run-time annotations.

    Only Workloads that gain an annotation are copied; the rest are the same objects.
    """
    by_group = pod_runtime_annotations(pods)
    if not by_group:
        return list(documents)
    out: list[Mapping[str, Any]] = []
    for doc in documents:
        meta = _meta(doc)
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        carried = by_group.get(key) if doc.get("kind") == "Workload" else None
        found = meta.get("annotations")
        existing: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        missing = {k: v for k, v in (carried or {}).items() if k not in existing}
        if not missing:
            out.append(doc)
            continue
        updated = dict(doc)
        updated["metadata"] = {**copy.deepcopy(dict(meta)), "annotations": {**existing, **missing}}
        out.append(updated)
    return out

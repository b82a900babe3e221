"""Pod-set resource requests, computed the way Kubernetes and Kueue compute them.

A pod's request for a resource is the larger of (a) the sum over its containers plus its
restartable ("sidecar") init containers and (b) the largest single init-container phase,
plus the pod ``overhead``; a container that sets only a limit requests its limit (Kueue
applies this when it queues a workload: ``workload.AdjustResources``). Kueue then
converts each per-pod quantity to an integer amount and multiplies it by the pod count.

Kueue iterates a workload's resources in a fixed order: sorted by the 64-bit FNV-1a hash
of the resource name (``pkg/resources/slice_requests.go``, VectorizedResourceRequests is on
by default). That order decides which resource group a multi-group pod set is assigned
first, and therefore which reasons appear in a pending message. :func:`resource_order_key`
reproduces it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import quantity
from sky_kueue.kueue.errors import ModelError

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
_MASK64 = (1 << 64) - 1


@lru_cache(maxsize=1024)
def resource_order_key(name: str) -> tuple[int, str]:
    """Sort key giving Kueue's iteration order of resource names (FNV-1a 64, then name)."""
    h = _FNV64_OFFSET
    for byte in name.encode():
        h ^= byte
        h = (h * _FNV64_PRIME) & _MASK64
    return (h, name)


def ordered_resources(names: Iterable[str]) -> list[str]:
    """Resource names in the order Kueue iterates them."""
    return sorted(names, key=resource_order_key)


def _container_requests(container: Mapping[str, Any], where: str, path: str, index: int) -> dict[str, int]:
    """Requests of the container at ``{path}[{index}]`` (a limit alone counts as the request)."""
    res = container.get("resources") or {}
    if type(res) is not dict and not isinstance(res, Mapping):
        raise ModelError(f"{where}: {path}[{index}].resources: expected a mapping")
    requests = res.get("requests") or {}
    limits = res.get("limits") or {}
    merged = {**limits, **requests} if limits else {**requests}
    return parse_amounts(merged, where, f"{path}[{index}].resources")


def parse_amounts(values: Mapping[Any, Any], where: str, path: str) -> dict[str, int]:
    """Each resource's quantity in ``values`` as Kueue's integer amount.

    Raises:
        ModelError: a value that is not a quantity, located at ``{path}.<resource>``.
    """
    result: dict[str, int] = {}
    for name, value in values.items():
        resource = str(name)
        try:
            result[resource] = quantity.parse_amount(resource, value)
        except quantity.QuantityError as exc:
            raise ModelError(f"{where}: {path}.{resource}: {exc}") from exc
    return result


def _amount(resource: str, value: object, where: str, path: str) -> int:
    try:
        return quantity.parse_amount(resource, value)
    except quantity.QuantityError as exc:
        raise ModelError(f"{where}: {path}.{resource}: {exc}") from exc


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def pod_requests(spec: Mapping[str, Any], where: str = "pod", path: str = "spec") -> dict[str, int]:
    """Per-pod requests (integer amounts) of a pod spec, following Kubernetes' rules."""
    total: dict[str, int] = {}
    containers_path = f"{path}.containers"
    for i, c in enumerate(spec.get("containers") or []):
        _add(total, _container_requests(c, where, containers_path, i))
    init_containers = spec.get("initContainers")
    if init_containers:
        sidecars: dict[str, int] = {}
        init_max: dict[str, int] = {}
        init_path = f"{path}.initContainers"
        for i, c in enumerate(init_containers):
            reqs = _container_requests(c, where, init_path, i)
            if c.get("restartPolicy") == "Always":
                _add(total, reqs)
                _add(sidecars, reqs)
                phase = dict(sidecars)
            else:
                phase = dict(reqs)
                _add(phase, sidecars)
            for k, v in phase.items():
                init_max[k] = max(init_max.get(k, 0), v)
        for k, v in init_max.items():
            total[k] = max(total.get(k, 0), v)
    overhead = spec.get("overhead")
    if overhead:
        for name, value in overhead.items():
            total[str(name)] = total.get(str(name), 0) + _amount(str(name), value, where, f"{path}.overhead")
    return {k: (v if v > 0 else 0) for k, v in total.items()}


def _tolerations(items: Iterable[Any]) -> tuple[o.Toleration, ...]:
    return tuple(
        o.Toleration(
            key=str(t.get("key", "")),
            operator=str(t.get("operator", "Equal")),
            value=str(t.get("value", "")),
            effect=str(t.get("effect", "")),
        )
        for t in items
        if isinstance(t, Mapping)
    )


def _affinity_terms(spec: Mapping[str, Any]) -> tuple[tuple[o.NodeSelectorRequirement, ...], ...]:
    affinity = spec.get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        reqs = tuple(
            o.NodeSelectorRequirement(
                key=str(e.get("key", "")),
                operator=str(e.get("operator", "")),
                values=tuple(str(v) for v in e.get("values") or []),
            )
            for e in (term.get("matchExpressions") or [])
        )
        terms.append(reqs)
    return tuple(terms)


#: Pod-spec fields of a shape besides the containers (see :func:`_shape`).
_SHAPE_FIELDS = (
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
    "priority",
    "topologySpreadConstraints",
    "overhead",
    "resourceClaims",
)
#: Shapes of the common pod spec (containers with string requests and nothing else that
#: counts), by those requests; bounded, cleared when full.
_SIMPLE_SHAPES: dict[tuple[tuple[tuple[str, str], ...] | None, ...], str] = {}
_SIMPLE_SHAPES_LIMIT = 4096


def _simple_shape_key(spec: Mapping[str, Any]) -> tuple[tuple[tuple[str, str], ...] | None, ...] | None:
    """The containers' requests of a pod spec whose shape depends on nothing else, or None.

    Per container its requests as pairs (None when it has none); None when the shape needs
    the general path (init containers, ports, node constraints, non-string values, ...).
    """
    if spec.get("initContainers"):
        return None
    for name in _SHAPE_FIELDS:
        if spec.get(name) is not None:
            return None
    items = spec.get("containers")
    if type(items) is not list:
        return None
    key: list[tuple[tuple[str, str], ...] | None] = []
    for c in items:
        if type(c) is not dict or c.get("ports") is not None:
            return None
        res = c.get("resources")
        if res is None:
            key.append(None)
            continue
        if type(res) is not dict:
            return None
        requests = res.get("requests")
        if requests is None:
            key.append(None)
            continue
        if type(requests) is not dict:
            return None
        pairs = tuple(requests.items())
        for k, v in pairs:
            if type(k) is not str or type(v) is not str:
                return None
        key.append(pairs)
    return tuple(key)


def _shape(spec: Mapping[str, Any]) -> str:
    """A stable text of the scheduling-relevant parts of a pod template (``utilpod.SpecShape``)."""
    key = _simple_shape_key(spec)
    if key is None:
        return _shape_text(spec)
    text = _SIMPLE_SHAPES.get(key)
    if text is None:
        text = _shape_text(spec)
        if len(_SIMPLE_SHAPES) >= _SIMPLE_SHAPES_LIMIT:
            _SIMPLE_SHAPES.clear()
        _SIMPLE_SHAPES[key] = text
    return text


def _shape_text(spec: Mapping[str, Any]) -> str:

    def containers(items: Any) -> list[Any]:
        return [
            {"requests": (c.get("resources") or {}).get("requests"), "ports": c.get("ports")}
            for c in (items or [])
            if isinstance(c, Mapping)
        ]

    shape = {
        "initContainers": containers(spec.get("initContainers")),
        "containers": containers(spec.get("containers")),
        "nodeSelector": spec.get("nodeSelector"),
        "affinity": spec.get("affinity"),
        "tolerations": spec.get("tolerations"),
        "runtimeClassName": spec.get("runtimeClassName"),
        "priority": spec.get("priority"),
        "topologySpreadConstraints": spec.get("topologySpreadConstraints"),
        "overhead": spec.get("overhead"),
        "resourceClaims": spec.get("resourceClaims"),
    }
    return json.dumps(shape, sort_keys=True, default=str)


def parse_pod_set(ps: Mapping[str, Any], where: str, path: str) -> o.PodSet:
    """Parse one entry of ``spec.podSets``."""
    name = str(ps.get("name", "main"))
    count_value = ps.get("count", 1)
    if isinstance(count_value, bool) or not isinstance(count_value, int) or count_value < 0:
        raise ModelError(f"{where}: {path}.count: expected a non-negative integer, got {count_value!r}")
    template = ps.get("template") or {}
    if not isinstance(template, Mapping):
        raise ModelError(f"{where}: {path}.template: expected a mapping")
    spec = template.get("spec") or {}
    if not isinstance(spec, Mapping):
        raise ModelError(f"{where}: {path}.template.spec: expected a mapping")
    min_count = ps.get("minCount")
    if min_count is not None and (isinstance(min_count, bool) or not isinstance(min_count, int)):
        raise ModelError(f"{where}: {path}.minCount: expected an integer, got {min_count!r}")
    return o.PodSet(
        name=name,
        count=count_value,
        requests=pod_requests(spec, where, f"{path}.template.spec"),
        min_count=min_count,
        node_selector={str(k): str(v) for k, v in (spec.get("nodeSelector") or {}).items()},
        affinity_terms=_affinity_terms(spec),
        tolerations=_tolerations(spec.get("tolerations") or []),
        shape=_shape(spec),
    )

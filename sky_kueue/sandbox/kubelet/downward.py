"""The downward API of container environments: ``valueFrom.fieldRef`` and ``resourceFieldRef``.

Why: SkyPilot's pod template (``sky/templates/kubernetes-ray.yml.j2``) sets
``SKYPILOT_POD_NODE_TYPE`` from ``metadata.labels['ray-node-type']`` and branches on it in the
container command (``head`` starts Ray's head; anything else waits for a head it would join), and
``SKYPILOT_POD_CPU_CORE_LIMIT``/``SKYPILOT_POD_MEMORY_BYTES_LIMIT`` from ``resourceFieldRef``
``requests.cpu``/``requests.memory``. The fields and rounding follow Kubernetes' downward API
(``pkg/fieldpath/fieldpath.go`` ``ExtractFieldPathAsString``; ``pkg/api/v1/resource/helpers.go``
``ExtractContainerResourceValue``: CPU and memory rounded up to whole divisors).

One deviation: a limit the container does not set is reported as its request (a kubelet reports
the node's allocatable; the sandbox schedules by requests and enforces neither).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from sky_kueue.kueue.quantity import QuantityError, parse_quantity

#: ``metadata.labels['key']`` / ``metadata.annotations['key']``
_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['([^']*)'\]$")


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """The value a ``fieldRef`` with ``fieldPath`` ``path`` gives (empty for an unset field)."""
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    subscript = _SUBSCRIPT.match(path)
    if subscript is not None:
        return str((meta.get(subscript.group(1)) or {}).get(subscript.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    return str(simple.get(path) or "")


def resource_value(pod: Mapping[str, Any], container: Mapping[str, Any], ref: Mapping[str, Any]) -> str:
    """The value a ``resourceFieldRef`` gives in ``container``'s environment.

    ``ref.containerName`` (default: ``container`` itself) names the container whose resources
    are read; ``requests.<r>``/``limits.<r>``; ``divisor`` (default ``1``); rounded up. An
    unreadable quantity or an unknown container gives an empty value.
    """
    wanted = str(ref.get("containerName") or container.get("name") or "")
    source = next(
        (c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == wanted),
        container,
    )
    kind, _, resource = str(ref.get("resource") or "").partition(".")
    resources = source.get("resources") or {}
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    if kind == "requests":
        raw = requests.get(resource, 0)
    elif kind == "limits":
        raw = limits.get(resource, requests.get(resource, 0))
    else:
        return ""
    try:
        amount = parse_quantity(raw)
        divisor = parse_quantity(ref.get("divisor") or "1")
    except QuantityError:
        return ""
    if divisor <= 0:
        return ""
    return str(math.ceil(amount / divisor))


def env_value(pod: Mapping[str, Any], container: Mapping[str, Any], item: Mapping[str, Any]) -> str | None:
    """The value of one ``env`` item, or None when it has neither ``value`` nor a supported ref."""
    if "value" in item:
        return str(item.get("value") or "")
    source = item.get("valueFrom") or {}
    if source.get("fieldRef"):
        return field_value(pod, str(source["fieldRef"].get("fieldPath", "")))
    if source.get("resourceFieldRef"):
        return resource_value(pod, container, source["resourceFieldRef"])
    return None

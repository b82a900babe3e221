"""What a decided burst is predicted to cost: the job's GPUs x its expected run time x the
price of the burst target, per team (the operator's "at what cost" of issue 25).

Why a prediction and not a bill: the controller decides a burst (:mod:`sky_kueue.controller.burst`)
before SkyPilot launches anything, and never sees the cloud's invoice. The inputs are facts the
controller already has:

* **GPUs**: the Workload's pod sets, ``count`` x the GPU requests of each pod template's
  containers (Kueue sums a pod set the same way, ``pkg/workload/resources.go``), in the
  resource the config names (``kubernetes.gpu_resource``, ``nvidia.com/gpu`` by default);
* **expected run time**: the ``sky-kueue.io/expected-runtime-seconds`` annotation the admin
  policy writes on the task's pods (:mod:`sky_kueue.skypilot.runtime_estimate`; Kueue copies no
  pod annotation onto a pod group's Workload, so the pods are read, the Workload too when it
  carries one);
* **price**: ``teams.<t>.burst.price_per_gpu_hour_usd`` of the first burst target
  (``burst.clouds`` is the order SkyPilot tries them in).

A missing run time or price makes the burst *unpriced* (counted apart, with the reason), never
a guess. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from typing import Any

from sky_kueue.kueue.quantity import QuantityError, parse_quantity

#: The expected run time the admin policy writes on a task's pods (``sky_kueue.skypilot.labels``).
RUNTIME_SECONDS_ANNOTATION = "sky-kueue.io/expected-runtime-seconds"
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"
SECONDS_PER_HOUR = Decimal(3600)


class UnpricedReason(str, Enum):
    """Why a burst has no predicted cost (the ``reason`` label of the unpriced counter)."""

    #: No expected run time on the job's pods or Workload.
    NO_RUNTIME = "no-runtime"
    #: The burst target has no ``price_per_gpu_hour_usd``.
    NO_PRICE = "no-price"
    #: The team of the Workload's namespace has no burst settings in the config.
    NO_TEAM = "no-team"


@dataclass(frozen=True)
class BurstPricing:
    """One team's burst targets, in SkyPilot's order, and their prices per GPU-hour."""

    clouds: tuple[str, ...]
    price_per_gpu_hour_usd: Mapping[str, Decimal] = field(default_factory=dict)

    @property
    def target(self) -> str:
        """The target the prediction prices: the first SkyPilot tries."""
        return self.clouds[0] if self.clouds else ""


@dataclass(frozen=True)
class BurstCost:
    """A burst's prediction: priced (``cost_usd``), or unpriced with ``unpriced``'s reason."""

    cloud: str
    gpus: Decimal
    gpu_hours: Decimal | None = None
    cost_usd: Decimal | None = None
    unpriced: UnpricedReason | None = None


def workload_gpus(workload: Mapping[str, Any], gpu_resource: str = DEFAULT_GPU_RESOURCE) -> Decimal:
    """GPUs the Workload requests: each pod set's ``count`` x its containers' requests (limits
    when a container has no request, as Kubernetes defaults requests to limits)."""
    total = Decimal(0)
    for pod_set in _list((workload.get("spec") or {}).get("podSets")):
        count = pod_set.get("count", 1)
        per_pod = Decimal(0)
        template_spec = ((pod_set.get("template") or {}).get("spec")) or {}
        for container in _list(template_spec.get("containers")):
            resources = container.get("resources") or {}
            value = (resources.get("requests") or {}).get(gpu_resource)
            if value is None:
                value = (resources.get("limits") or {}).get(gpu_resource)
            per_pod += _quantity(value)
        total += per_pod * _quantity(count)
    return total


def expected_runtime_seconds(workload: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> float | None:
    """The job's expected run time: the Workload's annotation, else the first pod's; None when
    neither carries a readable, non-negative number."""
    for obj in (workload, *pods):
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        value = annotations.get(RUNTIME_SECONDS_ANNOTATION)
        if value is None:
            continue
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            continue
        if seconds >= 0 and seconds != float("inf"):
            return seconds
    return None


def predict(gpus: Decimal, runtime_seconds: float | None, pricing: BurstPricing | None) -> BurstCost:
    """The predicted cost of a burst of ``gpus`` GPUs for ``runtime_seconds`` under ``pricing``."""
    if pricing is None:
        return BurstCost("", gpus, unpriced=UnpricedReason.NO_TEAM)
    cloud = pricing.target
    if runtime_seconds is None:
        return BurstCost(cloud, gpus, unpriced=UnpricedReason.NO_RUNTIME)
    gpu_hours = gpus * Decimal(str(runtime_seconds)) / SECONDS_PER_HOUR
    price = pricing.price_per_gpu_hour_usd.get(cloud)
    if price is None:
        return BurstCost(cloud, gpus, gpu_hours, unpriced=UnpricedReason.NO_PRICE)
    return BurstCost(cloud, gpus, gpu_hours, gpu_hours * price)


def _list(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []


def _quantity(value: object) -> Decimal:
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)

"""What a SkyPilot task asks a Kueue ClusterQueue for.

Why this is re-derived here: the policy must compare a task with team limits and with a
ClusterQueue's quota *before* SkyPilot renders any pod, so it has to predict the pod
requests SkyPilot 0.14.1 will write. The rules mirror ``Kubernetes.get_default_instance_type``
and ``_get_feasible_launchable_resources`` in ``sky/clouds/kubernetes.py``:

* CPUs: ``cpus`` with any ``+`` stripped; default 2, or 4 per accelerator when the task asks
  for accelerators and no CPUs.
* Memory (GB): ``memory`` with ``+`` stripped, ``Nx`` = N per CPU; default 1 GB per CPU, or
  4 GB per CPU with accelerators. The pod template writes it as ``<n>G`` (decimal gigabytes).
* Accelerators: ``<type>:<count>`` becomes ``count`` of the cluster's GPU resource.
* Every node is one pod with the same requests; Kueue sees one pod set of ``num_nodes`` pods.

Quantities are integers in Kueue's base units (CPU in millicores, memory in bytes), never
floats, so comparisons against quotas are exact.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

CPU = "cpu"
MEMORY = "memory"

#: SkyPilot 0.14.1 Kubernetes sizing defaults (``sky/clouds/kubernetes.py``).
DEFAULT_CPUS = Decimal(2)
DEFAULT_CPUS_PER_ACCELERATOR = Decimal(4)
DEFAULT_MEMORY_GB_PER_CPU = Decimal(1)
DEFAULT_MEMORY_GB_PER_CPU_WITH_ACCELERATOR = Decimal(4)

#: Bytes in the pod template's ``G`` memory suffix (decimal gigabyte).
BYTES_PER_GB = 10**9
MILLICORES_PER_CPU = 1000

#: SkyPilot memory units relative to its GB (``MEMORY_SIZE_UNITS`` in ``sky/resources.py``).
_MEMORY_UNIT_IN_GB = {
    "k": Decimal(1) / 2**20,
    "m": Decimal(1) / 2**10,
    "g": Decimal(1),
    "t": Decimal(2**10),
    "p": Decimal(2**20),
}
_MEMORY_RE = re.compile(r"^\s*([0-9.]+)\s*([kmgtp]?)i?b?\s*(\+|x)?\s*$", re.IGNORECASE)
_K8S_INSTANCE_RE = re.compile(r"^([0-9.]+)CPU--([0-9.]+)GB(?:--([^:]+):([0-9.]+))?$")


class DemandError(ValueError):
    """A resource field SkyPilot would accept but whose size cannot be determined."""


@dataclass(frozen=True)
class WorkloadDemand:
    """The Kueue view of a task: ``pod_count`` identical pods with ``per_pod`` requests.

    Attributes:
        pod_count: pods in the group (SkyPilot ``num_nodes``).
        per_pod: resource name -> integer quantity (cpu in millicores, memory in bytes).
    """

    pod_count: int
    per_pod: Mapping[str, int] = field(default_factory=dict)

    def total(self, resource: str) -> int:
        """Total of ``resource`` over all pods."""
        return self.per_pod.get(resource, 0) * self.pod_count

    @property
    def resources(self) -> tuple[str, ...]:
        """Requested resource names (with a non-zero request), sorted."""
        return tuple(sorted(r for r, q in self.per_pod.items() if q > 0))


def accelerator_count(candidate: Mapping[str, Any]) -> int:
    """Accelerators per node, rounded up; the largest option when several are allowed.

    Raises:
        DemandError: the accelerators field cannot be read.
    """
    raw = candidate.get("accelerators")
    if raw is None:
        instance = _k8s_instance(candidate)
        return instance[2] if instance else 0
    options: list[Decimal] = []
    if isinstance(raw, Mapping):
        options = [_decimal(v if v is not None else 1, "accelerators") for v in raw.values()]
    elif isinstance(raw, str):
        options = [_accelerator_string_count(raw)]
    elif isinstance(raw, (list, tuple, set)):
        options = [_accelerator_string_count(str(item)) for item in raw]
    else:
        raise DemandError(f"cannot read accelerators {raw!r}")
    return int(max(options, default=Decimal(0)).to_integral_value(rounding=ROUND_CEILING))


def pod_requests(candidate: Mapping[str, Any], gpu_resource: str) -> dict[str, int]:
    """Requests of one pod of a Kubernetes candidate, as SkyPilot 0.14.1 would size it.

    Args:
        candidate: one complete resource candidate (see ``task_yaml.candidates``).
        gpu_resource: the cluster's accelerator resource name (e.g. ``nvidia.com/gpu``).

    Returns:
        resource name -> quantity (cpu in millicores, memory in bytes, GPUs as a count).

    Raises:
        DemandError: cpus, memory or accelerators cannot be read.
    """
    gpus = accelerator_count(candidate)
    instance = _k8s_instance(candidate)
    cpus_raw = candidate.get("cpus")
    if cpus_raw is not None:
        cpus = _decimal(str(cpus_raw).strip().rstrip("+"), "cpus")
    elif instance is not None:
        cpus = instance[0]
    elif gpus:
        cpus = DEFAULT_CPUS_PER_ACCELERATOR * gpus
    else:
        cpus = DEFAULT_CPUS
    memory_raw = candidate.get("memory")
    if memory_raw is not None:
        memory_gb = _memory_gb(str(memory_raw), cpus)
    elif instance is not None and cpus_raw is None:
        memory_gb = instance[1]
    else:
        per_cpu = DEFAULT_MEMORY_GB_PER_CPU_WITH_ACCELERATOR if gpus else DEFAULT_MEMORY_GB_PER_CPU
        memory_gb = cpus * per_cpu
    requests = {
        CPU: _ceil(cpus * MILLICORES_PER_CPU),
        MEMORY: _ceil(memory_gb * BYTES_PER_GB),
    }
    if gpus:
        requests[gpu_resource] = gpus
    return requests


def format_quantity(resource: str, value: int) -> str:
    """A human-readable Kubernetes quantity (``7``, ``500m``, ``32G``, ``64Gi``)."""
    if resource == CPU:
        if value % MILLICORES_PER_CPU == 0:
            return str(value // MILLICORES_PER_CPU)
        return f"{value}m"
    if resource == MEMORY:
        for suffix, factor in (("Gi", 2**30), ("G", 10**9), ("Mi", 2**20), ("M", 10**6)):
            if value and value % factor == 0:
                return f"{value // factor}{suffix}"
        return str(value)
    return str(value)


def _k8s_instance(candidate: Mapping[str, Any]) -> tuple[Decimal, Decimal, int] | None:
    instance_type = candidate.get("instance_type")
    if not isinstance(instance_type, str):
        return None
    match = _K8S_INSTANCE_RE.match(instance_type)
    if match is None:
        return None
    gpus = int(Decimal(match.group(4)).to_integral_value(rounding=ROUND_CEILING)) if match.group(4) else 0
    return Decimal(match.group(1)), Decimal(match.group(2)), gpus


def _accelerator_string_count(text: str) -> Decimal:
    _, _, count = text.partition(":")
    return _decimal(count.strip() or 1, "accelerators")


def _memory_gb(text: str, cpus: Decimal) -> Decimal:
    match = _MEMORY_RE.match(text)
    if match is None:
        raise DemandError(f"cannot read memory {text!r}")
    value = _decimal(match.group(1), "memory") * _MEMORY_UNIT_IN_GB[(match.group(2) or "g").lower()]
    return value * cpus if match.group(3) == "x" else value


def _decimal(value: object, what: str) -> Decimal:
    try:
        result = Decimal(str(value))
    except InvalidOperation:
        raise DemandError(f"cannot read {what} {value!r}") from None
    if not result.is_finite() or result < 0:
        raise DemandError(f"cannot read {what} {value!r}")
    return result


def _ceil(value: Decimal) -> int:
    return math.ceil(value)

"""Admission fair sharing: order a ClusterQueue's workloads by their LocalQueue's usage.

With ``admissionFairSharing`` in Kueue's Configuration and
``admissionScope.admissionMode: UsageBasedAdmissionFairSharing`` on a ClusterQueue, the
queue is ordered first by the *decayed usage* of each workload's LocalQueue, divided by
the LocalQueue's ``fairSharing.weight``, and only then by priority and time
(``pkg/cache/queue/cluster_queue.go`` ``queueOrderingFunc``). Every admission immediately
charges an *entry penalty* of ``requests x (1 - 0.5^(samplingInterval/halfLife))`` to its
LocalQueue, which the workload controller later settles into the consumed usage
(``pkg/util/admissionfairsharing``, ``pkg/cache/queue/afs``).

Usage is kept as Kubernetes quantities in their natural unit (CPU in cores), as Kueue
keeps it, with penalties rounded down to 9 decimal places (``resource.MulByFloat``); the
final score is a float, as in Kueue.
"""

from __future__ import annotations

import math
from decimal import ROUND_DOWN, Decimal
from typing import TYPE_CHECKING

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import quantity

if TYPE_CHECKING:
    from sky_kueue.kueue.workload import WorkloadInfo

#: ``resource.MulByFloat`` rounds to this many decimal places.
PENALTY_SCALE_DIGITS = 9
_QUANT = Decimal(1).scaleb(-PENALTY_SCALE_DIGITS)


def alpha_rate(sampling_seconds: Decimal, half_life_seconds: Decimal, elapsed: Decimal | None = None) -> float:
    """``1 - 0.5^(interval/halfLife)``: the weight of new usage in one decay step."""
    if half_life_seconds == 0:
        return 0.0
    interval = sampling_seconds if elapsed is None else elapsed
    return 1.0 - math.pow(0.5, float(interval) / float(half_life_seconds))


def natural_quantity(resource: str, amount: int) -> Decimal:
    """An integer amount back in the resource's natural unit (CPU cores, bytes, units)."""
    return Decimal(amount) / 1000 if resource == quantity.CPU else Decimal(amount)


def mul_by_float(values: dict[str, Decimal], factor: float) -> dict[str, Decimal]:
    """Kueue's ``MulByFloat``: scale by a float given as its shortest decimal text, round down."""
    exact = Decimal(repr(factor))
    return {k: (v * exact).quantize(_QUANT, rounding=ROUND_DOWN) for k, v in values.items()}


def decay(old: dict[str, Decimal], new: dict[str, Decimal], alpha: float) -> dict[str, Decimal]:
    """``CalculateDecayedConsumed``: old x (1 - alpha) + new x alpha."""
    scaled_old = mul_by_float(old, 1 - alpha)
    scaled_new = mul_by_float(new, alpha)
    result = dict(scaled_old)
    for k, v in scaled_new.items():
        result[k] = result.get(k, Decimal(0)) + v
    return result


class UsageLedger:
    """Per-LocalQueue consumed usage and pending entry penalties (``AfsUsageLedger``)."""

    def __init__(self, config: o.AdmissionFairSharingConfig, local_queues: dict[str, o.LocalQueue]) -> None:
        self.config = config
        self.local_queues = local_queues
        self.alpha = alpha_rate(config.usage_sampling_interval_seconds, config.usage_half_life_seconds)
        self.consumed: dict[str, dict[str, Decimal]] = {
            key: dict(lq.consumed_resources) for key, lq in local_queues.items()
        }
        self.penalties: dict[str, dict[str, dict[str, Decimal]]] = {}
        self.weights = {r: float(w) for r, w in config.resource_weights.items()}

    def pending_penalty(self, lq_key: str) -> dict[str, Decimal]:
        total: dict[str, Decimal] = {}
        for penalty in self.penalties.get(lq_key, {}).values():
            for r, v in penalty.items():
                total[r] = total.get(r, Decimal(0)) + v
        return total

    def usage(self, lq_key: str) -> float:
        """``CalculateUsage``: weighted sum of consumed plus pending penalty, over the LQ weight."""
        merged = dict(self.consumed.get(lq_key, {}))
        for r, v in self.pending_penalty(lq_key).items():
            merged[r] = merged.get(r, Decimal(0)) + v
        total = 0.0
        for resource in sorted(merged):
            total += self.weights.get(resource, 1.0) * float(merged[resource])
        lq = self.local_queues.get(lq_key)
        weight = float(lq.fair_weight) if lq is not None else 1.0
        if weight <= 0:
            return math.inf
        return total / weight

    def usage_of(self, info: WorkloadInfo) -> float:
        return self.usage(f"{info.obj.namespace}/{info.obj.queue_name}")

    def push_penalty(self, info: WorkloadInfo) -> None:
        """Charge the entry penalty of a just-admitted workload to its LocalQueue."""
        requests: dict[str, Decimal] = {}
        for ps in info.obj.pod_sets:
            for r, v in ps.requests.items():
                requests[r] = requests.get(r, Decimal(0)) + natural_quantity(r, v * ps.count)
        lq_key = f"{info.obj.namespace}/{info.obj.queue_name}"
        self.penalties.setdefault(lq_key, {})[info.key] = mul_by_float(requests, self.alpha)

    def settle(self, info: WorkloadInfo) -> bool:
        """Move a workload's entry penalty into its LocalQueue's consumed usage (no time passes)."""
        lq_key = f"{info.obj.namespace}/{info.obj.queue_name}"
        penalty = self.penalties.get(lq_key, {}).pop(info.key, None)
        if penalty is None:
            return False
        consumed = decay(self.consumed.get(lq_key, {}), {}, 0.0)
        for r, v in penalty.items():
            consumed[r] = consumed.get(r, Decimal(0)) + v
        self.consumed[lq_key] = consumed
        return True

    def drop(self, info: WorkloadInfo) -> None:
        lq_key = f"{info.obj.namespace}/{info.obj.queue_name}"
        self.penalties.get(lq_key, {}).pop(info.key, None)

"""Protected within nominal quota: when a readmitted relaunch may take a protected band level.

Why: the band policies' protection (:mod:`sky_kueue.controller.aging.band`) orders a
readmitted relaunch above its class's never-preempted work, so Kueue's reclaim takes that
work first. But a reclaim under ``reclaimWithinCohort: Any`` keeps taking Workloads of a
borrowing ClusterQueue, lowest priority first and then newest admission first, until the
ClusterQueue no longer borrows (Kueue ``pkg/scheduler/preemption/preemption.go``: a candidate
of another ClusterQueue is skipped once its ClusterQueue is within nominal quota). So a
protected Workload is out of every reclaim's reach exactly when the Workloads Kueue would take
*after* it (the ClusterQueue's admitted Workloads at its priority or above) and itself fit in
the ClusterQueue's nominal quota. Protect every relaunch, and the protected set outgrows
nominal quota: the reclaims reach it again, now taking work that has run longest
(``benchmarks/README.md``, "Anti-starvation": ``keep-place`` lost goodput on 9 of 25 runs).

With ``protect_within_nominal`` the controller and the simulator grant the protected level
at admission only when :func:`fits_protected` says so, and otherwise admit the relaunch at its
class's plain level, where Kueue's own order (newest first) applies. The protected set then
never exceeds nominal quota, and a relaunch the safe-relaunch rule held for a safe place
(:mod:`sky_kueue.controller.aging.safe_relaunch`) is not reclaimed again.

Pure: quantities are :class:`~decimal.Decimal` keyed by ``(flavor, resource)``, as Kueue
accounts usage per flavor and resource.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal

#: Usage or quota per ``(flavor, resource)``.
Quantities = Mapping[tuple[str, str], Decimal]


@dataclass(frozen=True)
class AdmittedWorkload:
    """An admitted Workload of the ClusterQueue: its current priority and its usage."""

    priority: int
    usage: Quantities = field(default_factory=dict)


@dataclass(frozen=True)
class ProtectedFit:
    """Whether an admitted Workload at a protected band level stays within its ClusterQueue's
    nominal quota, as a reconcile reports it.

    ``detail`` names the ClusterQueue and, when it does not fit, the first flavor/resource
    that would exceed nominal quota (for the reconcile's notes).
    """

    fits: bool
    detail: str


def protected_offset(admitted: int | None, released: int | None) -> int | None:
    """A band decision's protected offset: its ``admitted`` offset when that lies above the
    class's plain (``released``) offset; None: the decision protects nothing."""
    if admitted is None or released is None or admitted <= released:
        return None
    return admitted


def protected_usage(admitted: Iterable[AdmittedWorkload], level: int) -> dict[tuple[str, str], Decimal]:
    """Usage of the admitted Workloads at priority ``level`` or above (what a reclaim takes
    after a Workload at ``level`` admitted now, the newest of its priority)."""
    total: dict[tuple[str, str], Decimal] = {}
    for workload in admitted:
        if workload.priority < level:
            continue
        for key, amount in workload.usage.items():
            total[key] = total.get(key, Decimal(0)) + amount
    return total


@dataclass(frozen=True)
class Overflow:
    """The first ``(flavor, resource)`` a protected Workload would take beyond nominal quota."""

    key: tuple[str, str]
    asked: Decimal
    #: Usage of the admitted Workloads at the level or above.
    held: Decimal
    nominal: Decimal


def overflow(
    nominal: Quantities, admitted: Iterable[AdmittedWorkload], level: int, request: Quantities
) -> Overflow | None:
    """Where a Workload asking ``request``, admitted now at priority ``level``, would exceed
    ``nominal`` together with every admitted Workload at ``level`` or above (the first such
    ``(flavor, resource)`` in sorted order); None: it fits.

    ``admitted`` must not include the Workload itself. A ``(flavor, resource)`` of the request
    without nominal quota has none: any positive request of it does not fit.
    """
    above = protected_usage(admitted, level)
    for key, amount in sorted(request.items()):
        held, quota = above.get(key, Decimal(0)), nominal.get(key, Decimal(0))
        if amount > 0 and held + amount > quota:
            return Overflow(key, amount, held, quota)
    return None


def fits_protected(nominal: Quantities, admitted: Iterable[AdmittedWorkload], level: int, request: Quantities) -> bool:
    """Whether a Workload asking ``request`` fits at ``level`` (:func:`overflow` finds nothing)."""
    return overflow(nominal, admitted, level, request) is None

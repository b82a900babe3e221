"""fits_protected: a protected Workload is out of every reclaim's reach only within nominal quota."""

from __future__ import annotations

from decimal import Decimal

from sky_kueue.controller.aging.protected_slot import AdmittedWorkload, fits_protected, protected_usage

GPU = ("a100", "nvidia.com/gpu")
CPU = ("default", "cpu")
NOMINAL = {GPU: Decimal(8), CPU: Decimal(32_000)}


def _admitted(priority: int, gpus: int, cpu_milli: int = 0) -> AdmittedWorkload:
    return AdmittedWorkload(priority, {GPU: Decimal(gpus), CPU: Decimal(cpu_milli)})


def test_exactly_nominal_quota_fits() -> None:
    assert fits_protected(NOMINAL, [_admitted(100, 4)], 100, {GPU: Decimal(4)})
    assert not fits_protected(NOMINAL, [_admitted(100, 4)], 100, {GPU: Decimal(5)})


def test_a_request_of_a_resource_without_nominal_quota_does_not_fit() -> None:
    assert not fits_protected(NOMINAL, [], 100, {("a100", "memory"): Decimal(1)})
    assert not fits_protected(NOMINAL, [], 100, {("h100", "nvidia.com/gpu"): Decimal(1)})
    # ... unless it asks none of it.
    assert fits_protected(NOMINAL, [], 100, {GPU: Decimal(1), ("a100", "memory"): Decimal(0)})


def test_admitted_workloads_below_the_level_are_ignored() -> None:
    # A reclaim takes those first: they do not stand between the protected Workload and it.
    lower = [_admitted(99, 8), _admitted(50, 8)]
    assert fits_protected(NOMINAL, lower, 100, {GPU: Decimal(8)})
    # At the level or above they count, whatever their flavor/resource mix.
    assert not fits_protected(NOMINAL, [*lower, _admitted(100, 1)], 100, {GPU: Decimal(8)})
    assert not fits_protected(NOMINAL, [_admitted(1000, 0, 30_000)], 100, {GPU: Decimal(1), CPU: Decimal(2_001)})
    assert fits_protected(NOMINAL, [_admitted(1000, 0, 30_000)], 100, {GPU: Decimal(1), CPU: Decimal(2_000)})


def test_an_empty_request_fits_and_usage_adds_up_per_flavor_and_resource() -> None:
    assert fits_protected({}, [_admitted(100, 100)], 100, {})
    assert protected_usage([_admitted(100, 2, 500), _admitted(101, 3), _admitted(99, 7)], 100) == {
        GPU: Decimal(5),
        CPU: Decimal(500),
    }

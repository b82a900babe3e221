"""Pod sizing mirrors SkyPilot 0.14.1's Kubernetes defaults, in Kueue's integer units."""

from __future__ import annotations

import pytest

from sky_kueue.skypilot.demand import DemandError, WorkloadDemand, format_quantity, pod_requests

GPU = "nvidia.com/gpu"
GB = 10**9


@pytest.mark.parametrize(
    ("candidate", "expected"),
    [
        ({}, {"cpu": 2000, "memory": 2 * GB}),
        ({"cpus": "4+"}, {"cpu": 4000, "memory": 4 * GB}),
        ({"cpus": "0.5", "memory": "1.5"}, {"cpu": 500, "memory": 1500 * 10**6}),
        ({"cpus": "4", "memory": "2x"}, {"cpu": 4000, "memory": 8 * GB}),
        ({"accelerators": {"A100": 2}}, {"cpu": 8000, "memory": 32 * GB, GPU: 2}),
        ({"accelerators": "H100:1", "cpus": "7"}, {"cpu": 7000, "memory": 28 * GB, GPU: 1}),
        ({"accelerators": ["A100:1", "H100:2"], "cpus": "1", "memory": "8+"}, {"cpu": 1000, "memory": 8 * GB, GPU: 2}),
        ({"instance_type": "3CPU--12GB--L4:1"}, {"cpu": 3000, "memory": 12 * GB, GPU: 1}),
        ({"memory": "1TB"}, {"cpu": 2000, "memory": 1024 * GB}),
    ],
)
def test_pod_requests(candidate: dict[str, object], expected: dict[str, int]) -> None:
    assert pod_requests(candidate, GPU) == expected


@pytest.mark.parametrize("candidate", [{"cpus": "many"}, {"memory": "lots"}, {"accelerators": 3}, {"cpus": "-1"}])
def test_unreadable_sizes(candidate: dict[str, object]) -> None:
    with pytest.raises(DemandError):
        pod_requests(candidate, GPU)


def test_totals_and_formatting() -> None:
    demand = WorkloadDemand(3, {"cpu": 1500, "memory": 0, GPU: 1})
    assert demand.total("cpu") == 4500 and demand.total("absent") == 0
    assert demand.resources == ("cpu", GPU)
    assert [format_quantity("cpu", v) for v in (7000, 500)] == ["7", "500m"]
    assert [format_quantity("memory", v) for v in (64 * 2**30, 32 * GB, 5)] == ["64Gi", "32G", "5"]

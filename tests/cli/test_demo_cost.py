"""The demo's cost of a run: prod delays against counterparts, burst hours and their price."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sky_kueue.cli.demo_cost import ProdWait, burst_use, delays, describe_cost
from sky_kueue.controller.burst_cost import BurstPricing, UnpricedReason


def wait(job: str, submitted: int, waited: int) -> ProdWait:
    return ProdWait(job, f"team-a/{job}", submitted, submitted + waited, waited, True)


def test_equal_jobs_submitted_together_are_compared_by_rank_not_by_name() -> None:
    reference = [wait("a", 60, 0), wait("b", 60, 300), wait("c", 1500, 0)]
    reordered = [wait("a", 60, 300), wait("b", 60, 0), wait("c", 1500, 360)]
    assert [(w.job, extra) for w, extra in delays(reordered, reference)] == [("c", 360)]


def job(cluster: str, admitted: int, ended: int | None, cpus: str, gpus: str) -> dict[str, Any]:
    attempt = {"cluster": cluster, "submitted_at": admitted, "admitted_at": admitted, "ended_at": ended}
    return {"attempts": [attempt], "cpus": cpus, "gpus": gpus}


def test_a_gpu_burst_is_priced_and_a_cpu_only_burst_is_not_guessed() -> None:
    pricing = BurstPricing(("k8s/burst",), {"k8s/burst": Decimal("3")})
    gpu = burst_use({"j": job("burst", 100, 1900, "4", "2")}, "burst", 2400, pricing)
    assert gpu is not None and gpu.gpu_hours == 1 and gpu.cost_usd == 3 and gpu.unpriced is None
    cpu = burst_use({"j": job("burst", 90, None, "5", "0")}, "burst", 690, pricing)
    assert cpu is not None and cpu.seconds == 600 and cpu.cost_usd is None and cpu.unpriced is UnpricedReason.NO_PRICE
    assert burst_use({"j": job("onprem", 0, 60, "5", "0")}, "burst", 690, pricing) is None


def test_the_cost_sentence_names_each_delayed_job_and_the_burst_price() -> None:
    cost = {
        "prod_delayed": [
            {
                "workload": "team-a/t-7",
                "waited_seconds": 180,
                "submitted_at": 1980,
                "admitted_at": 2160,
                "longer_by_seconds": 180,
                "finished": False,
            },
        ],
        "prod_delay_seconds": 180,
        "burst": {
            "cluster": "burst",
            "seconds": 3600,
            "cpu_hours": 4.0,
            "gpu_hours": 2.0,
            "target": "aws",
            "cost_usd": 6.12,
            "unpriced": None,
        },
    }
    text = describe_cost(cost, "the no aging run", 2400)
    assert "team-a/t-7 waited 180 s (t=1980-2160), 180 s longer, unfinished at t=2400 s" in text
    assert "4 CPU-hours and 2 GPU-hours (3600 s on burst), $6.12 at aws's price per GPU-hour" in text

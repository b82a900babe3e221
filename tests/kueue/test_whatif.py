"""Fast what-if verdicts for one more workload against the current cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from sky_kueue.kueue import loader, predictor, whatif
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.predictor import VerdictKind
from sky_kueue.kueue.scheduler import Engine

SEED = Path(__file__).resolve().parent.parent / "oracle" / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"


def _engine_without_prod() -> tuple[Engine, o.Workload]:
    state = loader.load_state_file(SEED)
    prod = state.workloads.pop("team-a/team-a-prod-job")
    return Engine(state, predictor.DEFAULT_NOW), prod


def test_prod_job_would_preempt_the_borrowing_dev_job() -> None:
    engine, prod = _engine_without_prod()
    verdict = whatif.quick_verdict(engine, prod)
    assert verdict.kind is VerdictKind.ADMITTED_AFTER_PREEMPTION
    assert verdict.victims == [("team-b/team-b-dev-job", "InCohortReclaimWhileBorrowing")]
    assert verdict.ahead == []


def test_small_job_is_admitted_now_and_state_is_untouched() -> None:
    engine, prod = _engine_without_prod()
    before = engine.snapshot.checkpoint()
    small = dataclasses.replace(
        prod,
        pod_sets=(dataclasses.replace(prod.pod_sets[0], requests={"cpu": 2000}),),
    )
    verdict = whatif.quick_verdict(engine, small)
    assert verdict.kind is VerdictKind.ADMITTED
    assert verdict.flavors == {"main": {"cpu": "default-flavor"}}
    assert engine.snapshot.checkpoint()[0] == before[0]


def test_a_job_beyond_capacity_never_fits() -> None:
    engine, prod = _engine_without_prod()
    huge = dataclasses.replace(
        prod,
        pod_sets=(dataclasses.replace(prod.pod_sets[0], requests={"cpu": 7000, "nvidia.com/gpu": 3}),),
    )
    verdict = whatif.quick_verdict(engine, huge)
    assert verdict.kind is VerdictKind.PENDING
    assert verdict.never_fits
    assert "maximum capacity (2)" in verdict.message

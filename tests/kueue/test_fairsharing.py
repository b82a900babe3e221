"""Dominant resource shares, the two fair-preemption strategies, and admission fair sharing."""

from __future__ import annotations

import math
from decimal import Decimal

from sky_kueue.kueue import admission_fair_sharing as afs
from sky_kueue.kueue import fairsharing as fs
from sky_kueue.kueue import objects as o
from sky_kueue.kueue import tree
from sky_kueue.kueue.scheduler import inactive_cluster_queues

from .builders import cq, flavor, state

CPU = ("f", "cpu")


def _pair(weight_a: str, weight_b: str = "1") -> tree.TreeShape:
    s = state(
        flavor("f"),
        cq("a", [{"f": {"cpu": "4"}}], cohort="c", weight=weight_a),
        cq("b", [{"f": {"cpu": "4"}}], cohort="c", weight=weight_b),
    )
    return tree.build_tree(s, inactive_cluster_queues(s))


def test_share_is_borrowed_over_lendable_per_mille_over_weight() -> None:
    t = _pair("0.5")
    tree.add_usage(t.cqs["a"], CPU, 6000)  # borrows 2 of the 8 the cohort can lend
    drs = fs.dominant_resource_share(t.cqs["a"])
    assert drs.borrowing and drs.ratio == 250.0
    assert drs.weighted_share() == 500.0
    assert fs.dominant_resource_share(t.cqs["b"]).weighted_share() == 0.0
    assert fs.dominant_resource_share(t.cohorts["c"]).weighted_share() == 0.0  # a root has no share


def test_zero_weight_borrower_sorts_after_everyone() -> None:
    t = _pair("0", "0.25")
    tree.add_usage(t.cqs["a"], CPU, 5000)
    tree.add_usage(t.cqs["b"], CPU, 3000)
    zero = fs.dominant_resource_share(t.cqs["a"])
    other = fs.dominant_resource_share(t.cqs["b"])
    assert math.isinf(zero.weighted_share())
    assert fs.compare_drs(zero, other) == 1
    assert fs.compare_drs(other, zero) == -1
    heavy = fs.dominant_resource_share(t.cqs["a"], {CPU: 2000})
    assert fs.compare_drs(zero, heavy) == -1  # among zero-weight borrowers the raw ratio decides


def test_strategies_compare_with_final_and_initial_shares() -> None:
    preemptor = fs.DRS(weight=1.0, ratio=300.0, borrowing=True)
    target_before = fs.DRS(weight=1.0, ratio=400.0, borrowing=True)
    target_after = fs.DRS(weight=1.0, ratio=250.0, borrowing=True)
    assert not fs._passes(fs.STRATEGY_LESS_THAN_OR_EQUAL_TO_FINAL_SHARE, preemptor, target_before, target_after)
    assert fs._passes(fs.STRATEGY_LESS_THAN_INITIAL_SHARE, preemptor, target_before, target_after)


def test_entry_penalty_and_decay_with_an_injected_elapsed_time() -> None:
    config = o.AdmissionFairSharingConfig(
        usage_half_life_seconds=Decimal(600), usage_sampling_interval_seconds=Decimal(60)
    )
    alpha = afs.alpha_rate(config.usage_sampling_interval_seconds, config.usage_half_life_seconds)
    assert math.isclose(alpha, 1 - 0.5**0.1)
    # after one half-life, old usage weighs half and the new usage the other half
    half = afs.alpha_rate(Decimal(60), Decimal(600), elapsed=Decimal(600))
    decayed = afs.decay({"cpu": Decimal(8)}, {"cpu": Decimal(2)}, half)
    assert decayed["cpu"] == Decimal(5)
    # penalties are rounded down to 9 decimal places, as Kueue's MulByFloat does
    assert afs.mul_by_float({"cpu": Decimal(1)}, 1 / 3) == {"cpu": Decimal("0.333333333")}


def test_local_queue_usage_is_weighted_and_zero_weight_is_last() -> None:
    config = o.AdmissionFairSharingConfig(
        usage_half_life_seconds=Decimal(600),
        usage_sampling_interval_seconds=Decimal(60),
        resource_weights={"cpu": Decimal(1), "memory": Decimal(0)},
    )
    queues = {
        "t/light": o.LocalQueue("t", "light", "a", Decimal(2), {"cpu": Decimal(4), "memory": Decimal(10**9)}),
        "t/none": o.LocalQueue("t", "none", "a", Decimal(0), {"cpu": Decimal(1)}),
    }
    ledger = afs.UsageLedger(config, queues)
    assert ledger.usage("t/light") == 2.0
    assert math.isinf(ledger.usage("t/none"))

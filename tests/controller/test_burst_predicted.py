"""The predicted-wait burst gate: a job due a burst goes to the cloud only when on-prem is slower."""

from __future__ import annotations

import math
from dataclasses import replace

import pydantic
import pytest

from sky_kueue.controller.burst import BurstReason, decide_burst, relaunch_burst
from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.predicted_burst import (
    DEFAULT_CLOUD_STARTUP_SECONDS,
    DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS,
    BurstChoice,
    PredictedBurstSettings,
    PredictedBurstSettingsError,
    decide_predicted_burst,
    gated_verdict,
    max_stays_reached,
)
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.skypilot.config import BurstSettings

from .test_burst import SETTINGS, history
from .test_engine import SETTINGS as ENGINE_SETTINGS
from .test_engine import Cluster, engine_for, preempt_and_relaunch

#: The thresholds alone (no bound on the stays), as the gate's threshold tests need.
GATE = PredictedBurstSettings(cloud_startup_seconds=600.0, margin_seconds=300.0, max_stays=None)


@pytest.mark.parametrize(
    ("predicted", "choice"),
    [
        (0.0, BurstChoice.STAY),  # admitted at once on-prem
        (900.0, BurstChoice.STAY),  # exactly start-up + margin: the cloud is not faster
        (900.5, BurstChoice.BURST),
        (math.inf, BurstChoice.BURST),  # not admitted within the predictor's horizon
        (None, BurstChoice.STAY),  # unknown: stays, the admission timeout still applies
    ],
)
def test_a_job_due_a_burst_bursts_only_above_startup_plus_margin(predicted: float | None, choice: BurstChoice) -> None:
    verdict = decide_predicted_burst(1, 1, predicted, GATE)
    assert verdict.choice is choice
    assert verdict.threshold_seconds == 900.0
    assert ("burst" in verdict.reason) == (choice is BurstChoice.BURST or predicted is None)


def test_below_the_preemption_count_or_without_it_the_gate_never_bursts() -> None:
    assert decide_predicted_burst(1, 2, math.inf, GATE).choice is BurstChoice.STAY
    off = decide_predicted_burst(5, None, math.inf, GATE)
    assert off.choice is BurstChoice.STAY and "off" in off.reason


def test_the_reason_names_the_wait_the_start_up_and_the_margin() -> None:
    verdict = decide_predicted_burst(2, 1, 1_500.0, GATE)
    assert verdict.bursts
    assert "1500s" in verdict.reason and "600s" in verdict.reason and "300s" in verdict.reason
    assert "beyond the predictor's horizon" in decide_predicted_burst(2, 1, math.inf, GATE).reason


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_thresholds_must_be_finite_seconds(bad: float) -> None:
    with pytest.raises(PredictedBurstSettingsError, match="margin_seconds"):
        PredictedBurstSettings(margin_seconds=bad)
    with pytest.raises(PredictedBurstSettingsError, match="cloud_startup_seconds"):
        PredictedBurstSettings(cloud_startup_seconds=bad)


@pytest.mark.parametrize("bad", [-1.0, math.nan])
def test_a_negative_or_nan_prediction_is_rejected(bad: float) -> None:
    with pytest.raises(ValueError, match="predicted_wait_seconds"):
        decide_predicted_burst(1, 1, bad, GATE)


def test_decide_burst_with_a_gate_keeps_work_that_on_prem_runs_soon() -> None:
    h = history([60, 60, 60])  # three preemptions without a successful run: due a burst
    now = 3 * 70 + 1
    assert decide_burst(h, SETTINGS, now).reason is BurstReason.PREEMPTIONS  # type: ignore[union-attr]
    assert decide_burst(h, SETTINGS, now, predicted_wait_seconds=120.0, gate=GATE) is None
    assert decide_burst(h, SETTINGS, now, predicted_wait_seconds=None, gate=GATE) is None
    slow = decide_burst(h, SETTINGS, now, predicted_wait_seconds=5_000.0, gate=GATE)
    assert slow is not None and slow.reason is BurstReason.PREDICTED_ON_PREM_WAIT
    assert slow.record(now).predicted_wait_seconds == 5_000.0


def test_with_a_gate_the_relaunch_bursts_only_when_the_controller_marked_it() -> None:
    h = history([60, 60, 60])
    bursts, why = relaunch_burst(h, SETTINGS, 1_000.0, gate=GATE)
    assert not bursts and "gate" in why
    assert relaunch_burst(h, SETTINGS, 1_000.0)[0]  # without a gate the count alone bursts


def test_the_team_config_carries_the_thresholds_and_rejects_bad_ones() -> None:
    team = BurstSettings(max_queue_wait_seconds=900, clouds=("aws",))
    assert team.predicted_burst().cloud_startup_seconds == DEFAULT_CLOUD_STARTUP_SECONDS
    custom = BurstSettings(
        max_queue_wait_seconds=900, clouds=("aws",), cloud_startup_seconds=300, predicted_wait_margin_seconds=0
    )
    assert custom.predicted_burst().threshold_seconds == 300.0
    with pytest.raises(pydantic.ValidationError, match="predicted_wait_margin_seconds"):
        BurstSettings(max_queue_wait_seconds=900, clouds=("aws",), predicted_wait_margin_seconds=-5)
    with pytest.raises(pydantic.ValidationError, match="cloud_startup_seconds"):
        BurstSettings(max_queue_wait_seconds=900, clouds=("aws",), cloud_startup_seconds=0)


def team_b_gate(gate: PredictedBurstSettings) -> BurstGates:
    """``gate`` for the namespace of the engine tests' Workloads (team-b), as the config gives it."""
    return BurstGates(by_namespace={"team-b": gate}, by_team={"team-b": gate})


def test_the_controller_records_a_gated_burst_once_and_only_when_on_prem_is_slow(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(
        store, clock, settings=replace(ENGINE_SETTINGS, burst_after_preemptions=1), burst_gates=team_b_gate(GATE)
    )
    cluster = Cluster(clock)
    uid = preempt_and_relaunch(cluster, engine, "w0", 0)
    relaunch = cluster.pending(uid, 1_010)
    assert engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=300.0).burst is None  # on-prem soon
    assert engine.reconcile(cluster.detect(relaunch)).burst is None  # no prediction: stays
    outcome = engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=3_600.0)
    assert outcome.burst is not None and outcome.burst.reason == "predicted-on-prem-wait"
    annotations = [b["metadata"].get("annotations", {}) for b in actuator.bodies]
    assert any(a.get("sky-kueue.io/burst-decision") == "predicted-on-prem-wait" for a in annotations)
    assert engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=3_600.0).burst is None  # once
    assert outcome.job_key is not None
    stored = store.load(outcome.job_key)
    assert stored is not None and stored.burst is not None


@pytest.mark.parametrize(
    ("preemptions", "after", "max_stays", "predicted", "choice", "bound"),
    [
        (1, 1, 1, 0.0, BurstChoice.STAY, False),  # first due preemption: the gate may keep it
        (2, 1, 1, 0.0, BurstChoice.BURST, True),  # kept once: bursts though on-prem is predicted at once
        (2, 1, 1, None, BurstChoice.BURST, True),  # ... and though the wait is unknown
        (2, 1, 2, 0.0, BurstChoice.STAY, False),
        (3, 1, 2, 0.0, BurstChoice.BURST, True),
        (4, 2, 2, 0.0, BurstChoice.BURST, True),  # counted from burst_after_preemptions
        (1, 1, 0, 0.0, BurstChoice.BURST, True),  # 0: no stay at all
        (9, 1, None, 0.0, BurstChoice.STAY, False),  # unbounded
        (0, 1, 0, 0.0, BurstChoice.STAY, False),  # not due a burst: the bound does not apply
        (2, 1, 1, 5_000.0, BurstChoice.BURST, True),  # slow on-prem and bound both: the bound is named
    ],
)
def test_the_gate_keeps_a_job_at_most_max_stays_times(
    preemptions: int, after: int, max_stays: int | None, predicted: float | None, choice: BurstChoice, bound: bool
) -> None:
    gate = replace(GATE, max_stays=max_stays)
    verdict = decide_predicted_burst(preemptions, after, predicted, gate)
    assert verdict.choice is choice
    assert verdict.max_stays_reached is bound
    assert max_stays_reached(preemptions, after, gate) is bound
    assert (f"predicted_wait_gate_max_stays {max_stays} reached" in verdict.reason) is bound


def test_the_bound_defaults_to_one_stay_and_rejects_bad_values() -> None:
    assert PredictedBurstSettings().max_stays == DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS == 1
    for bad in (-1, True, 1.5):
        with pytest.raises(PredictedBurstSettingsError, match="max_stays"):
            PredictedBurstSettings(max_stays=bad)  # type: ignore[arg-type]
    team = BurstSettings(max_queue_wait_seconds=900, clouds=("aws",))
    assert team.predicted_burst().max_stays == 1
    unbounded = BurstSettings.model_validate(
        {"max_queue_wait_seconds": 900, "clouds": ["aws"], "predicted_wait_gate_max_stays": None}
    )
    assert unbounded.predicted_burst().max_stays is None
    for bad_key in (-1, "2", True, 1.5):
        with pytest.raises(pydantic.ValidationError, match="predicted_wait_gate_max_stays"):
            BurstSettings.model_validate(
                {"max_queue_wait_seconds": 900, "clouds": ["aws"], "predicted_wait_gate_max_stays": bad_key}
            )


def test_decide_burst_and_the_relaunch_name_the_bound_once_reached() -> None:
    h = history([60, 60, 60, 60])  # four preemptions, burst after three: the gate kept it once
    now = 4 * 70 + 1
    bounded = replace(GATE, max_stays=1)
    verdict = decide_burst(h, SETTINGS, now, predicted_wait_seconds=0.0, gate=bounded)
    assert verdict is not None and verdict.reason is BurstReason.PREDICTED_WAIT_GATE_MAX_STAYS
    assert decide_burst(h, SETTINGS, now, predicted_wait_seconds=0.0, gate=GATE) is None  # unbounded: stays
    bursts, why = relaunch_burst(h, SETTINGS, now, gate=bounded)  # no prediction at the relaunch
    assert bursts and "kept it on-prem 1x" in why
    assert not relaunch_burst(h, SETTINGS, now, gate=GATE)[0]


def test_the_controller_bursts_a_job_the_gate_kept_once_at_its_next_preemption(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, _ = engine_for(
        store,
        clock,
        settings=replace(ENGINE_SETTINGS, burst_after_preemptions=1),
        burst_gates=team_b_gate(replace(GATE, max_stays=1)),
    )
    cluster = Cluster(clock)
    second = preempt_and_relaunch(cluster, engine, "w0", 0)
    kept = engine.reconcile(cluster.detect(cluster.pending(second, 1_010)), predicted_wait_seconds=0.0)
    assert kept.burst is None and any("stays on-prem" in note for note in kept.notes)
    third = preempt_and_relaunch(cluster, engine, second, 1_010)  # admitted, reclaimed again
    relaunch = engine.reconcile(cluster.detect(cluster.pending(third, 2_020)), predicted_wait_seconds=0.0)
    assert kept.job_key is not None
    stored = store.load(kept.job_key)
    assert stored is not None
    recorded = stored.burst
    assert recorded is not None and recorded.reason == "predicted-wait-gate-max-stays"
    assert "kept it on-prem 1x" in recorded.detail and recorded.preemptions == 2
    assert relaunch.burst is None  # recorded once, at the preemption (no predictor needed past the bound)


def test_the_gated_verdict_asks_the_predictor_only_when_the_answer_depends_on_it() -> None:
    asked: list[int] = []

    def wait() -> float:
        asked.append(1)
        return 3_600.0

    gate = replace(GATE, max_stays=1)
    assert gated_verdict(0, 1, gate, wait) is None and not asked  # not due a burst
    first = gated_verdict(1, 1, gate, wait)
    assert first is not None and first.bursts and not first.max_stays_reached and len(asked) == 1
    bound = gated_verdict(2, 1, gate, wait)
    assert bound is not None and bound.bursts and bound.max_stays_reached and len(asked) == 1  # not asked

"""The predicted-wait burst gate: a job due a burst goes to the cloud only when on-prem is slower."""

from __future__ import annotations

import math
from dataclasses import replace

import pydantic
import pytest

from sky_kueue.controller.burst import BurstReason, decide_burst, relaunch_burst
from sky_kueue.controller.predicted_burst import (
    DEFAULT_CLOUD_STARTUP_SECONDS,
    BurstChoice,
    PredictedBurstSettings,
    PredictedBurstSettingsError,
    decide_predicted_burst,
)
from sky_kueue.skypilot.config import BurstSettings

from .test_burst import SETTINGS, history
from .test_engine import SETTINGS as ENGINE_SETTINGS
from .test_engine import Cluster, engine_for, preempt_and_relaunch

GATE = PredictedBurstSettings(cloud_startup_seconds=600.0, margin_seconds=300.0)


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


def test_the_controller_records_a_gated_burst_once_and_only_when_on_prem_is_slow(store, clock) -> None:
    engine, actuator = engine_for(
        store, clock, settings=replace(ENGINE_SETTINGS, burst_after_preemptions=1), burst_gate=GATE
    )
    cluster = Cluster(clock)
    uid = preempt_and_relaunch(cluster, engine, "w0", 0)
    relaunch = cluster.pending(uid, 1_010)
    assert engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=300.0).burst is None  # on-prem soon
    assert engine.reconcile(cluster.detect(relaunch)).burst is None  # no prediction: stays
    outcome = engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=3_600.0)
    assert outcome.burst is not None and outcome.burst.reason == "predicted-on-prem-wait"
    annotations = [b["metadata"].get("annotations", {}) for b in actuator.bodies]  # type: ignore[union-attr]
    assert any(a.get("sky-kueue.io/burst-decision") == "predicted-on-prem-wait" for a in annotations)
    assert engine.reconcile(cluster.detect(relaunch), predicted_wait_seconds=3_600.0).burst is None  # once
    assert outcome.job_key is not None and store.load(outcome.job_key).burst is not None  # type: ignore[union-attr]

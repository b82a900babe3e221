"""rank+predicted: a relaunch due a burst stays on-prem when the predictor says it runs soon."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedWaitKind
from sky_kueue.sim import policies
from sky_kueue.sim.results import JobOutcome
from sky_kueue.sim.simulator import Simulator
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id

BURST = policies.with_burst_defaults(AgingSettings())
CONFIG = replace(NO_DELAY, allow_burst=True)


def preempted_by(high_run: float) -> Trace:
    """low-1 (4 GPUs, 5,000 s) is preempted at t=10 by high-1, which holds the quota ``high_run`` s."""
    return (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=5_000, klass="low")
        .job("high-1", at=10, gpus=4, run=high_run, klass="high")
        .trace()
    )


@pytest.mark.parametrize("kind", list(PredictedWaitKind))
@pytest.mark.parametrize(("high_run", "bursts"), [(200.0, False), (5_000.0, True)])
def test_the_relaunch_bursts_only_when_the_predicted_wait_exceeds_start_up_plus_margin(
    high_run: float, bursts: bool, kind: PredictedWaitKind
) -> None:
    policy = policies.resolve("rank+predicted", BURST, predicted=PredictedBurstSettings(wait_kind=kind))
    sim = Simulator(preempted_by(high_run), policy, CONFIG)
    low = by_id(sim.run())["low-1"]
    assert low.preemptions == 1
    assert (low.outcome is JobOutcome.BURST) == bursts
    assert (sim.gate_bursts, sim.gate_stays) == ((1, 0) if bursts else (0, 1))
    if not bursts:
        assert low.last_admission_s == pytest.approx(210.0, abs=2.0)  # on-prem, when high-1 ended


def test_rank_bursts_the_same_relaunch_that_the_gate_keeps_on_prem() -> None:
    low = by_id(Simulator(preempted_by(200.0), policies.resolve("rank", BURST), CONFIG).run())["low-1"]
    assert low.outcome is JobOutcome.BURST  # 600 s of start-up for a 200 s on-prem wait


def test_a_larger_margin_keeps_a_longer_wait_on_prem() -> None:
    gate = PredictedBurstSettings(margin_seconds=5_000.0)
    policy = policies.resolve("rank+predicted", BURST, predicted=gate)
    low = by_id(Simulator(preempted_by(5_000.0), policy, CONFIG).run())["low-1"]
    assert low.outcome is not JobOutcome.BURST or low.wait_s >= BURST.burst_max_predicted_wait_seconds  # type: ignore[operator]


def test_without_allow_burst_the_gate_does_nothing() -> None:
    sim = Simulator(preempted_by(5_000.0), policies.resolve("rank+predicted", BURST), NO_DELAY)
    assert by_id(sim.run())["low-1"].outcome is not JobOutcome.BURST
    assert (sim.gate_bursts, sim.gate_stays) == (0, 0)


@pytest.mark.parametrize("name", ["baseline+predicted", "rank+safe+predicted", "rank+predicted+predicted"])
def test_the_suffix_goes_once_on_a_registered_policy(name: str) -> None:
    with pytest.raises(policies.UnknownSimPolicyError, match=r"\+predicted once"):
        policies.resolve(name, BURST)


def reclaimed_twice() -> Trace:
    """low-1 is preempted at t=10 by high-1 (200 s), relaunched on-prem when it ends, and
    preempted again at t=400 by high-2 (200 s): both times on-prem frees up soon."""
    return (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=5_000, klass="low")
        .job("high-1", at=10, gpus=4, run=200, klass="high")
        .job("high-2", at=400, gpus=4, run=200, klass="high")
        .trace()
    )


@pytest.mark.parametrize(
    ("max_stays", "gate_verdicts", "bursts"),
    [
        (1, (1, 1), True),  # kept at its first due preemption, burst at the next one
        (2, (0, 2), False),  # two stays allowed: kept both times
        (None, (0, 2), False),  # unbounded: kept both times
        (0, (1, 0), True),  # no stay: bursts at once, as rank
    ],
)
def test_the_gate_keeps_a_relaunch_at_most_max_stays_times(
    max_stays: int | None, gate_verdicts: tuple[int, int], bursts: bool
) -> None:
    policy = policies.resolve("rank+predicted", BURST, predicted=PredictedBurstSettings(max_stays=max_stays))
    sim = Simulator(reclaimed_twice(), policy, CONFIG)
    low = by_id(sim.run())["low-1"]
    assert (sim.gate_bursts, sim.gate_stays) == gate_verdicts
    assert (low.outcome is JobOutcome.BURST) == bursts
    assert low.preemptions == (1 if max_stays == 0 else 2)

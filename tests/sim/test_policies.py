"""Simulator policies are the controller's registry policies, not copies."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from sky_kueue.controller import aging
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.aging.settings import DEFAULT_POLICY_NAME
from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedBurstVerdict
from sky_kueue.sim import policies, synthetic
from sky_kueue.sim.simulator import SimConfig, simulate


def test_aging_is_the_controllers_default_policy() -> None:
    policy = policies.resolve("aging")
    assert isinstance(policy, policies.RegistryPolicy)
    assert policy.policy is aging.get_policy(DEFAULT_POLICY_NAME)
    assert policy.settings == AgingSettings()


def test_aging_follows_the_configured_policy() -> None:
    policy = policies.resolve("aging", AgingSettings(policy="ladder"))
    assert isinstance(policy, policies.RegistryPolicy)
    assert policy.policy is aging.get_policy("ladder")


def test_every_registered_policy_is_available() -> None:
    for name in aging.policy_names():
        assert policies.resolve(name).name == name
    assert {"baseline", "aging"} <= set(policies.names())


def test_unknown_policy_lists_the_choices() -> None:
    with pytest.raises(policies.UnknownSimPolicyError, match="unknown policy 'fifo'; choose from baseline, aging"):
        policies.resolve("fifo")


def test_controller_path_with_the_none_policy_changes_nothing() -> None:
    trace = synthetic.generate(
        synthetic.SyntheticParams(jobs=120, teams=3, gpus_per_team=8, load=1.4), random.Random(8)
    )
    baseline = simulate(trace, policies.resolve("baseline"), SimConfig(seed=4))
    none = simulate(trace, policies.resolve("none"), SimConfig(seed=4))
    assert sum(j.preemptions for j in baseline.jobs) > 0
    assert [(j.job_id, j.wait_s, j.preemptions, j.outcome) for j in baseline.jobs] == [
        (j.job_id, j.wait_s, j.preemptions, j.outcome) for j in none.jobs
    ]


@dataclass(frozen=True)
class EveryTick:
    """The same policy, re-decided at every resync tick (what the controller does)."""

    inner: policies.RegistryPolicy

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def summary(self) -> str:
        return self.inner.summary

    @property
    def keeps_history(self) -> bool:
        return True

    @property
    def resync_seconds(self) -> float | None:
        return self.inner.resync_seconds

    @property
    def safe_relaunch(self) -> None:
        return None

    @property
    def relaunch_wait_limit_s(self) -> float | None:
        return self.inner.relaunch_wait_limit_s

    @property
    def predicted_burst(self) -> PredictedBurstSettings | None:
        return self.inner.predicted_burst

    def bursts_after_preemption(self, history: JobHistory | None, now: float) -> bool:
        return self.inner.bursts_after_preemption(history, now)

    def predicted_burst_verdict(
        self, history: JobHistory | None, now: float, predicted_wait: Callable[[], float | None]
    ) -> PredictedBurstVerdict | None:
        return self.inner.predicted_burst_verdict(history, now, predicted_wait)

    def decide(self, history: JobHistory | None, now: float) -> policies.Decision:
        return policies.Decision(self.inner.decide(history, now).boost, now)


@pytest.mark.parametrize(
    "settings",
    [
        AgingSettings(policy="bounded"),
        AgingSettings(policy="bounded", max_age_seconds=3600.0, age_weight=120, ceiling_priority=199),
    ],
    ids=["defaults", "fast-age"],
)
def test_skipping_resync_ticks_that_cannot_change_the_boost_gives_the_same_run(settings: AgingSettings) -> None:
    trace = synthetic.generate(
        synthetic.SyntheticParams(jobs=120, teams=3, gpus_per_team=8, load=1.4), random.Random(9)
    )
    smart = policies.resolve("aging", settings)
    assert isinstance(smart, policies.RegistryPolicy)
    fast = simulate(trace, smart, SimConfig(seed=2))
    exact = simulate(trace, EveryTick(smart), SimConfig(seed=2))
    assert fast.jobs == exact.jobs
    assert max(j.max_boost for j in fast.jobs) > 0

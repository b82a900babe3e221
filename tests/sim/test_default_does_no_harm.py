"""Issue 39 item 3: whatever is the default must do no harm against SkyPilot alone.

No ordering policy measured does no harm on every shipped trace and seed (benchmarks/README.md,
"no harm"), so the default is ``none``: the controller records, explains and exports
preemptions and changes no priority. The check here is behaviour, not the name: the controller's
path under the default settings takes exactly SkyPilot alone's decisions on the traces where the
ordering policies harm (the closed loop of ``test_rank_loop``, a reclaim storm, dev-starvation).
"""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import dev_starvation, policies, reclaim_storm
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.simulator import SimConfig, simulate
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY
from tests.sim.test_rank_loop import gaps_trace

#: Hours per generated trace: enough for reclaims and relaunches, a second or two to run.
HOURS = 12.0


def _decisions(run: RunResult) -> list[tuple[str, float, int, str]]:
    return [(j.job_id, j.wait_s, j.preemptions, j.outcome.value) for j in run.jobs]


def _storm(seed: int) -> Trace:
    return reclaim_storm.generate(reclaim_storm.StormParams(hours=HOURS), random.Random(seed))


def _dev_starvation(seed: int) -> Trace:
    return dev_starvation.generate(dev_starvation.DevStarvationParams(hours=HOURS), random.Random(seed))


def test_the_default_settings_name_a_policy_that_never_boosts() -> None:
    default = policies.resolve(policies.AGING, AgingSettings())
    assert isinstance(default, policies.RegistryPolicy) and default.policy.name == "none"


def test_the_default_keeps_skypilots_order_where_rank_closes_the_loop() -> None:
    alone = simulate(gaps_trace(), policies.resolve(policies.BASELINE), NO_DELAY)
    default = simulate(gaps_trace(), policies.resolve(policies.AGING, AgingSettings()), NO_DELAY)
    ranked = simulate(gaps_trace(), policies.resolve("rank"), NO_DELAY)
    assert _decisions(default) == _decisions(alone)
    # the trace is one where an ordering policy does harm: rank preempts one job more often
    assert max(j.preemptions for j in ranked.jobs) > max(j.preemptions for j in alone.jobs)


@pytest.mark.parametrize("make", [_storm, _dev_starvation], ids=["reclaim-storm", "dev-starvation"])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_default_takes_skypilots_decisions_on_the_starving_traces(make: Callable[[int], Trace], seed: int) -> None:
    trace = make(seed)
    alone = simulate(trace, policies.resolve(policies.BASELINE), SimConfig(seed=seed))
    default = simulate(trace, policies.resolve(policies.AGING, AgingSettings()), SimConfig(seed=seed))
    assert sum(j.preemptions for j in alone.jobs) > 0, "the trace must preempt"
    assert _decisions(default) == _decisions(alone)
    assert default.timeline == alone.timeline

"""A run is a pure function of (trace, policy, config): same seed, same records."""

from __future__ import annotations

import random

import pytest

from sky_kueue.sim import policies, synthetic
from sky_kueue.sim.simulator import SimConfig, simulate
from sky_kueue.sim.traces import Trace

PARAMS = synthetic.SyntheticParams(jobs=120, teams=3, gpus_per_team=8, load=1.4)


def contended_trace(seed: int) -> Trace:
    return synthetic.generate(PARAMS, random.Random(seed))


def test_same_seed_same_trace() -> None:
    assert contended_trace(3) == contended_trace(3)
    assert contended_trace(3).jobs != contended_trace(4).jobs


def test_same_seed_same_run_for_every_policy() -> None:
    trace = contended_trace(5)
    for name in ("baseline", "rank"):
        first = simulate(trace, policies.resolve(name), SimConfig(seed=11))
        second = simulate(trace, policies.resolve(name), SimConfig(seed=11))
        assert first.jobs == second.jobs
        assert first.cycles == second.cycles
        assert first.timeline == second.timeline
        assert sum(j.preemptions for j in first.jobs) > 0, "the trace must exercise relaunches"


def test_relaunch_jitter_depends_on_the_seed() -> None:
    trace = contended_trace(7)
    a = simulate(trace, policies.resolve("baseline"), SimConfig(seed=1))
    assert sum(j.preemptions for j in a.jobs) > 0, "the trace must exercise relaunches"
    b = simulate(trace, policies.resolve("baseline"), SimConfig(seed=2))
    assert [j.wait_s for j in a.jobs] != [j.wait_s for j in b.jobs]


def test_the_preemption_shortcut_changes_no_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    # The summed verdict (viable_passes: no candidates, or no pass can fit) skips searches that
    # cannot succeed; with it switched off, and the one-by-one bound (_cannot_fit) with it, the
    # model must take exactly the same decisions, preemptions included.
    from sky_kueue.kueue import preemption

    trace = contended_trace(6)
    calls = {"pruned": 0}
    original = preemption._Search.viable_passes

    def counting(self: preemption._Search) -> tuple[bool, ...] | None:
        passes = original(self)
        calls["pruned"] += passes == ()
        return passes

    monkeypatch.setattr(preemption._Search, "viable_passes", counting)
    with_bound = [simulate(trace, policies.resolve(name), SimConfig(seed=3)) for name in ("baseline", "rank")]
    assert calls["pruned"] > 0, "the trace must exercise the shortcut"
    monkeypatch.setattr(preemption._Search, "viable_passes", lambda self: None)
    monkeypatch.setattr(preemption._Search, "_cannot_fit", lambda self, candidates, allow_borrowing: False)
    without = [simulate(trace, policies.resolve(name), SimConfig(seed=3)) for name in ("baseline", "rank")]
    for a, b in zip(with_bound, without, strict=True):
        assert a.jobs == b.jobs
        assert a.cycles == b.cycles
        assert sum(j.preemptions for j in a.jobs) > 0

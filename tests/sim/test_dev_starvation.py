"""The dev-starvation trace: a low-class team living on borrowed quota, owners returning often."""

from __future__ import annotations

import itertools

import pytest

from sky_kueue.sim import compare, dev_starvation
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import TraceError, load_trace


def test_shape_and_determinism() -> None:
    trace = load_trace("dev-starvation", seed=3)
    again = load_trace("dev-starvation", seed=3)
    assert trace.jobs == again.jobs
    total, per_team = trace.realized_load()
    assert per_team["dev"] == pytest.approx(dev_starvation.DEV_LOAD, abs=0.05)
    assert 0.4 < per_team["owners"] < 0.8
    assert 0.7 < total < 0.95
    assert {j.priority_class for j in trace.jobs if j.team == "dev"} == {"low"}
    assert {j.priority_class for j in trace.jobs if j.team == "owners"} == {"high"}
    owner_starts = sorted({j.submit_s for j in trace.jobs if j.team == "owners"})
    gaps = [b - a for a, b in itertools.pairwise(owner_starts) if b - a > 60]
    low, high = dev_starvation.OWNER_WAVE_GAP_SECONDS
    assert min(gaps) >= low - 20 and max(gaps) <= high + 20


def test_load_is_fixed_by_the_trace() -> None:
    with pytest.raises(TraceError, match="fixes its own load"):
        load_trace("dev-starvation", seed=0, load=0.5)


@pytest.mark.slow
def test_the_baseline_starves_relaunched_jobs() -> None:
    """Seed 1 starves the fewest of seeds 0-4 (11 when tuned): the issue asks for at least 5."""
    trace = load_trace("dev-starvation", seed=1)
    metrics = compare.compare(trace, ["baseline"], SimConfig(seed=1)).metrics["baseline"]
    assert metrics.relaunch_starved >= 5

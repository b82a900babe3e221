"""The seed-shaped reclaim storms: their shape, their determinism, and the metrics that say
whether starvation came from relaunches or from queueing."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.kueue import objects as o
from sky_kueue.sim import reclaim_storm
from sky_kueue.sim.traces import TraceError, load_trace


@pytest.mark.parametrize("name", [reclaim_storm.RECLAIM_STORM, reclaim_storm.RECLAIM_STORM_HOT])
def test_the_storm_has_the_specified_shape(name: str) -> None:
    params = reclaim_storm.STORMS[name]
    trace = load_trace(name, seed=3)
    _, per_team = trace.realized_load()
    assert per_team["team-b"] == pytest.approx(params.team_b_load, abs=0.05)
    assert per_team["team-c"] == pytest.approx(params.team_c_load, abs=0.05)
    prod = [j for j in trace.jobs if j.team == "team-a"]
    assert prod and all(j.priority_class == "high" and j.gpus == 8 for j in prod)
    assert all(3600 <= j.duration_s <= 7200 for j in prod)
    dev = [j for j in trace.jobs if j.team == "team-b"]
    assert {j.priority_class for j in dev} == {"low", "medium"} and max(j.gpus for j in dev) <= 4
    bursts = sorted({round(j.submit_s / 3600) for j in prod})
    assert len(bursts) >= params.hours / params.burst_every_hours - 1
    for cq in trace.cluster.state.cluster_queues.values():
        assert cq.preemption.within_cluster_queue is o.PreemptionPolicy.LOWER_PRIORITY
        assert cq.preemption.reclaim_within_cohort is o.PreemptionPolicy.ANY
        assert cq.preemption.borrow_within_cohort is o.BorrowWithinCohortPolicy.LOWER_PRIORITY
        assert cq.preemption.max_priority_threshold == reclaim_storm.BORROW_MAX_PRIORITY_THRESHOLD
    assert load_trace(name, seed=3) == trace
    assert load_trace(name, seed=4).jobs != trace.jobs


def test_the_storm_fixes_its_own_load() -> None:
    with pytest.raises(TraceError, match="fixes its own loads"):
        load_trace(reclaim_storm.RECLAIM_STORM, seed=0, load=0.5)


def test_the_report_splits_starvation_and_counts_in_queue_preemptions() -> None:
    args = ["--trace", "reclaim-storm-hot", "--seed", "0", "--hours", "24", "--policies", "baseline", "-o", "json"]
    result = CliRunner().invoke(cli, ["simulate", *args])
    assert result.exit_code == 0, result.output
    baseline = json.loads(result.output)["policies"]["baseline"]
    assert baseline["starved_never_preempted"] + baseline["starved_preempted"] == baseline["starved"]
    assert baseline["preempted_jobs"]["relaunch_starved"] <= baseline["starved_preempted"]
    assert baseline["in_queue_preemptions"] == baseline["preemptions_by_reason"].get("InClusterQueue", 0)
    assert baseline["preempted_jobs"]["count"] > 0
    assert baseline["preempted_jobs"]["max_preemptions"] == baseline["preemptions_per_job_max"]

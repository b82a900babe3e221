"""Placement over several clusters with what the plugin knows of run times, and its baselines.

The clusters are one team's 8 GPUs cut in two (4 GPUs each, no borrowing), so which cluster a
job waits in is decided by placement alone.
"""

from __future__ import annotations

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import multicluster, policies
from sky_kueue.sim.eta import PlacementEta, placement_error
from sky_kueue.sim.multicluster import MultiClusterSimulator, PlacementStrategy
from sky_kueue.sim.runtime_knowledge import (
    DeclarationModel,
    RuntimeKnowledge,
    declared_runtime,
    round_up_declaration,
)
from sky_kueue.sim.traces import Trace
from sky_kueue.skypilot.runtime_estimate import RuntimeSourceKind
from tests.sim.builders import NO_DELAY, TraceBuilder

BASELINE = policies.resolve("baseline", AgingSettings())
NOBODY_DECLARES = DeclarationModel(fraction=0.0)
EVERYONE_DECLARES = DeclarationModel(fraction=1.0)


def two_busy_clusters(with_history: bool) -> Trace:
    """Cluster 0 holds a 10,000-s job, cluster 1 a 100-s job of another shape; then ``probe``.

    With ``with_history``, a first run of the short job's shape (3 GPUs, low) finished before.
    """
    builder = TraceBuilder().team("a", gpus=8)
    if with_history:
        builder.job("earlier", at=0, gpus=3, run=100)
    return (
        builder.job("long", at=200, gpus=4, run=10_000)
        .job("short", at=201, gpus=3, run=100)
        .job("probe", at=202, gpus=4, run=50)
        .trace()
    )


def simulate(
    trace: Trace,
    strategy: PlacementStrategy,
    *,
    declarations: DeclarationModel = NOBODY_DECLARES,
    oracle: bool = False,
) -> MultiClusterSimulator:
    sim = MultiClusterSimulator(
        trace,
        BASELINE,
        multicluster.split_cluster(trace.cluster, 2),
        strategy,
        NO_DELAY,
        oracle_runtimes=oracle,
        declarations=declarations,
    )
    sim.run()
    return sim


def job(sim: MultiClusterSimulator, job_id: str) -> int:
    return next(j.index for j in sim.jobs if j.spec.job_id == job_id)


def test_no_declaration_and_no_history_falls_back_to_the_admins_order() -> None:
    sim = simulate(two_busy_clusters(with_history=False), PlacementStrategy.PREDICTED)
    probe = job(sim, "probe")
    assert sim.placements[probe].order == [0, 1]
    assert sim.predicted_wait[probe] == (None, True)
    # It waits behind the long job in cluster 0 (no failover within 24 h).
    assert sim.jobs[probe].first_admission == pytest.approx(10_200.0, abs=1.0)


def test_history_of_the_teams_finished_runs_ranks_clusters_by_wait() -> None:
    sim = simulate(two_busy_clusters(with_history=True), PlacementStrategy.PREDICTED)
    probe = job(sim, "probe")
    # The short job's shape ran 100 s before: cluster 1 frees in about 99 s; the long job's
    # shape has no history, so cluster 0's wait is unknown and ranks after.
    assert sim.placements[probe].order == [1, 0]
    predicted, pending = sim.predicted_wait[probe]
    assert pending and predicted == pytest.approx(3 * 99 / 4, abs=1.0)
    assert sim.jobs[probe].first_admission == pytest.approx(301.0, abs=1.0)


def test_declared_run_times_rank_like_the_oracle() -> None:
    trace = two_busy_clusters(with_history=False)
    declared = simulate(trace, PlacementStrategy.PREDICTED, declarations=EVERYONE_DECLARES)
    oracle = simulate(trace, PlacementStrategy.PREDICTED, oracle=True)
    probe = job(oracle, "probe")
    assert oracle.placements[probe].order == declared.placements[probe].order == [1, 0]
    # Declarations are rounded up (100 s -> 5 min), so the declared wait is longer than the true one.
    assert declared.predicted_wait[probe][0] == pytest.approx(3 * (300 - 1) / 4, abs=1.0)
    assert oracle.predicted_wait[probe][0] == pytest.approx(3 * 99 / 4, abs=1.0)


def test_the_eta_error_of_a_run_compares_predicted_and_realised_waits() -> None:
    run = multicluster.run_placement(
        two_busy_clusters(with_history=True),
        BASELINE,
        2,
        PlacementStrategy.PREDICTED,
        NO_DELAY,
        declarations=NOBODY_DECLARES,
    )
    assert run.eta_error is not None and run.eta_error_pending is not None
    assert run.eta_error.placements == 4 and run.eta_error.no_estimate_fraction == 0.0
    # Only the probe had to wait: predicted 74 s, realised 99 s.
    assert run.eta_error_pending.placements == 1
    assert run.eta_error_pending.median_abs_error_s == pytest.approx(99 - 3 * 99 / 4, abs=1.0)
    baseline = multicluster.run_placement(
        two_busy_clusters(with_history=True), BASELINE, 2, PlacementStrategy.FIXED_ORDER, NO_DELAY
    )
    assert baseline.eta_error is None and baseline.to_json()["eta_error"] is None


def test_placement_error_figures() -> None:
    records = [
        PlacementEta("now", 0.0, False, 0.5),
        PlacementEta("close", 100.0, True, 150.0),
        PlacementEta("far", 1_000.0, True, 100.0),
        PlacementEta("unknown", None, True, 300.0),
        PlacementEta("never admitted", 10.0, True, None),
    ]
    error = placement_error(records)
    assert error.placements == 4
    assert error.no_estimate_fraction == 0.25
    assert error.median_abs_error_s == 50.0
    assert error.p90_abs_error_s == 900.0
    empty = placement_error([PlacementEta("unknown", None, True, 10.0)])
    assert empty.no_estimate_fraction == 1.0 and empty.median_abs_error_s is None


def test_round_robin_alternates_the_first_cluster() -> None:
    builder = TraceBuilder().team("a", gpus=8)
    for index in range(4):
        builder.job(f"j{index}", at=index * 1_000.0, gpus=1, run=10)
    sim = simulate(builder.trace(), PlacementStrategy.ROUND_ROBIN)
    orders = [sim.placements[job(sim, f"j{i}")].order for i in range(4)]
    assert orders == [[0, 1], [1, 0], [0, 1], [1, 0]]
    assert sim.first_choice == [2, 2]


def test_multikueue_like_runs_where_the_first_copy_is_admitted() -> None:
    trace = two_busy_clusters(with_history=False)
    sim = simulate(trace, PlacementStrategy.MULTIKUEUE)
    probe = sim.jobs[job(sim, "probe")]
    assert probe.workload is not None
    # The short job's cluster frees first: the probe's copy there is admitted at 301 s and
    # the copy waiting in cluster 0 was withdrawn.
    assert probe.first_admission == pytest.approx(301.0, abs=1.0)
    assert sim.engine_set.of_workload[probe.workload.key] == 1
    assert probe.workload.key not in sim.engine_set.copies
    assert probe.launches == 1 and sim.failovers == 0
    assert sim.first_choice == [1, 2]  # long in 0; short and probe in 1
    fixed = simulate(trace, PlacementStrategy.FIXED_ORDER)
    assert fixed.jobs[job(fixed, "probe")].first_admission == pytest.approx(10_300.0, abs=1.0)  # after short


def test_multikueue_like_withdraws_copies_so_each_job_runs_once() -> None:
    builder = TraceBuilder().team("a", gpus=8)
    for index in range(12):
        builder.job(f"j{index}", at=index * 10.0, gpus=2, run=500)
    run = multicluster.run_placement(builder.trace(), BASELINE, 2, PlacementStrategy.MULTIKUEUE, NO_DELAY)
    assert all(j.launches == 1 and j.preemptions == 0 for j in run.run.jobs)
    assert sum(run.first_choice) == 12 and all(count > 0 for count in run.first_choice)
    # 4 jobs at a time over the two clusters: three rounds of 500 s.
    assert max(j.end_s or 0.0 for j in run.run.jobs) == pytest.approx(1_500.0 + 20.0, abs=30.0)


def test_declarations_are_rounded_up_and_drawn_per_seed() -> None:
    assert round_up_declaration(100) == 300
    assert round_up_declaration(3_601) == 7_200
    assert round_up_declaration(4 * 86_400 + 1) == 5 * 86_400
    spec = two_busy_clusters(with_history=False).jobs[0]
    assert declared_runtime(spec, EVERYONE_DECLARES, seed=0) == 10_800  # 10,000 s: 3 h
    assert declared_runtime(spec, NOBODY_DECLARES, seed=0) is None
    half = DeclarationModel(fraction=0.5)
    builder = TraceBuilder().team("a", gpus=8)
    for index in range(400):
        builder.job(f"j{index}", at=index, gpus=1, run=60)
    declaring = sum(declared_runtime(s, half, seed=3) is not None for s in builder.trace().jobs)
    assert 160 < declaring < 240
    with pytest.raises(ValueError, match="fraction"):
        DeclarationModel(fraction=1.5).validate()


def test_history_is_the_teams_median_of_the_same_shape() -> None:
    knowledge = RuntimeKnowledge(NOBODY_DECLARES, seed=0)
    trace = (
        TraceBuilder()
        .team("a", gpus=8)
        .team("b", gpus=8)
        .job("a1", at=0, gpus=2, run=100)
        .job("b1", at=0, gpus=2, run=100, team="b")
        .trace()
    )
    a1, b1 = trace.jobs
    assert knowledge.estimate(a1).kind is RuntimeSourceKind.NONE
    for seconds in (100.0, 200.0, 900.0):
        knowledge.record_finished(a1, seconds, finished_at=seconds)
    estimate = knowledge.estimate(a1)
    assert (estimate.seconds, estimate.source) == (200, "history(n=3)")
    assert knowledge.estimate(b1).kind is RuntimeSourceKind.NONE  # another team's runs do not count

"""Several clusters in the simulator: splitting keeps the capacity; placement by prediction
uses the idle clusters that SkyPilot's fixed order leaves empty."""

from __future__ import annotations

import json
import random

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import multicluster, policies, synthetic
from sky_kueue.sim.traces import Trace

SMALL = synthetic.SyntheticParams(jobs=200, load=0.85)


def trace(seed: int = 0) -> Trace:
    return synthetic.generate(SMALL, random.Random(seed))


def test_split_clusters_hold_exactly_the_original_quota() -> None:
    whole = trace().cluster
    parts = multicluster.split_cluster(whole, 3)
    assert sum(p.gpu_capacity for p in parts) == whole.gpu_capacity
    for team, gpus in whole.team_gpus.items():
        assert sum(p.team_gpus[team] for p in parts) == gpus


@pytest.mark.slow
def test_prediction_spreads_work_that_fixed_order_piles_on_the_first_cluster() -> None:
    baseline = policies.resolve("baseline", AgingSettings())
    runs = {
        s: multicluster.run_placement(
            trace(), baseline, 3, s, failover_timeout_s=multicluster.SKYPILOT_ADMISSION_TIMEOUT_SECONDS
        )
        for s in multicluster.PlacementStrategy
    }
    fixed, predicted = runs[multicluster.PlacementStrategy.FIXED_ORDER], runs[multicluster.PlacementStrategy.PREDICTED]
    assert fixed.first_choice == (len(trace().jobs), 0, 0)
    assert all(count > 0 for count in predicted.first_choice)
    assert predicted.p95_wait_s <= fixed.p95_wait_s
    assert len(predicted.run.jobs) == len(fixed.run.jobs) == len(trace().jobs)


def test_simulate_clusters_option_prints_both_placements() -> None:
    result = CliRunner().invoke(
        cli, ["simulate", "--jobs", "100", "--clusters", "2", "--failover-after", "900", "-o", "json", "-q"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [r["label"] for r in data["runs"]] == ["fixed-order", "round-robin", "multikueue", "predicted"]
    assert all(len(r["utilisation"]) == 2 for r in data["runs"])
    assert data["failover_after_s"] == 900
    predicted = data["runs"][-1]
    assert predicted["runtimes"] == "estimator" and data["declared_runtimes"] == {"fraction": 0.3, "factor": 1.0}
    assert predicted["eta_error"]["placements"] == 100
    assert set(predicted["eta_error_pending"]) == {
        "placements",
        "no_estimate_fraction",
        "median_abs_error_s",
        "p90_abs_error_s",
    }
    assert set(data["over_predicted"]) == {"fixed-order", "round-robin", "multikueue"}


def test_simulate_clusters_oracle_runtimes_is_labelled_an_upper_bound() -> None:
    args = ["simulate", "--jobs", "100", "--clusters", "2", "--failover-after", "900", "-q", "--oracle-runtimes"]
    result = CliRunner().invoke(cli, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    predicted = json.loads(result.output)["runs"][-1]
    assert (predicted["label"], predicted["runtimes"]) == ("predicted-oracle", "oracle (upper bound)")
    text = CliRunner().invoke(cli, args)
    assert text.exit_code == 0, text.output
    assert "predicted-oracle ETA error (true run times, an upper bound)" in text.output
    assert "p99 wait" in text.output and "makespan" in text.output


def test_placement_options_need_several_clusters() -> None:
    for option in (["--oracle-runtimes"], ["--declared-runtimes", "0.5"], ["--declared-runtime-factor", "2"]):
        result = CliRunner().invoke(cli, ["simulate", "--jobs", "20", "-q", *option])
        assert result.exit_code == 2
        assert "add --clusters N" in result.output
        assert "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["simulate", "--jobs", "20", "--clusters", "2", "--declared-runtimes", "1.5"])
    assert result.exit_code == 2 and "--declared-runtimes" in result.output


@pytest.mark.slow
def test_a_protection_ending_reaches_the_engine_that_holds_the_workload() -> None:
    # keep-place with a bounded protection lowers an admitted Workload outside a scheduling
    # cycle; with several clusters that call must reach the cluster that admitted it.
    protected = policies.resolve("keep-place", AgingSettings(protect_seconds=600.0))
    contended = synthetic.generate(synthetic.SyntheticParams(jobs=300, load=0.85), random.Random(0))
    preempted = 0
    for strategy in multicluster.PlacementStrategy:
        result = multicluster.run_placement(contended, protected, 3, strategy, failover_timeout_s=900.0)
        assert len(result.run.jobs) == len(contended.jobs)
        preempted += sum(j.preemptions for j in result.run.jobs)
    assert preempted > 0  # relaunches were protected, then released

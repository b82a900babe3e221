"""The live oracle on the real Kueue: small public scenarios replayed, Kueue's decisions recorded,
and agreement with the recorded oracle and with ``sky-kueue predict`` computed.

These scenarios are ones where Kueue v0.17.0 and the recording (Kueue at ff69552) must agree:
a borrowing job reclaimed across the cohort, an in-queue priority preemption, a workload left
pending for want of a preemption policy, and a four-queue cohort with flavor choice. The
sandbox cannot pass them: they read the Preempted condition Kueue writes and the admissions
its scheduler makes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sky_kueue.realcluster import live_oracle
from sky_kueue.realcluster.cluster import RealCluster
from sky_kueue.realcluster.oracle_replay import OracleReplayer
from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KueueCluster

ORACLE = REPO / "tests" / "oracle"
SCENARIOS = [
    ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml",
    ORACLE / "seeds" / "scenarios" / "d-single-cq-priority-preempt.yaml",
    ORACLE / "seeds" / "scenarios" / "e-no-preemption-policy-pending.yaml",
    ORACLE / "public" / "scenarios" / "public-s1-001.yaml",
]


def test_small_public_scenarios_replay_and_agree_with_the_recording_and_predict(
    real_cluster: RealCluster, kueue: KueueCluster
) -> None:
    scenarios = live_oracle.read_scenarios(SCENARIOS)
    results = live_oracle.run(scenarios, OracleReplayer(real_cluster.api_client()), reconfigure=None)
    by_name = {r.scenario: r for r in results}
    assert set(by_name) == {p.stem for p in SCENARIOS}
    for result in results:
        assert result.error is None and result.skipped is None, result.to_json()
        assert result.live is not None and result.recorded is not None and result.predicted is not None
        assert result.recorded.decisions_agree, (result.scenario, result.recorded.differences, result.notes)
        assert result.predicted.decisions_agree, (result.scenario, result.predicted.differences)
    seed_a = by_name["a-gpu-borrow-preempt"].live
    assert seed_a is not None
    # what Kueue itself wrote: the preemptor (read from its UID) and the Preempted reason
    (victim, preemption), *_ = seed_a.preempted.items()
    assert victim == "team-b/team-b-dev-job"
    assert (preemption.by, preemption.reason) == ("team-a/team-a-prod-job", "InCohortReclaimWhileBorrowing")
    assert seed_a.admitted["team-a/team-a-prod-job"].pod_sets["main"]["nvidia.com/gpu"] == "gpu-flavor"
    seed_d = by_name["d-single-cq-priority-preempt"].live
    assert seed_d is not None and [p.reason for p in seed_d.preempted.values()] == ["InClusterQueue"]
    seed_e = by_name["e-no-preemption-policy-pending"].live
    assert seed_e is not None and not seed_e.admitted and "2 more needed" in next(iter(seed_e.pending.values()))
    summary = live_oracle.summary(results)
    assert summary["seeds"]["recordedDecisions"] == 3 and summary["public"]["predictDecisions"] == 1


def test_the_command_writes_per_scenario_results_and_skips_what_needs_another_configuration(
    real_cluster: RealCluster, kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path
) -> None:
    fair = sorted((ORACLE / "fair-public" / "scenarios").glob("*.yaml"))[0]
    results = tmp_path / "results"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "real-cluster",
            "oracle",
            str(SCENARIOS[1]),
            str(fair),
            "--kubeconfig",
            str(real_cluster.kubeconfig),
            "-o",
            "json",
            "--results",
            str(results),
        ],
        env=cli_env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    by_name = {r["scenario"]: r for r in report["scenarios"]}
    assert by_name[SCENARIOS[1].stem]["recorded"]["decisionsAgree"] is True
    assert "needs Kueue configured with fairSharing" in by_name[fair.stem]["skipped"]
    written = json.loads((results / "seeds" / f"{SCENARIOS[1].stem}.json").read_text())
    assert written["live"]["preemptions"] and written["predict"]["finalAgrees"] is True
    assert json.loads((results / "summary.json").read_text())["fair-public"]["skipped"] == 1


def test_a_fair_sharing_scenario_runs_on_kueue_restarted_with_fair_sharing_and_the_default_comes_back(
    real_cluster: RealCluster, kueue: KueueCluster
) -> None:
    import yaml

    from sky_kueue.realcluster.oracle_replay import Scenario, manager_configuration

    configs: list[dict[str, object]] = []

    def reconfigure(scenario: Scenario) -> None:
        real_cluster.reconfigure_kueue(manager_configuration(scenario.config))
        configs.append(yaml.safe_load((real_cluster.directory / "kueue-config.yaml").read_text()))

    fair = live_oracle.read_scenarios([ORACLE / "fair-public" / "scenarios" / "fair-public-s5-001.yaml"])
    (result,) = live_oracle.run(fair, OracleReplayer(real_cluster.api_client()), reconfigure)
    assert result.kueue_config == "fairSharing" and result.release == "flavor"
    assert result.recorded is not None and result.recorded.decisions_agree, result.to_json()
    # restarted with fair sharing for the scenario, then with Kueue's defaults again
    assert [("fairSharing" in config) for config in configs] == [True, False]

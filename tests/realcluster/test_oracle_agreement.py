"""The live oracle's pure parts: comparing what the live Kueue did with a recorded outcome, the
Kueue configuration a scenario needs, and how scenario arguments are found (no cluster)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.kueue import objects as o
from sky_kueue.realcluster import live_oracle
from sky_kueue.realcluster.oracle_agreement import LiveAdmission, LiveOutcome, LivePreemption, compare
from sky_kueue.realcluster.oracle_replay import Scenario, manager_configuration, read_scenario

ORACLE = Path(__file__).resolve().parents[1] / "oracle"


def recorded() -> dict[str, Any]:
    """Seed (a)'s shape: team-b's borrowing job preempted, then team-a's admitted."""
    return {
        "cycles": [
            {
                "admitted": {},
                "preempted": {"team-b/dev": {"by": "team-a/prod", "reason": "InCohortReclaimWhileBorrowing"}},
                "pending": {"team-a/prod": "Pending the preemption of 1 workload(s)"},
            },
            {
                "admitted": {
                    "team-a/prod": {"clusterQueue": "team-a-cq", "podSets": {"main": {"cpu": "default"}}},
                },
                "preempted": {},
                "pending": {},
            },
        ],
        "final": {"admitted": ["team-a/prod", "team-c/old"], "preempted": ["team-b/dev"], "pending": []},
    }


def live(flavor: str = "default", by: str = "team-a/prod", admitted: bool = True) -> LiveOutcome:
    out = LiveOutcome(initially_admitted=("team-b/dev", "team-c/old"))
    out.preempted["team-b/dev"] = LivePreemption(by=by, reason="InCohortReclaimWhileBorrowing", at_seconds=0.1)
    if admitted:
        out.admitted["team-a/prod"] = LiveAdmission("team-a-cq", {"main": {"cpu": flavor}}, at_seconds=0.4)
    else:
        out.pending["team-a/prod"] = "Pending the preemption of 1 workload(s)"
    return out


def test_the_same_decisions_agree() -> None:
    agreement = compare(live(), recorded(), "recorded")
    assert agreement.final_agrees and agreement.decisions_agree and agreement.differences == ()


def test_the_final_state_counts_initial_admissions_minus_preemptions() -> None:
    assert live().final() == {
        "admitted": ["team-a/prod", "team-c/old"],
        "preempted": ["team-b/dev"],
        "pending": [],
    }


def test_a_workload_left_pending_live_differs_in_the_final_sets() -> None:
    agreement = compare(live(admitted=False), recorded(), "recorded")
    assert not agreement.final_agrees and not agreement.decisions_agree
    assert agreement.differences == (
        "admitted only in recorded: team-a/prod",
        "pending only live: team-a/prod",
    )


def test_another_flavor_agrees_on_the_final_sets_but_not_on_the_decisions() -> None:
    agreement = compare(live(flavor="spot"), recorded(), "predict")
    assert agreement.final_agrees and not agreement.decisions_agree
    assert agreement.differences == (
        "flavors of team-a/prod: predict team-a-cq main: cpu=default, live team-a-cq main: cpu=spot",
    )


def test_another_preemptor_is_named() -> None:
    agreement = compare(live(by="team-a/other"), recorded(), "recorded")
    assert agreement.differences == (
        "preemption of team-b/dev: recorded by team-a/prod (InCohortReclaimWhileBorrowing), "
        "live by team-a/other (InCohortReclaimWhileBorrowing)",
    )


def test_the_kueue_configuration_follows_the_scenario_header() -> None:
    fair = read_scenario(sorted((ORACLE / "fair-public" / "scenarios").glob("*.yaml"))[0])
    assert fair.config_key == "fairSharing"
    assert manager_configuration(fair.config) == {
        "fairSharing": {"preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]}
    }
    afs = o.KueueConfig(
        admission_fair_sharing=o.AdmissionFairSharingConfig(
            Decimal(1800), Decimal(300), {"cpu": Decimal(1), "memory": Decimal(0)}
        )
    )
    scenario = Scenario(path=Path("x.yaml"), documents=(), config=afs)
    assert scenario.config_key.startswith("admissionFairSharing usageHalfLifeTime=1800s")
    assert manager_configuration(afs) == {
        "admissionFairSharing": {
            "usageHalfLifeTime": "1800s",
            "usageSamplingInterval": "300s",
            "resourceWeights": {"cpu": 1.0, "memory": 0.0},
        }
    }
    assert read_scenario(ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml").config_key == "classical"


def test_scenario_arguments_expand_set_directories_and_name_their_set() -> None:
    seeds = ORACLE / "seeds"
    one = seeds / "scenarios" / "a-gpu-borrow-preempt.yaml"
    paths = live_oracle.scenario_paths([seeds, one])
    assert len(paths) == len(list((seeds / "scenarios").glob("*.yaml")))  # no repeats
    assert {live_oracle.set_name(p) for p in paths} == {"seeds"}
    assert live_oracle.recorded_outcome(one) is not None


def test_a_capped_recording_is_known_from_the_prediction() -> None:
    capped = ORACLE / "public" / "scenarios" / "public-s1-010.yaml"
    _, settled = live_oracle.predicted_outcome(capped)
    _, settled_further = live_oracle.predicted_outcome(capped, live_oracle.SETTLED_CYCLE_CAP_CYCLES)
    assert not settled and settled_further
    _, uncapped = live_oracle.predicted_outcome(ORACLE / "public" / "scenarios" / "public-s1-001.yaml")
    assert uncapped


def test_an_invalid_scenario_is_one_model_error(tmp_path: Path) -> None:
    from sky_kueue.kueue.errors import ModelError

    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n")
    with pytest.raises(ModelError):
        read_scenario(bad)


def run_oracle_cli(*args: str) -> Any:
    from click.testing import CliRunner

    from sky_kueue.cli.main import cli

    return CliRunner(mix_stderr=False).invoke(cli, ["real-cluster", "oracle", *args])


SEED = str(ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml")


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--dir", "d", "--kubeconfig", "k"], 2, "give --dir or --kubeconfig, not both"),
        (["--kubeconfig", "k", "--release", "restart"], 2, "Invalid value for '--release'"),
        (["--dir", "{tmp}"], 1, "no real cluster in {tmp} (start one with `sky-kueue real-cluster up --dir {tmp}`"),
    ],
)
def test_bad_oracle_arguments_are_one_line_errors(tmp_path: Path, args: list[str], code: int, message: str) -> None:
    done = run_oracle_cli(SEED, *(a.replace("{tmp}", str(tmp_path)) for a in args))
    assert done.exit_code == code, done.output
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message.replace("{tmp}", str(tmp_path)) in lines[0]


def test_an_invalid_scenario_file_fails_before_any_cluster_is_touched(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata: {name: w}\n")
    done = run_oracle_cli(str(bad), "--kubeconfig", str(tmp_path / "missing"))
    assert done.exit_code == 2 and done.stderr.startswith(f"error: {bad}")
    assert len(done.stderr.strip().splitlines()) == 1

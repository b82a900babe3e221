"""The Kueue harness's Python side without Go: reading its JSON lines, comparing its decisions
with a recorded outcome, same-run ratios, the build's cache key and version check, and the
``--against-harness`` benchmark's report (the harness itself runs in tests/real_kueue)."""

from __future__ import annotations

import copy
import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.realcluster import harness_build, versions
from sky_kueue.realcluster.harness_outcome import (
    HarnessOutputError,
    compare,
    parse_line,
    parse_output,
    same_run_ratios,
    summarize,
    timing_rows,
)

ORACLE = Path(__file__).resolve().parents[1] / "oracle"
SEED = "d-single-cq-priority-preempt"


def recorded() -> dict[str, Any]:
    return json.loads((ORACLE / "seeds" / "expected" / f"{SEED}.json").read_text())


def line(outcome: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """A harness line for the seed, deciding what the recording decided, two runs."""
    base = outcome or recorded()
    raw: dict[str, Any] = {
        "scenario": SEED,
        "kueue_release": "v0.17.0",
        "cycles": base["cycles"],
        "final": base["final"],
        "settled": True,
        "hitCap": False,
        "repeats": 2,
        "deterministic": True,
        "decisionsDeterministic": True,
        "setupSeconds": [0.02, 0.03],
        "scheduleSeconds": [0.010, 0.014],
        "runSeconds": [0.04, 0.05],
    }
    raw.update(overrides)
    return raw


def test_a_line_reads_into_its_result() -> None:
    result = parse_line(json.dumps(line()), "line 1")
    assert result.scenario == SEED and result.kueue_release == "v0.17.0"
    assert result.cycles == 2 and result.repeats == 2
    assert result.schedule_seconds == (0.010, 0.014)
    assert result.schedule_median == pytest.approx(0.012)
    assert result.expected_json()["final"] == recorded()["final"]
    assert result.expected_json()["kueue_release"] == "v0.17.0"
    timing = result.timing_json()
    assert timing["id"] == SEED and timing["cycles"] == 2
    assert timing["scheduleSeconds"] == pytest.approx(0.012)
    assert timing["setupSeconds"] == pytest.approx(0.025)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "line 3: not JSON"),
        ("[1, 2]", "line 3: expected a JSON object"),
        (json.dumps({k: v for k, v in line().items() if k != "final"}), "line 3: missing final"),
        (json.dumps(line(scheduleSeconds=[0.1])), "line 3: scheduleSeconds must list 2 non-negative seconds"),
        (json.dumps(line(setupSeconds=[0.1, -1])), "line 3: setupSeconds must list 2 non-negative seconds"),
        (json.dumps(line(repeats=0)), "line 3: repeats must be a positive integer"),
        (json.dumps(line(cycles={})), "line 3: cycles must be a list"),
    ],
)
def test_a_bad_line_is_named_with_its_problem(text: str, message: str) -> None:
    with pytest.raises(HarnessOutputError, match=message):
        parse_line(text, "line 3")


def test_output_lines_are_numbered_and_blank_lines_skipped() -> None:
    text = json.dumps(line()) + "\n\n" + json.dumps(line(scenario="other")) + "\n"
    assert [r.scenario for r in parse_output(text)] == [SEED, "other"]
    with pytest.raises(HarnessOutputError, match="harness output line 3"):
        parse_output(json.dumps(line()) + "\n\n{")


def test_the_recorded_decisions_agree_by_every_measure() -> None:
    row = compare(parse_line(json.dumps(line()), "l"), recorded())
    assert row.final_agrees and row.decisions_agree and row.first_cycle_agrees and row.every_cycle_agrees
    assert row.differences == ()
    assert summarize([row]) == {
        "scenarios": 1,
        "finalAgrees": 1,
        "decisionsAgree": 1,
        "firstCycleAgrees": 1,
        "everyCycleAgrees": 1,
    }


def test_another_flavor_is_a_decision_difference_not_a_settled_one() -> None:
    outcome = recorded()
    outcome["cycles"][1]["admitted"]["research/high-job"]["podSets"]["main"]["cpu"] = "spot"
    row = compare(parse_line(json.dumps(line(outcome)), "l"), recorded())
    assert row.final_agrees and not row.decisions_agree
    assert row.first_cycle_agrees and not row.every_cycle_agrees
    assert row.differences[0].startswith(
        "flavors of research/high-job: recorded cluster-queue main: cpu=default-flavor"
    )
    assert "harness cluster-queue main: cpu=spot" in row.differences[0]


def test_an_extra_idle_cycle_only_breaks_cycle_agreement() -> None:
    outcome = recorded()
    outcome["cycles"].append({"admitted": {}, "preempted": {}, "pending": {}})
    row = compare(parse_line(json.dumps(line(outcome)), "l"), recorded())
    assert row.final_agrees and row.decisions_agree and row.first_cycle_agrees
    assert not row.every_cycle_agrees
    assert row.differences == ("cycles: recorded 2, harness 3",)


def test_another_preemptor_and_settled_sets_differ() -> None:
    outcome = copy.deepcopy(recorded())
    outcome["cycles"][0]["preempted"]["research/low-job"]["reason"] = "InCohortReclamation"
    outcome["cycles"] = outcome["cycles"][:1]
    outcome["final"] = {"admitted": [], "preempted": ["research/low-job"], "pending": ["research/high-job"]}
    row = compare(parse_line(json.dumps(line(outcome)), "l"), recorded())
    assert not row.final_agrees and not row.decisions_agree and not row.first_cycle_agrees
    assert "admitted only in recorded: research/high-job" in row.differences
    assert "pending only harness: research/high-job" in row.differences
    assert any(
        d.startswith("preemption of research/low-job: recorded by research/high-job (InClusterQueue)")
        for d in row.differences
    )


def test_same_run_ratios_are_medians_over_medians() -> None:
    ratios = same_run_ratios({"a": [1.0, 3.0, 2.0], "b": [0.5, 0.4, 0.6]}, {"a": [4.0, 4.0, 5.0], "b": [1.0, 2.0, 1.0]})
    assert ratios.per_scenario == {"a": 0.5, "b": 0.5}
    skewed = same_run_ratios({"a": [1.0], "b": [3.0], "c": [0.2]}, {"a": [4.0], "b": [2.0], "c": [1.0]})
    assert skewed.median == 0.25 and skewed.worst == 1.5


@pytest.mark.parametrize(
    ("ours", "kueue", "message"),
    [
        ({"a": [1.0]}, {"b": [1.0]}, "timings of different scenarios"),
        ({}, {}, "timings of different scenarios"),
        ({"a": []}, {"a": [1.0]}, "a: no timing samples"),
        ({"a": [1.0]}, {"a": [0.0]}, "a: Kueue's scheduling took no measurable time"),
    ],
)
def test_ratios_refuse_what_cannot_be_compared(
    ours: dict[str, list[float]], kueue: dict[str, list[float]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        same_run_ratios(ours, kueue)


def test_the_harness_requires_the_pinned_kueue() -> None:
    assert harness_build.required_kueue() == versions.load_pins().kueue


def test_the_cache_key_follows_the_source(tmp_path: Path) -> None:
    source = tmp_path / "kueue_harness"
    shutil.copytree(harness_build.SOURCE, source)
    pins = versions.load_pins()
    before = harness_build.binary_path(pins, tmp_path / "cache", source)
    assert before.parent.parent.parent == tmp_path / "cache"
    assert before.name == "kueue-harness" and before.parent.parent.name.startswith(f"kueue-harness-{pins.kueue}-")
    assert harness_build.binary_path(pins, tmp_path / "cache", source) == before
    (source / "main.go").write_text((source / "main.go").read_text() + "\n// edited\n")
    assert harness_build.binary_path(pins, tmp_path / "cache", source) != before


def test_a_harness_for_another_kueue_is_refused_before_building(tmp_path: Path) -> None:
    source = tmp_path / "kueue_harness"
    shutil.copytree(harness_build.SOURCE, source)
    go_mod = source / "go.mod"
    go_mod.write_text(go_mod.read_text().replace("sigs.k8s.io/kueue v0.17.0", "sigs.k8s.io/kueue v0.16.1"))
    pins = versions.load_pins()
    with pytest.raises(
        harness_build.HarnessError, match=r"requires sigs.k8s.io/kueue v0.16.1 but the real cluster pins"
    ):
        harness_build.ensure_built(pins, log=lambda _: None, root=tmp_path / "cache", source=source)
    assert not (tmp_path / "cache").exists()


def test_no_source_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(harness_build.HarnessError, match="no harness source in"):
        harness_build.digest(tmp_path)


def test_a_failing_harness_reports_its_own_error_line(tmp_path: Path) -> None:
    fake = tmp_path / "kueue-harness"
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nprint('error: x.yaml: document 3: bad', file=sys.stderr)\nsys.exit(2)\n"
    )
    fake.chmod(0o755)
    with pytest.raises(harness_build.HarnessError, match=r"exited 2: error: x.yaml: document 3: bad"):
        harness_build.run(fake, [tmp_path / "x.yaml"])


def test_a_group_report_has_each_scenarios_same_run_ratios() -> None:
    samples = {
        "s-0": {
            "kueue_schedule_s": [2.0, 2.4, 2.2],
            "kueue_setup_s": [10.0, 11.0, 12.0],
            "predict_process_s": [0.9, 1.1, 1.0],
            "predict_in_process_s": [0.4, 0.5, 0.6],
            "kueue_cycles": [16],
            "predict_cycles": [15],
        },
        "s-1": {
            "kueue_schedule_s": [1.0, 1.0, 1.0],
            "kueue_setup_s": [5.0, 5.0, 5.0],
            "predict_process_s": [0.8, 0.8, 0.8],
            "predict_in_process_s": [0.1, 0.1, 0.1],
            "kueue_cycles": [10, 11],
            "predict_cycles": [10],
        },
    }
    group = timing_rows(samples)
    assert group["scenarios"]["s-0"] == {
        "kueue_schedule_s": 2.2,
        "kueue_setup_s": 11.0,
        "predict_process_s": 1.0,
        "predict_in_process_s": 0.5,
        "process_ratio": round(1.0 / 2.2, 2),
        "in_process_ratio": round(0.5 / 2.2, 2),
        "kueue_cycles": [16],
        "predict_cycles": [15],
    }
    assert group["process_ratio_median"] == round((1.0 / 2.2 + 0.8) / 2, 2)
    assert group["process_ratio_worst"] == 0.8
    assert group["in_process_ratio_worst"] == round(0.5 / 2.2, 2)

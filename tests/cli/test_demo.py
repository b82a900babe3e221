"""``sky-kueue demo``: the default ends the dev job's starvation on the second cluster, and
the settings are the shipped config plus the changes each run names."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.cli import demo_config
from sky_kueue.cli.demo_config import BURST_CONTEXT, ONPREM_CONTEXT, RUNS, Change, DemoConfigError
from sky_kueue.cli.demo_live import merged_kubeconfig, task_candidates
from sky_kueue.controller.burst import is_burst_target

REPO = Path(__file__).resolve().parents[2]
DEV = "team-b/dev-1-fcd1e5cf"
#: The most preemptions the default run may cost the dev job before it finishes elsewhere.
DEFAULT_MAX_PREEMPTIONS = 1


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", *args], capture_output=True, text=True, timeout=120, check=False
    )


def _flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(data, dict) and data:
        out: dict[str, Any] = {}
        for key, value in data.items():
            out.update(_flatten(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): data}


def test_the_packaged_demo_config_is_the_shipped_file() -> None:
    assert demo_config.shipped_config() == yaml.safe_load((REPO / "configs" / "sky-kueue-demo.yaml").read_text())


@pytest.mark.parametrize("spec", RUNS, ids=[r.name for r in RUNS])
def test_each_run_differs_from_the_shipped_config_by_its_declared_changes_only(spec: Any, tmp_path: Path) -> None:
    path, config = demo_config.write_run_config(spec, tmp_path)
    written, shipped = _flatten(yaml.safe_load(path.read_text())), _flatten(demo_config.shipped_config())
    differing = {k for k in written.keys() | shipped.keys() if written.get(k) != shipped.get(k)}
    declared = {k for c in spec.changes for k in _flatten(c.value, f"{c.key}.")}
    emptied = {k for k in differing if any(d.startswith(f"{k}.") for d in declared)}  # `parameters: {}` filled
    assert differing - emptied == declared
    # what the product's loader makes of it
    if spec.name == "default":
        assert config.aging.policy == "rank" and config.strategy == "KUEUE_AGING"
        assert config.aging.burst_after_preemptions == 1 and config.burst_contexts == {BURST_CONTEXT}
    else:
        assert config.burst_contexts == frozenset() and config.aging.burst_after_preemptions is None


def test_the_default_runs_burst_changes_are_what_the_shipped_config_documents() -> None:
    """configs/sky-kueue.yaml: 'add burst_after_preemptions: 1 and burst_max_predicted_wait_seconds: 900
    and set strategy: KUEUE_AGING' where teams may burst."""
    documented = " ".join((REPO / "configs" / "sky-kueue.yaml").read_text().split())
    changes = {c.key: c.value for c in demo_config.BURST_CHANGES}
    assert f"burst_after_preemptions: {changes['aging.parameters.burst_after_preemptions']}" in documented
    assert (
        f"burst_max_predicted_wait_seconds: {changes['aging.parameters.burst_max_predicted_wait_seconds']}"
        in documented
    )
    assert f"strategy: {changes['aging.strategy']}" in documented
    assert demo_config.SEED_RUN.name == "default"


def test_a_change_under_a_missing_section_is_an_error() -> None:
    with pytest.raises(DemoConfigError, match="teams"):
        demo_config.apply_changes({"teams": []}, (Change("teams.team-b.burst", {}, "x"),))


def test_the_dev_task_may_burst_only_to_the_second_cluster() -> None:
    candidates = task_candidates([f"k8s/{BURST_CONTEXT}"])
    assert candidates == [("kubernetes", ONPREM_CONTEXT), ("kubernetes", BURST_CONTEXT)]
    assert [is_burst_target(*c, frozenset({BURST_CONTEXT})) for c in candidates] == [False, True]


def test_the_merged_kubeconfig_has_both_contexts(tmp_path: Path) -> None:
    class Fake:
        def __init__(self, name: str) -> None:
            self.kubeconfig_path = tmp_path / f"{name}.yaml"
            self.kubeconfig_path.write_text(
                yaml.safe_dump(
                    {
                        "clusters": [{"name": name, "cluster": {"server": f"http://127.0.0.1/{name}"}}],
                        "users": [{"name": name, "user": {}}],
                        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
                        "current-context": name,
                    }
                )
            )

    path = merged_kubeconfig(tmp_path / "merged", [Fake(ONPREM_CONTEXT), Fake(BURST_CONTEXT)])
    merged = yaml.safe_load(path.read_text())
    assert [c["name"] for c in merged["contexts"]] == [ONPREM_CONTEXT, BURST_CONTEXT]
    assert merged["current-context"] == ONPREM_CONTEXT
    assert path.stat().st_mode & 0o077 == 0


def test_the_default_ends_the_dev_jobs_starvation_on_the_second_cluster() -> None:
    """The README's first command: two sandboxes, SkyPilot-like jobs, the controller, three runs."""
    proc = run("demo", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert set(document) == {"events", "final"}
    events, final = document["events"], document["final"]
    assert all(
        set(e) == {"t", "type", "workload", "job", "priority", "detail", "cluster"}
        and e["type"] in ("submitted", "admitted", "preempted", "resubmitted", "aged", "burst", "finished")
        and e["cluster"] in (ONPREM_CONTEXT, BURST_CONTEXT)
        for e in events
    )
    assert final["clusters"]["onprem"] == ONPREM_CONTEXT and final["clusters"]["burst"] == BURST_CONTEXT
    # The seed, under the default: preempted by team-a on-prem, relaunched on the burst target, finished there.
    dev_story = [(e["type"], e["cluster"]) for e in events if e["workload"] == DEV]
    assert dev_story == [
        ("submitted", ONPREM_CONTEXT),
        ("admitted", ONPREM_CONTEXT),
        ("preempted", ONPREM_CONTEXT),
        ("resubmitted", BURST_CONTEXT),
        ("admitted", BURST_CONTEXT),
        ("finished", BURST_CONTEXT),
    ]
    preempted = next(e for e in events if e["type"] == "preempted")
    assert "team-a/train-2-fcd1e5cf" in preempted["detail"] and "InCohortReclaimWhileBorrowing" in preempted["detail"]
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert final["preempted"] == [DEV]

    starvation = final["starvation"]
    runs = {v["run"]: v for v in (starvation[k] for k in ("without_aging", "with_aging", "with_rank"))}
    assert set(runs) == {"no-aging", "boost", "default"}
    for variant in runs.values():
        assert variant["changes"] and all(set(c) == {"key", "value", "why"} for c in variant["changes"])
        b = variant["team_b"]
        assert len(b["attempts"]) == b["preemptions"] + 1  # one attempt per launch, each but the last preempted
        assert all(a["outcome"] == "preempted" for a in b["attempts"][:-1])
        assert len(b["relaunches"]) == b["preemptions"]
        assert (b["finished_at"] is None) == b["starved"] == (b["why_unfinished"] is not None)

    # No aging: preempted again and again on-prem, never finished, and the demo says why.
    none = runs["no-aging"]["team_b"]
    assert none["starved"] and none["preemptions"] >= 3
    assert {a["cluster"] for a in none["attempts"]} == {ONPREM_CONTEXT}
    assert "preempted" in none["why_unfinished"] and "aging is disabled" in none["why_unfinished"]
    # Boost: finishes on-prem, lifted above the threshold.
    boost = runs["boost"]["team_b"]
    assert not boost["starved"] and boost["finished_on"] == ONPREM_CONTEXT and boost["final_priority"] > 100
    # The default: starvation ends on the second cluster after at most the stated preemptions.
    default = runs["default"]
    dev = default["team_b"]
    assert default["policy"] == "rank"
    assert not dev["starved"] and dev["finished_on"] == BURST_CONTEXT
    assert 1 <= dev["preemptions"] <= DEFAULT_MAX_PREEMPTIONS
    assert dev["attempts"][0]["cluster"] == ONPREM_CONTEXT and dev["attempts"][-1]["cluster"] == BURST_CONTEXT
    assert dev["attempts"][-1]["outcome"] == "finished" and dev["attempts"][-1]["ended_at"] == dev["finished_at"]
    assert dev["relaunches"][-1]["burst"] and "burst_after_preemptions 1" in dev["relaunches"][-1]["why"]
    assert all(e["priority"] <= 100 for e in default["events"] if e["job"] == "managed-job/1")  # never left its class
    assert default["team_a_finished"] == default["team_a_jobs"]  # prod lost nothing to it
    assert f"finished on {BURST_CONTEXT}" in starvation["verdict"]
    assert final["elapsed_seconds"] < 30


@pytest.mark.slow  # two more demo processes; the JSON demo stays in the inner loop
def test_demo_text_prints_the_three_runs_and_predict_only_keeps_the_model_demo() -> None:
    text = run("demo")
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    for words in ("no aging", "boost (bounded)", "default (rank + burst)", "where each attempt ran", BURST_CONTEXT):
        assert words in flat
    for change in demo_config.BURST_CHANGES:
        assert change.key in flat
    proc = run("demo", "--predict-only", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    final = json.loads(proc.stdout)["final"]
    assert final["preempted"] == ["team-b/team-b-dev-job"]
    assert final["admitted"] == ["team-a/team-a-prod-job"]

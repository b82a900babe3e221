"""``sky-kueue demo``: the default ends the dev job's starvation on the second cluster through
the controller's predicted-wait burst gate (production's decision), and the settings are the
shipped config plus the changes each run names."""

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
from sky_kueue.cli.demo_live import (
    PROD_RUN_SECONDS,
    PROD_SWEEP_SIZE,
    DemoJob,
    merged_kubeconfig,
    seed_jobs,
    starvation_jobs,
    task_candidates,
)
from sky_kueue.controller.burst import is_burst_target
from sky_kueue.skypilot.labels import RUNTIME_SECONDS_ANNOTATION, RUNTIME_SOURCE_ANNOTATION

REPO = Path(__file__).resolve().parents[2]
DEV = "team-b/dev-1-fcd1e5cf"
#: The most preemptions the default run may cost the dev job before it finishes elsewhere.
RANK_BURST_MAX_PREEMPTIONS = 1
#: team-b's gate in the default run: the shipped cloud start-up + margin.
GATE_THRESHOLD_SECONDS = 600 + 300


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
    if spec.name == "rank-burst":
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
    assert demo_config.SEED_RUN.name == "rank-burst"


def test_a_change_under_a_missing_section_is_an_error() -> None:
    with pytest.raises(DemoConfigError, match="teams"):
        demo_config.apply_changes({"teams": []}, (Change("teams.team-b.burst", {}, "x"),))


def test_the_dev_task_may_burst_only_to_the_second_cluster() -> None:
    candidates = task_candidates([f"k8s/{BURST_CONTEXT}"])
    assert candidates == [("kubernetes", ONPREM_CONTEXT), ("kubernetes", BURST_CONTEXT)]
    assert [is_burst_target(*c, frozenset({BURST_CONTEXT})) for c in candidates] == [False, True]


@pytest.mark.parametrize("job", [*seed_jobs(), *starvation_jobs()], ids=lambda j: f"{j.task}-{j.job_id}")
def test_each_job_declares_its_run_time_as_the_policy_writes_it(job: DemoJob) -> None:
    annotations = job.pod()["metadata"]["annotations"]
    assert annotations[RUNTIME_SECONDS_ANNOTATION] == str(job.run_seconds)  # the demo's jobs run as declared
    assert annotations[RUNTIME_SOURCE_ANNOTATION] == "declared"
    assert annotations["sandbox.sky-kueue.io/run-seconds"] == str(job.run_seconds)


def test_the_starvation_sweep_is_queued_long_enough_for_the_gate_to_burst() -> None:
    """The scenario's premise: the prod sweep queued at the dev job's preemption outlasts start-up + margin."""
    assert PROD_SWEEP_SIZE * PROD_RUN_SECONDS > GATE_THRESHOLD_SECONDS
    seed_prod = [j for j in seed_jobs() if j.team == "team-a"]
    assert all(j.run_seconds < GATE_THRESHOLD_SECONDS for j in seed_prod)  # the seed's relaunch stays on-prem


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


def test_rank_with_burst_ends_the_dev_jobs_starvation_on_the_second_cluster() -> None:
    """The README's first command: two sandboxes, SkyPilot-like jobs, the controller, three runs."""
    proc = run("demo", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert set(document) == {"events", "final"}
    events, final = document["events"], document["final"]
    assert all(
        set(e) == {"t", "type", "workload", "job", "priority", "detail", "cluster"}
        and e["type"] in ("submitted", "admitted", "preempted", "resubmitted", "aged", "kept", "burst", "finished")
        and e["cluster"] in (ONPREM_CONTEXT, BURST_CONTEXT)
        for e in events
    )
    assert final["clusters"]["onprem"] == ONPREM_CONTEXT and final["clusters"]["burst"] == BURST_CONTEXT
    gate = final["burst_gate"]
    assert gate == {
        "team": "team-b",
        "cloud_startup_seconds": 600.0,
        "margin_seconds": 300.0,
        "threshold_seconds": float(GATE_THRESHOLD_SECONDS),
        "wait": "any",
    }
    # The seed, under rank + burst: preempted by team-a's 120-s prod job; the gate predicts its
    # relaunch waits 120 s on-prem, under start-up + margin, so it is relaunched and finishes on-prem.
    dev_story = [(e["type"], e["cluster"]) for e in events if e["workload"] == DEV and e["type"] != "aged"]
    assert dev_story == [
        ("submitted", ONPREM_CONTEXT),
        ("admitted", ONPREM_CONTEXT),
        ("preempted", ONPREM_CONTEXT),
        ("kept", ONPREM_CONTEXT),
        ("resubmitted", ONPREM_CONTEXT),
        ("admitted", ONPREM_CONTEXT),
        ("finished", ONPREM_CONTEXT),
    ]
    kept = next(e for e in events if e["type"] == "kept")
    assert "predicted any on-prem wait 120s vs cloud start-up 600s + margin 300s: stays on-prem" in kept["detail"]
    relaunch = next(e for e in events if e["type"] == "resubmitted")
    assert "the predicted-wait gate decides" in relaunch["detail"] and "wait 120s" in relaunch["detail"]
    assert final["jobs"]["managed-job/1"]["burst"] is None
    assert all(e["priority"] <= 100 for e in events if e["workload"] == DEV)  # rank keeps it in its class
    preempted = next(e for e in events if e["type"] == "preempted")
    assert "team-a/train-2-fcd1e5cf" in preempted["detail"] and "InCohortReclaimWhileBorrowing" in preempted["detail"]
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    assert final["preempted"] == [DEV]

    starvation = final["starvation"]
    runs = {v["run"]: v for v in (starvation[k] for k in ("without_aging", "with_aging", "with_rank"))}
    assert set(runs) == {"no-aging", "boost", "rank-burst"}
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
    assert runs["no-aging"]["burst_gate"] is None and runs["boost"]["burst_gate"] is None  # no burst section
    # rank + burst: starvation ends on the second cluster after at most the stated preemptions,
    # because the controller's gate predicts the queued sweep's wait, well above start-up + margin.
    ranked = runs["rank-burst"]
    dev = ranked["team_b"]
    assert ranked["policy"] == "rank" and ranked["burst_gate"] == gate
    assert not dev["starved"] and dev["finished_on"] == BURST_CONTEXT
    assert 1 <= dev["preemptions"] <= RANK_BURST_MAX_PREEMPTIONS
    assert dev["attempts"][0]["cluster"] == ONPREM_CONTEXT and dev["attempts"][-1]["cluster"] == BURST_CONTEXT
    assert dev["attempts"][-1]["outcome"] == "finished" and dev["attempts"][-1]["ended_at"] == dev["finished_at"]
    sweep_wait = f"predicted any on-prem wait {PROD_SWEEP_SIZE * PROD_RUN_SECONDS}s vs cloud start-up 600s"
    assert dev["burst"] is not None and sweep_wait in dev["burst"] and dev["burst"].endswith(": burst")
    last = dev["relaunches"][-1]
    assert last["burst"] and "the controller marked it for a cloud burst" in last["why"]
    marks = [e for e in ranked["events"] if e["job"] == "managed-job/1" and e["type"] == "burst"]
    assert len(marks) == 1 and "(predicted-on-prem-wait)" in marks[0]["detail"]
    assert marks[0]["t"] <= last["t"]  # marked before SkyPilot relaunched it
    assert all(e["priority"] <= 100 for e in ranked["events"] if e["job"] == "managed-job/1")  # never left its class
    assert ranked["team_a_finished"] == ranked["team_a_jobs"]  # prod lost nothing to it
    assert f"finished on {BURST_CONTEXT}" in starvation["verdict"] and sweep_wait in starvation["verdict"]
    assert final["elapsed_seconds"] < 30
    # The README's demo paragraph states these figures.
    readme = " ".join((REPO / "README.md").read_text().split())
    assert f"with aging off the dev job is preempted {none['preemptions']} times and never finishes" in readme
    assert f"finish on-prem after {boost['preemptions']} preemption" in readme
    wait = dev["burst_predicted_wait_seconds"]
    assert wait == PROD_SWEEP_SIZE * PROD_RUN_SECONDS and f"predicts a {wait:,.0f}-s on-prem wait" in readme
    assert f"bursts it after {dev['preemptions']} preemption" in readme

    # Each run's cost: the prod work it delayed against the run without aging, and the burst's hours.
    assert runs["no-aging"]["cost"]["prod_delayed"] == [] and runs["no-aging"]["cost"]["burst"] is None
    bounded = runs["boost"]["cost"]
    assert bounded["prod_delayed"] and bounded["burst"] is None
    assert bounded["prod_delay_seconds"] == bounded["prod_wait_seconds"] - runs["no-aging"]["cost"]["prod_wait_seconds"]
    for delayed in bounded["prod_delayed"]:
        job = runs["boost"]["jobs"][delayed["job"]]
        assert delayed["admitted_at"] - delayed["submitted_at"] == delayed["waited_seconds"] > 0
        assert job["admitted_at"][0] == delayed["admitted_at"] and delayed["finished"] == (
            job["finished_at"] is not None
        )
    assert runs["boost"]["team_a_jobs"] - runs["boost"]["team_a_finished"] == sum(
        not d["finished"] for d in bounded["prod_delayed"]
    )
    burst = ranked["cost"]["burst"]
    dev_job = ranked["jobs"]["managed-job/1"]
    ran = dev["attempts"][-1]["ended_at"] - dev["attempts"][-1]["admitted_at"]
    assert burst["cluster"] == BURST_CONTEXT and burst["seconds"] == ran
    assert burst["cpu_hours"] == round(int(dev_job["cpus"]) * ran / 3600, 3) and burst["gpu_hours"] == 0
    assert burst["cost_usd"] is None and burst["unpriced"] == "no-price"  # CPU-hours have no price setting
    assert ranked["cost"]["prod_delayed"] == []
    assert f"two later prod jobs wait {bounded['prod_delay_seconds']} s longer" in readme
    # Every aging step says in words what it did.
    aged = [e for v in runs.values() for e in v["events"] if e["type"] == "aged"] + [
        e for e in events if e["type"] == "aged"
    ]
    assert aged and all(any(w in e["detail"] for w in (" below ", " above ", "back at ")) for e in aged)
    fresh = next(e for e in events if e["type"] == "aged" and e["priority"] < 1000 and e["workload"] != DEV)
    assert "a fresh arrival waits at the bottom of its class" in fresh["detail"]


@pytest.mark.slow  # two more demo processes; the JSON demo stays in the inner loop
def test_demo_text_prints_the_three_runs_and_predict_only_keeps_the_model_demo() -> None:
    text = run("demo")
    assert text.returncode == 0, text.stderr
    flat = " ".join(text.stdout.split())
    for words in (
        "no aging",
        "boost (bounded)",
        "rank + burst",
        "dev attempts",
        BURST_CONTEXT,
        "cloud start-up 600 s + margin 300 s = 900 s",
        "Seed: kept on-prem",
        "What each run cost",
        "longer than the no aging run",
        "CPU-hours",
    ):
        assert words in flat
    for change in demo_config.BURST_CHANGES:
        assert change.key in flat
    proc = run("demo", "--predict-only", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    final = json.loads(proc.stdout)["final"]
    assert final["preempted"] == ["team-b/team-b-dev-job"]
    assert final["admitted"] == ["team-a/team-a-prod-job"]

"""``sky-kueue predict`` as a user runs it: JSON contract, text verdicts, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SEED = ORACLE / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_json_output_is_the_oracle_format() -> None:
    proc = run("predict", "--snapshot", str(SEED), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    expected = json.loads((ORACLE / "seeds" / "expected" / "a-gpu-borrow-preempt.json").read_text())
    assert got["cycles"] == expected["cycles"]
    assert got["final"] == expected["final"]


def test_text_output_names_the_victim_and_the_reason() -> None:
    proc = run("predict", "--snapshot", str(SEED))
    assert proc.returncode == 0, proc.stderr
    flat = " ".join(proc.stdout.split())
    assert "admitted-after-preemption" in flat
    assert "team-b/team-b-dev-job" in flat


def test_what_if_addition_is_predicted(tmp_path: Path) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text(
        """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: what-if, namespace: team-b, uid: what-if, creationTimestamp: "2026-01-01T11:00:00Z"}
spec:
  queueName: team-b-lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "2"}}}]}}
"""
    )
    proc = run("predict", "--snapshot", str(SEED), "--add", str(extra), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert "team-b/what-if" in got["cycles"][0]["pending"] or any(
        "team-b/what-if" in c["admitted"] for c in got["cycles"]
    )


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such file"),
        ("a: [unclosed", "invalid YAML at line"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", "unknown kind 'Deployment'"),
        (
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: a}\n"
            "spec: {preemption: {reclaimWithinCohort: Never, borrowWithinCohort: {policy: LowerPriority}}}\n",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never",
        ),
        (
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: t}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\n"
            "metadata: {name: w, namespace: t, creationTimestamp: '2026-01-01T10:00:00Z'}\n"
            "spec: {queueName: missing, podSets: [{name: main, count: 1, template: {spec: {containers: []}}}]}\n",
            "LocalQueue t/missing not found",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(tmp_path: Path, content: str | None, expected: str) -> None:
    path = tmp_path / "snapshot.yaml"
    if content is not None:
        path.write_text(content)
    proc = run("predict", "--snapshot", str(path))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert expected in lines[0]


def test_demo_runs_with_no_cluster() -> None:
    """The README's first command: the sandbox, the seed setup, SkyPilot-like jobs, the controller."""
    proc = run("demo", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    document = json.loads(proc.stdout)
    assert set(document) == {"events", "final"}
    events, final = document["events"], document["final"]
    assert all(
        set(e) == {"t", "type", "workload", "job", "priority", "detail"}
        and e["type"] in ("submitted", "admitted", "preempted", "resubmitted", "aged", "burst", "finished")
        for e in events
    )
    dev = "team-b/dev-1-fcd1e5cf"
    # team-b admitted, preempted by team-a, resubmitted with an aged priority, admitted when capacity frees.
    dev_story = [(e["type"], e["priority"]) for e in events if e["workload"] == dev]
    assert dev_story == [
        ("submitted", 100),
        ("admitted", 100),
        ("preempted", 100),
        ("resubmitted", 100),
        ("aged", 200),
        ("admitted", 200),
        ("finished", 200),
    ]
    preempted = next(e for e in events if e["type"] == "preempted")
    assert "team-a/train-2-fcd1e5cf" in preempted["detail"] and "InCohortReclaimWhileBorrowing" in preempted["detail"]
    times = [e["t"] for e in events]
    assert times == sorted(times)
    assert final["preempted"] == [dev]
    assert final["admitted"] == [dev, "team-a/train-2-fcd1e5cf"]
    # The starvation variant: repeated preemption starves team-b without aging, not with it.
    starvation = final["starvation"]
    without, with_aging = starvation["without_aging"]["team_b"], starvation["with_aging"]["team_b"]
    assert without["starved"] and without["preemptions"] >= 3 and without["burst"]
    assert not with_aging["starved"] and with_aging["preemptions"] == 1
    assert starvation["with_aging"]["team_a_finished"] == starvation["with_aging"]["team_a_jobs"]
    # rank keeps team-b in its class: prod's borrowing still preempts it (threshold 100), and the
    # controller marks it for a burst instead; no priority write ever left the dev class.
    with_rank = starvation["with_rank"]
    assert with_rank["policy"] == "rank"
    assert with_rank["team_b"]["preemptions"] >= 3 and with_rank["team_b"]["burst"]
    assert all(e["priority"] <= 100 for e in with_rank["events"] if e["job"] == "managed-job/1")
    assert "under rank, the default" in starvation["verdict"]
    assert final["elapsed_seconds"] < 30


@pytest.mark.slow  # two more demo processes; the JSON demo stays in the inner loop
def test_demo_text_is_a_timeline_and_predict_only_keeps_the_model_demo() -> None:
    text = run("demo")
    assert text.returncode == 0, text.stderr
    for word in ("preempted", "resubmitted", "aged", "Starvation", "never (starved)"):
        assert word in text.stdout
    proc = run("demo", "--predict-only", "--output", "json")
    assert proc.returncode == 0, proc.stderr
    final = json.loads(proc.stdout)["final"]
    assert final["preempted"] == ["team-b/team-b-dev-job"]
    assert final["admitted"] == ["team-a/team-a-prod-job"]

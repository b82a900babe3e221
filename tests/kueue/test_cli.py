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


WHAT_IF_WITHOUT_TIME = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: Workload
metadata: {name: what-if, namespace: team-b}
spec:
  queueName: team-b-lq
  podSets:
  - name: main
    count: 1
    template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
"""


def test_a_what_if_workload_without_creation_time_is_submitted_now(tmp_path: Path) -> None:
    extra = tmp_path / "job.yaml"
    extra.write_text(WHAT_IF_WITHOUT_TIME)
    proc = run("predict", "--snapshot", str(SEED), "--add", str(extra), "--output", "json")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == (
        f"note: {extra}: Workload team-b/what-if has no metadata.creationTimestamp; taken as submitted now "
        "(2026-01-01T12:00:00+00:00), after every Workload of the cluster\n"
    )
    got = json.loads(proc.stdout)
    assert "team-b/what-if" in got["final"]["pending"] + got["final"]["admitted"]


def test_an_error_in_a_what_if_file_names_that_file(tmp_path: Path) -> None:
    extra = tmp_path / "job.yaml"
    extra.write_text(WHAT_IF_WITHOUT_TIME.replace("count: 1", "count: many") + "---\n" + WHAT_IF_WITHOUT_TIME)
    proc = run("predict", "--snapshot", str(SEED), "--add", str(extra))
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {extra}: Workload team-b/what-if: spec.podSets[0]")
    assert str(SEED) not in proc.stderr and proc.stderr.count("\n") == 1

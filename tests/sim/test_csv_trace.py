"""CSV traces: what a valid file becomes, and one clear line for every kind of bad row."""

from __future__ import annotations

from pathlib import Path

import pytest

from sky_kueue.sim import csv_trace
from sky_kueue.sim.traces import TraceError

HEADER = "submit_time,duration,gpus,cpus,memory,priority_class,team\n"


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_valid_trace_with_quantities_durations_and_timestamps(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "job_id,submit_time,duration,gpus,cpus,memory,priority_class,team,failed\n"
        "j1,2025-03-01T09:00:30Z,1h30m,2,500m,64Gi,high,vision,false\n"
        "j0,2025-03-01T09:00:00Z,90,0,4,8Gi,low,nlp,true\n",
    )
    trace = csv_trace.load(path)
    assert [j.job_id for j in trace.jobs] == ["j0", "j1"]
    j0, j1 = trace.jobs
    assert (j0.submit_s, j1.submit_s) == (0.0, 30.0)
    assert j1.duration_s == 5400.0
    assert (j1.gpus, j1.cpu_milli, j1.memory_bytes) == (2, 500, 64 * 2**30)
    assert (j0.cpu_milli, j0.fails, j1.fails) == (4000, True, False)
    assert set(trace.cluster.queues) == {"nlp", "vision"}
    assert trace.cluster.gpu_capacity >= 2


def test_defaults_for_optional_columns(tmp_path: Path) -> None:
    trace = csv_trace.load(write(tmp_path, "submit_time,duration,gpus,priority_class,team\n5,60,1,medium,a\n"))
    job = trace.jobs[0]
    assert job.job_id == "row-2"
    assert job.cpu_milli == 8000 and job.memory_bytes == 64 * 2**30


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ("x,60,1,1,1Gi,low,a\n", "trace.csv:2: column 'submit_time': expected seconds or an RFC 3339 timestamp"),
        ("0,-5,1,1,1Gi,low,a\n", "trace.csv:2: column 'duration': expected a positive number of seconds"),
        ("0,1y,1,1,1Gi,low,a\n", "trace.csv:2: column 'duration'"),
        ("0,60,1.5,1,1Gi,low,a\n", "trace.csv:2: column 'gpus': expected a whole number of GPUs >= 0, got '1.5'"),
        (
            "0,60,1,lots,1Gi,low,a\n",
            "trace.csv:2: column 'cpus': expected cores (8, 0.5) or a quantity (500m), got 'lots'",
        ),
        ("0,60,1,1,1Qi,low,a\n", "trace.csv:2: column 'memory'"),
        (
            "0,60,1,1,1Gi,urgent,a\n",
            "trace.csv:2: column 'priority_class': expected one of high, low, medium, got 'urgent'",
        ),
        ("0,60,1,1,1Gi,low,\n", "trace.csv:2: column 'team': expected a team name"),
        ("0,60,0,0,0,low,a\n", "trace.csv:2: column 'gpus': expected a job that requests something"),
        (
            "0,60,1,1,1Gi,low,a\n2025-03-01T00:00:00Z,60,1,1,1Gi,low,a\n",
            "trace.csv:3: column 'submit_time': expected the same form",
        ),
        ("0,60,1,1,1Gi,low,a,extra\n", "trace.csv:2: 8 values but the header has 7 columns"),
    ],
)
def test_bad_rows_name_file_line_and_column(tmp_path: Path, rows: str, message: str) -> None:
    with pytest.raises(TraceError) as err:
        csv_trace.load(write(tmp_path, HEADER + rows))
    text = str(err.value)
    assert message in text
    assert "\n" not in text


def test_duplicate_job_ids_point_at_the_first(tmp_path: Path) -> None:
    path = write(tmp_path, "job_id,submit_time,duration,gpus,priority_class,team\nx,0,1,1,low,a\nx,1,1,1,low,a\n")
    with pytest.raises(TraceError, match=r"trace.csv:3: column 'job_id': expected a unique id \(line 2 has the same\)"):
        csv_trace.load(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("submit_time,gpus,team\n0,1,a\n", "header: missing column(s) 'duration', 'priority_class'"),
        (HEADER, "no jobs after the header"),
    ],
)
def test_bad_files(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message.replace("(", r"\(").replace(")", r"\)")):
        csv_trace.load(write(tmp_path, text))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="no such file"):
        csv_trace.load(tmp_path / "nope.csv")


def test_cluster_yaml_maps_teams_to_local_queues(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(
        """
apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ResourceFlavor
metadata: {name: h100}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: WorkloadPriorityClass
metadata: {name: prod}
value: 1000
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata: {name: ml-cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h100
      resources:
      - {name: cpu, nominalQuota: 64}
      - {name: memory, nominalQuota: 1Ti}
      - {name: nvidia.com/gpu, nominalQuota: 8}
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: LocalQueue
metadata: {name: ml-lq, namespace: ml}
spec: {clusterQueue: ml-cq}
""",
        encoding="utf-8",
    )
    path = write(tmp_path, "submit_time,duration,gpus,priority_class,team\n0,60,1,prod,ml\n")
    trace = csv_trace.load(path, cluster_yaml=cluster)
    assert trace.cluster.queues["ml"].cluster_queue == "ml-cq"
    assert trace.cluster.gpu_capacity == 8
    bad = write(tmp_path, "submit_time,duration,gpus,priority_class,team\n0,60,1,prod,other\n", "bad.csv")
    with pytest.raises(TraceError, match="team 'other': no LocalQueue in namespace 'other'"):
        csv_trace.load(bad, cluster_yaml=cluster)

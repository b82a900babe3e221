"""``sky-kueue predict --kubeconfig``, ``snapshot`` and ``queue`` against the sandbox, as users run them."""

from __future__ import annotations

import dataclasses
import json
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from sky_kueue.cli.main import cli
from sky_kueue.cli.queue_cmd import watch_loop
from sky_kueue.mirror import Mirror, view
from sky_kueue.mirror.kubeconfig import why_none
from sky_kueue.mirror.view import QueueView
from sky_kueue.sandbox.apiserver import ApiServer, FaultKind, ManualClock, ObjectStore
from sky_kueue.sandbox.apiserver.resources import ResourceRegistry, default_resources
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS

#: The seed's objects are created at their own timestamps on a manual clock.
SEED_CLOCK_START = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc)


def _registry(served: str) -> ResourceRegistry | None:
    if served == "v1beta2":
        return None
    return ResourceRegistry(
        dataclasses.replace(r, versions=("v1beta1",)) if r.group == "kueue.x-k8s.io" else r for r in default_resources()
    )


@pytest.fixture(params=["v1beta2", "v1beta1"])
def seeded(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[ApiServer, Path]]:
    """The seed scenario ``a-gpu-borrow-preempt`` applied to a sandbox serving one Kueue version."""
    clock = ManualClock(SEED_CLOCK_START)
    registry = _registry(request.param)
    store = ObjectStore(registry, clock=clock) if registry else ObjectStore(clock=clock)
    with ApiServer(store=store) as server:
        builders.apply_documents(server.store, builders.load_yaml(builders.SEED_SCENARIO), clock)
        yield server, server.write_kubeconfig(tmp_path / "kubeconfig")


def run(*args: str) -> Result:
    return CliRunner(mix_stderr=False).invoke(cli, list(args))


def _oracle() -> dict[str, Any]:
    return json.loads(builders.SEED_EXPECTED.read_text())


def test_predict_on_the_live_seed_gives_the_oracle_verdict(seeded: tuple[ApiServer, Path]) -> None:
    _, kubeconfig = seeded

    result = run("predict", "--kubeconfig", str(kubeconfig), "--output", "json")

    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    expected = _oracle()
    assert got["cycles"] == expected["cycles"]
    assert got["final"] == expected["final"]


def test_snapshot_round_trips_through_predict(seeded: tuple[ApiServer, Path], tmp_path: Path) -> None:
    _, kubeconfig = seeded
    out = tmp_path / "snap.yaml"

    written = run("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(out), "--kueue-config", "classical")
    predicted = run("predict", "--snapshot", str(out), "--output", "json")

    assert written.exit_code == 0, written.stderr
    assert "2 workloads" in written.stderr
    header = out.read_text().splitlines()[:4]
    assert header[0] == "# sky-kueue snapshot" and any(line.startswith("# taken at: ") for line in header)
    assert predicted.exit_code == 0, predicted.stderr
    assert json.loads(predicted.stdout)["final"] == _oracle()["final"]


def test_snapshot_records_the_scheduling_mode(seeded: tuple[ApiServer, Path], tmp_path: Path) -> None:
    _, kubeconfig = seeded
    out = tmp_path / "snap.yaml"

    result = run("snapshot", "--kubeconfig", str(kubeconfig), "-o", str(out), "--kueue-config", "fairSharing")

    assert result.exit_code == 0, result.stderr
    assert out.read_text().startswith("# kueue-config: fairSharing\n")
    docs = [d for d in yaml.safe_load_all(out.read_text()) if d]
    assert {d["kind"] for d in docs} >= {"Namespace", "ClusterQueue", "LocalQueue", "Workload", "ResourceFlavor"}


def test_predict_adds_a_skypilot_task_as_its_pod_group_workload(seeded: tuple[ApiServer, Path], tmp_path: Path) -> None:
    _, kubeconfig = seeded
    task = tmp_path / "task.yaml"
    task.write_text(
        yaml.safe_dump(
            {
                "name": "dev-notebook",
                "num_nodes": 2,
                "resources": {"infra": "k8s", "cpus": 1, "memory": 2},
                "config": {
                    "kubernetes": {
                        "namespace": "team-b",
                        "kueue": {"local_queue_name": "team-b-lq"},
                        "pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "dev-priority"}}},
                    }
                },
            }
        )
    )

    result = run("predict", "--kubeconfig", str(kubeconfig), "--task", str(task), "--output", "json")

    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert "team-b/dev-notebook-what-if" in got["final"]["admitted"]  # 2 pods x 1 CPU fit what team-b may borrow
    admitted = next(c["admitted"] for c in got["cycles"] if "team-b/dev-notebook-what-if" in c["admitted"])
    (pod_set,) = admitted["team-b/dev-notebook-what-if"]["podSets"]
    assert len(pod_set) == 8  # one pod set, named by the role hash


def test_predict_rejects_a_task_with_an_unknown_priority_class(seeded: tuple[ApiServer, Path], tmp_path: Path) -> None:
    _, kubeconfig = seeded
    task = tmp_path / "task.yaml"
    task.write_text(
        "resources: {infra: k8s, cpus: 1}\nconfig:\n  kubernetes:\n    pod_config:\n"
        "      metadata: {labels: {kueue.x-k8s.io/priority-class: platinum}}\n"
    )

    result = run("predict", "--kubeconfig", str(kubeconfig), "--task", str(task), "--task-queue", "team-a/team-a-lq")

    assert result.exit_code == 2
    assert "WorkloadPriorityClass 'platinum' does not exist" in result.stderr


def test_queue_json_shows_quota_positions_predictions_and_reasons(seeded: tuple[ApiServer, Path]) -> None:
    server, kubeconfig = seeded
    server.store.create("pods", builders.skypilot_pod("team-b-dev-job", "team-b", job_id="12", job_name="dev"))

    result = run("queue", "--kubeconfig", str(kubeconfig), "--output", "json")

    assert result.exit_code == 0, result.stderr
    got = json.loads(result.stdout)
    assert got["positionsFrom"] == "model"
    queues = {cq["name"]: cq for cq in got["clusterQueues"]}
    team_b = queues["team-b-cq"]
    cpu = next(r for r in team_b["resources"] if r["resource"] == "cpu")
    assert (cpu["nominal"], cpu["usage"], cpu["borrowed"]) == ("0", "5", "5")
    lent = next(r for r in queues["shared-cq"]["resources"] if r["resource"] == "cpu")
    assert lent["lent"] == "5"
    (running,) = team_b["admitted"]
    assert running["workload"] == "team-b/team-b-dev-job"
    assert running["predicted"].startswith("preempted by team-a/team-a-prod-job")
    assert running["skypilot"]["managedJobId"] == "12"
    (waiting,) = queues["team-a-cq"]["pending"]
    assert (waiting["workload"], waiting["position"], waiting["priority"]) == ("team-a/team-a-prod-job", 0, 1000)
    assert waiting["predicted"].startswith("admitted after preempting team-b/team-b-dev-job")


def test_queue_filters_by_cluster_queue_and_namespace(seeded: tuple[ApiServer, Path]) -> None:
    _, kubeconfig = seeded

    by_cq = json.loads(
        run("queue", "--kubeconfig", str(kubeconfig), "-o", "json", "--cluster-queue", "team-b-cq").stdout
    )
    by_ns = json.loads(run("queue", "--kubeconfig", str(kubeconfig), "-o", "json", "--namespace", "team-a").stdout)

    assert [cq["name"] for cq in by_cq["clusterQueues"]] == ["team-b-cq"]
    assert [cq["name"] for cq in by_ns["clusterQueues"]] == ["team-a-cq"]


def test_queue_text_is_a_table_per_cluster_queue(seeded: tuple[ApiServer, Path]) -> None:
    _, kubeconfig = seeded

    result = run("queue", "--kubeconfig", str(kubeconfig), "--no-predict")

    assert result.exit_code == 0, result.stderr
    assert "ClusterQueue team-a-cq" in result.stdout
    lines = [line.split() for line in result.stdout.splitlines()]
    assert next(line[:3] for line in lines if line and line[0] == "team-a/team-a-prod-job") == [
        "team-a/team-a-prod-job",
        "pending",
        "1000",
    ]
    assert "PREDICTED" not in result.stdout


def test_queue_watch_prints_the_view_from_the_mirror(seeded: tuple[ApiServer, Path]) -> None:
    _, kubeconfig = seeded

    result = run("queue", "--kubeconfig", str(kubeconfig), "--watch", "-o", "json", "--max-redraws", "1")

    assert result.exit_code == 0, result.stderr
    (line,) = result.stdout.splitlines()
    assert {cq["name"] for cq in json.loads(line)["clusterQueues"]} == {"shared-cq", "team-a-cq", "team-b-cq"}


def _read_until(fd: int, marker: str, count: int) -> str:
    """What the pipe ``fd`` gives until ``marker`` has appeared ``count`` times, within WAIT_SECONDS."""
    selector = selectors.DefaultSelector()
    selector.register(fd, selectors.EVENT_READ)
    deadline = time.monotonic() + WAIT_SECONDS
    seen = b""
    while seen.decode().count(marker) < count:
        left = deadline - time.monotonic()
        if left <= 0 or not selector.select(left):
            raise AssertionError(f"{marker!r} not seen {count} time(s) within {WAIT_SECONDS}s; got {seen!r}")
        chunk = os.read(fd, 65536)
        if not chunk:
            raise AssertionError(f"the command ended; got {seen!r}")
        seen += chunk
    return seen.decode()


def test_queue_watch_into_a_pipe_prints_a_snapshot_per_redraw(seeded: tuple[ApiServer, Path]) -> None:
    server, kubeconfig = seeded
    command = [sys.executable, "-m", "sky_kueue.cli.main", "queue", "--kubeconfig", str(kubeconfig), "--watch"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL) as proc:
        try:
            assert proc.stdout is not None
            first = _read_until(proc.stdout.fileno(), "ClusterQueue team-b-cq", 1)
            server.store.create("workloads", builders.workload("late", "team-a", queue="team-a-lq"))
            second = _read_until(proc.stdout.fileno(), "team-a/late", 1)
        finally:
            proc.terminate()
    assert first.startswith("ClusterQueue shared-cq") and "team-a/late" not in first
    assert second.startswith("---\n") and "ClusterQueue team-a-cq" in second


def test_watch_loop_redraws_when_the_cluster_changes_without_polling(seeded: tuple[ApiServer, Path]) -> None:
    server, kubeconfig = seeded
    views: list[QueueView] = []
    drawn = threading.Semaphore(0)

    def show(result: QueueView) -> None:
        views.append(result)
        drawn.release()

    with Mirror.connect(kubeconfig, retries=False) as mirror:
        mirror.wait_synced(WAIT_SECONDS)

        def build() -> QueueView:
            return view.build_view(mirror.documents(), now=mirror.clock.now(), predict=False)

        loop = threading.Thread(target=watch_loop, args=(mirror.store, build, show), kwargs={"max_redraws": 2})
        loop.start()
        assert drawn.acquire(timeout=WAIT_SECONDS)
        server.requests.clear()
        server.store.create("workloads", builders.workload("late", "team-a", queue="team-a-lq"))
        assert drawn.acquire(timeout=WAIT_SECONDS)
        loop.join(WAIT_SECONDS)

    pending = {w["workload"] for cq in views[1].to_json()["clusterQueues"] for w in cq["pending"]}
    assert "team-a/late" in pending
    assert not server.requests.matching(verb="list")  # redrawn from the watch stream


# --- bad input: one line, non-zero exit ----------------------------------------------------------


def _one_line(result: Result) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


COMMANDS = [["queue"], ["queue", "--watch"], ["snapshot", "-o", "-"], ["predict"]]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_a_kubeconfig_variable_naming_a_missing_file_is_named(
    command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nonexistent"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)

    result = run(*command)

    assert result.exit_code == 2
    assert f"($KUBECONFIG names {missing}, which does not exist)" in _one_line(result)


def test_why_no_kubeconfig_was_found() -> None:
    def exists(path: str) -> bool:
        return path == "/here"

    assert why_none({"KUBECONFIG": "/a:/here:/b"}, exists) == "$KUBECONFIG names /a, /b, none of which exists"
    assert why_none({}, exists, expand=lambda p: p) == "no $KUBECONFIG and no ~/.kube/config"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_unreachable_server(command: list[str], tmp_path: Path) -> None:
    with ApiServer() as gone:
        kubeconfig = gone.write_kubeconfig(tmp_path / "kubeconfig")
        url = gone.url

    result = run(*command, "--kubeconfig", str(kubeconfig))

    assert result.exit_code == 1
    assert _one_line(result) == f"error: cannot reach the Kubernetes API server at {url}: connection refused"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_kueue_not_installed(command: list[str], tmp_path: Path) -> None:
    without_kueue = ResourceRegistry(r for r in default_resources() if r.group != "kueue.x-k8s.io")
    with ApiServer(store=ObjectStore(without_kueue)) as server:
        result = run(*command, "--kubeconfig", str(server.write_kubeconfig(tmp_path / "kubeconfig")))

    assert result.exit_code == 1
    assert "Kueue is not installed" in _one_line(result)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_forbidden_by_rbac(command: list[str], server: ApiServer, kubeconfig: Path) -> None:
    server.inject(FaultKind.STATUS, verb="list", resource="workloads", status_code=403, times=100)

    result = run(*command, "--kubeconfig", str(kubeconfig))

    assert result.exit_code == 1
    line = _one_line(result)
    assert line.startswith("error: forbidden: cannot list workloads.kueue.x-k8s.io/v1beta2 on http://127.0.0.1")


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: "-".join(c[:2]))
def test_unknown_context(command: list[str], kubeconfig: Path) -> None:
    result = run(*command, "--kubeconfig", str(kubeconfig), "--context", "prod")

    assert result.exit_code == 2
    assert _one_line(result) == (
        f"error: context 'prod' not found in kubeconfig {kubeconfig} (available: sky-kueue-sandbox)"
    )


def test_missing_kubeconfig(tmp_path: Path) -> None:
    result = run("queue", "--kubeconfig", str(tmp_path / "nope"))

    assert result.exit_code == 2
    assert _one_line(result) == f"error: kubeconfig {tmp_path / 'nope'}: no such file"


def test_in_a_pod_a_kubeconfig_list_of_missing_files_means_the_pods_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As kubectl: missing $KUBECONFIG files are ignored, and inside a pod the service account
    # is used (the one rule the admin policy's discovery follows too). There is no token file
    # here, so the in-cluster attempt itself is what fails, not a "no such file".
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    result = run("queue")

    assert result.exit_code == 2
    assert _one_line(result).startswith("error: in-cluster configuration:")


def test_predict_from_a_snapshot_does_not_import_the_kubernetes_client() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from sky_kueue.cli.main import cli\n"
        f"r = CliRunner().invoke(cli, ['predict', '--snapshot', {str(builders.SEED_SCENARIO)!r}, '-o', 'json'])\n"
        "assert r.exit_code == 0, r.output\n"
        "print('kubernetes' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"

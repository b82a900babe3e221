"""kubectl smoke tests: a second, independent client against the server.

kubectl must be installed (``/usr/bin/kubectl`` on these machines; ``.ci/run`` installs Debian's
``kubernetes-client`` otherwise). A missing kubectl fails these tests; it never skips them.
"""

from __future__ import annotations

import json
import pathlib
import queue
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator

import pytest

from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from tests.sandbox import builders

KUBECTL_TIMEOUT_SECONDS = 20
WATCH_OUTPUT_TIMEOUT_SECONDS = 10.0

SEED_MANIFEST = """\
apiVersion: v1
kind: Namespace
metadata:
  name: team-a
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata:
  name: default-flavor
---
apiVersion: kueue.x-k8s.io/v1beta1
kind: ClusterQueue
metadata:
  name: team-a-cq
spec:
  cohort: team-ab
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: ["cpu"]
    flavors:
    - name: default-flavor
      resources:
      - name: cpu
        nominalQuota: 6
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata:
  name: team-a-lq
  namespace: team-a
spec:
  clusterQueue: team-a-cq
"""

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def _kubectl_binary() -> str:
    found = shutil.which("kubectl") or ("/usr/bin/kubectl" if pathlib.Path("/usr/bin/kubectl").exists() else None)
    if found is None:
        pytest.fail("kubectl is not installed: install it (Debian: kubernetes-client) to run the kubectl smoke tests")
    return found


@pytest.fixture
def kubectl_command(server: ApiServer, tmp_path: pathlib.Path) -> list[str]:
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    return [_kubectl_binary(), "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache")]


@pytest.fixture
def kubectl(kubectl_command: list[str]) -> Kubectl:
    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*kubectl_command, *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
        return result

    return run


@pytest.fixture
def background_kubectl(
    kubectl_command: list[str],
) -> Iterator[Callable[..., tuple[subprocess.Popen[str], queue.Queue[str]]]]:
    """Starts kubectl in the background; its output lines arrive on a queue."""
    processes: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
        process = subprocess.Popen(
            [*kubectl_command, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        processes.append(process)
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.put(line.rstrip("\n"))

        threading.Thread(target=pump, daemon=True).start()
        return process, lines

    yield start
    for process in processes:
        if process.poll() is None:
            process.terminate()
        process.wait(timeout=KUBECTL_TIMEOUT_SECONDS)


def _line_containing(lines: queue.Queue[str], text: str) -> str:
    while True:
        line = lines.get(timeout=WATCH_OUTPUT_TIMEOUT_SECONDS)
        if text in line:
            return line


def test_create_from_a_manifest_without_validation(store: ObjectStore, kubectl: Kubectl) -> None:
    result = kubectl("create", "-f", "-", stdin=SEED_MANIFEST)

    assert "clusterqueue.kueue.x-k8s.io/team-a-cq created" in result.stdout
    assert store.get("clusterqueues", "team-a-cq")["spec"]["cohortName"] == "team-ab"
    assert store.get("localqueues", "team-a-lq", "team-a")["spec"]["clusterQueue"] == "team-a-cq"


def test_get_clusterqueues_prints_kueue_columns(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=SEED_MANIFEST)

    result = kubectl("get", "clusterqueues")

    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "COHORT", "PENDING", "WORKLOADS"]
    assert row.split() == ["team-a-cq", "team-ab"]


def test_get_workloads_across_namespaces(store: ObjectStore, kubectl: Kubectl) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("workloads", builders.workload("wl-a", "team-a", queue="team-a-lq"))
    store.create("workloads", builders.workload("wl-d", "default", queue="default-lq"))

    result = kubectl("get", "workloads", "-A")

    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    assert result.stdout.splitlines()[0].split()[:3] == ["NAMESPACE", "NAME", "QUEUE"]
    assert [row[:3] for row in rows] == [["default", "wl-d", "default-lq"], ["team-a", "wl-a", "team-a-lq"]]


def test_get_watch_prints_changes(
    server: ApiServer,
    store: ObjectStore,
    background_kubectl: Callable[..., tuple[subprocess.Popen[str], queue.Queue[str]]],
) -> None:
    store.create("workloads", builders.workload("wl", queue="first-lq"))
    process, lines = background_kubectl("get", "workloads", "-w", "--request-timeout=15s")

    assert "first-lq" in _line_containing(lines, "wl ")
    assert server.wait_for_watches(1, WATCH_OUTPUT_TIMEOUT_SECONDS)
    store.patch("workloads", "wl", {"spec": {"queueName": "second-lq"}}, "default")

    assert "second-lq" in _line_containing(lines, "wl ")
    assert process.poll() is None


def test_wait_for_jsonpath_returns_once_the_condition_holds(
    server: ApiServer,
    store: ObjectStore,
    background_kubectl: Callable[..., tuple[subprocess.Popen[str], queue.Queue[str]]],
) -> None:
    store.create("workloads", builders.workload("wl"))
    process, lines = background_kubectl(
        "wait",
        '--for=jsonpath={.status.conditions[?(@.type=="Admitted")].status}=True',
        "workload/wl",
        "--timeout=15s",
    )

    assert server.wait_for_watches(1, WATCH_OUTPUT_TIMEOUT_SECONDS)
    store.patch(
        "workloads",
        "wl",
        {"status": {"conditions": [builders.admitted_condition()]}},
        "default",
        subresource="status",
    )

    assert "condition met" in _line_containing(lines, "wl")
    assert process.wait(timeout=KUBECTL_TIMEOUT_SECONDS) == 0


def test_patch_the_status_subresource(store: ObjectStore, kubectl: Kubectl) -> None:
    store.create("workloads", builders.workload("wl"))
    patch = {"status": {"conditions": [builders.admitted_condition()]}, "spec": {"priority": 9}}

    kubectl("patch", "workload", "wl", "--subresource=status", "--type=merge", "-p", json.dumps(patch))

    stored = store.get("workloads", "wl", "default")
    assert stored["status"]["conditions"][0]["type"] == "Admitted"
    assert "priority" not in stored["spec"]


def test_get_by_short_name_and_legacy_version(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", stdin=SEED_MANIFEST)

    short = kubectl("get", "cq", "team-a-cq", "-o", "jsonpath={.spec.cohortName}")
    legacy = kubectl("get", "clusterqueues.v1beta1.kueue.x-k8s.io", "team-a-cq", "-o", "jsonpath={.spec.cohort}")

    assert short.stdout == "team-ab"
    assert legacy.stdout == "team-ab"

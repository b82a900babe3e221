"""What SkyPilot's Kubernetes provisioner needs from a cluster, served by the sandbox: Nodes
with the seed setup's capacity, RBAC, RuntimeClasses, workload and storage kinds; and a clock
that starts now (a controller reads Workload ages off the server's timestamps)."""

from __future__ import annotations

import datetime
import pathlib
import subprocess
import sys

from click.testing import CliRunner
from kubernetes import client

from sky_kueue.cli.main import cli
from sky_kueue.sandbox import seed
from sky_kueue.sandbox.apiserver.clock import parse_timestamp
from sky_kueue.sandbox.sandbox import Sandbox

KUBECTL_TIMEOUT_SECONDS = 20
#: How far a fresh object's creationTimestamp may lag the test's own clock.
CLOCK_SLACK_SECONDS = 60


def test_seed_nodes_hold_the_seed_quota_with_gpus_labelled_for_skypilot() -> None:
    with Sandbox(run_emulator=False) as box:
        box.apply(seed.seed_cluster())
        core = client.CoreV1Api(box.api_client())
        nodes = {n.metadata.name: n for n in core.list_node().items}

    assert set(nodes) == {"sandbox-gpu-0", "sandbox-cpu-0"}
    gpu = nodes["sandbox-gpu-0"]
    assert gpu.status.allocatable["nvidia.com/gpu"] == "2"
    assert gpu.metadata.labels["skypilot.co/accelerator"] == "a100"
    assert "nvidia.com/gpu" not in nodes["sandbox-cpu-0"].status.allocatable
    assert sum(int(n.status.allocatable["cpu"]) for n in nodes.values()) >= 10  # shared-cq's nominal CPU
    assert all(c.type == "Ready" and c.status == "True" for n in nodes.values() for c in n.status.conditions)


def test_rbac_runtime_class_and_workload_kinds_are_served() -> None:
    with Sandbox(run_emulator=False) as box:
        api = box.api_client()
        rbac = client.RbacAuthorizationV1Api(api)
        rbac.create_namespaced_role(
            "default",
            {
                "metadata": {"name": "skypilot-role"},
                "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
            },
        )
        rbac.create_cluster_role({"metadata": {"name": "skypilot-cluster-role"}, "rules": []})
        client.NodeV1Api(api).create_runtime_class({"metadata": {"name": "nvidia"}, "handler": "nvidia"})
        client.AppsV1Api(api).list_namespaced_daemon_set("default")
        client.StorageV1Api(api).list_storage_class()

        roles = [r.metadata.name for r in rbac.list_namespaced_role("default").items]
        cluster_roles = [r.metadata.name for r in rbac.list_cluster_role().items]
        runtime_classes = [r.metadata.name for r in client.NodeV1Api(api).list_runtime_class().items]
        kubectl = subprocess.run(
            ["kubectl", "--kubeconfig", str(box.kubeconfig_path), "get", "roles,runtimeclasses", "-A", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )

    assert roles == ["skypilot-role"]
    assert cluster_roles == ["skypilot-cluster-role"]
    assert runtime_classes == ["nvidia"]
    assert kubectl.returncode == 0, kubectl.stderr
    assert sorted(kubectl.stdout.split()) == [
        "role.rbac.authorization.k8s.io/skypilot-role",
        "runtimeclass.node.k8s.io/nvidia",
    ]


def test_the_clock_starts_now_unless_a_start_is_given() -> None:
    fixed = datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc)
    stamps = []
    for start in (None, fixed):
        with Sandbox(run_emulator=False, start=start) as box:
            created = client.CoreV1Api(box.api_client()).create_namespace({"metadata": {"name": "t"}})
            stamps.append(created.metadata.creation_timestamp)

    lag = datetime.datetime.now(datetime.timezone.utc) - stamps[0]
    assert datetime.timedelta(0) <= lag < datetime.timedelta(seconds=CLOCK_SLACK_SECONDS)
    assert datetime.timedelta(0) <= stamps[1] - fixed < datetime.timedelta(seconds=CLOCK_SLACK_SECONDS)


def test_up_rejects_a_start_time_it_cannot_read_in_one_line() -> None:
    for value, says in (("yesterday", "is not an RFC 3339 time"), ("2026-01-01T12:00:00", "has no time zone")):
        result = CliRunner().invoke(cli, ["sandbox", "up", "--start-time", value])
        assert result.exit_code == 2, result.output
        assert says in result.output and "Traceback" not in result.output


def test_up_starts_at_the_given_time(tmp_path: object) -> None:
    kubeconfig = f"{tmp_path}/kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "sandbox",
            "up",
            "--kubeconfig",
            kubeconfig,
            "--start-time",
            "2026-01-01T12:00:00Z",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("sandbox cluster (Kueue emulation) listening on")
        listed = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                kubeconfig,
                "get",
                "namespace",
                "team-a",
                "-o",
                "jsonpath={.metadata.creationTimestamp}",
            ],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
        nodes = subprocess.run(
            ["kubectl", "--kubeconfig", kubeconfig, "get", "nodes", "-o", "name"],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
    finally:
        process.terminate()
        process.communicate(timeout=KUBECTL_TIMEOUT_SECONDS)
    assert listed.returncode == 0, listed.stderr
    created = parse_timestamp(listed.stdout)
    assert datetime.timedelta(0) <= created - datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc)
    assert created.year == 2026 and created.month == 1 and created.day == 1
    assert sorted(nodes.stdout.split()) == ["node/sandbox-cpu-0", "node/sandbox-gpu-0"]


def test_kubectl_applies_the_shipped_manifests_with_validation_on() -> None:
    """kubectl validates by default; it needs the server's OpenAPI v3 to decide how."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    with Sandbox(run_emulator=False) as box:
        # Kueue's own namespace exists on a cluster running Kueue (rbac.yaml has a Role in it).
        client.CoreV1Api(box.api_client()).create_namespace({"metadata": {"name": "kueue-system"}})
        applied = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(box.kubeconfig_path),
                "apply",
                "-f",
                str(repo / "configs" / "kueue" / "seed-setup.yaml"),
                "-f",
                str(repo / "configs" / "controller" / "namespace.yaml"),
                "-f",
                str(repo / "configs" / "controller" / "rbac.yaml"),
                "-f",
                str(repo / "configs" / "controller" / "serviceaccount.yaml"),
            ],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_SECONDS,
            check=False,
        )
        roles = client.RbacAuthorizationV1Api(box.api_client()).list_cluster_role().items
        by_kubectl = [r for r in box.requests.matching(verb="create") if r.query.get("fieldManager")]
        validated = [r.query.get("fieldValidation") for r in by_kubectl]

    assert applied.returncode == 0, applied.stderr
    assert "clusterqueue.kueue.x-k8s.io/team-a-cq created" in applied.stdout
    assert roles, "the controller's ClusterRole was created"
    assert validated and set(validated) == {"Strict"}

"""After Kueue admits a pod, the sandbox binds it to a node that fits and reports it Running,
as kube-scheduler and the kubelet would; pods Kueue does not manage start at once."""

from __future__ import annotations

import datetime
import ipaddress
from typing import Any

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.kueue_emulation import binding
from sky_kueue.sandbox.sandbox import Sandbox
from tests.sandbox.test_kueue_emulation import group_pod


def _node(name: str, cpu: str, gpus: str | None = None, ready: bool = True) -> dict[str, Any]:
    allocatable = {"cpu": cpu, "memory": "8Gi"}
    if gpus:
        allocatable["nvidia.com/gpu"] = gpus
    return {
        "metadata": {"name": name},
        "status": {"allocatable": allocatable, "conditions": [{"type": "Ready", "status": str(ready)}]},
    }


def _pod(cpu: str, gpus: str | None = None, node: str | None = None, phase: str = "Running") -> dict[str, Any]:
    requests = {"cpu": cpu} | ({"nvidia.com/gpu": gpus} if gpus else {})
    spec: dict[str, Any] = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return {"spec": spec, "status": {"phase": phase}}


def test_first_fit_counts_what_is_bound_and_skips_unready_and_finished() -> None:
    nodes = [_node("b-gpu", "8", gpus="2"), _node("a-cpu", "4"), _node("c-down", "64", ready=False)]
    assert binding.choose_node(nodes, [], _pod("2")) == "a-cpu"
    assert binding.choose_node(nodes, [_pod("3", node="a-cpu")], _pod("2")) == "b-gpu"
    assert binding.choose_node(nodes, [_pod("3", node="a-cpu", phase="Succeeded")], _pod("2")) == "a-cpu"
    assert binding.choose_node(nodes, [], _pod("1", gpus="1")) == "b-gpu"
    assert binding.choose_node(nodes, [_pod("1", gpus="2", node="b-gpu")], _pod("1", gpus="1")) is None
    assert binding.choose_node(nodes, [], _pod("9")) is None  # the unready node is never chosen


def test_requests_default_to_limits_and_init_containers_count_as_kubernetes_does() -> None:
    pod = {
        "spec": {
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
            "containers": [
                {"resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}},
                {"resources": {"requests": {"cpu": "500m"}}},
            ],
            "overhead": {"cpu": "100m"},
        }
    }
    requests = binding.pod_requests(pod)
    assert requests["cpu"] == 3 + binding.pod_requests({"spec": {"overhead": {"cpu": "100m"}}})["cpu"]
    assert requests["nvidia.com/gpu"] == 1


def test_an_admitted_gpu_pod_is_bound_running_and_ready_with_a_loopback_ip() -> None:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    with Sandbox(clock=clock, run_emulator=False) as box:
        box.apply(seed.seed_cluster())
        box.apply(group_pod("train-head", "team-a", "team-a-lq", "train", "prod-priority", "2", gpus="2"))
        assert box.step().admitted == ["team-a/train"]
        pod = box.store.get("pods", "train-head", "team-a")

    status = pod["status"]
    assert pod["spec"]["nodeName"] == "sandbox-gpu-0"
    assert "schedulingGates" not in pod["spec"]
    assert status["phase"] == "Running"
    assert ipaddress.ip_address(status["podIP"]).is_loopback
    assert status["hostIP"] == "127.0.0.1"
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["PodScheduled"] == ready["Ready"] == ready["ContainersReady"] == "True"
    assert status["containerStatuses"][0]["state"]["running"]["startedAt"] == "2026-01-01T12:00:00Z"


def test_pods_outside_kueue_start_at_once_with_distinct_ips() -> None:
    clock = ManualClock(datetime.datetime(2026, 1, 1, 12, tzinfo=datetime.timezone.utc))
    plain = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}]},
        }
        for name in ("one", "two")
    ]
    with Sandbox(clock=clock, run_emulator=False) as box:
        box.apply(seed.seed_nodes())
        box.apply(plain)
        box.step()
        pods = [box.store.get("pods", name, "default") for name in ("one", "two")]

    assert [p["status"]["phase"] for p in pods] == ["Running", "Running"]
    assert all(p["spec"]["nodeName"] == "sandbox-cpu-0" for p in pods)
    assert pods[0]["status"]["podIP"] != pods[1]["status"]["podIP"]

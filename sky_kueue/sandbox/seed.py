"""The seed setup: two teams sharing a cohort (the demo scenario, without its workloads).

It is exactly the non-Workload objects of the seed scenario shipped in
``sky_kueue/data/seed-scenario.yaml`` (namespaces team-a/team-b, LocalQueues team-a-lq/team-b-lq,
ClusterQueues team-a-cq/team-b-cq/shared-cq in cohort team-ab, flavors default-flavor/gpu-flavor,
classes prod-priority/dev-priority); ``configs/kueue/seed-setup.yaml`` is the same set as a file.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

import yaml

SEED_SCENARIO = "seed-scenario.yaml"


def seed_documents() -> list[dict[str, Any]]:
    text = resources.files("sky_kueue.data").joinpath(SEED_SCENARIO).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def seed_setup() -> list[dict[str, Any]]:
    """The seed cluster's Kueue objects and namespaces, without workloads."""
    return [d for d in seed_documents() if d.get("kind") != "Workload"]


#: Node shapes of the seed cluster: (name, cpu, memory, GPUs, GPU type label value).
#: Together they hold the cohort's quota (10 CPU and 64Gi in shared-cq, 2 GPUs in team-a-cq)
#: with room for system pods, so that what Kueue admits can also be scheduled.
SEED_NODES: tuple[tuple[str, int, str, int, str | None], ...] = (
    ("sandbox-gpu-0", 8, "48Gi", 2, "a100"),
    ("sandbox-cpu-0", 8, "48Gi", 0, None),
)
#: The node label SkyPilot reads for the accelerator type (``SkyPilotLabelFormatter`` in
#: ``sky/provision/kubernetes/utils.py``); values are lower-case accelerator names.
ACCELERATOR_LABEL = "skypilot.co/accelerator"
GPU_RESOURCE = "nvidia.com/gpu"


def seed_nodes() -> list[dict[str, Any]]:
    """Ready Nodes with the seed setup's capacity, GPUs labelled as SkyPilot expects.

    Why: SkyPilot's optimizer and provisioner read Nodes (capacity, allocatable, accelerator
    labels) before they create a pod; a cluster without them has no capacity to offer.
    """
    nodes = []
    for name, cpu, memory, gpus, accelerator in SEED_NODES:
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
        capacity = {"cpu": str(cpu), "memory": memory, "pods": "110", "ephemeral-storage": "100Gi"}
        if gpus:
            capacity[GPU_RESOURCE] = str(gpus)
            if accelerator:
                labels[ACCELERATOR_LABEL] = accelerator
        nodes.append(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": name, "labels": labels},
                "spec": {},
                "status": {
                    "capacity": dict(capacity),
                    "allocatable": dict(capacity),
                    "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
                    "addresses": [
                        {"type": "InternalIP", "address": "127.0.0.1"},
                        {"type": "Hostname", "address": name},
                    ],
                    # Every field the API marks required (clients validate them on read).
                    "nodeInfo": {
                        "architecture": "amd64",
                        "bootID": f"{name}-boot",
                        "containerRuntimeVersion": "sandbox://local-process",
                        "kernelVersion": "sandbox",
                        "kubeProxyVersion": "v1.32.0",
                        "kubeletVersion": "v1.32.0",
                        "machineID": f"{name}-machine",
                        "operatingSystem": "linux",
                        "osImage": "sky-kueue sandbox",
                        "systemUUID": f"{name}-uuid",
                    },
                },
            }
        )
    return nodes


def seed_cluster() -> list[dict[str, Any]]:
    """What ``sandbox up`` loads by default: the seed setup and the Nodes that hold it."""
    return [*seed_nodes(), *seed_setup()]

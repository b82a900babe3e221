"""The downward API as SkyPilot's pod template uses it (``sky_kueue/sandbox/kubelet/downward.py``)."""

from __future__ import annotations

import pathlib
from typing import Any

from sky_kueue.sandbox.kubelet import downward
from sky_kueue.sandbox.kubelet.kubelet import LocalKubelet

POD: dict[str, Any] = {
    "metadata": {
        "name": "c-head",
        "namespace": "team-b",
        "uid": "u-1",
        "labels": {"ray-node-type": "head"},
        "annotations": {"skypilot-user": "alice@example.com"},
    },
    "spec": {
        "nodeName": "sandbox-cpu-0",
        "containers": [
            {
                "name": "ray-node",
                "resources": {"requests": {"cpu": 4.5, "memory": "8.0G"}, "limits": {"memory": "9Gi"}},
                "env": [
                    {"name": "NODE_TYPE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['ray-node-type']"}}},
                    {"name": "MISSING", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['nope']"}}},
                    {
                        "name": "CPUS",
                        "valueFrom": {"resourceFieldRef": {"containerName": "ray-node", "resource": "requests.cpu"}},
                    },
                    {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
                    {
                        "name": "MEM_LIMIT_MI",
                        "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
                    },
                    {"name": "CPU_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
                    {"name": "PLAIN", "value": "x"},
                    {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                ],
            }
        ],
    },
    "status": {"podIP": "10.213.0.5", "hostIP": "192.0.2.2"},
}


def test_field_paths() -> None:
    assert downward.field_value(POD, "metadata.labels['ray-node-type']") == "head"
    assert downward.field_value(POD, "metadata.annotations['skypilot-user']") == "alice@example.com"
    assert downward.field_value(POD, "metadata.uid") == "u-1"
    assert downward.field_value(POD, "status.hostIP") == "192.0.2.2"
    assert downward.field_value(POD, "metadata.labels['absent']") == ""


def test_resource_fields_round_up_to_the_divisor() -> None:
    container = POD["spec"]["containers"][0]
    assert downward.resource_value(POD, container, {"resource": "requests.cpu"}) == "5"
    assert downward.resource_value(POD, container, {"resource": "requests.memory"}) == "8000000000"
    assert downward.resource_value(POD, container, {"resource": "limits.memory", "divisor": "1Mi"}) == "9216"
    # an unset limit is reported as the request (the sandbox's documented deviation)
    assert downward.resource_value(POD, container, {"resource": "limits.cpu"}) == "5"
    assert downward.resource_value(POD, container, {"resource": "bogus"}) == ""


def test_the_kubelet_environment_resolves_skypilots_env(tmp_path: pathlib.Path) -> None:
    env = LocalKubelet.environment(None, POD, POD["spec"]["containers"][0], tmp_path)  # type: ignore[arg-type]
    assert env["NODE_TYPE"] == "head"
    assert env["MISSING"] == ""
    assert (env["CPUS"], env["MEM"], env["MEM_LIMIT_MI"], env["CPU_LIMIT"], env["PLAIN"]) == (
        "5",
        "8000000000",
        "9216",
        "5",
        "x",
    )
    assert "FROM_SECRET" not in env

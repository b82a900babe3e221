"""The real node's configuration files and choices, without starting anything (pure checks)."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from sky_kueue.realcluster import node as real_node
from sky_kueue.realcluster.build import Binaries
from sky_kueue.realcluster.cluster import RealCluster
from sky_kueue.realcluster.versions import load_pins
from sky_kueue.sandbox.containers import recipes_skypilot


@pytest.fixture
def planned(tmp_path: Path) -> real_node.RealNode:
    cluster = RealCluster(tmp_path / "cluster", Binaries(tmp_path / "cache", load_pins()), real_node=True)
    cluster.state.ports["apiserver"] = 6443
    node = real_node.RealNode(cluster)
    node.state = node.plan()
    return node


def test_a_subnet_that_overlaps_no_route_is_chosen() -> None:
    taken = [ipaddress.IPv4Network("10.218.0.0/24"), ipaddress.IPv4Network("10.218.1.128/25")]
    assert real_node.free_subnet(taken) == ipaddress.IPv4Network("10.218.2.0/24")
    with pytest.raises(real_node.NodeError, match="no free /24"):
        real_node.free_subnet([real_node.POD_SUPERNET])


def test_the_kubelet_runs_on_cgroup_v1_under_its_own_root_with_webhook_auth(planned: real_node.RealNode) -> None:
    config = planned.kubelet_configuration()
    assert planned.state is not None
    assert config["failCgroupV1"] is False  # kubelet v1.35 refuses cgroup v1 otherwise
    assert (config["cgroupDriver"], config["cgroupRoot"]) == ("cgroupfs", planned.state.cgroup_root)
    assert config["address"] == planned.state.gateway != "127.0.0.1"
    assert config["readOnlyPort"] == 0 and config["authentication"]["anonymous"]["enabled"] is False
    assert config["authorization"]["mode"] == "Webhook"
    assert config["oomScoreAdj"] == 0
    assert config["containerRuntimeEndpoint"] == f"unix://{planned.socket}"
    assert len(str(planned.socket)) < 100  # a unix socket's path is limited to 107 bytes


def test_containerd_keeps_every_path_its_own_and_mirrors_to_the_local_registry(planned: real_node.RealNode) -> None:
    assert planned.state is not None
    text = planned.containerd_config("sky-kueue.invalid/pause:abc")
    assert 'sandbox_image = "sky-kueue.invalid/pause:abc"' in text
    assert "restrict_oom_score_adj = true" in text and "netns_mounts_under_state_dir = true" in text
    assert f'root = "{planned.directory / "containerd" / "root"}"' in text
    assert f'  Root = "{planned.run_dir / "runc"}"' in text
    mirror = f'endpoint = ["http://127.0.0.1:{planned.state.registry_port}"]'
    assert text.count(mirror) == len(real_node.MIRRORED_REGISTRIES)
    assert '"/opt/containerd"' not in text and "/var/lib/containerd" not in text


def test_an_image_is_imported_under_each_tagged_reference_of_its_recipe() -> None:
    recipe = recipes_skypilot.SKYPILOT_RUNTIME
    names = real_node._tagged_references("skypilot-sandbox/cpu:offline", recipe)
    assert names[0] == "docker.io/skypilot-sandbox/cpu:offline"
    assert "docker.io/skypilot-sandbox/gpu:offline" in names
    assert "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot:latest" in names
    assert all(not n.startswith("docker:") for n in names)

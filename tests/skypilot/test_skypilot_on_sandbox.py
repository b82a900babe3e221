"""Real SkyPilot against the sandbox: ``sky check``, ``sky show-gpus`` and ``sky launch --dryrun``
through SkyPilot's own API server with the admin policy loaded.

Why: the policy's output only matters if SkyPilot takes it all the way to a rendered cluster.
``sky launch --dryrun`` runs the client- and server-side policy, the optimizer (which reads the
sandbox's Nodes), and renders the Kubernetes cluster config (``write_cluster_config(dryrun=True)``
in ``sky/backends/cloud_vm_ray_backend.py`` leaves it in ``~/.sky/generated/<cluster>.yml.tmp``),
where we check the namespace, the Kueue labels and the pod group as SkyPilot wrote them.

Isolation: ``HOME`` (with an offline catalog, ``sky_kueue.sandbox.skypilot_home``),
``SKYPILOT_GLOBAL_CONFIG``, ``SKYPILOT_PROJECT_CONFIG``, ``KUBECONFIG`` and a free port for the
API server (``SKYPILOT_API_SERVER_LOCAL_PORT``), which is stopped at the end. Needs ``socat``
and ``nc`` on the host (SkyPilot's port-forward networking); ``scripts/test.sh`` installs them.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.skypilot_home import isolated_environment
from tests.skypilot.builders import CONTEXT, DEMO_CONFIG, TEMPLATES

SKY = Path(sys.executable).with_name("sky")
#: Seconds one ``sky`` command may take (the first one starts the API server).
SKY_COMMAND_TIMEOUT_SECONDS = 240

pytestmark = [
    pytest.mark.skipif(
        shutil.which("socat") is None or shutil.which("nc") is None,
        reason="SkyPilot's Kubernetes support needs socat and nc on the host (scripts/test.sh installs them)",
    ),
    pytest.mark.slow,  # SkyPilot's own API server starts (tens of seconds on two cores)
]

#: template -> (namespace, LocalQueue, priority class, GPUs per pod)
DRYRUN: dict[str, tuple[str, str, str, int]] = {
    "team-a-gpu-train": ("team-a", "team-a-lq", "prod-priority", 2),
    "team-b-cpu-dev": ("team-b", "team-b-lq", "dev-priority", 0),
    "multinode-ray": ("team-b", "team-b-lq", "dev-priority", 0),
}


@dataclass(frozen=True)
class SkyOnSandbox:
    home: Path
    env: dict[str, str]

    def sky(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SKY), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=SKY_COMMAND_TIMEOUT_SECONDS,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="module")
def sky_on_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkyOnSandbox]:
    root = tmp_path_factory.mktemp("sky-on-sandbox")
    with Sandbox() as box:
        box.apply(seed.seed_cluster())
        env = isolated_environment(root, box.kubeconfig_path, DEMO_CONFIG, CONTEXT)
        env["PATH"] = f"{SKY.parent}{os.pathsep}{env.get('PATH', '')}"
        runner = SkyOnSandbox(pathlib.Path(env["HOME"]), env)
        try:
            yield runner
        finally:
            runner.sky("api", "stop")


def _rendered(home: Path, before: set[Path]) -> dict[str, Any]:
    generated = set((home / ".sky" / "generated").glob("*.yml.tmp")) - before
    assert len(generated) == 1, f"expected one rendered cluster, found {sorted(map(str, generated))}"
    return yaml.safe_load(generated.pop().read_text())


def test_sky_check_enables_the_sandbox_and_sees_its_gpus(sky_on_sandbox: SkyOnSandbox) -> None:
    check = sky_on_sandbox.sky("check", "kubernetes")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "Kubernetes: enabled" in check.stdout and CONTEXT in check.stdout
    gpus = sky_on_sandbox.sky("show-gpus", "--infra", "kubernetes")
    assert gpus.returncode == 0, gpus.stdout + gpus.stderr
    assert "A100" in gpus.stdout and "2 of 2 free" in gpus.stdout


@pytest.mark.parametrize("template", sorted(DRYRUN))
def test_sky_launch_dryrun_renders_the_labeled_cluster(sky_on_sandbox: SkyOnSandbox, template: str) -> None:
    namespace, queue, priority_class, gpus = DRYRUN[template]
    generated = sky_on_sandbox.home / ".sky" / "generated"
    before = set(generated.glob("*.yml.tmp")) if generated.exists() else set()

    launch = sky_on_sandbox.sky("launch", "--dryrun", "-y", str(TEMPLATES / f"{template}.yaml"))

    assert launch.returncode == 0, launch.stdout + launch.stderr
    assert "Applying server admin policy: KueuePolicy" in launch.stdout
    assert f"Kubernetes ({CONTEXT})" in launch.stdout and "Dryrun finished" in launch.stdout
    cluster = _rendered(sky_on_sandbox.home, before)
    assert cluster["provider"]["namespace"] == namespace
    assert cluster["provider"]["context"] == CONTEXT
    pod = cluster["available_node_types"]["ray_head_default"]["node_config"]
    labels = pod["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == queue
    assert labels["kueue.x-k8s.io/priority-class"] == priority_class
    assert labels["kueue.x-k8s.io/pod-group-name"] == labels["skypilot-cluster"]
    requests = pod["spec"]["containers"][0]["resources"]["requests"]
    assert requests.get("nvidia.com/gpu", 0) == gpus


def test_a_task_for_another_teams_queue_is_rejected_by_the_server(sky_on_sandbox: SkyOnSandbox, tmp_path: Path) -> None:
    task = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
    task.setdefault("config", {}).setdefault("kubernetes", {})["kueue"] = {"local_queue_name": "team-a-lq"}
    path = tmp_path / "foreign.yaml"
    path.write_text(yaml.safe_dump(task))

    launch = sky_on_sandbox.sky("launch", "--dryrun", "-y", str(path))

    assert launch.returncode != 0
    assert "sky-kueue:" in launch.stdout + launch.stderr
    assert "belongs to team 'team-a'" in launch.stdout + launch.stderr

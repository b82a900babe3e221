"""SkyPilot's own pods on real Kueue, and ``sky-kueue predict``'s verdict before each launch.

The pods come from SkyPilot 0.14.1's launch path under the sky-kueue admin policy
(``skypilot_provision``): its template, its ServiceAccount, its pod creation. Kueue's pod
webhook gates them, groups them into one Workload named after SkyPilot's cluster, and admits
or preempts. Before each launch ``predict --task`` says what Kueue will do; after it, Kueue
must have done exactly that: team-b's dev job is admitted (borrowing the shared CPUs), then
team-a's GPU training job reclaims them by preempting it, with the reason predicted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.realcluster.cluster import CONTEXT
from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KueueCluster, condition_true, conditions, run_cli

TEMPLATES = REPO / "task_templates"
#: SkyPilot waits for Kueue's admission and the pods' scheduling; KWOK runs them at once.
PROVISION_SECONDS = 180


@pytest.fixture
def teams(kueue: KueueCluster, cli_env: dict[str, str], tmp_path: Path) -> Path:
    """The seed teams set up on the real cluster; returns the plugin config setup rendered."""
    spec = yaml.safe_load((REPO / "configs" / "teams.yaml").read_text())
    spec["context"] = CONTEXT
    (tmp_path / "teams.yaml").write_text(yaml.safe_dump(spec))
    out = tmp_path / "setup"
    done = run_cli(cli_env, "setup", "--teams", str(tmp_path / "teams.yaml"), "--output", str(out), "--apply")
    assert done.returncode == 0, done.stderr
    return out / "sky-kueue.yaml"


def predict(env: dict[str, str], kubeconfig: str, config: Path, template: str) -> dict[str, Any]:
    done = run_cli(
        env,
        "predict",
        "--kubeconfig",
        kubeconfig,
        "--task",
        str(TEMPLATES / template),
        "--config",
        str(config),
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    verdict: dict[str, Any] = json.loads(done.stdout)
    return verdict


class Launch:
    """SkyPilot's launch of one task, running in its own process until its pods are admitted."""

    def __init__(self, env: dict[str, str], home: Path, template: str, user: str, cluster: str, config: Path) -> None:
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.real_kueue.skypilot_provision",
                "--task",
                str(TEMPLATES / template),
                "--user",
                user,
                "--cluster",
                cluster,
                "--plugin-config",
                str(config),
                "--home",
                str(home),
                "--context",
                CONTEXT,
            ],
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def finish(self) -> tuple[dict[str, Any], str]:
        """Waits for SkyPilot's provisioning to return; the rendered head pod metadata and the output."""
        output, _ = self.proc.communicate(timeout=PROVISION_SECONDS)
        assert self.proc.returncode == 0, output[-4000:]
        rendered = next(line for line in output.splitlines() if line.startswith("RENDERED "))
        found: dict[str, Any] = json.loads(rendered.removeprefix("RENDERED "))
        return found, output

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


@pytest.fixture
def launches() -> Iterator[list[Launch]]:
    started: list[Launch] = []
    try:
        yield started
    finally:
        for launch in started:
            launch.stop()


def test_skypilots_pods_become_the_workload_predict_foresaw(
    kueue: KueueCluster, teams: Path, cli_env: dict[str, str], tmp_path: Path, launches: list[Launch]
) -> None:
    env = dict(cli_env, SKY_KUEUE_CONFIG=str(teams))
    before = predict(env, kueue.kubeconfig, teams, "team-b-cpu-dev.yaml")
    assert before["final"]["admitted"] == ["team-b/team-b-dev-what-if"], before

    dev = Launch(env, tmp_path / "sky-bob", "team-b-cpu-dev.yaml", "bob", "dev-1", teams)
    launches.append(dev)
    rendered, _ = dev.finish()
    group = rendered["cluster_name_on_cloud"]
    labels, annotations = rendered["metadata"]["labels"], rendered["metadata"]["annotations"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-b-lq" and labels["kueue.x-k8s.io/pod-group-name"] == group
    assert labels["kueue.x-k8s.io/priority-class"] == "dev-priority" and labels["sky-kueue.io/team"] == "team-b"
    assert annotations["kueue.x-k8s.io/pod-group-total-count"] == "1"
    workload = kueue.wait_workload("team-b", group, lambda w: condition_true(w, "Admitted"), "admitted")
    assert workload["metadata"]["annotations"]["kueue.x-k8s.io/is-group-workload"] == "true"
    assert workload["spec"]["priorityClassRef"]["name"] == "dev-priority" and workload["spec"]["priority"] == 100
    assert workload["spec"]["queueName"] == "team-b-lq"
    assert [p["count"] for p in workload["spec"]["podSets"]] == [1]
    assert workload["status"]["admission"]["clusterQueue"] == "team-b-cq"

    foreseen = predict(env, kueue.kubeconfig, teams, "team-a-gpu-train.yaml")
    assert foreseen["final"]["preempted"] == [f"team-b/{group}"], foreseen
    (first_cycle_victims,) = [c["preempted"] for c in foreseen["cycles"] if c["preempted"]]
    predicted_reason = first_cycle_victims[f"team-b/{group}"]["reason"]

    train = Launch(env, tmp_path / "sky-alice", "team-a-gpu-train.yaml", "alice", "train-2", teams)
    launches.append(train)
    evicted = kueue.wait_workload("team-b", group, lambda w: condition_true(w, "Evicted"), "preempted by team-a's job")
    assert conditions(evicted)["Preempted"]["reason"] == predicted_reason, conditions(evicted)
    rendered_train, _ = train.finish()
    train_group = rendered_train["cluster_name_on_cloud"]
    admitted = kueue.wait_workload("team-a", train_group, lambda w: condition_true(w, "Admitted"), "admitted")
    assert admitted["spec"]["priority"] == 1000
    flavors = admitted["status"]["admission"]["podSetAssignments"][0]["flavors"]
    assert flavors == {"cpu": "default-flavor", "memory": "default-flavor", "nvidia.com/gpu": "gpu-flavor"}

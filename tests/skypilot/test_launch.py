"""``sky-kueue launch --dry-run``: the policy's choices and Kueue's predicted admission,
printed before anything is submitted."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.sandbox.apiserver import ApiServer
from sky_kueue.skypilot.launch import plan_launch, submission_overrides, with_choices
from sky_kueue.skypilot.task_reader import NotRead, read_task
from tests.skypilot.builders import CONTEXT, DEMO_CONFIG, SEED_SCENARIO, TEMPLATES, config, task
from tests.skypilot.conftest import SkyEnv


def run(*args: str, config: Path = DEMO_CONFIG) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["launch", *args, "--config", str(config)])
    return result.exit_code, result.output


@pytest.fixture()
def offline_config(tmp_path: Path) -> Path:
    """The demo config on the plugin config alone (``cluster: {discover: false}``): no cluster is
    looked for, so predictions are ``unknown`` by choice, not for want of a kubeconfig."""
    path = tmp_path / "offline.yaml"
    path.write_text(DEMO_CONFIG.read_text() + "cluster: {discover: false}\n")
    return path


@pytest.fixture()
def busy_snapshot(tmp_path: Path) -> Path:
    docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all([d for d in docs if d["metadata"]["name"] != "team-a-prod-job"]))
    return path


def test_dry_run_predicts_preemption_on_a_snapshot(sky_env: SkyEnv, busy_snapshot: Path) -> None:
    code, output = run(str(TEMPLATES / "team-a-gpu-train.yaml"), "--dry-run", "--snapshot", str(busy_snapshot))
    assert code == 0, output
    assert "queue:      team-a/team-a-lq on context sky-kueue-sandbox" in output
    assert "prediction: admit-after-preemption (preempts team-b/team-b-dev-job)" in output
    assert "burst:      keep-kubernetes" in output
    assert "kueue.x-k8s.io/priority-class: prod-priority" in output


def test_json_output_for_a_burst_task(sky_env: SkyEnv, offline_config: Path) -> None:
    code, output = run(str(TEMPLATES / "burst-finetune.yaml"), "--dry-run", "-o", "json", config=offline_config)
    assert code == 0, output
    described = json.loads(output)
    assert described["prediction"]["outcome"] == "unknown"
    assert described["burst"]["action"] == "add-cloud-fallback"
    assert described["admission_timeout_seconds"] == 900
    infras = [c["infra"] for c in described["task"]["resources"]["ordered"]]
    assert infras == [f"kubernetes/{CONTEXT}", "aws", "gcp"]
    assert described["skypilot_config"]["kubernetes"]["context_configs"][CONTEXT]["namespace"] == "team-a"


def test_team_and_priority_options(sky_env: SkyEnv, offline_config: Path) -> None:
    code, output = run(
        str(TEMPLATES / "multinode-ray.yaml"), "--dry-run", "--team", "team-a", "-o", "json", config=offline_config
    )
    assert code == 0, output
    described = json.loads(output)
    assert (described["team"], described["priority_class"]) == ("team-a", "prod-priority")
    code, output = run(str(TEMPLATES / "team-b-cpu-dev.yaml"), "--dry-run", "--priority", "prod-priority")
    assert code == 1
    identity, rejection = output.splitlines()
    assert identity.startswith("as user ")
    assert rejection == (
        "rejected: sky-kueue: priority class 'prod-priority' is not allowed for team 'team-b' (allowed: dev-priority)"
    )


def test_a_dry_run_that_reads_no_cluster_says_why_and_fails(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nonexistent"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    result = CliRunner(mix_stderr=False).invoke(
        cli, ["launch", str(TEMPLATES / "team-a-gpu-train.yaml"), "--dry-run", "--config", str(DEMO_CONFIG)]
    )
    assert result.exit_code == 2  # as `queue` with the same $KUBECONFIG (docs/exit-codes.md)
    assert "prediction: unknown" in result.stdout  # the plan is still shown
    assert result.stderr == (
        f"warning: no cluster was read ($KUBECONFIG names {missing}, which does not exist), so the prediction is "
        "unknown: pass --kubeconfig FILE or --snapshot FILE\n"
    )


def test_a_dry_run_on_an_unreachable_cluster_exits_1(sky_env: SkyEnv, tmp_path: Path) -> None:
    with ApiServer() as gone:
        kubeconfig = gone.write_kubeconfig(tmp_path / "kubeconfig", context=CONTEXT)
        url = gone.url
    result = CliRunner(mix_stderr=False).invoke(
        cli,
        [
            *("launch", str(TEMPLATES / "team-a-gpu-train.yaml"), "--dry-run"),
            *("--config", str(DEMO_CONFIG), "--kubeconfig", str(kubeconfig)),
        ],
    )
    assert result.exit_code == 1  # as `queue` on the same cluster
    assert "prediction: unknown" in result.stdout
    assert f"cannot reach the Kubernetes API server at {url}: connection refused" in result.stderr


def test_invalid_task_file_is_one_line(sky_env: SkyEnv, tmp_path: Path) -> None:
    bad = tmp_path / "task.yaml"
    bad.write_text("resources:\n  cpus: [1, 2]\n  nonsense: true\n")
    code, output = run(str(bad), "--dry-run")
    assert code == 2
    assert output.startswith(f"error: {bad}: not a valid SkyPilot task:")
    assert output.count("\n") == 1


def test_with_choices_overrides_team_and_priority() -> None:
    original = task(team="team-b", labels={"kueue.x-k8s.io/priority-class": "dev-priority"})
    changed = with_choices(original, team="team-a", priority="prod-priority")
    assert changed["resources"]["labels"] == {"sky-kueue.io/team": "team-a"}
    assert changed["resources"]["priority_class"] == "prod-priority"
    assert original["resources"]["labels"]["sky-kueue.io/team"] == "team-b"


def test_the_submission_lays_only_the_policys_changes_over_skypilots_config(sky_env: SkyEnv) -> None:
    """The plan carries the user's whole SkyPilot config (as SkyPilot's client sends it); laying
    it back over that config must not repeat a pod_config list SkyPilot merges item by item."""
    from sky import skypilot_config

    toleration = {"key": "gpu", "operator": "Exists"}
    user = {"kubernetes": {"allowed_contexts": [CONTEXT], "pod_config": {"spec": {"tolerations": [toleration]}}}}
    task_yaml = read_task(TEMPLATES / "team-a-gpu-train.yaml")
    assert not isinstance(task_yaml, NotRead)
    result = plan_launch(task_yaml, config(), skypilot_config=user, workspace="default")
    returned = result.skypilot_config["kubernetes"]
    assert returned["context_configs"][CONTEXT]["namespace"] == "team-a"

    def laid_over_user(overrides: dict[str, Any]) -> dict[str, Any]:
        merged: dict[str, Any] = skypilot_config.overlay_skypilot_config(
            original_config=sky_env.sky.Config(copy.deepcopy(user)), override_configs=sky_env.sky.Config(overrides)
        )
        return merged

    merged = laid_over_user(submission_overrides(result))
    assert merged["kubernetes"] == {**user["kubernetes"], "context_configs": returned["context_configs"]}
    # the whole returned section would have repeated the toleration
    assert laid_over_user({"kubernetes": returned})["kubernetes"]["pod_config"]["spec"]["tolerations"] == [
        toleration,
        toleration,
    ]

"""``KueuePolicy`` applied through SkyPilot's own machinery (``admin_policy_utils.apply``), with
HOME and SkyPilot's config files isolated (see ``conftest.sky_env``)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.skypilot.builders import CONTEXT, DEMO_CONFIG, REPO, SEED_SETUP, TEMPLATES, demo_config_data
from tests.skypilot.conftest import SkyEnv

#: template -> (team, queue, priority class, admission timeout, infra of each candidate)
EXPECTED: dict[str, tuple[str, str, str, int, list[str]]] = {
    "team-a-gpu-train": ("team-a", "team-a-lq", "prod-priority", 86400, [f"kubernetes/{CONTEXT}"]),
    "team-b-cpu-dev": ("team-b", "team-b-lq", "dev-priority", 86400, [f"kubernetes/{CONTEXT}"]),
    "multinode-ray": ("team-b", "team-b-lq", "dev-priority", 86400, [f"kubernetes/{CONTEXT}"]),
    "burst-finetune": ("team-a", "team-a-lq", "prod-priority", 900, [f"kubernetes/{CONTEXT}", "aws", "gcp"]),
}


def apply(env: SkyEnv, task: Any, request_name: str = "jobs.launch", at_client_side: bool = False) -> tuple[Any, Any]:
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils

    dag, config = admin_policy_utils.apply(
        task, request_name=AdminPolicyRequestName(request_name), at_client_side=at_client_side
    )
    return dag.tasks[0], config


def load_task(env: SkyEnv, source: str | dict[str, Any]) -> Any:
    if isinstance(source, str):
        return env.sky.Task.from_yaml(str(TEMPLATES / f"{source}.yaml"))
    return env.sky.Task.from_yaml_config(copy.deepcopy(source))  # the parser consumes its input


def rejection_message(env: SkyEnv, source: str | dict[str, Any], request_name: str = "jobs.launch") -> str:
    from sky import exceptions

    with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
        apply(env, load_task(env, source), request_name)
    return str(info.value)


@pytest.mark.parametrize("template", sorted(EXPECTED))
@pytest.mark.parametrize("at_client_side", [False, True])
def test_templates_pass_and_are_labeled(sky_env: SkyEnv, template: str, at_client_side: bool) -> None:
    team, queue, priority_class, timeout, infras = EXPECTED[template]
    task = load_task(sky_env, template)
    assert task.resources and all(r.labels.get("sky-kueue.io/team") == team for r in task.resources)
    mutated, config = apply(sky_env, task, at_client_side=at_client_side)
    resources = list(mutated.resources)
    assert [r.infra.to_str() for r in resources] == infras
    for r in resources:
        overrides = r.cluster_config_overrides["kubernetes"]
        assert overrides["kueue"] == {"local_queue_name": queue, "admission_timeout": timeout}
        labels = overrides["pod_config"]["metadata"]["labels"]
        assert labels["kueue.x-k8s.io/queue-name"] == queue
        assert labels["kueue.x-k8s.io/priority-class"] == priority_class
        assert labels["sky-kueue.io/team"] == team
        assert not any("/" in key for key in (r.labels or {}))
        assert r.priority_class == priority_class
        assert r.job_recovery is None  # the demo config writes no recovery strategy
    assert config.get_nested(("kubernetes", "context_configs", CONTEXT, "namespace"), None) == team
    assert mutated.num_nodes == (3 if template == "multinode-ray" else 1)


def test_mutated_task_survives_a_yaml_round_trip(sky_env: SkyEnv) -> None:
    mutated, _ = apply(sky_env, load_task(sky_env, "burst-finetune"))
    again = sky_env.sky.Task.from_yaml_config(mutated.to_yaml_config())
    assert again.to_yaml_config() == mutated.to_yaml_config()


def template_config(name: str) -> dict[str, Any]:
    return yaml.safe_load((TEMPLATES / f"{name}.yaml").read_text())


def with_resources(name: str, **changes: Any) -> dict[str, Any]:
    config = template_config(name)
    config["resources"].update(changes)
    return config


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (with_resources("team-b-cpu-dev", labels={}), "no team for user"),
        (with_resources("team-b-cpu-dev", labels={"sky-kueue.io/team": "team-z"}), "unknown team 'team-z'"),
        (
            {
                **template_config("team-b-cpu-dev"),
                "config": {"kubernetes": {"kueue": {"local_queue_name": "team-a-lq"}}},
            },
            "asks for queue 'team-a-lq', which belongs to team 'team-a'",
        ),
        (
            {
                **template_config("team-b-cpu-dev"),
                "config": {"kubernetes": {"pod_config": {"metadata": {"namespace": "team-a"}}}},
            },
            "asks for namespace 'team-a'",
        ),
        (with_resources("team-b-cpu-dev", infra="k8s/other-cluster"), "asks for 'other-cluster'"),
        (with_resources("team-b-cpu-dev", priority_class="prod-priority"), "not allowed for team 'team-b'"),
        (
            with_resources(
                "team-a-gpu-train",
                priority_class="prod-priority",
                labels={"sky-kueue.io/team": "team-a", "kueue.x-k8s.io/priority-class": "dev-priority"},
            ),
            "several priority classes",
        ),
        (with_resources("team-b-cpu-dev", accelerators="A100:1"), "at most 0 GPUs per job"),
        (with_resources("multinode-ray", cpus=4), "at most 10 CPUs per job, but the task asks for 12"),
        (
            with_resources("burst-finetune", labels={"sky-kueue.io/team": "team-a", "sky-kueue.io/burst": "sometimes"}),
            'must be "true" or "false"',
        ),
    ],
)
def test_rejections_carry_their_message(sky_env: SkyEnv, source: dict[str, Any], message: str) -> None:
    text = rejection_message(sky_env, source)
    assert "sky-kueue: " in text
    assert message in text


def write_config(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_not_a_member_of_a_restricted_team(sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = demo_config_data()
    data["teams"]["team-a"]["users"] = ["someone-else"]
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(write_config(tmp_path / "plugin.yaml", data)))
    assert "may not submit as team 'team-a'" in rejection_message(sky_env, "team-a-gpu-train")
    mutated, _ = apply(sky_env, load_task(sky_env, "team-b-cpu-dev"))
    assert next(iter(mutated.resources)).priority_class == "dev-priority"


def test_cluster_checks_against_kueue_manifests(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifests = [d for d in yaml.safe_load_all(SEED_SETUP.read_text()) if d]
    for doc in manifests:
        if doc["kind"] == "ClusterQueue" and doc["metadata"]["name"] == "team-b-cq":
            doc["spec"]["namespaceSelector"] = {"matchLabels": {"team": "nobody"}}
    (tmp_path / "setup.yaml").write_text(yaml.safe_dump_all(manifests))
    data = demo_config_data()
    data["cluster"] = {"manifests": ["setup.yaml"]}
    data["teams"]["team-a"]["limits"]["max_cpus"] = 64
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(write_config(tmp_path / "plugin.yaml", data)))
    assert "does not select namespace 'team-b'" in rejection_message(sky_env, "team-b-cpu-dev")
    assert "can hold at most 10 even when borrowing" in rejection_message(
        sky_env, with_resources("team-a-gpu-train", cpus=12)
    )
    mutated, _ = apply(sky_env, load_task(sky_env, "team-a-gpu-train"))
    assert next(iter(mutated.resources)).priority_class == "prod-priority"


def relaunch_task() -> dict[str, Any]:
    """What the jobs controller relaunches: job-id env and annotation, labels frozen at submission
    (here: a queue of another team and an aged class the team may not request itself)."""
    config = template_config("team-b-cpu-dev")
    config["envs"] = {"SKYPILOT_MANAGED_JOB_ID": "7"}
    config["config"] = {
        "kubernetes": {
            "kueue": {"local_queue_name": "team-a-lq"},
            "pod_config": {
                "metadata": {
                    "labels": {"kueue.x-k8s.io/priority-class": "prod-priority"},
                    "annotations": {"skypilot-managed-job-id": "7"},
                }
            },
        }
    }
    return config


def test_relaunch_validate_is_accepted_unchanged(sky_env: SkyEnv) -> None:
    """In 0.14.1 ``validate`` is the only request of a relaunch the server policy sees."""
    task = load_task(sky_env, relaunch_task())
    before = task.to_yaml_config()
    mutated, _ = apply(sky_env, task, "validate")
    assert mutated.to_yaml_config() == before


@pytest.mark.parametrize("request_name", ["launch", "jobs.launch", "jobs.launch_cluster"])
def test_a_forged_managed_job_id_does_not_bypass_the_policy(sky_env: SkyEnv, request_name: str) -> None:
    """Users can set the job-id env and annotation, and send ``is_launched_by_jobs_controller``."""
    message = rejection_message(sky_env, relaunch_task(), request_name)
    assert "belongs to team 'team-a'" in message


def test_broken_plugin_config_fails_closed_but_never_blocks_relaunches(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "plugin.yaml"
    broken.write_text("teams: {}\n")
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(broken))
    message = rejection_message(sky_env, "team-a-gpu-train")
    assert "sky-kueue is misconfigured" in message and f"{broken}:1: teams:" in message
    mutated, _ = apply(sky_env, load_task(sky_env, relaunch_task()), "validate")
    assert mutated.envs["SKYPILOT_MANAGED_JOB_ID"] == "7"
    apply(sky_env, load_task(sky_env, "team-a-gpu-train"), "validate")


def test_policy_is_named_in_the_isolated_global_config(sky_env: SkyEnv) -> None:
    from sky import skypilot_config

    assert skypilot_config.get_nested(("admin_policy",), None) == "sky_kueue.skypilot.policy.KueuePolicy"
    loaded = skypilot_config.loaded_config_path() or ""
    assert str(sky_env.global_config) in loaded
    assert Path.home() == sky_env.home
    assert Path(os.environ["SKY_KUEUE_CONFIG"]) == DEMO_CONFIG


def test_skypilot_config_example_passes_skypilots_schema(sky_env: SkyEnv) -> None:
    from sky import skypilot_config

    example = skypilot_config.parse_and_validate_config_file(str(REPO / "configs" / "skypilot-config.yaml"))
    assert example.get_nested(("admin_policy",), None) == "sky_kueue.skypilot.policy.KueuePolicy"
    assert example.get_nested(("kubernetes", "allowed_contexts"), None) == [CONTEXT]
    plugins = yaml.safe_load((REPO / "configs" / "plugins.yaml").read_text())
    assert [set(p) for p in plugins["plugins"]] == [{"class", "parameters"}]


def test_a_server_without_the_plugin_gets_an_error_that_names_sky_kueue(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky.utils import registry

    with_strategy = demo_config_data()
    with_strategy["aging"]["strategy"] = "KUEUE_AGING"
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(with_strategy))
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(path))
    with_plugin, _ = apply(sky_env, load_task(sky_env, "team-b-cpu-dev"))
    assert next(iter(with_plugin.resources)).job_recovery == {"strategy": "KUEUE_AGING"}
    saved = registry.JOBS_RECOVERY_STRATEGY_REGISTRY.pop("kueue_aging")
    try:
        message = rejection_message(sky_env, "team-b-cpu-dev")
        client_side, _ = apply(sky_env, load_task(sky_env, "team-b-cpu-dev"), at_client_side=True)
    finally:
        registry.JOBS_RECOVERY_STRATEGY_REGISTRY["kueue_aging"] = saved
    assert message.startswith("sky-kueue: aging.strategy KUEUE_AGING is not registered on this SkyPilot API server")
    assert "configs/plugins.yaml" in message and "aging.strategy: null" in message
    # a client cannot know the server's plugins: it labels and leaves the check to the server
    assert next(iter(client_side.resources)).job_recovery == {"strategy": "KUEUE_AGING"}


def test_an_unexpected_error_in_the_policy_is_one_line_naming_sky_kueue(
    sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky_kueue.skypilot import policy

    def broken(request: Any) -> Any:
        raise AttributeError("'NoneType' object has no attribute 'get'\nsecond line")

    monkeypatch.setattr(policy, "run", broken)
    message = rejection_message(sky_env, "team-a-gpu-train")
    assert message.startswith("sky-kueue: internal error in the admin policy (AttributeError: ")
    assert "\n" not in message and "second line" not in message
    assert "sky-kueue check-config" in message and "object at 0x" not in message

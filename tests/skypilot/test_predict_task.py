"""``sky-kueue predict --task`` queues a task as the admin policy would (the plugin config's
team, LocalQueue and priority class), so it gives the verdict ``launch --dry-run`` gives; when
no team applies it says so in one line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result

from sky_kueue.cli.main import cli
from sky_kueue.kueue.errors import ModelError
from sky_kueue.skypilot.config import load_config
from sky_kueue.skypilot.task_team import TaskQueueing, task_queueing
from tests.skypilot.builders import DEMO_CONFIG, PRODUCTION_CONFIG, REPO, SEED_SCENARIO

TEAM_A_TASK = REPO / "task_templates" / "team-a-gpu-train.yaml"
WHAT_IF = "team-a/team-a-train-what-if"


@pytest.fixture
def without_prod_job(tmp_path: Path) -> Path:
    """The seed cluster before team-a's prod job arrives: team-b's dev job borrows the cohort's CPU."""
    docs = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all([d for d in docs if d["metadata"]["name"] != "team-a-prod-job"]))
    return path


def predict(snapshot: Path, *args: str, config_env: Path) -> Result:
    return CliRunner(mix_stderr=False).invoke(
        cli,
        ["predict", "--snapshot", str(snapshot), "--task", str(TEAM_A_TASK), *args],
        env={"SKY_KUEUE_CONFIG": str(config_env)},
    )


def verdict(result: Result) -> str:
    for line in result.stdout.splitlines():
        if WHAT_IF in line:
            return line.split("│")[2].strip()
    raise AssertionError(result.stdout)


def test_predict_task_gives_the_launch_verdict_with_the_teams_priority_class(
    without_prod_job: Path, tmp_path: Path
) -> None:
    result = predict(without_prod_job, "--task-queue", "team-a/team-a-lq", config_env=PRODUCTION_CONFIG)

    assert result.exit_code == 0, result.stderr
    assert verdict(result) == "admitted-after-preemption"  # what `launch --dry-run` says (test_launch)
    assert result.stderr == (
        f"note: {TEAM_A_TASK}: as the admin policy would submit it for team 'team-a' (from its label, "
        f"{PRODUCTION_CONFIG}): team-a/team-a-lq, priority class prod-priority (the team's default)\n"
    )


def test_without_a_plugin_config_predict_says_what_it_assumed(without_prod_job: Path, tmp_path: Path) -> None:
    missing = tmp_path / "none.yaml"

    result = predict(without_prod_job, "--task-queue", "team-a/team-a-lq", config_env=missing)

    assert result.exit_code == 0, result.stderr
    assert verdict(result) == "pending"
    assert result.stderr.splitlines() == [
        f"note: {TEAM_A_TASK}: predicted as written, without a priority class (priority 0; the admin policy "
        f"would add its team's): there is no plugin config ({missing} does not exist; pass --config FILE)"
    ]


def test_an_explicit_config_that_cannot_be_read_is_bad_input(without_prod_job: Path, tmp_path: Path) -> None:
    result = predict(without_prod_job, "--config", str(tmp_path / "none.yaml"), config_env=PRODUCTION_CONFIG)

    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "none.yaml: cannot read the config file" in result.stderr


def task(**resources: Any) -> dict[str, Any]:
    return {"name": "t", "resources": {"infra": "k8s", "cpus": 1, **resources}}


def placed(queueing: TaskQueueing) -> tuple[str | None, str | None, str | None]:
    return queueing.namespace, queueing.local_queue, queueing.priority_class


def test_the_team_comes_from_the_label_else_from_the_queue() -> None:
    config = load_config(PRODUCTION_CONFIG)

    by_label = task_queueing(task(labels={"sky-kueue.io/team": "team-b"}), config, "c.yaml", source="t.yaml")
    by_queue = task_queueing(task(priority_class="dev-priority"), config, "c.yaml", source="t", local_queue="team-a-lq")

    assert placed(by_label) == ("team-b", "team-b-lq", "dev-priority")
    assert placed(by_queue) == ("team-a", "team-a-lq", "dev-priority")
    assert "(from its queue, c.yaml)" in by_queue.note and "(the task's)" in by_queue.note


def test_a_queue_no_team_uses_is_predicted_as_written() -> None:
    got = task_queueing(task(), load_config(DEMO_CONFIG), "c.yaml", source="t", namespace="x", local_queue="x-lq")

    assert placed(got) == ("x", "x-lq", None)
    assert got.note.endswith("no team of c.yaml submits to x/x-lq and the task has no sky-kueue.io/team label")


@pytest.mark.parametrize(
    ("resources", "queue", "text"),
    [
        ({"labels": {"sky-kueue.io/team": "team-c"}}, None, "names team 'team-c', which c.yaml does not define"),
        ({"labels": {"sky-kueue.io/team": "team-b"}}, "team-a-lq", "team 'team-b' submits to team-b/team-b-lq, not"),
        ({"labels": {"sky-kueue.io/team": "team-b"}, "priority_class": "prod-priority"}, None, "is not allowed"),
    ],
)
def test_what_the_policy_would_reject_is_an_error(resources: dict[str, Any], queue: str | None, text: str) -> None:
    with pytest.raises(ModelError, match=None) as info:
        task_queueing(task(**resources), load_config(PRODUCTION_CONFIG), "c.yaml", source="t", local_queue=queue)
    assert text in str(info.value)

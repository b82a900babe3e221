"""``task_templates/simulate-sweep.yaml``: SkyPilot 0.14.1 parses and validates it (HOME and
SkyPilot's config files isolated, ``conftest.sky_env``), the policy admits it as a managed job,
and its run line is a sweep the ``sky-kueue simulate`` CLI runs."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from tests.skypilot.builders import CONTEXT, REPO, TEMPLATES
from tests.skypilot.conftest import SkyEnv

TEMPLATE = TEMPLATES / "simulate-sweep.yaml"
#: The installed CLI the template's setup creates on the pod.
POD_CLI = "~/sky-kueue-sweep/bin/sky-kueue"


def test_skypilot_parses_and_validates_the_sweep_template(sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # `sky jobs launch` is run from the checkout, whose workdir it syncs
    task = sky_env.sky.Task.from_yaml(str(TEMPLATE))
    task.validate()  # name, run, and the workdir expanded and checked as a directory
    assert Path(task.workdir) == REPO and (REPO / "pyproject.toml").is_file()
    assert "pip install --quiet ." in task.setup
    (resources,) = task.resources
    assert int(float(resources.cpus)) == int(task.envs["WORKERS"]), "WORKERS must match the pod's CPUs"


def test_the_policy_admits_the_sweep_as_team_b_managed_job(sky_env: SkyEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils

    monkeypatch.chdir(REPO)
    task = sky_env.sky.Task.from_yaml(str(TEMPLATE))
    dag, _ = admin_policy_utils.apply(task, request_name=AdminPolicyRequestName("jobs.launch"), at_client_side=False)
    (mutated,) = dag.tasks
    (resources,) = mutated.resources
    assert resources.infra.to_str() == f"kubernetes/{CONTEXT}"
    labels = resources.cluster_config_overrides["kubernetes"]["pod_config"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-b-lq"
    assert labels["kueue.x-k8s.io/priority-class"] == "dev-priority"


def test_the_run_line_is_a_sweep_the_cli_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    template = yaml.safe_load(TEMPLATE.read_text(encoding="utf-8"))
    (line,) = [line for line in template["run"].splitlines() if line.strip().startswith(POD_CLI)]
    monkeypatch.setenv("SWEEP_ARGS", template["envs"]["SWEEP_ARGS"])
    monkeypatch.setenv("WORKERS", "2")  # this machine's share, not the pod's
    words = shlex.split(os.path.expandvars(line.strip()[len(POD_CLI) :]))
    # The template's own sweep, on the first two hours of its trace so that the test stays short.
    result = CliRunner().invoke(cli, [*words, "--hours", "2", "--output", "json"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["seeds"] == [0, 1, 2, 3, 4]
    assert [list(run["policies"]) for run in document["runs"]] == [["baseline", "rank", "safe-place"]] * 5

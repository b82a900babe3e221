"""sky-kueue's own task reader: what it leaves to SkyPilot names the field, a file it cannot
read at all is one precise line, and the file's text is kept as SkyPilot keeps it. (That what
it reads equals SkyPilot's own reading is ``test_task_reader_equivalence``.)"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.skypilot.task_reader import NotRead, TaskFileError, read_task, task_from_text
from tests.skypilot.builders import DEMO_CONFIG, SEED_SCENARIO


@pytest.mark.parametrize(
    "text, field",
    [
        ("resources: {disk_size: 100}", "resources.disk_size"),
        ("resources: {infra: aws}", "resources.infra 'aws' is not Kubernetes"),
        ("resources: {memory: 16G}", "resources.memory '16G'"),
        ("resources: {accelerators: 80GB+}", "names accelerators by memory"),
        ("resources: {any_of: [{infra: k8s/a, ports: 80}]}", "resources.any_of[0].ports"),
        ("file_mounts: {/data: /tmp}", "file_mounts is not read"),
        ("config: {kubernetes: {provision_timeout: 10}}", "config.kubernetes.provision_timeout"),
        ("envs: {SKYPILOT_DOCKER_USERNAME: me}", "envs.SKYPILOT_DOCKER_USERNAME"),
        ("workdir: $HOME/src", "workdir refers to a variable"),
        ("name: a\nname: b", "duplicate key 'name'"),
    ],
)
def test_what_the_reader_leaves_to_skypilot_names_the_field(text: str, field: str) -> None:
    left = task_from_text(text)
    assert isinstance(left, NotRead)
    assert field in left.reason


def test_a_kubernetes_task_is_read_in_skypilots_form() -> None:
    read = task_from_text(
        "name: t\nnum_nodes: 2\nenvs: {EPOCHS: 10}\n"
        "config: {kubernetes: {pod_config: {metadata: {labels: {a: b}}}}}\n"
        "resources: {infra: k8s, cpus: 4+, memory: 16GB, accelerators: {A100: 2, H100: 1}}\n"
    )
    assert not isinstance(read, NotRead)
    overrides = {"kubernetes": {"pod_config": {"metadata": {"labels": {"a": "b"}}}}}
    common = {"infra": "kubernetes", "cpus": "4+", "memory": "16.0"}
    assert read["resources"] == {
        "any_of": [
            {**common, "accelerators": {"A100": 2}, "_cluster_config_overrides": overrides},
            {**common, "accelerators": {"H100": 1}, "_cluster_config_overrides": overrides},
        ]
    }
    assert (read["num_nodes"], read["envs"], read["file_mounts"], read["volumes"]) == (2, {"EPOCHS": "10"}, {}, {})


def test_the_text_is_kept_with_line_ends_as_python_text_mode_reads_them(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    path.write_bytes(b"name: t\r\nrun: |\r\n  echo a\r\n")
    read = read_task(path)
    assert not isinstance(read, NotRead)
    assert read["_user_specified_yaml"] == "name: t\nrun: |\n  echo a\n"
    assert read["run"] == "echo a\n"


def test_a_file_that_cannot_be_read_is_one_precise_line(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # SkyPilot's open() would wait for a writer forever
    for path, reason in ((tmp_path / "none.yaml", "no such file"), (tmp_path, "is a directory"), (fifo, "a FIFO")):
        with pytest.raises(TaskFileError, match=reason):
            read_task(path)
    result = CliRunner(mix_stderr=False).invoke(
        cli,
        ["launch", str(fifo), "--dry-run", "--config", str(DEMO_CONFIG), "--snapshot", str(SEED_SCENARIO)],
    )
    assert result.exit_code == 2
    assert result.stderr == f"error: {fifo}: not a valid SkyPilot task: is a FIFO; give a SkyPilot task YAML\n"

"""The Python SDK (``sky_kueue.predict``/``launch``) and the user hooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import sky_kueue
from sky_kueue import hooks

REPO = Path(__file__).resolve().parent.parent.parent
CONFIG = REPO / "configs" / "sky-kueue-demo.yaml"
SEED = REPO / "tests" / "oracle" / "seeds" / "scenarios" / "a-gpu-borrow-preempt.yaml"


def _task(team: str, cpus: str, gpus: str | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {"infra": "kubernetes", "cpus": cpus, "labels": {"sky-kueue.io/team": team}}
    if gpus:
        resources["accelerators"] = {"A100": int(gpus)}
    return {"name": "train", "resources": resources, "run": "echo hi"}


def test_predict_says_whom_a_prod_job_would_preempt(tmp_path: Path) -> None:
    without_prod = tmp_path / "cluster.yaml"
    text = SEED.read_text()
    without_prod.write_text(
        text[: text.index("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Workload\nmetadata:\n  name: team-a")]
    )
    got = sky_kueue.predict(_task("team-a", "7", gpus="2"), config=CONFIG, snapshot=[without_prod])
    assert got["decision"] == "placed"
    assert got["local_queue"] == "team-a-lq"
    assert got["prediction"]["outcome"] == "admit-after-preemption"
    assert got["prediction"]["preempts"] == ["team-b/team-b-dev-job"]


def test_launch_dry_run_returns_the_plan_and_rejects_another_teams_queue() -> None:
    plan = sky_kueue.launch(_task("team-b", "2"), config=CONFIG, dry_run=True)
    assert plan["decision"] == "placed" and "submitted" not in plan
    with pytest.raises(sky_kueue.LaunchRejected):
        sky_kueue.launch(_task("no-such-team", "2"), config=CONFIG, dry_run=True)


def test_hooks_run_in_order_and_a_failing_one_does_not_stop_the_rest() -> None:
    seen: list[str] = []

    def broken(event: Any) -> None:
        raise RuntimeError("user bug")

    def record(event: Any) -> None:
        seen.append(event.job)

    remove_broken = hooks.register(hooks.HookEvent.PREEMPTED, broken)
    sky_kueue.on_preempted(record)
    try:
        assert hooks.emit(hooks.Preempted("managed-job/7", "team-a/w", "uid-1", "InClusterQueue", None, None)) == 1
        assert seen == ["managed-job/7"]
        assert hooks.emit(hooks.Burst("managed-job/7", "team-a/w", "uid-1", "aws")) == 0
    finally:
        remove_broken()
        hooks.unregister(hooks.HookEvent.PREEMPTED, record)


def test_predict_reads_a_task_file_as_skypilot_would_without_importing_it(tmp_path: Path) -> None:
    import json
    import os
    import subprocess
    import sys

    import yaml

    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(_task("team-b", "2")))
    code = (
        "import json, sys\n"
        "import sky_kueue\n"
        f"got = sky_kueue.predict({str(task)!r}, config={str(CONFIG)!r}, snapshot=[{str(SEED)!r}])\n"
        "print(json.dumps({'got': got, 'sky': 'sky' in sys.modules}))\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "SKYPILOT_USER": "bob"}
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["sky"] is False, "predict on a task file imported SkyPilot"
    import sky

    # the same plan as from SkyPilot's own parser (what predict read a path with before)
    parsed = sky.Task.from_yaml(str(task)).to_yaml_config()
    expected = sky_kueue.predict(parsed, config=CONFIG, snapshot=[SEED])
    assert out["got"]["decision"] == expected["decision"] == "placed"
    for key in ("team", "local_queue", "priority_class", "prediction", "task"):
        assert out["got"][key] == expected[key], key


def test_predict_on_a_missing_task_file_says_so() -> None:
    from sky_kueue.skypilot.task_reader import TaskFileError

    with pytest.raises(TaskFileError):
        sky_kueue.predict(REPO / "no-such-task.yaml", config=CONFIG, snapshot=[SEED])

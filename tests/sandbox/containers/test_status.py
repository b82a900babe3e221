"""Pod phase and container commands as the kubelet derives them (no containers started)."""

from __future__ import annotations

import pathlib
from typing import Any

import pytest

from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.images import Image
from sky_kueue.sandbox.containers.runtime import ContainerState, container_command, pod_phase


def _running() -> dict[str, Any]:
    return {"state": {"running": {"startedAt": "t"}}, "lastState": {}}


def _exited(code: int) -> dict[str, Any]:
    return {"state": {"terminated": {"exitCode": code}}, "lastState": {}}


def _restarting(code: int) -> dict[str, Any]:
    return {"state": {"waiting": {"reason": "CrashLoopBackOff"}}, "lastState": {"terminated": {"exitCode": code}}}


def _creating() -> dict[str, Any]:
    return {"state": {"waiting": {"reason": "ContainerCreating"}}, "lastState": {}}


@pytest.mark.parametrize(
    ("policy", "statuses", "phase"),
    [
        ("Never", [_creating()], "Pending"),
        ("Never", [_running(), _creating()], "Pending"),
        ("Never", [_running(), _exited(0)], "Running"),
        ("Never", [_exited(0), _exited(0)], "Succeeded"),
        ("Never", [_exited(0), _exited(3)], "Failed"),
        ("OnFailure", [_exited(0)], "Succeeded"),
        ("OnFailure", [_restarting(1)], "Running"),
        ("Always", [_exited(0)], "Running"),
        ("Always", [_restarting(0)], "Running"),
    ],
)
def test_pod_phase_follows_the_kubelets_get_phase(policy: str, statuses: list[dict[str, Any]], phase: str) -> None:
    assert pod_phase(policy, statuses) == phase


def test_container_status_reports_the_last_exit_while_waiting_to_restart() -> None:
    state = ContainerState("c", "debian:bookworm", restart_count=1)
    state.terminated = {"exitCode": 2, "reason": "Error"}
    state.waiting_reason = "CrashLoopBackOff"
    status = state.status()
    assert status["state"] == {"waiting": {"reason": "CrashLoopBackOff"}}
    assert status["lastState"] == {"terminated": {"exitCode": 2, "reason": "Error"}}
    assert status["ready"] is False and status["restartCount"] == 1


def test_command_args_and_the_images_default() -> None:
    image = Image("debian", recipes.BASE, pathlib.Path("/nonexistent"))
    assert container_command({"command": ["sh", "-c"], "args": ["exit 0"]}, image) == ["sh", "-c", "exit 0"]
    assert container_command({"args": ["python3", "-V"]}, image) == ["python3", "-V"]
    assert container_command({}, image) == ["sleep", "infinity"]

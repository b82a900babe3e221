"""The README's steps 2-3 with the real ``sky`` and the shipped closed config, on the sandbox.

Why: SkyPilot applies the admin policy on the client too, with no user; before the policy
identified a client-side request as SkyPilot's client identifies its user, every launch of a
user the closed config lists was rejected there ("this request (no user, ...) may not submit
as team 'team-a'"), while the open demo config of the other tests hid it.

Step 2 puts ``admin_policy`` in SkyPilot's global config (``isolated_environment``); step 3
writes ``~/.sky/sky-kueue.yaml`` from ``configs/sky-kueue.yaml`` with the user's own SkyPilot
name in place of ``alice`` (the README's ``me=...`` and ``sed``) and the policy finds it at its
default path. ``sky launch --dryrun`` goes through the client's and the server's policy to a
rendered cluster; ``sky jobs launch`` through the client's policy, SkyPilot's ``validate`` and
optimizer to its confirmation prompt, declined (no jobs controller is started).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.skypilot_home import isolated_environment
from tests.skypilot.builders import CONTEXT, PRODUCTION_CONFIG, REPO, TEMPLATES
from tests.skypilot.test_skypilot_on_sandbox import SkyOnSandbox

SKY = Path(sys.executable).with_name("sky")
#: README step 3's way of asking SkyPilot for the user's name.
README_ME = "from sky.utils import common_utils; print(common_utils.get_local_user_name())"

pytestmark = [
    pytest.mark.skipif(
        shutil.which("socat") is None or shutil.which("nc") is None,
        reason="SkyPilot's Kubernetes support needs socat and nc on the host (scripts/test.sh installs them)",
    ),
    pytest.mark.slow,  # SkyPilot's own API server starts (tens of seconds on two cores)
]


def test_readme_step_3_rewrites_the_one_user_entry() -> None:
    """The ``sed`` below is the README's; it must still find ``users: [alice]``."""
    readme = (REPO / "README.md").read_text()
    assert "s/users: \\[alice\\]/users: [$me]/" in readme
    assert PRODUCTION_CONFIG.read_text().count("users: [alice]") == 1


@pytest.fixture(scope="module")
def readme_sky(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SkyOnSandbox]:
    root = tmp_path_factory.mktemp("readme-sky")
    with Sandbox() as box:
        box.apply(seed.seed_cluster())
        env = isolated_environment(root, box.kubeconfig_path, PRODUCTION_CONFIG, CONTEXT)
        del env["SKY_KUEUE_CONFIG"]  # the README relies on the default, ~/.sky/sky-kueue.yaml
        env["PATH"] = f"{SKY.parent}{os.pathsep}{env.get('PATH', '')}"
        me = subprocess.run(
            [sys.executable, "-c", README_ME], env=env, capture_output=True, text=True, check=True
        ).stdout.strip()
        closed = re.sub(r"users: \[alice\]", f"users: [{me}]", PRODUCTION_CONFIG.read_text())
        (Path(env["HOME"]) / ".sky" / "sky-kueue.yaml").write_text(closed)
        runner = SkyOnSandbox(Path(env["HOME"]), env)
        try:
            yield runner
        finally:
            runner.sky("api", "stop")


def test_sky_launch_dryrun_passes_both_policies_with_the_closed_config(readme_sky: SkyOnSandbox) -> None:
    launch = readme_sky.sky("launch", "--dryrun", "-y", str(TEMPLATES / "team-a-gpu-train.yaml"))

    output = launch.stdout + launch.stderr
    assert launch.returncode == 0, output
    assert "Applying client admin policy: KueuePolicy" in output
    assert "Applying server admin policy: KueuePolicy" in output
    assert "Dryrun finished" in output
    rendered = [yaml.safe_load(p.read_text()) for p in (readme_sky.home / ".sky" / "generated").glob("*.yml.tmp")]
    assert [c["provider"]["namespace"] for c in rendered] == ["team-a"]


def test_sky_jobs_launch_passes_the_client_policy_with_the_closed_config(readme_sky: SkyOnSandbox) -> None:
    launch = readme_sky.sky("jobs", "launch", str(TEMPLATES / "team-a-gpu-train.yaml"))

    output = launch.stdout + launch.stderr
    assert "Applying client admin policy: KueuePolicy" in output
    assert "may not submit" not in output and "no team for" not in output, output
    assert "Applying server admin policy: KueuePolicy" in output  # SkyPilot's optimize request
    assert f"Kubernetes ({CONTEXT})" in output
    assert "Launching a managed job 'team-a-train'. Proceed?" in output, output


def test_a_user_the_closed_config_does_not_list_is_rejected_on_the_client(readme_sky: SkyOnSandbox) -> None:
    env = {**readme_sky.env, "SKYPILOT_USER": "mallory"}
    launch = subprocess.run(
        [str(SKY), "launch", "--dryrun", "-y", str(TEMPLATES / "team-a-gpu-train.yaml")],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        stdin=subprocess.DEVNULL,
    )

    assert launch.returncode != 0
    assert "user 'mallory' may not submit as team 'team-a'" in launch.stdout + launch.stderr

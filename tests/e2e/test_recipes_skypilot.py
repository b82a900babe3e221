"""The SkyPilot image recipe matches what SkyPilot 0.14.1's own commands look for.

Each check reads SkyPilot's source (constants or the pod template), so a SkyPilot upgrade that
moves a path, a pin or a package fails here rather than as a slow download in every pod.
"""

from __future__ import annotations

import pathlib
import re
import subprocess
import sys

import sky
from sky.skylet import constants

from sky_kueue.sandbox.containers import recipe, recipes_skypilot
from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES

TEMPLATE = pathlib.Path(sky.__file__).parent / "templates" / "kubernetes-ray.yml.j2"


def _expand_home(path: str) -> str:
    return (
        path.replace('"', "")
        .replace("${SKY_RUNTIME_DIR:-$HOME}", "/root")
        .replace("$HOME", "/root")
        .replace("~", "/root")
    )


def test_ray_pins_are_skypilots() -> None:
    assert recipes_skypilot.RAY_VERSION == constants.SKY_REMOTE_RAY_VERSION
    for pin in (*recipes_skypilot.RAY_COMPANION_PINS, *recipes_skypilot.RAY_INSTALL_PINS):
        assert (
            f"install {pin}" in constants.RAY_INSTALLATION_COMMANDS or f" {pin}" in constants.RAY_INSTALLATION_COMMANDS
        ), pin


def test_paths_are_where_skypilot_looks() -> None:
    assert _expand_home(constants.SKY_UV_INSTALL_DIR) + "/uv" == recipes_skypilot.UV
    assert _expand_home(constants.SKY_REMOTE_PYTHON_ENV) == recipes_skypilot.RUNTIME_VENV
    assert _expand_home(constants.SKY_USER_ENV_PATH) == recipes_skypilot.USER_VENV
    # The venv is only created by SkyPilot when the directory is missing: the image's is kept.
    assert f"[ -d {constants.SKY_REMOTE_PYTHON_ENV} ] ||" in constants.UV_INSTALLATION_COMMANDS


def test_apt_packages_cover_the_container_commands_list() -> None:
    found = re.search(r'PACKAGES="([^"]+)"', TEMPLATE.read_text())
    assert found is not None
    wanted = {"netcat-openbsd" if name == "netcat" else name for name in found.group(1).split()}
    assert wanted == set(recipes_skypilot.SKYPILOT_APT_PACKAGES)


def test_steps_install_the_installed_skypilot_release_and_download_nothing_from_github() -> None:
    steps = recipes_skypilot.steps(recipes_skypilot.skypilot_version())
    assert any(f'"skypilot[kubernetes,remote]=={sky.__version__}"' in step for step in steps)
    joined = "\n".join(steps)
    assert "astral.sh" not in joined and "github" not in joined
    uv_steps = [step for step in steps if recipes_skypilot.UV + " " in step and "install -D" not in step]
    assert uv_steps and all("UV_PYTHON_DOWNLOADS=never" in step for step in uv_steps)


def test_skypilot_image_references_map_to_the_recipe() -> None:
    references = [image_id for _, image_id in KUBERNETES_IMAGES]
    references += [image_id.removeprefix("docker:") for image_id in references]
    references += list(recipes_skypilot.UPSTREAM_REFERENCES)
    for reference in references:
        found = recipe.lookup(reference)
        assert found is not None and found.name == recipes_skypilot.SKYPILOT_RUNTIME_IMAGE, reference
    assert recipe.chain(recipes_skypilot.SKYPILOT_RUNTIME)[0].name == recipe.BASE_NAME


def test_a_new_skypilot_release_changes_the_image_key() -> None:
    assert recipes_skypilot.runtime_recipe("0.14.1").digest() != recipes_skypilot.runtime_recipe("0.14.2").digest()


def test_a_containers_sandbox_knows_skypilots_image_without_the_e2e() -> None:
    # A fresh interpreter that only imports the sandbox (as ``sandbox up --containers`` does).
    probe = (
        "from sky_kueue.sandbox import sandbox; from sky_kueue.sandbox.containers import recipe; "
        f"print(recipe.lookup({KUBERNETES_IMAGES[0][1]!r}).name)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-800:]
    assert done.stdout.strip() == recipes_skypilot.SKYPILOT_RUNTIME_IMAGE

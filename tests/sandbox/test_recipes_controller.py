"""The controller image's recipe: the Containerfile's install steps on the sandbox's base."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers import recipes_controller as rc

REPO = pathlib.Path(__file__).resolve().parents[2]


def _fake_checkout(root: pathlib.Path) -> pathlib.Path:
    (root / "configs" / "controller").mkdir(parents=True)
    shutil.copyfile(REPO / rc.INSTALL_SCRIPT, root / rc.INSTALL_SCRIPT)
    (root / "pyproject.toml").write_text("[project]\nname = 'sky-kueue'\n")
    (root / "README.md").write_text("readme\n")
    (root / "sky_kueue").mkdir()
    (root / "sky_kueue" / "__init__.py").write_text("")
    (root / "sky_kueue" / "__pycache__").mkdir()
    (root / "sky_kueue" / "__pycache__" / "x.pyc").write_bytes(b"compiled")
    return root


def test_the_deployments_image_reference_maps_to_the_recipe() -> None:
    assert rc.CONTROLLER is not None  # the tests run from a checkout
    assert recipes.lookup(rc.CONTROLLER_IMAGE_REFERENCE) == rc.CONTROLLER
    deployment = (REPO / "configs" / "controller" / "deployment.yaml").read_text()
    assert f"image: {rc.CONTROLLER_IMAGE_REFERENCE}" in deployment


def test_the_recipe_runs_the_containerfiles_install_script() -> None:
    recipe = rc.controller_recipe(REPO)
    copied = dict(recipe.files)
    assert copied[str(REPO / rc.INSTALL_SCRIPT)].endswith("/install.sh")
    assert any(f"sh {copied[str(REPO / rc.INSTALL_SCRIPT)]} " in step for step in recipe.steps)
    containerfile = (REPO / "configs" / "controller" / "Containerfile").read_text()
    assert "configs/controller/install.sh" in containerfile
    assert dict(recipe.env)["HOME"] == "/tmp" and "ENV HOME=/tmp" in containerfile
    assert recipe.command[:3] == ("sky-kueue", "controller", "run")


def test_an_edited_source_gives_a_new_image_and_bytecode_does_not(tmp_path: pathlib.Path) -> None:
    root = _fake_checkout(tmp_path / "checkout")
    before = rc.controller_recipe(root)
    (root / "sky_kueue" / "__pycache__" / "x.pyc").write_bytes(b"recompiled")
    assert rc.controller_recipe(root).digest() == before.digest()
    (root / "sky_kueue" / "__init__.py").write_text("VERSION = 2\n")
    assert rc.controller_recipe(root).digest() != before.digest()


def test_the_compiled_model_neither_changes_the_image_nor_goes_into_it(tmp_path: pathlib.Path) -> None:
    root = _fake_checkout(tmp_path / "checkout")
    before = rc.controller_recipe(root)
    built = root / "sky_kueue" / "kueue" / "_compiled"
    built.mkdir(parents=True)
    (built / "scheduler.cpython-311-x86_64-linux-gnu.so").write_bytes(b"host build")
    after = rc.controller_recipe(root)
    assert after.digest() == before.digest()
    # the sources are copied as a tree: the install step deletes the host's build before pip runs
    assert any("-name _compiled" in step and step.index("_compiled") < step.index("install.sh") for step in after.steps)


def test_no_recipe_outside_a_checkout(tmp_path: pathlib.Path) -> None:
    with pytest.raises(FileNotFoundError, match="built from a checkout"):
        rc.controller_recipe(tmp_path)
    assert rc.register_controller_image(tmp_path) is None


def test_stale_images_are_pruned(tmp_path: pathlib.Path) -> None:
    keep = tmp_path / f"{rc.CONTROLLER_IMAGE}-new"
    old = tmp_path / f"{rc.CONTROLLER_IMAGE}-old"
    other = tmp_path / "debian-bookworm-abc"
    for directory in (keep, old, other):
        (directory / "etc").mkdir(parents=True)
    assert rc.prune_stale_images(tmp_path, keep) == [old]
    assert keep.is_dir() and other.is_dir() and not old.exists()


def _python(
    code: str, cwd: pathlib.Path, *, pythonpath: pathlib.Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter, outside the checkout (its package comes from the install
    or from ``pythonpath``)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=cwd, timeout=120, check=False
    )


#: Imports only what ``sandbox up --containers`` imports, then resolves the deployment's image.
_RESOLVE_THROUGH_THE_NODE = f"""
import sys
from sky_kueue.sandbox.containers import node
from sky_kueue.sandbox.containers.images import ImageNotFound, ImageStore
print(node.__file__)
try:
    print("recipe", ImageStore().resolve({rc.CONTROLLER_IMAGE_REFERENCE!r}).name)
except ImageNotFound as exc:
    print("missing", str(exc).splitlines()[0])
"""


def test_the_containers_node_knows_the_controllers_image_from_a_checkout(tmp_path: pathlib.Path) -> None:
    done = _python(_RESOLVE_THROUGH_THE_NODE, tmp_path)
    assert done.returncode == 0, done.stderr
    where, outcome = done.stdout.splitlines()
    assert pathlib.Path(where).is_relative_to(REPO)
    assert outcome == f"recipe {rc.CONTROLLER_IMAGE}"


def test_without_sources_the_pull_error_says_the_image_is_built_from_a_checkout(tmp_path: pathlib.Path) -> None:
    # An installed wheel: the package with no pyproject.toml (nor configs/) beside it.
    installed = tmp_path / "site-packages"
    shutil.copytree(REPO / "sky_kueue", installed / "sky_kueue", ignore=shutil.ignore_patterns("__pycache__"))
    done = _python(_RESOLVE_THROUGH_THE_NODE, tmp_path, pythonpath=installed)
    assert done.returncode == 0, done.stderr
    where, outcome = done.stdout.splitlines()
    assert pathlib.Path(where).is_relative_to(installed)
    assert outcome.startswith(f'missing failed to pull image "{rc.CONTROLLER_IMAGE_REFERENCE}": ')
    assert outcome.endswith("; " + rc.MISSING_HINT)
    assert "configs/controller/Containerfile" in outcome and "kustomize edit set image" in outcome

"""The controller's image, ``ghcr.io/sky-kueue/sky-kueue:0.1.0``, for the sandbox's image store.

Why: ``configs/controller/deployment.yaml`` names that image, and a user builds it from
``configs/controller/Containerfile``. The sandbox cannot pull it (no registry is reachable)
nor build the Containerfile (no container engine), so it applies the **same install steps**
(``configs/controller/install.sh``, which the Containerfile runs too) to its Debian bookworm
base: the checkout's package sources and ``install.sh`` are copied into the rootfs, and pip
builds and installs the package with its dependencies into ``/opt/sky-kueue``, from PyPI as
the Containerfile's wheel stage does.

Differences from the Containerfile, and why:

* the base is Debian bookworm's python3 (3.11), not ``python:3.11-slim-bookworm``'s; Debian
  splits the ``venv`` module into ``python3-venv``, installed first;
* the image reference maps to the recipe by name, whatever the registry (the user's image is
  whatever ``kustomize edit set image`` names; in the sandbox the manifests run unchanged).

The recipe exists only when this module runs from a checkout (``pyproject.toml`` beside the
package): an installed wheel has no sources to build the image from, and then a pod naming the
image reports ``ErrImagePull`` with :data:`MISSING_HINT` (how to get the image instead). The
cache key covers a hash of the copied sources, so an edited checkout builds a new image.
``sky-kueue sandbox up --containers`` imports this module (``containers/node.py``), so
``kubectl apply -k configs/controller`` on that sandbox runs the controller from this image.
"""

from __future__ import annotations

import hashlib
import pathlib

from sky_kueue.sandbox.containers import images
from sky_kueue.sandbox.containers.recipe import BASE_NAME, ImageRecipe, register

#: The reference ``configs/controller/deployment.yaml`` names.
CONTROLLER_IMAGE_REFERENCE = "ghcr.io/sky-kueue/sky-kueue:0.1.0"
#: The repository of that reference (every tag maps to the recipe).
CONTROLLER_REPOSITORY = "ghcr.io/sky-kueue/sky-kueue"
#: The recipe's name (also a reference that maps to it).
CONTROLLER_IMAGE = "sky-kueue-controller"
#: What the "no recipe" message adds for the controller's image (one line: it ends the pod's
#: ``ErrImagePull`` message): why there is no image, and how to get one.
MISSING_HINT = (
    "the controller's image is built from a sky-kueue checkout, and this sky-kueue is installed "
    "without its sources: run `sky-kueue sandbox up --containers` from a git checkout of sky-kueue "
    "(installed with `pip install -e .`), or, for a real cluster, build configs/controller/Containerfile "
    "from the checkout's root (podman/docker build), push it to a registry the cluster pulls from, and "
    f"point the kustomization at it (`kustomize edit set image {CONTROLLER_REPOSITORY}=<your image>`; "
    "README, Install the controller)"
)
#: Where the checkout is (this file is ``<root>/sky_kueue/sandbox/containers/...``).
CHECKOUT = pathlib.Path(__file__).resolve().parents[3]
INSTALL_SCRIPT = pathlib.Path("configs/controller/install.sh")
#: What of the checkout the package build needs (the Containerfile's wheel stage copies the same).
SOURCES = (pathlib.Path("pyproject.toml"), pathlib.Path("README.md"), pathlib.Path("sky_kueue"))
#: The virtualenv ``install.sh`` creates (the Containerfile's PREFIX).
PREFIX = "/opt/sky-kueue"
#: Source files that do not go into the package (nor into the hash): bytecode, and the
#: compiled model (``sky_kueue/kueue/_compiled``: built for this host's interpreter by
#: ``scripts/compile-model.sh``; the image runs the pure model).
_IGNORED_PARTS = frozenset({"__pycache__", "_compiled"})
_IGNORED_SUFFIXES = frozenset({".pyc", ".pyo"})


def _source_files(root: pathlib.Path) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for source in SOURCES:
        path = root / source
        candidates = sorted(path.rglob("*")) if path.is_dir() else [path]
        files.extend(
            p
            for p in candidates
            if p.is_file() and not _IGNORED_PARTS & set(p.parts) and p.suffix not in _IGNORED_SUFFIXES
        )
    return files


def source_hash(root: pathlib.Path = CHECKOUT) -> str:
    """A hash over the install script and the package sources (paths and contents)."""
    digest = hashlib.sha256()
    for path in [root / INSTALL_SCRIPT, *_source_files(root)]:
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def controller_recipe(root: pathlib.Path = CHECKOUT) -> ImageRecipe:
    """The recipe: the sources and ``install.sh`` copied in, then the install steps.

    Raises:
        FileNotFoundError: ``root`` is not a checkout (no ``pyproject.toml`` or install script).
    """
    for needed in (root / "pyproject.toml", root / INSTALL_SCRIPT):
        if not needed.is_file():
            raise FileNotFoundError(f"{needed}: the controller image is built from a checkout")
    # The build directory is named by the sources' hash: the recipe's digest covers the paths
    # of the files it copies, so a changed checkout gives a new image (recipe.ImageRecipe.files).
    build = f"/tmp/sky-kueue-build-{source_hash(root)}"
    files = [(str(root / INSTALL_SCRIPT), f"{build}/install.sh")]
    files += [(str(root / source), f"{build}/src/{source}") for source in SOURCES]
    return ImageRecipe(
        name=CONTROLLER_IMAGE,
        references=(CONTROLLER_IMAGE_REFERENCE, CONTROLLER_REPOSITORY),
        base=BASE_NAME,
        steps=(
            # python:3.11-slim has the venv module; Debian's python3 needs its package.
            "apt-get update -qq && apt-get install -y -qq --no-install-recommends python3-venv >/dev/null"
            " && apt-get clean && rm -rf /var/lib/apt/lists/*",
            # the Containerfile's install, from the checkout (pip builds the wheel, as its first stage)
            f"find {build}/src \\( -name __pycache__ -o -name _compiled \\) -prune -exec rm -rf {{}} + ; "
            f"sh {build}/install.sh {build}/src {PREFIX} && rm -rf {build}",
        ),
        # The Containerfile's ENV, WORKDIR and ENTRYPOINT + CMD.
        env=(
            ("HOME", "/tmp"),
            ("PATH", f"{PREFIX}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
            ("PYTHONDONTWRITEBYTECODE", "1"),
            ("PYTHONUNBUFFERED", "1"),
        ),
        command=("sky-kueue", "controller", "run", "--help"),
        workdir="/tmp",
        files=tuple(files),
    )


def register_controller_image(root: pathlib.Path = CHECKOUT) -> ImageRecipe | None:
    """Register the recipe when ``root`` is a checkout; None otherwise (an installed package)."""
    try:
        recipe = controller_recipe(root)
    except FileNotFoundError:
        return None
    return register(recipe)


# The hint is registered either way: it shows only when no recipe maps to the reference.
images.explain_missing(CONTROLLER_REPOSITORY, MISSING_HINT)
CONTROLLER = register_controller_image()


def prune_stale_images(cache: pathlib.Path, keep: pathlib.Path) -> list[pathlib.Path]:
    """Remove controller images in ``cache`` other than ``keep`` (built from older sources:
    every edit of the checkout makes a new one, about 700 MB each); returns what was removed."""
    removed = []
    for candidate in sorted(cache.glob(f"{CONTROLLER_IMAGE}-*")):
        if candidate.is_dir() and candidate.resolve() != keep.resolve():
            images.remove_tree(candidate)
            removed.append(candidate)
    return removed

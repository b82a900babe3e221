"""Image recipes: what a sandbox image is made of, as data.

An image in the sandbox's store is a root filesystem. The base is Debian bookworm built by
``mmdebstrap``/``debootstrap`` (see :mod:`sky_kueue.sandbox.containers.images`); a named image
is a parent image plus shell steps run as root inside a copy of the parent's rootfs. Recipes
are frozen dataclasses so that their hash keys the cache: change a step and the image is
rebuilt, nothing else is.

Other modules register recipes at import time (``register(ImageRecipe(...))``) - e.g.
``recipes_skypilot`` for SkyPilot's default Kubernetes image, ``recipes_controller`` for the
controller's image (from a checkout).
``lookup`` maps an image reference as a pod spec names it (``debian:bookworm``,
``docker.io/library/python:3.11-slim``, ``ghcr.io/sky-kueue/sky-kueue:0.1.0``) to a recipe.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass

#: The name of the Debian base recipe (``base=None`` means "built on this").
BASE_NAME = "debian-bookworm"
#: Registries whose prefix is dropped when matching a reference (Docker Hub's spellings).
DEFAULT_REGISTRY_PREFIXES = ("docker.io/library/", "docker.io/", "index.docker.io/library/", "library/")


class RecipeError(ValueError):
    """A recipe that cannot be registered (one line: which recipe, why)."""


@dataclass(frozen=True)
class ImageRecipe:
    """One image: a parent and the steps that turn the parent's rootfs into this one.

    Attributes:
        name: unique name of the recipe (also a reference that maps to it).
        references: image references that map to it, with or without tag and registry
            (``"python:3.11-slim"``, ``"ghcr.io/org/img:0.1"``); a reference without a tag
            matches any tag of that repository.
        base: parent recipe name; ``None`` = the Debian base itself.
        steps: shell commands run as root, chrooted in the new rootfs, each with
            ``bash -euo pipefail -c``.
        env: environment the image sets for its containers (like a Dockerfile's ``ENV``).
        command: the default command of a container that names no ``command`` (a
            Dockerfile's ``ENTRYPOINT``/``CMD``); empty = ``sleep infinity``.
        workdir: the default working directory of its containers.
        files: ``(host path, image path)`` pairs copied into the rootfs before the steps run
            (a Containerfile's ``COPY``: what the steps install from the host, e.g. a wheel
            built from the checkout). The digest covers the paths, not the contents, so a host
            path must name its contents (e.g. a directory named by their hash).
    """

    name: str
    references: tuple[str, ...]
    base: str | None
    steps: tuple[str, ...]
    env: tuple[tuple[str, str], ...] = ()
    command: tuple[str, ...] = ()
    workdir: str = "/root"
    files: tuple[tuple[str, str], ...] = ()

    def digest(self) -> str:
        """A hash of what the rootfs is built from (not of the parent: see :func:`chain_digest`)."""
        payload: dict[str, object] = {"name": self.name, "base": self.base, "steps": list(self.steps)}
        if self.files:  # only when set, so the keys of recipes without files stay as they were
            payload["files"] = [list(pair) for pair in self.files]
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()

    def describe(self) -> dict[str, object]:
        return asdict(self)


_lock = threading.Lock()
_recipes: dict[str, ImageRecipe] = {}


def register(recipe: ImageRecipe) -> ImageRecipe:
    """Add ``recipe`` (idempotent for an equal recipe).

    Raises:
        RecipeError: another recipe has the same name, or the recipe names itself as its base.
    """
    if recipe.base == recipe.name:
        raise RecipeError(f"image recipe {recipe.name!r}: its base is itself")
    with _lock:
        existing = _recipes.get(recipe.name)
        if existing is not None and existing != recipe:
            raise RecipeError(f"image recipe {recipe.name!r} is already registered with different contents")
        _recipes[recipe.name] = recipe
    return recipe


def unregister(name: str) -> None:
    """Remove a recipe (tests)."""
    with _lock:
        _recipes.pop(name, None)


def recipes() -> dict[str, ImageRecipe]:
    with _lock:
        return dict(_recipes)


def get(name: str) -> ImageRecipe | None:
    """The recipe called ``name`` exactly."""
    with _lock:
        return _recipes.get(name)


def normalize(reference: str) -> str:
    """``reference`` without digest, Docker Hub registry prefixes and surrounding blanks."""
    ref = reference.strip().split("@", 1)[0]
    for prefix in DEFAULT_REGISTRY_PREFIXES:
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    return ref


def split_tag(reference: str) -> tuple[str, str | None]:
    """``("repo/path", "tag")`` of a reference; a ``:`` in the registry's host:port is no tag."""
    slash = reference.rfind("/")
    colon = reference.rfind(":")
    if colon > slash:
        return reference[:colon], reference[colon + 1 :]
    return reference, None


def _matches(pattern: str, reference: str) -> bool:
    pattern_n = normalize(pattern)
    if pattern_n == reference:
        return True
    repo, tag = split_tag(pattern_n)
    ref_repo, ref_tag = split_tag(reference)
    if tag is None:
        return repo == ref_repo
    return repo == ref_repo and (tag == ref_tag or (ref_tag is None and tag == "latest"))


def lookup(reference: str) -> ImageRecipe | None:
    """The recipe an image reference maps to, or ``None`` (the kubelet reports ``ErrImagePull``)."""
    ref = normalize(reference)
    with _lock:
        candidates = list(_recipes.values())
    for recipe in candidates:
        if recipe.name == ref:
            return recipe
    for recipe in candidates:
        if any(_matches(pattern, ref) for pattern in recipe.references):
            return recipe
    return None


def chain(recipe: ImageRecipe) -> list[ImageRecipe]:
    """``recipe`` and its ancestors, base first.

    Raises:
        RecipeError: a parent is not registered, or the chain loops.
    """
    result: list[ImageRecipe] = [recipe]
    seen = {recipe.name}
    current = recipe
    while current.base is not None:
        parent = get(current.base)
        if parent is None:
            raise RecipeError(f"image recipe {current.name!r}: base {current.base!r} is not registered")
        if parent.name in seen:
            raise RecipeError(f"image recipe {recipe.name!r}: its bases loop through {parent.name!r}")
        seen.add(parent.name)
        result.append(parent)
        current = parent
    return list(reversed(result))


def chain_digest(recipe: ImageRecipe) -> str:
    """The cache key of ``recipe``'s rootfs: a hash over its whole chain of recipes."""
    digests = [r.digest() for r in chain(recipe)]
    return hashlib.sha256("\n".join(digests).encode()).hexdigest()[:16]


#: The Debian base. Its steps are the debootstrap recipe (see ``images.base_build_argv``);
#: the steps listed here run after it (apt's proxy setting is written by the store).
BASE = register(
    ImageRecipe(
        name=BASE_NAME,
        references=(
            "debian:bookworm",
            "debian:bookworm-slim",
            "debian:12",
            "debian:12-slim",
            "debian:latest",
            "debian",
            "python:3.11-slim",
            "python:3.11-slim-bookworm",
            "python:3.11",
            "python:3-slim",
        ),
        base=None,
        steps=(),
    )
)

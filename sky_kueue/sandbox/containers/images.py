"""The sandbox's image store: root filesystems built from Debian's packages, cached on disk.

Why not pull OCI images: the sandbox reaches no container registry (only Debian's and PyPI's
package archives), so an image is built locally from a recipe
(:mod:`sky_kueue.sandbox.containers.recipe`). The base is Debian bookworm from ``debootstrap
--variant=minbase`` plus python3 and ca-certificates; a named image is its parent's rootfs
copied, then the recipe's steps run chrooted in it.

Cache layout (``~/.cache/sky-kueue/images`` unless ``SKY_KUEUE_IMAGE_CACHE`` or a parameter
says otherwise)::

    <cache>/<recipe name>-<chain digest>/        the rootfs, complete (renamed into place)
    <cache>/.<recipe name>-<chain digest>.lock   flock held while building it
    <cache>/.building-<name>-<digest>-<pid>/     a build in progress (removed if left behind)

A build happens in a temporary directory and is renamed into place, so a rootfs that exists
is complete; an exclusive ``flock`` on the lock file keeps two processes from building the
same image. Every build runs in a private mount namespace (``unshare --mount``), so the
``/proc``, ``/sys`` and ``/dev`` that debootstrap and the steps need vanish with it, even when
the build is killed.

The machine reaches deb.debian.org and PyPI through a TLS-intercepting proxy whose CA is in
the host's bundle; the host's ``/etc/resolv.conf`` and CA bundle are copied into the rootfs
before the steps run (and again at every container start, by the runtime).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass

from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.recipe import ImageRecipe, RecipeError

LOG = logging.getLogger(__name__)

#: Environment variable naming the cache directory.
IMAGE_CACHE_ENV = "SKY_KUEUE_IMAGE_CACHE"
DEFAULT_CACHE_DIR = pathlib.Path("~/.cache/sky-kueue/images")
DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
#: Packages added to debootstrap's minbase (the base image's python3, TLS roots).
BASE_PACKAGES = ("python3", "ca-certificates")
HOST_CA_BUNDLE = pathlib.Path("/etc/ssl/certs/ca-certificates.crt")
HOST_RESOLV_CONF = pathlib.Path("/etc/resolv.conf")
#: A base build takes about 1-3 minutes here; past this it is considered stuck.
BUILD_TIMEOUT_SECONDS = 30 * 60
#: How much of a failed build's output goes into the error message.
ERROR_TAIL_CHARS = 2000


class ImageError(RuntimeError):
    """An image could not be built (one line plus the tail of the failing command's output)."""


class ImageNotFound(ImageError):
    """No recipe maps to the reference: what a kubelet reports as ``ErrImagePull``."""


#: Why a known image has no recipe here, by repository (normalized, without tag): appended to
#: the "no recipe" message, so a pod's ``ErrImagePull`` says what to do instead of only that
#: the image is missing. Filled by :func:`explain_missing`.
_MISSING_HINTS: dict[str, str] = {}


def explain_missing(repository: str, hint: str) -> None:
    """Say why ``repository`` (any tag) may have no recipe: the hint ends its "no recipe" message.

    Raises:
        ValueError: the hint spans lines (a pod's waiting message is the message's first line).
    """
    if "\n" in hint:
        raise ValueError(f"the hint for {repository!r} must be one line (it ends a pod's waiting message)")
    _MISSING_HINTS[recipes.split_tag(recipes.normalize(repository))[0]] = hint


def missing_hint(reference: str) -> str | None:
    """The hint registered for ``reference``'s repository, or None."""
    return _MISSING_HINTS.get(recipes.split_tag(recipes.normalize(reference))[0])


@dataclass(frozen=True)
class Image:
    """A built image: its recipe and the directory holding its root filesystem."""

    reference: str
    recipe: ImageRecipe
    rootfs: pathlib.Path

    @property
    def image_id(self) -> str:
        """What ``containerStatuses[*].imageID`` reports (the cache key, as a digest)."""
        return f"sky-kueue://{self.rootfs.name}"

    @property
    def env(self) -> dict[str, str]:
        """The environment the image sets (its whole chain, child last)."""
        merged: dict[str, str] = {}
        for step in recipes.chain(self.recipe):
            merged.update(dict(step.env))
        return merged

    @property
    def command(self) -> tuple[str, ...]:
        """The default command (nearest recipe in the chain that sets one)."""
        for step in reversed(recipes.chain(self.recipe)):
            if step.command:
                return step.command
        return ()


def cache_dir(override: str | os.PathLike[str] | None = None) -> pathlib.Path:
    """The cache directory: ``override``, else ``$SKY_KUEUE_IMAGE_CACHE``, else the default."""
    chosen = override or os.environ.get(IMAGE_CACHE_ENV) or DEFAULT_CACHE_DIR
    return pathlib.Path(chosen).expanduser()


def base_build_argv(target: pathlib.Path) -> list[str]:
    """The debootstrap command that makes the base rootfs in ``target``."""
    return [
        "debootstrap",
        "--variant=minbase",
        f"--include={','.join(BASE_PACKAGES)}",
        DEBIAN_SUITE,
        str(target),
        DEBIAN_MIRROR,
    ]


def _base_salt() -> str:
    # The base's key covers how debootstrap is called, so changing it rebuilds the base.
    return hashlib.sha256(" ".join(base_build_argv(pathlib.Path("/"))).encode()).hexdigest()[:8]


def image_key(recipe: ImageRecipe) -> str:
    """The cache directory name of a recipe's rootfs."""
    return f"{recipe.name}-{recipes.chain_digest(recipe)}{_base_salt()}"


#: What runs inside the build's private mount namespace before a chrooted step: the kernel
#: file systems a package manager needs, bound into the target ($1); the step is $2.
_CHROOT_SCRIPT = r"""
set -eu
root=$1; step=$2
mount -t proc proc "$root/proc"
mount -t sysfs sysfs "$root/sys"
mount --rbind /dev "$root/dev"
exec chroot "$root" /bin/bash -euo pipefail -c "$step"
"""

#: The environment of build steps: a clean one (the host's would leak into the image).
_STEP_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME": "/root",
    "LANG": "C.UTF-8",
    "DEBIAN_FRONTEND": "noninteractive",
    "SSL_CERT_FILE": str(HOST_CA_BUNDLE),
    "PIP_CERT": str(HOST_CA_BUNDLE),
    "REQUESTS_CA_BUNDLE": str(HOST_CA_BUNDLE),
}


class ImageStore:
    """Finds, builds and caches images; safe to share between threads and processes."""

    def __init__(self, cache: str | os.PathLike[str] | None = None) -> None:
        self.cache = cache_dir(cache)

    def resolve(self, reference: str) -> ImageRecipe:
        """The recipe ``reference`` maps to.

        Raises:
            ImageNotFound: no recipe maps to it.
        """
        found = recipes.lookup(reference)
        if found is None:
            hint = missing_hint(reference)
            raise ImageNotFound(
                f'failed to pull image "{reference}": the sandbox image store has no recipe for it '
                f"(known: {', '.join(sorted(recipes.recipes()))})" + (f"; {hint}" if hint else "")
            )
        return found

    def path(self, recipe: ImageRecipe) -> pathlib.Path:
        return self.cache / image_key(recipe)

    def cached(self, reference: str) -> bool:
        """True if the image is built (no build needed to start a container from it)."""
        try:
            return self.path(self.resolve(reference)).is_dir()
        except (ImageNotFound, RecipeError):
            return False

    def ensure(self, reference: str) -> Image:
        """The built image for ``reference``, building it (and its parents) if needed.

        Blocks for the build (minutes for the base); callers run it off the API server's threads.

        Raises:
            ImageNotFound: no recipe maps to the reference.
            ImageError: a build step failed, or a parent recipe is missing.
        """
        target = self.resolve(reference)
        try:
            chain = recipes.chain(target)
        except RecipeError as exc:
            raise ImageError(str(exc)) from exc
        parent: pathlib.Path | None = None
        for step in chain:
            parent = self._ensure_one(step, parent)
        assert parent is not None
        return Image(reference, target, parent)

    def _ensure_one(self, recipe: ImageRecipe, parent: pathlib.Path | None) -> pathlib.Path:
        final = self.path(recipe)
        if final.is_dir():
            return final
        self.cache.mkdir(parents=True, exist_ok=True)
        with self._locked(final.name):
            if final.is_dir():  # another process built it while we waited
                return final
            for stale in self.cache.glob(f".building-{final.name}-*"):
                remove_tree(stale)
            work = self.cache / f".building-{final.name}-{os.getpid()}"
            started = time.monotonic()
            LOG.info("building image %s into %s", recipe.name, final)
            try:
                if parent is None:
                    self._debootstrap(work)
                else:
                    _copy_tree(parent, work)
                _copy_host_files(work)
                _copy_recipe_files(recipe, work)
                for step in recipe.steps:
                    self._run_step(work, recipe, step)
                _copy_host_files(work)  # a step may have rewritten the bundle (update-ca-certificates)
                os.rename(work, final)
            except BaseException:
                remove_tree(work)
                raise
            LOG.info("built image %s in %.0f s", recipe.name, time.monotonic() - started)
        return final

    @contextlib.contextmanager
    def _locked(self, key: str) -> Iterator[None]:
        with open(self.cache / f".{key}.lock", "w", encoding="utf-8") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _debootstrap(self, work: pathlib.Path) -> None:
        if shutil.which("debootstrap") is None:
            raise ImageError("debootstrap is not installed (apt-get install debootstrap)")
        argv = ["unshare", "--mount", "--propagation", "private", "--", *base_build_argv(work)]
        _run(argv, f"debootstrap of the {DEBIAN_SUITE} base", env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})

    def _run_step(self, work: pathlib.Path, recipe: ImageRecipe, step: str) -> None:
        argv = ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", _CHROOT_SCRIPT, "sh"]
        env = {**_STEP_ENV, **dict(recipe.env)}
        _run([*argv, str(work), step], f"image {recipe.name}: step {step[:80]!r}", env=env)


def _run(argv: list[str], what: str, env: dict[str, str]) -> None:
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, capture_output=True, env=env, timeout=BUILD_TIMEOUT_SECONDS, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ImageError(f"{what}: did not finish within {BUILD_TIMEOUT_SECONDS} s") from exc
    except OSError as exc:
        raise ImageError(f"{what}: cannot run {argv[0]}: {exc.strerror or exc}") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).decode(errors="replace")[-ERROR_TAIL_CHARS:]
        raise ImageError(f"{what}: failed with exit code {done.returncode}:\n{output}")


def _copy_tree(source: pathlib.Path, target: pathlib.Path) -> None:
    _run(["cp", "-a", "--reflink=auto", str(source), str(target)], f"copying {source}", env=dict(os.environ))


def _copy_host_files(rootfs: pathlib.Path) -> None:
    """The host's resolver and CA bundle, so that apt and pip reach the archives from inside."""
    for source in (HOST_RESOLV_CONF, HOST_CA_BUNDLE):
        if not source.exists():
            continue
        destination = rootfs / source.relative_to("/")
        destination.parent.mkdir(parents=True, exist_ok=True)
        if destination.is_symlink() or destination.exists():
            destination.unlink()
        shutil.copyfile(source, destination)


def _copy_recipe_files(recipe: ImageRecipe, rootfs: pathlib.Path) -> None:
    """The recipe's ``files`` (host path -> image path), directories recursively."""
    for source_text, destination_text in recipe.files:
        source = pathlib.Path(source_text)
        destination = rootfs / destination_text.lstrip("/")
        if not source.exists():
            raise ImageError(f"image {recipe.name}: {source} does not exist (a file the recipe copies in)")
        destination.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, destination, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, destination)


def mounts_under(path: pathlib.Path) -> list[pathlib.Path]:
    """Mount points at or below ``path`` in this process's mount namespace, deepest first."""
    resolved = str(path.resolve())
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = _unescape(line.split()[4])
            if point == resolved or point.startswith(resolved.rstrip("/") + "/"):
                found.append(pathlib.Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _unescape(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo octal
    return field.encode().decode("unicode_escape") if "\\" in field else field


def remove_tree(path: pathlib.Path) -> None:
    """Remove ``path`` after unmounting whatever is mounted below it (never crossing into a mount)."""
    if not path.exists() and not path.is_symlink():
        return
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
    if mounts_under(path):
        raise ImageError(f"cannot remove {path}: mounts remain below it")
    # rm is several times faster than shutil.rmtree on a rootfs's tens of thousands of files,
    # and --one-file-system keeps it from descending into anything mounted meanwhile.
    done = subprocess.run(["rm", "-rf", "--one-file-system", "--", str(path)], capture_output=True, check=False)
    if done.returncode != 0:
        raise ImageError(f"cannot remove {path}: {done.stderr.decode(errors='replace').strip()}")

"""The Kueue model compiled ahead of time with mypyc, used only when it matches the sources.

Why: the simulator's throughput and the burst gate's answer time are the model's own speed
(issue 38), and compiling the typed, pure model modules with mypyc (from the mypy project)
makes the same code run about twice as fast. The pure-Python modules stay the reference:
the package installs and runs without the build, and both give byte-identical answers
(``tests/sim/test_compiled_model.py``).

The build (``scripts/compile-model.sh``, run by ``scripts/bootstrap.sh`` when a C compiler
is present) writes the extension modules to :data:`BUILD_DIR`, beside a stamp naming the
digest of the sources it compiled. At import, ``sky_kueue/kueue/__init__.py`` puts that
directory first on the package's search path only when the stamp matches the sources as
they are now and this interpreter, so an edited module is never shadowed by a stale build
(it runs as pure Python until the next build). :data:`PURE_ENV` set to ``1`` forces the pure
modules (the test suite sets it: its tests patch model internals, which compiled classes
do not allow).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
from pathlib import Path

#: The compiled modules of ``sky_kueue.kueue``: the scheduler, its state and what they read.
MODULES = (
    "admission_fair_sharing",
    "eta",
    "fairsharing",
    "flavorassigner",
    "objects",
    "predictor",
    "preemption",
    "quantity",
    "queue",
    "resources",
    "scheduler",
    "snapshot",
    "tree",
    "whatif",
    "workload",
)
PACKAGE_DIR = Path(__file__).resolve().parent
#: Where the build puts the extension modules (not in version control).
BUILD_DIR = PACKAGE_DIR / "_compiled"
#: The build's stamp: the digest of the sources compiled (see :func:`sources_digest`).
STAMP = BUILD_DIR / "build.json"
#: ``SKY_KUEUE_PURE=1`` runs the pure-Python model even when a matching build exists.
PURE_ENV = "SKY_KUEUE_PURE"


def sources_digest() -> str:
    """SHA-256 of the compiled modules' sources, in :data:`MODULES` order, and of this
    interpreter's cache tag (an extension module is built for one Python version)."""
    digest = hashlib.sha256(sys.implementation.cache_tag.encode())
    for name in MODULES:
        digest.update(name.encode())
        digest.update((PACKAGE_DIR / f"{name}.py").read_bytes())
    return digest.hexdigest()


def sources_stat() -> dict[str, list[int]]:
    """Size and modification time (ns) of each compiled module's source."""
    out: dict[str, list[int]] = {}
    for name in MODULES:
        stat = (PACKAGE_DIR / f"{name}.py").stat()
        out[name] = [stat.st_size, stat.st_mtime_ns]
    return out


def build_matches() -> bool:
    """Whether :data:`BUILD_DIR` holds a build of the sources as they are now.

    The sources' sizes and times as the build saw them answer at the cost of a few ``stat``
    calls (every import of the package asks); when they differ (an edit, a checkout), the
    sources' digest decides.
    """
    try:
        stamp = json.loads(STAMP.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(stamp, dict) or stamp.get("python") != sys.implementation.cache_tag:
        return False
    try:
        if stamp.get("stat") == sources_stat():
            return True
        return stamp.get("sources") == sources_digest()
    except OSError:
        return False


def search_path(path: list[str]) -> list[str]:
    """The package's search path, with the build first when it is used."""
    if os.environ.get(PURE_ENV) == "1" or not build_matches():
        return path
    return [str(BUILD_DIR), *path]


def in_use() -> bool:
    """Whether the model modules imported so far come from the build (what a benchmark reports)."""
    import sky_kueue.kueue.scheduler as scheduler

    return (scheduler.__file__ or "").endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))

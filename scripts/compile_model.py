"""Compile the Kueue model with mypyc into ``sky_kueue/kueue/_compiled`` (see
:mod:`sky_kueue.kueue.compiled` for when the build is used).

Run from the repository root with the project's environment (mypy, which brings mypyc, is a
test dependency; a C compiler and Python's headers are needed)::

    .venv/bin/python scripts/compile_model.py           # build unless up to date
    .venv/bin/python scripts/compile_model.py --clean   # remove the build: pure Python

Exit codes: 0 built or up to date; 3 this machine cannot compile (no mypyc, no C compiler
or no Python headers: the model runs as pure Python, one line says why); 1 the build failed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sky_kueue.kueue import compiled  # noqa: E402 - the repository's package, not an installed one

EXIT_CANNOT_COMPILE = 3
#: mypyc's name for the shared library of the compiled modules (``<group>__mypyc``), placed
#: in the package so that the package's search path finds it.
GROUP = "sky_kueue.kueue._model"


def _cannot(reason: str) -> int:
    print(f"note: the Kueue model stays pure Python ({reason})", file=sys.stderr)
    return EXIT_CANNOT_COMPILE


def _missing_toolchain() -> str | None:
    try:
        import mypyc.build  # noqa: F401
    except ImportError:
        return "mypyc is not installed; it comes with mypy, a test dependency"
    try:
        import setuptools  # noqa: F401
    except ImportError:
        return "setuptools is not installed (pip install setuptools)"
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(compiler) is None:
        return f"no C compiler ({compiler!r} not found)"
    include = Path(sysconfig.get_paths()["include"])
    if not (include / "Python.h").is_file():
        return f"no Python headers ({include / 'Python.h'} not found)"
    return None


def build() -> int:
    missing = _missing_toolchain()
    if missing is not None:
        return _cannot(missing)
    if compiled.build_matches():
        print(f"the compiled model is up to date ({compiled.BUILD_DIR.relative_to(ROOT)})", file=sys.stderr)
        return 0
    from mypyc.build import mypycify
    from setuptools import Distribution

    digest = compiled.sources_digest()
    stat = compiled.sources_stat()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="sky-kueue-mypyc-") as scratch:
        paths = [str(Path("sky_kueue") / "kueue" / f"{name}.py") for name in compiled.MODULES]
        build_lib = Path(scratch) / "lib"
        extensions = mypycify(paths, group_name=GROUP, target_dir=str(Path(scratch) / "c"), opt_level="3")
        distribution = Distribution({"name": "sky-kueue-model", "ext_modules": extensions})
        command = distribution.get_command_obj("build_ext")
        command.build_lib = str(build_lib)
        command.build_temp = str(Path(scratch) / "temp")
        command.inplace = False
        distribution.run_command("build_ext")
        built = sorted((build_lib / "sky_kueue" / "kueue").glob("*.so")) + sorted(
            (build_lib / "sky_kueue" / "kueue").glob("*.pyd")
        )
        if not built:
            print("error: mypyc built no extension modules", file=sys.stderr)
            return 1
        if compiled.sources_digest() != digest or compiled.sources_stat() != stat:
            print("error: the model's sources changed during the build; run it again", file=sys.stderr)
            return 1
        clean()
        compiled.BUILD_DIR.mkdir()
        for path in built:
            shutil.copy2(path, compiled.BUILD_DIR / path.name)
    stamp = {
        "sources": digest,
        "stat": stat,
        "modules": list(compiled.MODULES),
        "python": sys.implementation.cache_tag,
    }
    compiled.STAMP.write_text(json.dumps(stamp, indent=1) + "\n")
    seconds = time.monotonic() - started
    print(f"compiled {len(compiled.MODULES)} model modules in {seconds:.0f} s", file=sys.stderr)
    return 0


def clean() -> None:
    if compiled.BUILD_DIR.exists():
        shutil.rmtree(compiled.BUILD_DIR)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clean", action="store_true", help="remove the build (the model runs as pure Python)")
    args = parser.parse_args(argv)
    if args.clean:
        clean()
        return 0
    return build()


if __name__ == "__main__":
    sys.exit(main())

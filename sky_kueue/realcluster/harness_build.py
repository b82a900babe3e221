"""Build and run the Kueue harness: Kueue's own scheduler as a same-run baseline.

The harness (``benchmarks/kueue_harness``, our Go source only) requires ``sigs.k8s.io/kueue``
at the release the real cluster pins (``sky_kueue/data/real-cluster-versions.env``); Go
resolves it from the module cache or the module proxy. It is built into the same cache as the
real cluster's binaries, never into the repository: ``<cache>/kueue-harness-<kueue
version>-<digest of the harness source>/bin/kueue-harness``, so an edited harness gets a new
build and an unchanged one is reused. The build shares Go's build cache with the real
cluster's Kueue build (same module versions, same flags), so after ``sky-kueue real-cluster
build`` it compiles little more than the harness itself. It runs under the cache's lock, so
two builders share one build.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from sky_kueue.realcluster import build
from sky_kueue.realcluster.harness_outcome import HarnessOutputError, HarnessResult, parse_output
from sky_kueue.realcluster.versions import Pins

#: The harness's Go source, in a checkout (it is a benchmark: not in the installed package).
SOURCE = Path(__file__).resolve().parents[2] / "benchmarks" / "kueue_harness"
BINARY = "kueue-harness"
KUEUE_MODULE = "sigs.k8s.io/kueue"
#: Longest a harness run may take, per scenario and repeat (scale scenarios take tens of
#: seconds on two busy cores, most of it Kueue's cache listing the fake client's objects).
RUN_TIMEOUT_SECONDS_PER_RUN = 600

_REQUIRE = re.compile(rf"^\s*(?:require\s+)?{re.escape(KUEUE_MODULE)}\s+(\S+)", re.MULTILINE)


class HarnessError(RuntimeError):
    """The harness could not be built or run; the message says which and why."""


def source_files(source: Path = SOURCE) -> list[Path]:
    """The files that make the harness binary: its Go files, go.mod and go.sum."""
    if not (source / "go.mod").is_file():
        raise HarnessError(f"no harness source in {source} (it ships in the repository's benchmarks/, not the package)")
    return sorted([*source.glob("*.go"), source / "go.mod", *source.glob("go.sum")])


def required_kueue(source: Path = SOURCE) -> str:
    """The Kueue version the harness's go.mod requires."""
    match = _REQUIRE.search((source / "go.mod").read_text(encoding="utf-8"))
    if match is None:
        raise HarnessError(f"{source / 'go.mod'} does not require {KUEUE_MODULE}")
    return match.group(1)


def digest(source: Path = SOURCE) -> str:
    """12 hex digits that change whenever a file of the harness changes."""
    sha = hashlib.sha256()
    for path in source_files(source):
        sha.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return sha.hexdigest()[:12]


def binary_path(pins: Pins, root: Path | None = None, source: Path = SOURCE) -> Path:
    """Where the harness built from ``source`` against the pinned Kueue lives in the cache."""
    return (root or build.cache_root()) / f"kueue-harness-{pins.kueue}-{digest(source)}" / "bin" / BINARY


def ensure_built(pins: Pins, log: build.Log = print, root: Path | None = None, source: Path = SOURCE) -> Path:
    """Build the harness unless the cache has this source's build; return the binary.

    Raises:
        HarnessError: the harness's go.mod requires another Kueue than the pins, or the build
            failed (Go missing or too old, module download or compile error).
    """
    wanted = required_kueue(source)
    if wanted != pins.kueue:
        raise HarnessError(
            f"{source / 'go.mod'} requires {KUEUE_MODULE} {wanted} but the real cluster pins {pins.kueue}: "
            "update the harness's go.mod (go get sigs.k8s.io/kueue@<pin> && go mod tidy)"
        )
    target = binary_path(pins, root, source)
    if target.exists():
        log(f"kueue harness ({pins.kueue}): cached in {target.parent.parent}")
        return target
    try:
        build.check_go()
    except build.BuildError as err:
        raise HarnessError(str(err)) from None
    env = build._go_env()
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    cache = target.parent.parent.parent
    with build._locked(cache):
        if target.exists():
            return target
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_name(target.name + ".partial")
        started = time.monotonic()
        try:
            build._run(["go", "build", "-ldflags", "-s -w", "-o", str(partial), "."], source, "the kueue harness", env)
        except build.BuildError as err:
            raise HarnessError(str(err)) from None
        partial.replace(target)
        log(f"kueue harness ({pins.kueue}): built in {time.monotonic() - started:.0f} s")
    return target


def run(binary: Path, scenarios: Sequence[Path], repeats: int = 1) -> list[HarnessResult]:
    """Run the harness on ``scenarios`` (``repeats`` runs each); one result per scenario.

    Raises:
        HarnessError: the harness failed (its one-line error is in the message), timed out or
            printed something that is not its JSON.
    """
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    command = [str(binary), "-repeat", str(repeats), *map(str, scenarios)]
    timeout = RUN_TIMEOUT_SECONDS_PER_RUN * repeats * max(1, len(scenarios))
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise HarnessError(f"the kueue harness did not finish within {timeout} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["(no message)"])[-1]
        raise HarnessError(f"the kueue harness exited {proc.returncode}: {tail}")
    try:
        results = parse_output(proc.stdout)
    except HarnessOutputError as err:
        raise HarnessError(str(err)) from None
    if len(results) != len(scenarios):
        raise HarnessError(f"the kueue harness printed {len(results)} results for {len(scenarios)} scenarios")
    return results

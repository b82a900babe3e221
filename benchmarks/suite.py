"""Benchmark of the test suite itself: how long a developer waits; prints one JSON document.

What is measured (each a fresh ``pytest`` process, as ``scripts/test.sh`` runs it, with the
same two workers unless ``--workers`` says otherwise):

* ``collect``: ``pytest --collect-only``, the floor every run pays (imports of the project,
  SkyPilot and the kubernetes client in each worker); the baseline of the ratios below.
* ``inner_loop``: ``pytest -m "not slow"``, what a developer runs between two edits.
  Target: 60 s on a 2-core machine.
* ``whole``: every test, the slow ones included (crash and failover runs with real
  processes, the 10,000-preemption store run, the thousand-mutant fuzzers).
  Target: 180 s on a 2-core machine.

Each run reports wall seconds, the number of tests passed and its ratio to ``collect``; a
failing run is reported as such (its time is not a result). The figures depend on what else
the machine is doing: run it on a quiet machine, and read the ratios when comparing machines.

Run: ``.venv/bin/python benchmarks/suite.py`` (about five minutes; ``--inner-only`` skips the
whole suite).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INNER_LOOP_TARGET_SECONDS = 60.0
WHOLE_SUITE_TARGET_SECONDS = 180.0
DEFAULT_WORKERS = 2
#: pytest's summary line, e.g. "1356 passed, 6 skipped in 94.10s".
_SUMMARY = re.compile(r"(\d+) passed")


@dataclass(frozen=True)
class Run:
    name: str
    seconds: float
    passed: int
    ok: bool
    ratio_to_collect: float | None = None
    target_seconds: float | None = None


def _pytest(name: str, args: list[str]) -> Run:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args]
    started = time.monotonic()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    tail = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    found = _SUMMARY.search(tail)
    if result.returncode != 0:
        print(f"suite: {name} failed (exit {result.returncode}): {tail or result.stderr[-300:]}", file=sys.stderr)
    return Run(name, round(seconds, 1), int(found.group(1)) if found else 0, result.returncode == 0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS, help="pytest-xdist workers (0: one process)")
    parser.add_argument("--inner-only", action="store_true", help="skip the whole suite")
    args = parser.parse_args(argv)
    workers = ["-n", str(args.workers), "--dist", "worksteal"] if args.workers else []

    collect = _pytest("collect", ["--collect-only"])
    runs = [collect]
    plan = [("inner_loop", ["-m", "not slow"], INNER_LOOP_TARGET_SECONDS)]
    if not args.inner_only:
        plan.append(("whole", [], WHOLE_SUITE_TARGET_SECONDS))
    for name, extra, target in plan:
        run = _pytest(name, [*workers, *extra])
        runs.append(
            Run(
                run.name,
                run.seconds,
                run.passed,
                run.ok,
                ratio_to_collect=round(run.seconds / collect.seconds, 1) if collect.seconds else None,
                target_seconds=target,
            )
        )
    print(json.dumps({"workers": args.workers, "runs": [asdict(r) for r in runs]}, indent=2))
    return 0 if all(r.ok for r in runs) else 1


if __name__ == "__main__":
    raise SystemExit(main())

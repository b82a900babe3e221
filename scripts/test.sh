#!/usr/bin/env bash
# The whole test suite: install into .venv, lint, type-check, run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/host-tools.sh
# SkyPilot pins its kubernetes client range; a conflicting install breaks it at launch time.
.venv/bin/pip check
.venv/bin/ruff check sky_kueue tests benchmarks
.venv/bin/mypy
# Bytecode is written (some machines set PYTHONDONTWRITEBYTECODE): otherwise every run and
# every `sky-kueue` process a test starts compiles the package and pytest re-rewrites the tests.
unset PYTHONDONTWRITEBYTECODE
# Three workers on this project's two-core machines: much of the suite waits on processes
# (SkyPilot, sandboxes) and sockets, so a third worker fills that time (measured 2026-11-29,
# idle: the whole default suite 133-148 s with 3 workers against 204 s with 2; not slow 59 s).
# PYTEST_WORKERS=0 runs in one process; arguments after ours win.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-3}" --dist worksteal "$@"

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
# Two workers (this project's machines have two cores; much of the suite waits on processes
# and sockets). PYTEST_WORKERS=0 runs in one process; arguments after ours win.
.venv/bin/python -m pytest -n "${PYTEST_WORKERS:-2}" --dist worksteal "$@"

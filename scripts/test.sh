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
.venv/bin/python -m pytest "$@"

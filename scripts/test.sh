#!/usr/bin/env bash
# The whole test suite: install into .venv, lint, type-check, run pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
if ! command -v kubectl >/dev/null 2>&1; then
  # kubectl is the second, independent client of the sandbox tests; Debian ships it.
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq kubernetes-client >/dev/null
  fi
fi
# SkyPilot pins its kubernetes client range; a conflicting install breaks it at launch time.
.venv/bin/pip check
.venv/bin/ruff check sky_kueue tests benchmarks
.venv/bin/mypy
.venv/bin/python -m pytest "$@"

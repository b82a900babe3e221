#!/usr/bin/env bash
# The whole loop with the real SkyPilot on the sandbox, stage by stage with evidence and times
# (tests/e2e/skypilot_loop.py says what runs). Without options it stops where SkyPilot's runtime
# setup needs containers; with --containers (root) pods run in namespaces of their own on
# SkyPilot's default image (built once into ~/.cache/sky-kueue/images) and the loop goes on to
# the relaunched job's SUCCEEDED and the controller's record of it.
set -euo pipefail
cd "$(dirname "$0")/.."
for arg in "$@"; do
  case "$arg" in
    --containers) ;;
    *) echo "usage: scripts/e2e-skypilot.sh [--containers]" >&2; exit 2 ;;
  esac
done
bash scripts/bootstrap.sh
bash scripts/host-tools.sh
exec .venv/bin/python -m tests.e2e.skypilot_loop "$@"

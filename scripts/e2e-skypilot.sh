#!/usr/bin/env bash
# The whole loop with the real SkyPilot on the sandbox, stage by stage with evidence
# (tests/e2e/skypilot_loop.py says what runs and where SkyPilot's runtime stops it here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
bash scripts/host-tools.sh
exec .venv/bin/python -m tests.e2e.skypilot_loop

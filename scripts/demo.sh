#!/usr/bin/env bash
# The main job on a machine with no cluster: install into .venv, then run the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/sky-kueue demo "$@"

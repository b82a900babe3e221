#!/usr/bin/env bash
# The main job on a machine with no cluster and no root: install into .venv, then run the
# demo (two sandbox clusters in one kubeconfig, the controller, three runs; about 6 s).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/sky-kueue demo "$@"

#!/usr/bin/env bash
# Real Kubernetes and the real Kueue on this machine, from a checkout:
#   scripts/real-cluster.sh build    # compile the pinned upstream modules (cached; needs Go)
#   scripts/real-cluster.sh up       # start a cluster in the background, print its KUBECONFIG
#   scripts/real-cluster.sh status | down
# The same as `sky-kueue real-cluster ...`; installs .venv first (scripts/bootstrap.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/sky-kueue real-cluster "$@"

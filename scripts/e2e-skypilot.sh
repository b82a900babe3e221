#!/usr/bin/env bash
# The whole loop with the real SkyPilot on the sandbox, stage by stage with evidence and times
# (tests/e2e/skypilot_loop.py says what runs). Without options it stops where SkyPilot's runtime
# setup needs containers; with --containers (root) pods run in namespaces of their own on
# SkyPilot's default image (built once into ~/.cache/sky-kueue/images, or $SKY_KUEUE_IMAGE_CACHE)
# and the loop goes on to the relaunched job's SUCCEEDED and the controller's record of it.
# With --real (root) the same stages run on real Kubernetes, the real Kueue and a real node
# (kubelet, containerd, runc, CNI bridge; tests/e2e/real_world.py), built from their Go modules
# and Debian's packages (sky-kueue real-cluster build; cached in ~/.cache/sky-kueue/upstream).
# With --lane (no containers) team-b has a relaunch lane after one preemption, aging.strategy
# KUEUE_AGING and the server plugin: the loop stops once Kueue admits the relaunch in the lane.
set -euo pipefail
cd "$(dirname "$0")/.."
containers=0
for arg in "$@"; do
  case "$arg" in
    --containers|--real) containers=1 ;;
    --lane) ;;
    *) echo "usage: scripts/e2e-skypilot.sh [--containers | --real | --lane]" >&2; exit 2 ;;
  esac
done
bash scripts/host-tools.sh
if [ "$containers" = 1 ] && [ "$(id -u)" = 0 ]; then
  # The Debian base image needs only the standard library and debootstrap: build it while
  # bootstrap.sh makes the venv (minutes each on a fresh machine). The loop's own build waits
  # on the image store's lock and finds it, or builds it itself if this one failed.
  base_log="${TMPDIR:-/tmp}/sky-kueue-e2e-base-image.log"
  PYTHONPATH=. python3 -c 'from sky_kueue.sandbox.containers.images import ImageStore; ImageStore().ensure("debian:bookworm")' \
    >"$base_log" 2>&1 &
  echo "e2e: building the Debian base image in the background (log: $base_log)"
fi
bash scripts/bootstrap.sh
exec .venv/bin/python -m tests.e2e.skypilot_loop "$@"

#!/usr/bin/env bash
# Host tools the tests and real SkyPilot use beside the Python packages:
#   kubectl  - the second, independent client of the sandbox tests;
#   socat, nc - SkyPilot's Kubernetes port-forward networking (`sky check kubernetes` needs both);
#   rsync    - SkyPilot's file sync to pods;
#   debootstrap - the Debian base image of `sandbox up --containers`;
#   containerd, runc, containernetworking-plugins, iptables - the real cluster's real node
#     (`real-cluster up --real-node`, scripts/e2e-skypilot.sh --real).
# Installed from Debian's packages when missing and we are root; otherwise say what is missing.
set -euo pipefail
missing=()
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
command -v socat >/dev/null 2>&1 || missing+=(socat)
command -v nc >/dev/null 2>&1 || missing+=(netcat-openbsd)
command -v rsync >/dev/null 2>&1 || missing+=(rsync)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)  # sandbox --containers: base image
command -v containerd >/dev/null 2>&1 || missing+=(containerd)  # the real node (1.6: CRI v1)
command -v runc >/dev/null 2>&1 || missing+=(runc)
[ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "host-tools: missing ${missing[*]} (install them; tests that need them are skipped)" >&2
fi

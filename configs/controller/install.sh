#!/bin/sh
# The controller image's install steps, in one place for both images that carry them:
#   - configs/controller/Containerfile (users' registries: podman/docker build), and
#   - sky_kueue/sandbox/containers/recipes_controller.py (the sandbox's local image of the
#     same name, built on its Debian bookworm root filesystem).
#
# Usage (as root, inside the image being built):
#   install.sh PACKAGE [PREFIX]
# PACKAGE is what pip installs: the sky-kueue wheel (or a checkout). Where its dependencies come
# from is pip's business (PIP_INDEX_URL, or PIP_NO_INDEX=1 with PIP_FIND_LINKS=<wheel dir>).
# PREFIX (default /opt/sky-kueue) receives a virtualenv; `sky-kueue` is linked onto PATH.
#
# The controller runs as uid/gid 65532, the Deployment's runAsUser/runAsGroup
# (configs/controller/deployment.yaml), with a read-only root filesystem: everything is
# byte-compiled here, and HOME points at the writable /tmp the Deployment mounts.
set -eu

package=${1:?usage: install.sh PACKAGE [PREFIX]}
prefix=${2:-/opt/sky-kueue}
uid=65532

python3 -m venv "$prefix"
"$prefix/bin/pip" install --no-cache-dir --disable-pip-version-check --no-warn-script-location "$package"
"$prefix/bin/python" -m compileall -q "$prefix" >/dev/null
ln -sf "$prefix/bin/sky-kueue" /usr/local/bin/sky-kueue

if ! getent group "$uid" >/dev/null; then
    groupadd --gid "$uid" sky-kueue
fi
if ! getent passwd "$uid" >/dev/null; then
    useradd --uid "$uid" --gid "$uid" --no-create-home --home-dir /tmp --shell /usr/sbin/nologin sky-kueue
fi

# A smoke test of what the Deployment runs (fails the build, not the rollout).
sky-kueue controller run --help >/dev/null

"""The image SkyPilot's Kubernetes pods name by default, for the sandbox's image store.

Why preinstall anything: SkyPilot's pod starts from its own default image, which already holds
what its runtime setup would otherwise download (its ``Dockerfile_k8s``: apt packages, uv, the
``~/skypilot-runtime`` venv with Ray and SkyPilot's dependencies, ``~/sky-user-env``). Every step
SkyPilot runs in the pod checks first and skips what is present, so an image with the same
contents makes the launch need neither GitHub (``astral.sh``'s uv installer, uv's managed
Python downloads: unreachable here) nor minutes of installing per pod. What each step below
skips, with the SkyPilot 0.14.1 source that needs it:

1. apt packages - ``sky/templates/kubernetes-ray.yml.j2``, the container's STEP 1: ``PACKAGES=
   "rsync curl wget netcat gcc patch pciutils openssh-server"``, each tested with ``command -v``
   (``pkg_present``); with none missing, apt is not run at all ("All required packages already
   installed") and sshd starts at once. ``sudo`` and ``/etc/systemd`` serve ``setup_commands``
   (``sudo touch ~/.sudo_as_admin_successful``, the ``DefaultTasksMax`` line appended to
   ``/etc/systemd/system.conf``); ``procps`` gives ``pgrep`` to the preStop hook.
2. uv at ``~/.local/bin/uv`` - ``sky/skylet/constants.py`` ``SKY_UV_INSTALL_CMD`` runs
   ``~/.local/bin/uv -V`` and only if that fails ``curl https://astral.sh/uv/install.sh``. Here
   uv comes from its PyPI wheel (``UV_VERSION``).
3. ``~/skypilot-runtime`` - ``UV_INSTALLATION_COMMANDS`` creates it with ``uv venv --python
   3.10`` (a download of a uv-managed CPython from GitHub) only when the directory is missing;
   here it is a venv on Debian's python3.11 (SkyPilot requires Python < 3.12).
4. Ray and SkyPilot's dependencies in it - ``RAY_INSTALLATION_COMMANDS`` installs
   ``"setuptools<70"``, ``"click<8.3.0"``, then ``ray[default]==2.9.3`` (``SKY_REMOTE_RAY_VERSION``)
   with ``pydantic-core==2.41.1`` unless ``uv pip list`` already shows that Ray; the container's
   STEP 2 then runs ``uv pip install skypilot[kubernetes,remote]`` and ``setup_commands``
   install the API server's own wheel over it (``SKYPILOT_WHEEL_INSTALLATION_COMMANDS``). The
   image installs the same pins and the PyPI release of the installed SkyPilot version, so the
   wheel's dependencies are already satisfied. Bytecode is compiled at build time: every pod
   starts from a fresh copy of the image, and Ray's and SkyPilot's imports are large.
5. ``~/sky-user-env`` - ``ACTIVATE_SKY_USER_ENV`` activates it for the task's ``setup``/``run``
   (``SKY_USER_ENV_PATH``; SkyPilot's default image bakes it), so a ``run: python ...`` finds
   ``python``. ``python-is-python3`` covers shells that do not activate it.

Only the Python version differs from SkyPilot's image (3.11, Debian's, rather than 3.10).
The GPU reference maps to the same image: the sandbox's nodes have no GPU devices, and
SkyPilot's GPU image differs from the CPU one only by CUDA libraries.
"""

from __future__ import annotations

import importlib.metadata

from sky_kueue.sandbox.containers.recipe import BASE_NAME, ImageRecipe, register
from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES

#: The recipe's name (also a reference that maps to it).
SKYPILOT_RUNTIME_IMAGE = "skypilot-runtime"
#: uv release installed from PyPI (any uv SkyPilot's commands accept; pinned so the image is
#: reproducible).
UV_VERSION = "0.13.9"
#: ``sky/skylet/constants.py`` ``SKY_REMOTE_RAY_VERSION`` (tests check it against SkyPilot).
RAY_VERSION = "2.9.3"
#: The pins of ``RAY_INSTALLATION_COMMANDS`` besides Ray itself, in SkyPilot's order.
RAY_COMPANION_PINS = ('"setuptools<70"', '"click<8.3.0"')
RAY_INSTALL_PINS = (f'"ray[default]=={RAY_VERSION}"', '"pydantic-core==2.41.1"', '"click<8.3.0"')
#: The packages STEP 1 of the container command checks for (``PACKAGES`` in the template; the
#: template maps ``netcat`` to ``netcat-openbsd`` for apt).
SKYPILOT_APT_PACKAGES = ("rsync", "curl", "wget", "netcat-openbsd", "gcc", "patch", "pciutils", "openssh-server")
#: What else SkyPilot's commands call (see the module docstring), and the venv module the uv
#: bootstrap needs.
EXTRA_APT_PACKAGES = ("sudo", "procps", "python3-venv", "python-is-python3", "libc6-dev")
#: The container's Python (Debian bookworm's).
PYTHON = "/usr/bin/python3.11"
HOME = "/root"
UV = f"{HOME}/.local/bin/uv"
RUNTIME_VENV = f"{HOME}/skypilot-runtime"
USER_VENV = f"{HOME}/sky-user-env"
CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"

#: Upstream's default images for SkyPilot's Kubernetes image tags (``skypilot:custom-cpu-
#: ubuntu-2204-v1`` / ``-gpu-``, ``sky/clouds/kubernetes.py`` ``IMAGE_CPU``/``IMAGE_GPU``, as the
#: skypilot-catalog's ``kubernetes/images.csv`` resolves them), and the names the sandbox's
#: offline catalog resolves them to (``sky_kueue/sandbox/skypilot_home.py``).
UPSTREAM_REFERENCES = (
    "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot:latest",
    "us-docker.pkg.dev/sky-dev-465/skypilotk8s/skypilot-gpu:latest",
)


def _offline_catalog_references() -> tuple[str, ...]:
    """The sandbox catalog's image ids (plain references: a ``docker:`` prefix never reaches a
    lookup, the runtime refuses it first as ``InvalidImageName``, :mod:`.image_reference`)."""
    return tuple(image_id for _, image_id in KUBERNETES_IMAGES)


def skypilot_version() -> str:
    """The installed SkyPilot's version: the image holds the same release's dependencies."""
    return importlib.metadata.version("skypilot")


def _uv(args: str) -> str:
    # SkyPilot's SKY_UV_CMD environment; no managed-Python downloads (GitHub), and no cache
    # left in the image (with UV_LINK_MODE=copy it would double the installed size).
    return f"UV_LINK_MODE=copy UV_SYSTEM_PYTHON=false UV_PYTHON_DOWNLOADS=never UV_NO_CACHE=1 {UV} {args}"


def steps(version: str) -> tuple[str, ...]:
    """The build steps (root, chrooted, ``bash -euo pipefail -c`` each) for SkyPilot ``version``."""
    packages = " ".join((*SKYPILOT_APT_PACKAGES, *EXTRA_APT_PACKAGES))
    runtime_pip = f"VIRTUAL_ENV={RUNTIME_VENV} " + _uv("pip install --compile-bytecode")
    return (
        # 1. what STEP 1 of the container command would apt-get install; the CA bundle the
        # store copied in is kept (a package's trigger may regenerate it from Debian's CAs alone)
        f"cp {CA_BUNDLE} /tmp/ca-bundle.crt && apt-get update -qq && apt-get install -y -qq --no-install-recommends "
        f"{packages} >/dev/null && apt-get clean && rm -rf /var/lib/apt/lists/* && mkdir -p /etc/systemd "
        f"&& cp /tmp/ca-bundle.crt {CA_BUNDLE} && rm /tmp/ca-bundle.crt",
        # 2. uv from its PyPI wheel, where SKY_UV_INSTALL_CMD looks for it
        f"{PYTHON} -m venv /tmp/uv-bootstrap && /tmp/uv-bootstrap/bin/pip install -q --disable-pip-version-check "
        f"uv=={UV_VERSION} && install -D -m 0755 /tmp/uv-bootstrap/bin/uv {UV} && rm -rf /tmp/uv-bootstrap && {UV} -V",
        # 3. the runtime venv UV_INSTALLATION_COMMANDS keeps when it exists
        _uv(f"venv --seed {RUNTIME_VENV} --python {PYTHON}"),
        # 4. RAY_INSTALLATION_COMMANDS' pins, then STEP 2's SkyPilot with the extras it installs
        f"{runtime_pip} {' '.join(RAY_COMPANION_PINS)}",
        f"{runtime_pip} {' '.join(RAY_INSTALL_PINS)}",
        f'{runtime_pip} "skypilot[kubernetes,remote]=={version}"',
        # 5. the user environment ACTIVATE_SKY_USER_ENV activates
        _uv(f"venv --seed --system-site-packages {USER_VENV} --python {PYTHON}"),
    )


def runtime_recipe(version: str | None = None) -> ImageRecipe:
    """The recipe of SkyPilot's default Kubernetes image (CPU and GPU references)."""
    return ImageRecipe(
        name=SKYPILOT_RUNTIME_IMAGE,
        references=(*UPSTREAM_REFERENCES, *_offline_catalog_references()),
        base=BASE_NAME,
        steps=steps(version or skypilot_version()),
        # uv and Python's HTTP clients trust the CA bundle the sandbox copies in (the machine's
        # TLS-intercepting proxy's CA is in it), as pip does with PIP_CERT.
        env=(
            ("LANG", "C.UTF-8"),
            ("SSL_CERT_FILE", CA_BUNDLE),
            ("REQUESTS_CA_BUNDLE", CA_BUNDLE),
            ("PIP_CERT", CA_BUNDLE),
        ),
    )


SKYPILOT_RUNTIME = register(runtime_recipe())

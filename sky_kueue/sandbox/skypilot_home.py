"""A SkyPilot home that can launch onto the sandbox with no network: an offline catalog.

Why: SkyPilot 0.14.1 downloads its service catalog from GitHub the first time it needs an
entry (``sky/catalog/common.py`` ``read_catalog``): the Kubernetes image tags
(``kubernetes/images.csv``, read by ``sky/clouds/kubernetes.py`` for every pod) and, for a task
with accelerators, the accelerator names (``common/accelerators.csv``, ``common/metadata.csv``,
``sky/utils/accelerator_registry.py``). A catalog file SkyPilot did not download itself (no
``.meta/<file>.md5`` beside it) counts as edited by the user and is never refreshed, so a
home seeded with these few rows works offline indefinitely.

Only the rows the sandbox needs: SkyPilot's two default Kubernetes image tags
(``Kubernetes.IMAGE_CPU``/``IMAGE_GPU``) and the accelerators the task templates ask for.
"""

from __future__ import annotations

import csv
import os
import pathlib
import socket
from collections.abc import Mapping
from typing import Any

import yaml

#: SkyPilot's catalog schema version in 0.14.1 (``sky/skylet/constants.py``).
CATALOG_SCHEMA_VERSION = "v8"
#: Image tags SkyPilot's Kubernetes cloud resolves through the catalog, and the image each
#: names. SkyPilot puts a catalog image id on the pod as it is (``sky/clouds/kubernetes.py``
#: ``_get_image_id`` strips ``docker:`` only from a task's own ``image_id``), so these are plain
#: references, as upstream's catalog has them: with a ``docker:`` prefix a real kubelet refuses
#: the pod (``InvalidImageName``), which the real node showed.
KUBERNETES_IMAGES: tuple[tuple[str, str], ...] = (
    ("skypilot:custom-cpu-ubuntu-2204-v1", "skypilot-sandbox/cpu:offline"),
    ("skypilot:custom-gpu-ubuntu-2204-v1", "skypilot-sandbox/gpu:offline"),
)
#: Accelerators known offline: (canonical name, clouds offering it, memory GB, manufacturer).
ACCELERATORS: tuple[tuple[str, str, int, str], ...] = (
    ("A100", "['AWS', 'GCP', 'Kubernetes']", 40, "NVIDIA"),
    ("L4", "['AWS', 'GCP', 'Kubernetes']", 24, "NVIDIA"),
)


def catalog_dir(home: pathlib.Path) -> pathlib.Path:
    """Where SkyPilot reads its catalog for a process whose ``HOME`` is ``home``."""
    return home / ".sky" / "catalogs" / CATALOG_SCHEMA_VERSION


def write_offline_catalog(home: pathlib.Path) -> pathlib.Path:
    """Write the catalog files SkyPilot needs to launch on the sandbox; return the catalog dir."""
    root = catalog_dir(home)
    _write(root / "kubernetes" / "images.csv", ("Tag", "Region", "ImageId"), [(t, "", i) for t, i in KUBERNETES_IMAGES])
    _write(root / "common" / "accelerators.csv", ("AcceleratorName", "Clouds"), [(n, c) for n, c, _, _ in ACCELERATORS])
    _write(
        root / "common" / "metadata.csv",
        ("GPU", "MemoryGB", "Manufacturer"),
        [(n, str(m), maker) for n, _, m, maker in ACCELERATORS],
    )
    return root


def _write(path: pathlib.Path, header: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def free_local_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


#: SkyPilot 0.14.1's API server port when ``SKYPILOT_API_SERVER_LOCAL_PORT`` is unset
#: (``sky/server/common.py`` ``DEFAULT_SERVER_PORT``).
SKYPILOT_DEFAULT_SERVER_PORT = 46580
#: Its request-queue manager's port for that default, and the range its other ports wrap in
#: (``sky/server/requests/queues/mp_queue.py`` ``get_queue_manager_port``: the queue port moves
#: in lockstep with the API server's port, modulo 10,000 above 50,000).
SKYPILOT_DEFAULT_QUEUE_MANAGER_PORT = 50011
SKYPILOT_QUEUE_MANAGER_PORT_BASE = 50000
SKYPILOT_QUEUE_MANAGER_PORT_SPAN = 10000
#: How many API server ports to try before giving up on a free pair.
API_SERVER_PORT_ATTEMPTS = 50


def skypilot_queue_manager_port(api_server_port: int) -> int:
    """The port SkyPilot's API server on ``api_server_port`` binds its request queues to."""
    offset = api_server_port - SKYPILOT_DEFAULT_SERVER_PORT
    if offset == 0:
        return SKYPILOT_DEFAULT_QUEUE_MANAGER_PORT
    shifted = SKYPILOT_DEFAULT_QUEUE_MANAGER_PORT - SKYPILOT_QUEUE_MANAGER_PORT_BASE + offset
    return SKYPILOT_QUEUE_MANAGER_PORT_BASE + shifted % SKYPILOT_QUEUE_MANAGER_PORT_SPAN


def _bindable(port: int) -> bool:
    """Whether ``port`` can be bound on every interface now (as SkyPilot checks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("", port))
        except OSError:
            return False
    return True


def free_api_server_port() -> int:
    """A port for a SkyPilot API server of one's own whose request-queue port is free too.

    Why: SkyPilot derives a second port from the API server's (its queue manager's, in
    50,000-59,999, inside Linux's ephemeral range) and refuses to start when another process
    holds it ("port ... is already in use by another process"); a free API server port alone
    hit that under parallel tests.

    Raises:
        OSError: no such pair was found in :data:`API_SERVER_PORT_ATTEMPTS` tries.
    """
    for _ in range(API_SERVER_PORT_ATTEMPTS):
        port = free_local_port()
        queue_port = skypilot_queue_manager_port(port)
        if queue_port != port and _bindable(queue_port):
            return port
    raise OSError(f"no free port pair for a SkyPilot API server in {API_SERVER_PORT_ATTEMPTS} tries")


def isolated_environment(
    root: pathlib.Path,
    kubeconfig: pathlib.Path,
    plugin_config: pathlib.Path,
    context: str,
    skypilot_config: Mapping[str, Any] | None = None,
) -> dict[str, str]:
    """Environment for ``sky`` commands that use only ``root`` and the sandbox.

    Writes ``root/home`` (with the offline catalog), a global SkyPilot config that enables the
    sky-kueue admin policy for ``context`` (plus ``skypilot_config``), an empty project config,
    and picks a free port for SkyPilot's API server, so that nothing of the user's own
    SkyPilot setup (``~/.sky``, a running API server) is read or touched.
    """
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    write_offline_catalog(home)
    config: dict[str, Any] = {
        "admin_policy": "sky_kueue.skypilot.policy.KueuePolicy",
        "kubernetes": {"allowed_contexts": [context]},
    }
    config.update(skypilot_config or {})
    global_config = root / "skypilot-global.yaml"
    global_config.write_text(yaml.safe_dump(config), encoding="utf-8")
    project_config = root / "skypilot-project.yaml"
    project_config.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SKYPILOT_") and k not in _OVERRIDDEN}
    env.update(
        HOME=str(home),
        KUBECONFIG=str(kubeconfig),
        SKYPILOT_GLOBAL_CONFIG=str(global_config),
        SKYPILOT_PROJECT_CONFIG=str(project_config),
        SKYPILOT_API_SERVER_LOCAL_PORT=str(free_api_server_port()),
        SKY_KUEUE_CONFIG=str(plugin_config),
    )
    return env


#: Variables of the caller's environment that ``isolated_environment`` replaces.
_OVERRIDDEN = frozenset({"KUBECONFIG", "SKY_KUEUE_CONFIG", "HOME"})


#: The variables :func:`skypilot_exports` hands a shell: everything ``sky`` and the policy read
#: to use the prepared home (``isolated_environment`` also copies the caller's environment).
SKYPILOT_EXPORTS = (
    "HOME",
    "KUBECONFIG",
    "SKYPILOT_GLOBAL_CONFIG",
    "SKYPILOT_PROJECT_CONFIG",
    "SKYPILOT_API_SERVER_LOCAL_PORT",
    "SKY_KUEUE_CONFIG",
)


def skypilot_exports(
    root: pathlib.Path, kubeconfig: pathlib.Path, plugin_config: pathlib.Path, context: str
) -> dict[str, str]:
    """Prepare ``root`` as a SkyPilot home for the sandbox and return the variables to export.

    Why: one's own ``sky`` reaches the sandbox only with the offline catalog, a global config
    naming the admin policy and the sandbox's context, and the sandbox's kubeconfig; this is
    :func:`isolated_environment` for a shell rather than a test, so a user's own ``~/.sky``
    (and an API server of theirs on SkyPilot's default port) stays untouched.
    """
    env = isolated_environment(root, kubeconfig, plugin_config, context)
    return {name: env[name] for name in SKYPILOT_EXPORTS}

"""The Kubernetes contexts SkyPilot enables on this machine, read from its files (edge).

Why: ``sky-kueue check-config`` warns about a team's context that SkyPilot here would not
enable. Asking SkyPilot itself (``enabled_contexts.skypilot_enabled_contexts``) imports it:
3-10 s on two cores, for a config check that needs two files. This module applies SkyPilot
0.14.1's rule to the same files instead, without importing SkyPilot:

* SkyPilot's client config (``_reload_config_as_client`` in ``sky/skypilot_config.py``): the
  file named by ``$SKYPILOT_CONFIG`` alone if set; else the global config
  (``$SKYPILOT_GLOBAL_CONFIG``, else ``~/.sky/config.yaml``) overlaid with the project config
  (``$SKYPILOT_PROJECT_CONFIG``, else ``.sky.yaml`` in the working directory);
* the active workspace (``get_active_workspace``: ``active_workspace``, else ``default``);
* ``Kubernetes.existing_allowed_contexts`` (``sky/clouds/kubernetes.py``): the workspace's
  ``kubernetes.allowed_contexts``, else the global one; ``all`` (or
  ``SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS``) for every kubeconfig context; unset for the
  current context; ``ssh-`` contexts and contexts missing from the kubeconfig left out.

Where it cannot tell as SkyPilot would (inside a pod, where SkyPilot adds its in-cluster
context; an unreadable SkyPilot config, which SkyPilot itself reports) it answers None and
the check is skipped, as when SkyPilot finds no context.

:func:`request_config` gives the SkyPilot config a request from this machine carries (what
``sky-kueue launch --dry-run`` plans with, :mod:`.client_identity`), or None where SkyPilot's
own reading could differ, so that the caller asks SkyPilot: a config SkyPilot would refuse
(a top-level key its schema lacks, or a type problem in a field the policy reads; the full
check is SkyPilot's ``_validate_config``), two files that both set ``kubernetes.pod_config``
or ``custom_metadata`` (SkyPilot merges those with ``merge_k8s_configs``, list items by
name), a ``dashboard`` section (SkyPilot checks its links), or SkyPilot's API server
environment (it reads the server's config there).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sky_kueue.inputs.errors import InputError
from sky_kueue.inputs.files import read_text
from sky_kueue.inputs.yaml_reader import load_one
from sky_kueue.mirror.kubeconfig import DEFAULT_KUBECONFIG_PATH, IN_CLUSTER_ENV, KUBECONFIG_ENV
from sky_kueue.skypilot.cluster_discovery import ALL_CONTEXTS, allowed_contexts_setting, allows_all_contexts
from sky_kueue.skypilot.resources_reader import SSH_CONTEXT_PREFIX

logger = logging.getLogger(__name__)

#: SkyPilot 0.14.1's config locations and variables (``sky/skypilot_config.py``).
INTERNAL_CONFIG_ENV = "SKYPILOT_CONFIG"
GLOBAL_CONFIG_ENV = "SKYPILOT_GLOBAL_CONFIG"
PROJECT_CONFIG_ENV = "SKYPILOT_PROJECT_CONFIG"
GLOBAL_CONFIG_PATH = "~/.sky/config.yaml"
PROJECT_CONFIG_PATH = ".sky.yaml"
#: ``constants.SKYPILOT_DEFAULT_WORKSPACE``.
DEFAULT_WORKSPACE = "default"


#: Set in SkyPilot's API server, whose config is the server's (``ENV_VAR_IS_SKYPILOT_SERVER``).
SERVER_ENV = "IS_SKYPILOT_SERVER"
#: The top-level keys of SkyPilot 0.14.1's config (``get_config_schema`` in
#: ``sky/utils/schemas.py``, which refuses any other).
CONFIG_KEYS = frozenset(
    {
        "active_workspace", "admin_policy", "allowed_clouds", "api_server", "aws", "azure",
        "daemons", "dashboard", "data", "db", "docker", "gcp", "jobs", "kubernetes", "logs",
        "metrics", "nebius", "nvidia_gpus", "oci", "plugins", "provision", "rbac", "serve",
        "slurm", "ssh", "vast", "workspace", "workspace_config", "workspaces",
    }
)  # fmt: skip
#: Keys SkyPilot's client leaves out of a request: the database URL (moved to the environment
#: when the file is read, ``parse_and_validate_config_file``), the API server and the admin
#: policy (``get_override_skypilot_config_from_client`` in ``sky/server/requests/payloads.py``).
NOT_SENT_KEYS = ("db", "api_server", "admin_policy")
#: ``kubernetes`` keys SkyPilot merges item by item across files (``merge_k8s_configs``).
K8S_MERGED_KEYS = ("pod_config", "custom_metadata")
#: A section SkyPilot checks beyond its schema (``_validate_dashboard_external_links``).
DASHBOARD_KEY = "dashboard"


class SkyPilotFilesError(RuntimeError):
    """A SkyPilot config file named by a variable is missing or unreadable (one line)."""


def client_config(environ: Mapping[str, str]) -> dict[str, Any]:
    """SkyPilot's client config as its files set it (see the module docstring).

    Raises:
        SkyPilotFilesError: a file is missing although a variable names it, or unreadable.
    """
    merged: dict[str, Any] = {}
    for layer in _layers(environ):
        merged = _overlay(merged, layer)
    return merged


def request_config(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The SkyPilot config a request from here carries (its client config without
    :data:`NOT_SENT_KEYS`, with ``active_workspace`` set), or None where SkyPilot's own reading
    could differ (see the module docstring)."""
    from sky_kueue.skypilot.task_schema import config_problem

    if environ.get(SERVER_ENV) is not None:
        return None
    try:
        layers = _layers(environ)
    except SkyPilotFilesError as exc:
        logger.debug("sky-kueue: %s; SkyPilot reads its config itself", exc)
        return None
    for layer in layers:
        unknown = sorted(str(key) for key in layer if key not in CONFIG_KEYS)
        problem = (
            unknown
            or config_problem(layer)
            or _allowed_contexts_problem(layer)
            or (DASHBOARD_KEY if DASHBOARD_KEY in layer else None)
        )
        if problem:
            logger.debug("sky-kueue: SkyPilot checks its config itself (%s)", problem)
            return None
    for key in K8S_MERGED_KEYS:
        if sum(key in (layer.get("kubernetes") or {}) for layer in layers) > 1:
            logger.debug("sky-kueue: SkyPilot merges kubernetes.%s across its files itself", key)
            return None
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _overlay(merged, layer)
    return as_sent(merged, active_workspace(merged))


def as_sent(config: Mapping[str, Any], workspace: str) -> dict[str, Any]:
    """``config`` as a client request carries it: without :data:`NOT_SENT_KEYS`, with
    ``active_workspace`` set to ``workspace``."""
    sent = {key: value for key, value in config.items() if key not in NOT_SENT_KEYS}
    sent["active_workspace"] = workspace
    return sent


def active_workspace(config: Mapping[str, Any]) -> str:
    """``active_workspace`` of SkyPilot's config, else its default workspace."""
    value = config.get("active_workspace")
    return str(value) if value is not None else DEFAULT_WORKSPACE


def enabled_contexts(environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The contexts SkyPilot here enables, or None when it finds none or this cannot tell."""
    env = os.environ if environ is None else environ
    if env.get(IN_CLUSTER_ENV):
        return None
    try:
        config = client_config(env)
    except SkyPilotFilesError as exc:
        logger.debug("sky-kueue: %s; the teams' contexts are not checked", exc)
        return None
    known, current = _kubeconfig_contexts(env.get(KUBECONFIG_ENV, DEFAULT_KUBECONFIG_PATH))
    if not known:
        return None
    usable = [c for c in known if not c.startswith(SSH_CONTEXT_PREFIX)]
    workspace = active_workspace(config)
    setting = allowed_contexts_setting(config, workspace)
    if allows_all_contexts(config, workspace, env if setting is None else {}):
        wanted = usable
    elif isinstance(setting, list):
        wanted = [str(c) for c in setting if c]
    else:
        wanted = [current] if current is not None else []
    found = tuple(c for c in wanted if c in usable)
    return found or None


def _kubeconfig_contexts(path: str) -> tuple[list[str], str | None]:
    """Every context of the kubeconfig ``path`` (files joined by ``os.pathsep``, merged) and its
    current one, as SkyPilot's Kubernetes adaptor lists them (``sky/adaptors/kubernetes.py``
    ``list_kube_config_contexts``: ``$KUBECONFIG``, else ``~/.kube/config``)."""
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        contexts, current = kube_config.list_kube_config_contexts(config_file=path)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        logger.debug("sky-kueue: no kubeconfig contexts (%s)", exc)
        return [], None
    names = [str(c["name"]) for c in contexts or () if isinstance(c, dict) and c.get("name")]
    name = current.get("name") if isinstance(current, dict) else None
    return names, str(name) if name else None


def _allowed_contexts_problem(layer: Mapping[str, Any]) -> str | None:
    """Where ``kubernetes.allowed_contexts`` (global or a workspace's) is neither a list of
    names nor ``all``, as SkyPilot's schema requires; the policy reads it."""
    places = [("kubernetes", layer.get("kubernetes"))]
    places += [
        (f"workspaces.{name}.kubernetes", (ws or {}).get("kubernetes"))
        for name, ws in (layer.get("workspaces") or {}).items()
    ]
    for where, section in places:
        value = (section or {}).get("allowed_contexts")
        if (
            value is None
            or value == ALL_CONTEXTS
            or (isinstance(value, list) and all(isinstance(v, str) for v in value))
        ):
            continue
        return f"{where}.allowed_contexts"
    return None


def _layers(environ: Mapping[str, str]) -> list[dict[str, Any]]:
    """SkyPilot's client config files in overlay order (see the module docstring)."""
    internal = environ.get(INTERNAL_CONFIG_ENV)
    if internal is not None:
        return [_read(internal, INTERNAL_CONFIG_ENV, required=True)]
    layers = []
    for variable, default in ((GLOBAL_CONFIG_ENV, GLOBAL_CONFIG_PATH), (PROJECT_CONFIG_ENV, PROJECT_CONFIG_PATH)):
        named = environ.get(variable)
        layers.append(_read(named if named is not None else default, variable, required=named is not None))
    return layers


def _read(path: str, variable: str, *, required: bool) -> dict[str, Any]:
    expanded = Path(os.path.expanduser(path))
    if not expanded.exists():
        if required:
            raise SkyPilotFilesError(f"{variable} names {expanded}, which does not exist")
        return {}
    try:
        data = load_one(read_text(expanded, "SkyPilot config"), str(expanded))
    except (InputError, OSError) as exc:
        raise SkyPilotFilesError(f"cannot read the SkyPilot config {expanded}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SkyPilotFilesError(f"the SkyPilot config {expanded} is not a mapping")
    return data


def _overlay(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` on top of ``base``, mappings merged key by key (SkyPilot's
    ``overlay_skypilot_config`` for the keys read here)."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        merged[key] = _overlay(old, value) if isinstance(old, Mapping) and isinstance(value, Mapping) else value
    return merged

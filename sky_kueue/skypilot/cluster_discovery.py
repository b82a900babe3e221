"""Finding the clusters without being told: the kubeconfig as kubectl finds it, the contexts as
SkyPilot chooses them.

Why: a newcomer whose ``$KUBECONFIG`` points at a Kueue cluster already runs ``kubectl`` and
``sky`` against it; sky-kueue must see the same cluster without a line of its own config.

* The kubeconfig: ``cluster.kubeconfig`` of the plugin config; else ``$KUBECONFIG``, a list
  of files separated by ``os.pathsep`` that kubectl merges (missing files are ignored; the
  first file to set ``current-context`` wins: ``k8s.io/client-go/tools/clientcmd``
  ``loader.go``, and the ``kubernetes`` Python client's ``KubeConfigMerger`` does the same);
  else ``~/.kube/config`` if it exists; else, inside a pod, the service-account credentials
  (``KUBERNETES_SERVICE_HOST``, as ``rest.InClusterConfig``).
* The contexts: those the plugin config names; else SkyPilot's
  ``kubernetes.allowed_contexts`` (the active workspace's first, as
  ``Kubernetes.existing_allowed_contexts`` in SkyPilot 0.14.1 ``sky/clouds/kubernetes.py``
  reads them); else the kubeconfig's current context. ``allowed_contexts: all`` is not a
  list of names; it is treated as unset here (the current context).

Pure: the environment and the file-existence check are arguments.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

#: Environment variable holding kubectl's list of kubeconfig files.
KUBECONFIG_ENV = "KUBECONFIG"
#: kubectl's default kubeconfig.
DEFAULT_KUBECONFIG_PATH = "~/.kube/config"
#: Set by the kubelet in every pod; then the service-account credentials are used.
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
#: SkyPilot's value of ``allowed_contexts`` meaning "every context of the kubeconfig".
ALL_CONTEXTS = "all"


class KubeconfigSource(enum.Enum):
    """Where the kubeconfig came from (for messages)."""

    PLUGIN_CONFIG = "cluster.kubeconfig"
    ENVIRONMENT = "$KUBECONFIG"
    HOME = DEFAULT_KUBECONFIG_PATH
    IN_CLUSTER = "in-cluster credentials"


@dataclass(frozen=True)
class FoundKubeconfig:
    """A kubeconfig to connect with.

    Attributes:
        path: one file or an ``os.pathsep``-separated list (None: in-cluster credentials).
        source: where it was found.
    """

    path: str | None
    source: KubeconfigSource


def find_kubeconfig(
    explicit: str | None,
    environ: Mapping[str, str],
    exists: Callable[[str], bool],
    expand: Callable[[str], str] = os.path.expanduser,
) -> FoundKubeconfig | None:
    """The kubeconfig kubectl would use (see the module docstring), or None if there is none.

    Args:
        explicit: ``cluster.kubeconfig`` of the plugin config.
        environ: the process environment.
        exists: whether a file exists.
        expand: ``~`` expansion.
    """
    if explicit:
        return FoundKubeconfig(explicit, KubeconfigSource.PLUGIN_CONFIG)
    listed = [expand(p) for p in environ.get(KUBECONFIG_ENV, "").split(os.pathsep) if p]
    present = [p for p in listed if exists(p)]
    if present:
        return FoundKubeconfig(os.pathsep.join(present), KubeconfigSource.ENVIRONMENT)
    if not listed:
        home = expand(DEFAULT_KUBECONFIG_PATH)
        if exists(home):
            return FoundKubeconfig(home, KubeconfigSource.HOME)
    if environ.get(IN_CLUSTER_ENV):
        return FoundKubeconfig(None, KubeconfigSource.IN_CLUSTER)
    return None


def allowed_contexts(skypilot_config: Mapping[str, Any], workspace: str | None = None) -> tuple[str, ...]:
    """SkyPilot's ``kubernetes.allowed_contexts`` (the workspace's beats the global one).

    Args:
        skypilot_config: the request's SkyPilot config.
        workspace: the active workspace.

    Returns:
        The listed context names; empty when unset or ``all``.
    """
    scopes: list[Any] = []
    workspaces = skypilot_config.get("workspaces")
    if workspace and isinstance(workspaces, Mapping):
        scopes.append(workspaces.get(workspace))
    scopes.append(skypilot_config)
    for scope in scopes:
        kubernetes = scope.get("kubernetes") if isinstance(scope, Mapping) else None
        value = kubernetes.get("allowed_contexts") if isinstance(kubernetes, Mapping) else None
        if value is None:
            continue
        if isinstance(value, list):
            return tuple(str(v) for v in value if v)
        return ()  # "all": every kubeconfig context, which a pure function cannot list
    return ()

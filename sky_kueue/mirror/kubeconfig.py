"""The kubeconfig as kubectl finds it, or the pod's own credentials.

``--kubeconfig`` (or ``cluster.kubeconfig`` of the plugin config); else ``$KUBECONFIG``, a list
of files separated by ``os.pathsep`` that kubectl merges (missing files are ignored; the
first file to set ``current-context`` wins: ``k8s.io/client-go/tools/clientcmd``
``loader.go``, and the ``kubernetes`` Python client's ``KubeConfigMerger`` does the same);
else ``~/.kube/config`` if it exists; else, inside a pod, the service-account credentials
(``KUBERNETES_SERVICE_HOST``, as ``rest.InClusterConfig``).

One rule for every command and the admin policy, so they all talk to the cluster kubectl
would. Pure: the environment and the file-existence check are arguments.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

#: Environment variable holding kubectl's list of kubeconfig files.
KUBECONFIG_ENV = "KUBECONFIG"
#: kubectl's default kubeconfig.
DEFAULT_KUBECONFIG_PATH = "~/.kube/config"
#: Set by the kubelet in every pod; then the service-account credentials are used.
IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"


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


def why_none(
    environ: Mapping[str, str], exists: Callable[[str], bool], expand: Callable[[str], str] = os.path.expanduser
) -> str:
    """Why :func:`find_kubeconfig` found nothing, in words a user can act on.

    Why: kubectl ignores ``$KUBECONFIG`` files that do not exist, so a typo there looks like no
    kubeconfig at all; telling the user to "set $KUBECONFIG" when it is set hides the typo.
    """
    listed = [expand(p) for p in environ.get(KUBECONFIG_ENV, "").split(os.pathsep) if p]
    missing = [p for p in listed if not exists(p)]
    if len(missing) == 1:
        return f"${KUBECONFIG_ENV} names {missing[0]}, which does not exist"
    if missing:
        return f"${KUBECONFIG_ENV} names {', '.join(missing)}, none of which exists"
    return f"no ${KUBECONFIG_ENV} and no {DEFAULT_KUBECONFIG_PATH}"

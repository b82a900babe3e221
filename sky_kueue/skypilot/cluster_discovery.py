"""Finding the clusters without being told: the kubeconfig as kubectl finds it, the contexts as
SkyPilot chooses them.

Why: a newcomer whose ``$KUBECONFIG`` points at a Kueue cluster already runs ``kubectl`` and
``sky`` against it; sky-kueue must see the same cluster without a line of its own config.

* The kubeconfig: ``cluster.kubeconfig`` of the plugin config, else as kubectl finds it
  (:mod:`sky_kueue.mirror.kubeconfig`).
* The contexts: those the plugin config names; else SkyPilot's
  ``kubernetes.allowed_contexts`` (the active workspace's first, as
  ``Kubernetes.existing_allowed_contexts`` in SkyPilot 0.14.1 ``sky/clouds/kubernetes.py``
  reads them); ``allowed_contexts: all`` (or ``SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS``) means
  every context SkyPilot enables (asked of SkyPilot on its API server) or, where SkyPilot
  cannot be asked, every context of the kubeconfig as kubectl merges it
  (:mod:`sky_kueue.skypilot.kubeconfig_contexts`); else the kubeconfig's current context.

Pure: the environment and the file-existence check are arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sky_kueue.mirror.kubeconfig import (
    DEFAULT_KUBECONFIG_PATH,
    IN_CLUSTER_ENV,
    KUBECONFIG_ENV,
    FoundKubeconfig,
    KubeconfigSource,
    find_kubeconfig,
)

__all__ = [
    "ALLOW_ALL_ENV",
    "ALL_CONTEXTS",
    "DEFAULT_KUBECONFIG_PATH",
    "IN_CLUSTER_ENV",
    "KUBECONFIG_ENV",
    "FoundKubeconfig",
    "KubeconfigSource",
    "allowed_contexts",
    "allows_all_contexts",
    "discovered_contexts",
    "find_kubeconfig",
    "listed_allowed_contexts",
]

#: SkyPilot's value of ``allowed_contexts`` meaning "every context of the kubeconfig".
ALL_CONTEXTS = "all"
#: SkyPilot's environment switch with the same meaning (``sky/clouds/kubernetes.py``).
ALLOW_ALL_ENV = "SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS"


def allows_all_contexts(
    skypilot_config: Mapping[str, Any], workspace: str | None = None, environ: Mapping[str, str] | None = None
) -> bool:
    """Whether SkyPilot may use every kubeconfig context: ``allowed_contexts: all`` in the
    workspace's scope (else the global one), or :data:`ALLOW_ALL_ENV` set to true."""
    if environ is not None and environ.get(ALLOW_ALL_ENV, "").lower() in ("1", "true", "yes"):
        return True
    value = allowed_contexts_setting(skypilot_config, workspace)
    return isinstance(value, str) and value.strip().lower() == ALL_CONTEXTS


def allowed_contexts_setting(skypilot_config: Mapping[str, Any], workspace: str | None) -> Any:
    """The ``kubernetes.allowed_contexts`` value in force, as written (a list, ``all``, or
    None when unset): the workspace's if it sets one, else the global one (SkyPilot 0.14.1
    ``Kubernetes.existing_allowed_contexts``, ``sky/clouds/kubernetes.py``)."""
    scopes: list[Any] = []
    workspaces = skypilot_config.get("workspaces")
    if workspace and isinstance(workspaces, Mapping):
        scopes.append(workspaces.get(workspace))
    scopes.append(skypilot_config)
    for scope in scopes:
        kubernetes = scope.get("kubernetes") if isinstance(scope, Mapping) else None
        value = kubernetes.get("allowed_contexts") if isinstance(kubernetes, Mapping) else None
        if value is not None:
            return value
    return None


def discovered_contexts(
    skypilot_config: Mapping[str, Any],
    workspace: str | None,
    enabled: tuple[str, ...] | None,
    kubeconfig: tuple[str, ...] | None,
) -> tuple[str, ...]:
    """The contexts a team without its own list runs on, as SkyPilot would choose them.

    Args:
        skypilot_config: the request's SkyPilot config.
        workspace: the active workspace.
        enabled: the contexts SkyPilot itself enables (on its API server), if known.
        kubeconfig: every context of the kubeconfig, read at the edge when
            ``allowed_contexts`` is ``all``, if known.

    Returns:
        An explicit ``allowed_contexts`` list; with ``all``, SkyPilot's enabled contexts, else
        the kubeconfig's; else nothing (the current context).
    """
    listed = listed_allowed_contexts(skypilot_config, workspace)
    if listed:
        return listed
    if allows_all_contexts(skypilot_config, workspace):
        return enabled or kubeconfig or ()
    return ()


def listed_allowed_contexts(skypilot_config: Mapping[str, Any], workspace: str | None = None) -> tuple[str, ...] | None:
    """An explicit ``kubernetes.allowed_contexts`` list (the workspace's beats the global one).

    Returns:
        The listed names, or None when unset or ``all`` (SkyPilot then decides from the
        kubeconfig, which a pure function cannot read).
    """
    value = allowed_contexts_setting(skypilot_config, workspace)
    if isinstance(value, list):
        return tuple(str(v) for v in value if v)
    return None


def allowed_contexts(skypilot_config: Mapping[str, Any], workspace: str | None = None) -> tuple[str, ...]:
    """SkyPilot's ``kubernetes.allowed_contexts`` (the workspace's beats the global one).

    Args:
        skypilot_config: the request's SkyPilot config.
        workspace: the active workspace.

    Returns:
        The listed context names; empty when unset or ``all``.
    """
    return listed_allowed_contexts(skypilot_config, workspace) or ()

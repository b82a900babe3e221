"""Which Kubernetes contexts SkyPilot accepts, so that the policy pins only those.

Why: SkyPilot 0.14.1's optimizer refuses a task whose candidates are all Kubernetes when any
of them names a context that ``Kubernetes.existing_allowed_contexts`` does not return
(``_check_specified_regions`` in ``sky/optimizer.py``: ``ResourcesUnavailableError ... which is
not enabled``), even when the first candidate is fine. That function is SkyPilot's rule:

* ``kubernetes.allowed_contexts`` of the active workspace, else of the global config;
* ``all`` (or ``SKYPILOT_ALLOW_ALL_KUBERNETES_CONTEXTS``): every kubeconfig context;
* unset: the kubeconfig's current context only (in a pod, the in-cluster one);
* a listed context missing from the kubeconfig is not enabled, nor are ``ssh-`` contexts.

The in-process policy on the API server asks SkyPilot itself (:func:`skypilot_enabled_contexts`);
where SkyPilot's view is not the server's (a client, the RESTful policy server) only an
explicit list in the request's SkyPilot config is known (:func:`listed_allowed_contexts`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from sky_kueue.skypilot.cluster_discovery import listed_allowed_contexts
from sky_kueue.skypilot.config import PluginConfig
from sky_kueue.skypilot.request import PolicyRequest

logger = logging.getLogger(__name__)


def enabled_contexts(request: PolicyRequest) -> tuple[str, ...] | None:
    """The contexts the request may be pinned to, or None when every context is possible."""
    if request.enabled_contexts is not None:
        return request.enabled_contexts
    return listed_allowed_contexts(request.skypilot_config, request.workspace)


def not_enabled(contexts: Iterable[str | None], enabled: tuple[str, ...] | None) -> tuple[str, ...]:
    """The named contexts SkyPilot would refuse (a None context is the default one: never refused)."""
    if enabled is None:
        return ()
    allowed = set(enabled)
    return tuple(c for c in contexts if c is not None and c not in allowed)


def describe_enabled(enabled: tuple[str, ...]) -> str:
    """``enabled: a, b`` for a message (``none`` when empty)."""
    return f"enabled: {', '.join(enabled) if enabled else 'none'}"


def skypilot_enabled_contexts() -> tuple[str, ...] | None:
    """The contexts SkyPilot enables in this process (its own function, no log lines).

    Returns:
        The enabled contexts; None when SkyPilot finds no context at all (no kubeconfig
        here: it cannot launch on Kubernetes anyway and says so itself) or cannot tell.
    """
    from sky.clouds import kubernetes as sky_kubernetes

    try:
        found = sky_kubernetes.Kubernetes.existing_allowed_contexts(silent=True)
    except Exception as exc:  # noqa: BLE001 - SkyPilot reports a broken kubeconfig itself at launch
        logger.debug("SkyPilot cannot list its enabled contexts (%s); no context is left out", exc)
        return None
    names = tuple(c for c in found if isinstance(c, str))
    return names or None


def refused_team_clusters(config: PluginConfig, enabled: tuple[str, ...]) -> tuple[str, ...]:
    """One warning per context that some team's cluster names and SkyPilot does not enable.

    Args:
        config: the plugin config.
        enabled: the contexts SkyPilot enables.

    Returns:
        The warnings (one line each), in the order the contexts first appear.
    """
    teams_of: dict[str, list[str]] = {}
    for name, team in config.teams.items():
        for context in not_enabled((c.context for c in config.team_clusters(team)), enabled):
            teams_of.setdefault(context, []).append(name)
    return tuple(
        f"context {context!r} (team{'s' if len(teams) > 1 else ''} {', '.join(teams)}) is not enabled in SkyPilot "
        f"here ({describe_enabled(enabled)}): the policy leaves it out; add it to kubernetes.allowed_contexts"
        for context, teams in teams_of.items()
    )

"""Decide and rewrite in one call: what both policy adapters run.

Why: the in-process ``KueuePolicy`` and the RESTful ``policy-server`` must give the same
answer for the same request. Both convert their input to a
:class:`~sky_kueue.skypilot.request.PolicyRequest`, call :func:`evaluate` (or
:func:`misconfigured` when the plugin config cannot be loaded) and convert the
:class:`PolicyResult` back to their own wire form.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass
from typing import Any

from sky_kueue.skypilot.config import PluginConfig
from sky_kueue.skypilot.decision import (
    Decision,
    PassThrough,
    Placement,
    Rejection,
    RejectionCode,
    decide,
    early_pass_through,
)
from sky_kueue.skypilot.request import PolicyRequest
from sky_kueue.skypilot.rewrite import apply_placement
from sky_kueue.skypilot.view import ClusterView, ContextViews

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PolicyResult:
    """The outcome of one policy call.

    Attributes:
        decision: what was decided.
        task: the task to hand back (YAML form; unchanged unless placed).
        skypilot_config: the SkyPilot config to hand back.
    """

    decision: Decision
    task: dict[str, Any]
    skypilot_config: dict[str, Any]

    @property
    def rejection(self) -> Rejection | None:
        """The rejection, if the task was rejected."""
        return self.decision if isinstance(self.decision, Rejection) else None


def evaluate(
    request: PolicyRequest, config: PluginConfig, view: ClusterView | ContextViews | None = None
) -> PolicyResult:
    """Decide a request and apply the decision.

    Args:
        request: the request.
        config: the plugin config.
        view: cluster knowledge, one view or one per context (default: the plugin config alone).

    Returns:
        The decision with the resulting task and SkyPilot config.
    """
    decision = decide(request, config, view)
    if isinstance(decision, Placement):
        task, skypilot_config = apply_placement(request.task, request.skypilot_config, decision)
        logger.info(
            "sky-kueue: %s for %s: queue %s/%s, priority class %s, admission timeout %ss; %s",
            request.request_name,
            request.task.get("name") or "<unnamed task>",
            decision.namespace,
            decision.local_queue,
            decision.priority_class,
            decision.admission_timeout_seconds,
            "; ".join(decision.notes),
        )
        return PolicyResult(decision, task, skypilot_config)
    if isinstance(decision, Rejection):
        logger.info("sky-kueue: rejected %s: %s", request.request_name, decision.message)
    else:
        logger.debug("sky-kueue: pass-through %s: %s", request.request_name, decision.reason)
    return _unchanged(request, decision)


def misconfigured(request: PolicyRequest, error: Exception) -> PolicyResult:
    """The result when the plugin config cannot be loaded: fail closed, except for requests
    that must never be rejected (relaunch ``validate`` and controller launches).

    Args:
        request: the request.
        error: the configuration error (its message is one line).

    Returns:
        A pass-through for requests that need no config, else a rejection.
    """
    early = early_pass_through(request)
    if early is not None:
        return _unchanged(request, early)
    rejection = Rejection(RejectionCode.MISCONFIGURED, f"sky-kueue is misconfigured ({error}); ask your SkyPilot admin")
    logger.error("sky-kueue: %s", rejection.message)
    return _unchanged(request, rejection)


def _unchanged(request: PolicyRequest, decision: Rejection | PassThrough) -> PolicyResult:
    return PolicyResult(decision, copy.deepcopy(dict(request.task)), copy.deepcopy(dict(request.skypilot_config)))

"""``KueuePolicy``: the SkyPilot admin policy, a thin adapter around ``engine.evaluate``.

Enable it in the SkyPilot config of the API server and of clients (a client applies it first,
for the user it sends)::

    admin_policy: sky_kueue.skypilot.policy.KueuePolicy

and point ``$SKY_KUEUE_CONFIG`` at the plugin config (default ``~/.sky/sky-kueue.yaml``).

Why so thin: every decision lives in pure modules (``decision``, ``rewrite``) shared with the
RESTful policy server, so both give identical answers. This module only converts between
SkyPilot's objects and plain data, uses a ``ConfigCache`` (reloaded when the file
changes) and turns a rejection into ``sky.exceptions.UserRequestRejectedByPolicy``.

SkyPilot instantiates the class without arguments (``admin_policy_utils._get_policy_impl``)
and calls ``validate_and_mutate`` once per task of a request.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import sky
from sky import exceptions as sky_exceptions
from sky.utils import registry as sky_registry

from sky_kueue import __version__
from sky_kueue.skypilot import managed_relaunch
from sky_kueue.skypilot.client_identity import IdentityError, current_identity
from sky_kueue.skypilot.config_cache import ConfigCache
from sky_kueue.skypilot.decision import MESSAGE_PREFIX, PassThrough, Placement, Rejection
from sky_kueue.skypilot.enabled_contexts import skypilot_enabled_contexts
from sky_kueue.skypilot.engine import PolicyResult
from sky_kueue.skypilot.request import PolicyRequest, RequestOptions, UserIdentity

_CACHE = ConfigCache()


def to_policy_request(user_request: Any) -> PolicyRequest:
    """Convert a ``sky.UserRequest`` to plain data.

    On the API server the Kubernetes contexts SkyPilot enables are asked of SkyPilot itself
    (its config there is the request's); a client's kubeconfig says nothing about the
    server's, so a client-side request carries none.

    SkyPilot's client passes no user (``sky/utils/admin_policy_utils.py`` ``apply``), so a
    client-side request is made for the user SkyPilot's client sends with it
    (``client_identity.current_identity``, as the dry run shows): the same team rule then
    holds on both sides instead of rejecting every closed team on the client.

    Raises:
        sky.exceptions.UserRequestRejectedByPolicy: SkyPilot cannot tell who the client's
            user is (its own client fails the same way).
    """
    user = user_request.user
    options = user_request.request_options
    at_client_side = bool(user_request.at_client_side)
    identity = UserIdentity(id=str(user.id), name=str(user.name or user.id)) if user is not None else None
    user_is_local = identity is None and at_client_side
    if user_is_local:
        try:
            identity = current_identity().user
        except IdentityError as exc:
            raise sky_exceptions.UserRequestRejectedByPolicy(f"{MESSAGE_PREFIX}{exc}") from None
    request = PolicyRequest(
        task=user_request.task.to_yaml_config(),
        skypilot_config=plain(user_request.skypilot_config),
        request_name=str(getattr(user_request.request_name, "value", user_request.request_name)),
        at_client_side=at_client_side,
        user=identity,
        user_is_local=user_is_local,
        request_options=(
            RequestOptions(
                cluster_name=options.cluster_name,
                idle_minutes_to_autostop=options.idle_minutes_to_autostop,
                down=bool(options.down),
                dryrun=bool(options.dryrun),
            )
            if options is not None
            else None
        ),
        enabled_contexts=None if at_client_side else skypilot_enabled_contexts(),
    )
    # A server-side ``jobs.launch_cluster`` is checked against SkyPilot's own managed-jobs
    # state in this process (``managed_relaunch``); the request itself proves nothing.
    return dataclasses.replace(request, relaunch=managed_relaunch.check(request))


def plain(value: Any) -> Any:
    """A deep copy made of plain dicts and lists (``sky.Config`` is a dict subclass)."""
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def run(request: PolicyRequest) -> PolicyResult:
    """Evaluate a request with the plugin config named by ``$SKY_KUEUE_CONFIG`` (cached)."""
    return _CACHE.evaluate(request)


def unregistered_strategy_message(decision: Placement, at_client_side: bool) -> str | None:
    """Why SkyPilot would refuse the recovery strategy the policy writes, or None.

    Why: the policy writes ``job_recovery.strategy`` (``aging.strategy``), a name only the
    sky-kueue server plugin registers. Without the plugin SkyPilot's server rejects the job
    later with a generic "not a valid jobs recovery strategy" that never names sky-kueue.
    Server-side plugins load before requests run (``sky/server/plugins.py``), so on the
    server the registry is complete; a client cannot tell and leaves it to the server.
    """
    strategy = decision.recovery_strategy
    if strategy is None or at_client_side or strategy.lower() in sky_registry.JOBS_RECOVERY_STRATEGY_REGISTRY:
        return None
    return (
        f"{MESSAGE_PREFIX}aging.strategy {strategy} is not registered on this SkyPilot API server: add the "
        "sky-kueue plugin to the server's plugins.yaml (see configs/plugins.yaml) and restart it, or set "
        "aging.strategy: null in the sky-kueue config"
    )


def to_mutated_request(user_request: Any, result: PolicyResult) -> Any:
    """Turn a result into a ``sky.MutatedUserRequest``.

    Raises:
        sky.exceptions.UserRequestRejectedByPolicy: the task was rejected.
    """
    decision = result.decision
    if isinstance(decision, Rejection):
        raise sky_exceptions.UserRequestRejectedByPolicy(decision.message)
    if isinstance(decision, Placement):
        missing = unregistered_strategy_message(decision, bool(user_request.at_client_side))
        if missing is not None:
            raise sky_exceptions.UserRequestRejectedByPolicy(missing)
    if isinstance(decision, PassThrough):
        return sky.MutatedUserRequest(task=user_request.task, skypilot_config=user_request.skypilot_config)
    task = user_request.task
    # Only the resources change; rebuilding them through SkyPilot's own parser keeps every
    # other attribute of the caller's task (including unserialised ones) intact.
    task.set_resources(sky.Task.from_yaml_config(result.task).resources)
    return sky.MutatedUserRequest(task=task, skypilot_config=sky.Config.from_dict(result.skypilot_config))


class KueuePolicy(sky.AdminPolicy):
    """Label SkyPilot tasks for their team's Kueue LocalQueue (see ``decision``)."""

    @classmethod
    def validate_and_mutate(cls, user_request: Any) -> Any:
        """Validate and label one task.

        Args:
            user_request: a ``sky.UserRequest``.

        Returns:
            A ``sky.MutatedUserRequest``.

        Raises:
            sky.exceptions.UserRequestRejectedByPolicy: the task was rejected; the message
                says why and what to change. An unexpected error inside the policy is one
                too, in one line that names sky-kueue (SkyPilot would otherwise show the
                policy object's repr and the exception's class).
        """
        try:
            return to_mutated_request(user_request, run(to_policy_request(user_request)))
        except sky_exceptions.UserRequestRejectedByPolicy:
            raise
        except Exception as exc:  # the policy's outer boundary: fail closed, say so in one line
            raise sky_exceptions.UserRequestRejectedByPolicy(unexpected_error_message(exc)) from exc


def unexpected_error_message(exc: BaseException) -> str:
    """One line for a failure the policy did not anticipate (fail closed, name what to check)."""
    detail = str(exc).splitlines()[0] if str(exc) else "no detail"
    return (
        f"{MESSAGE_PREFIX}internal error in the admin policy ({type(exc).__name__}: {detail}); the request was "
        "rejected. Check the plugin config with `sky-kueue check-config $SKY_KUEUE_CONFIG` and report this "
        f"with sky-kueue {__version__}"
    )

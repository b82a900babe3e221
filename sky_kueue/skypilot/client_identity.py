"""Who a client-side plan is made for: the user and workspace SkyPilot's client would send.

Why: the policy maps a request to a team by its user and workspace, and SkyPilot's API
server always attaches a user. A dry run (``sky-kueue launch --dry-run``,
``sky_kueue.predict``) that sent none would answer for nobody and reject what the server
would accept. So it asks SkyPilot, with SkyPilot's own functions, what its client puts in
every request body (``sky.server.requests.payloads.request_body_env_vars``):

* the user id, ``common_utils.get_user_hash()``: ``$SKYPILOT_USER_ID``, else the hash kept in
  ``~/.sky/user_hash`` (created on first use);
* the user name, ``common_utils.get_local_user_name()``: ``$SKYPILOT_USER``, else the OS
  user (``getpass.getuser()``: ``$LOGNAME``, ``$USER``, ... then the password database);

and the workspace from SkyPilot's config, ``skypilot_config.get_active_workspace()``
(``active_workspace``, else ``default``). A server without authentication takes the user
from those two values as sent; one with authentication (basic auth, SSO, service-account
tokens) uses the authenticated user instead, which a client cannot know offline.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sky_kueue.skypilot.request import UserIdentity
from sky_kueue.skypilot.runtime_estimate import PastRun

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig
    from sky_kueue.skypilot.engine import PolicyResult
    from sky_kueue.skypilot.view import ClusterView, ContextViews

logger = logging.getLogger(__name__)


class IdentityError(RuntimeError):
    """SkyPilot cannot tell who the current user is (its own client would fail the same way)."""


@dataclass(frozen=True)
class ClientIdentity:
    """The identity a request from this machine carries.

    Attributes:
        user: the SkyPilot user (name and id).
        workspace: the active SkyPilot workspace.
    """

    user: UserIdentity
    workspace: str

    def describe(self) -> str:
        """One line, e.g. ``as user 'alice' (id abcd1234), workspace 'default'``."""
        return f"as user {self.user.name!r} (id {self.user.id}), workspace {self.workspace!r}"

    def to_dict(self) -> dict[str, str]:
        """JSON form: ``{"user": name, "user_id": id, "workspace": workspace}``."""
        return {"user": self.user.name, "user_id": self.user.id, "workspace": self.workspace}


def current_identity() -> ClientIdentity:
    """The user and workspace SkyPilot's client would attach to a request from here.

    Raises:
        IdentityError: SkyPilot cannot determine the user name (no ``$SKYPILOT_USER``,
            ``$LOGNAME`` or ``$USER`` and no password-database entry for this uid).
    """
    from sky import skypilot_config
    from sky.skylet import constants
    from sky.utils import common_utils

    try:
        name = common_utils.get_local_user_name()
    except (KeyError, OSError) as exc:
        raise IdentityError(
            f"SkyPilot cannot tell who you are ({type(exc).__name__}: {exc}); set SKYPILOT_USER or USER"
        ) from None
    user_id = common_utils.get_user_hash()
    identity = ClientIdentity(
        user=UserIdentity(id=str(user_id), name=str(name or user_id)),
        workspace=str(skypilot_config.get_active_workspace()),
    )
    logger.debug(
        "SkyPilot identity: user %r from %s, id %s from %s, workspace %r",
        identity.user.name,
        f"${constants.USER_ENV_VAR}" if os.getenv(constants.USER_ENV_VAR) else "the OS user",
        identity.user.id,
        f"${constants.USER_ID_ENV_VAR}"
        if os.getenv(constants.USER_ID_ENV_VAR) == user_id
        else common_utils.USER_HASH_FILE,
        identity.workspace,
    )
    return identity


def client_skypilot_config() -> dict[str, Any]:
    """The user's SkyPilot config as a request from here carries it: SkyPilot's client's own
    override config (``payloads.get_override_skypilot_config_from_client``: without
    ``admin_policy`` and ``api_server``), with ``active_workspace`` set to the active
    workspace. Its ``kubernetes.allowed_contexts`` names the clusters when the plugin config
    does not."""
    from sky import skypilot_config
    from sky.server.requests import payloads

    loaded: dict[str, Any] = dict(payloads.get_override_skypilot_config_from_client())
    workspace = skypilot_config.get_active_workspace()
    if workspace:
        loaded["active_workspace"] = workspace
    return loaded


def plan_as_client(
    identity: ClientIdentity,
    task: Mapping[str, Any],
    config: PluginConfig,
    view: ClusterView | ContextViews | None,
    *,
    team: str | None,
    priority: str | None,
    past_runs: tuple[PastRun, ...] = (),
) -> PolicyResult:
    """What the policy does with ``task`` submitted by ``identity`` with the user's own
    SkyPilot config, as the API server would receive it (the CLI's dry run and the SDK);
    ``past_runs`` feed the run-time estimate (``history_source``)."""
    from sky_kueue.skypilot.cluster_discovery import allows_all_contexts
    from sky_kueue.skypilot.kubeconfig_contexts import kubeconfig_contexts
    from sky_kueue.skypilot.launch import plan_launch

    skypilot_config = client_skypilot_config()
    every_context = (
        kubeconfig_contexts(config.cluster.kubeconfig)
        if allows_all_contexts(skypilot_config, identity.workspace, os.environ)
        else None
    )
    return plan_launch(
        task,
        config,
        view,
        team=team,
        priority=priority,
        user=identity.user,
        workspace=identity.workspace,
        skypilot_config=skypilot_config,
        past_runs=past_runs,
        kubeconfig_contexts=every_context,
    )

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

Importing SkyPilot to ask costs 3-10 s on two cores, most of a dry run. So when SkyPilot is not
imported yet, the same values are read from the same places (:func:`identity_from_files`: the
two variables, ``getpass``, the hash file; the config from SkyPilot's files,
:func:`sky_kueue.skypilot.skypilot_files.request_config`), and SkyPilot is asked only where
that reading could differ from its own: no valid hash file yet (SkyPilot creates one), or a
config it reads differently or would refuse. Once SkyPilot is imported (the SDK, a task only
SkyPilot's parser reads) it is asked: its config in memory is what its requests carry.
"""

from __future__ import annotations

import getpass
import logging
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sky_kueue.inputs import files
from sky_kueue.inputs.errors import InputError
from sky_kueue.skypilot import skypilot_files
from sky_kueue.skypilot.request import UserIdentity
from sky_kueue.skypilot.runtime_estimate import PastRun

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig
    from sky_kueue.skypilot.engine import PolicyResult
    from sky_kueue.skypilot.view import ClusterView, ContextViews

logger = logging.getLogger(__name__)

#: SkyPilot's variables naming the user (``USER_ENV_VAR``, ``USER_ID_ENV_VAR`` in
#: ``sky/skylet/constants.py``).
USER_ENV = "SKYPILOT_USER"
USER_ID_ENV = "SKYPILOT_USER_ID"
#: Where SkyPilot keeps the user id (``USER_HASH_FILE`` in ``sky/utils/common_utils.py``).
USER_HASH_PATH = "~/.sky/user_hash"
#: A user id SkyPilot accepts (``is_valid_user_hash``).
_USER_HASH_RE = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-]*")
#: Bytes of the hash file read at most (SkyPilot's ids are 8 characters; service accounts' longer).
MAX_USER_HASH_BYTES = 4096


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
    if not skypilot_loaded():
        found = identity_from_files(os.environ)
        if found is not None:
            return found
    from sky import skypilot_config
    from sky.skylet import constants
    from sky.utils import common_utils

    try:
        name = common_utils.get_local_user_name()
    except (KeyError, OSError) as exc:
        raise _unknown_user(exc) from None
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


def skypilot_loaded() -> bool:
    """Whether SkyPilot is imported in this process (then it is asked: it costs nothing more)."""
    return "sky" in sys.modules


def identity_from_files(environ: Mapping[str, str]) -> ClientIdentity | None:
    """The identity :func:`current_identity` gives, read without SkyPilot, or None where only
    SkyPilot can say (no valid user id yet; a config SkyPilot reads differently).

    SkyPilot's ``get_local_user_name`` asks ``getpass`` even when ``$SKYPILOT_USER`` is set, so
    this does too (``getpass`` reads the process's own environment).

    Raises:
        IdentityError: as :func:`current_identity`.
    """
    try:
        os_user = getpass.getuser()
    except (KeyError, OSError) as exc:
        raise _unknown_user(exc) from None
    config = skypilot_files.request_config(environ)
    user_id = _user_id(environ)
    if config is None or user_id is None:
        return None
    name = environ.get(USER_ENV, os_user)
    identity = ClientIdentity(
        user=UserIdentity(id=user_id, name=name or user_id), workspace=skypilot_files.active_workspace(config)
    )
    logger.debug(
        "SkyPilot identity: user %r from %s, id %s from %s, workspace %r (read from SkyPilot's files)",
        identity.user.name,
        f"${USER_ENV}" if environ.get(USER_ENV) else "the OS user",
        identity.user.id,
        f"${USER_ID_ENV}" if environ.get(USER_ID_ENV) == user_id else os.path.expanduser(USER_HASH_PATH),
        identity.workspace,
    )
    return identity


def _user_id(environ: Mapping[str, str]) -> str | None:
    """``$SKYPILOT_USER_ID`` if valid, else the hash file's id if valid (``get_user_hash``)."""
    named = environ.get(USER_ID_ENV)
    if named is not None and _USER_HASH_RE.fullmatch(named):
        return named
    try:  # a bounded read that a FIFO or a device at the path cannot block (inputs.files)
        data = files.read_bytes(os.path.expanduser(USER_HASH_PATH), "SkyPilot user hash", MAX_USER_HASH_BYTES)
        stored = data.decode("utf-8").strip()
    except (InputError, UnicodeDecodeError):
        return None
    return stored if _USER_HASH_RE.fullmatch(stored) else None


def _unknown_user(exc: BaseException) -> IdentityError:
    return IdentityError(f"SkyPilot cannot tell who you are ({type(exc).__name__}: {exc}); set SKYPILOT_USER or USER")


def client_skypilot_config() -> dict[str, Any]:
    """The user's SkyPilot config as a request from here carries it: SkyPilot's client config
    without ``api_server`` and ``admin_policy`` (``get_override_skypilot_config_from_client``
    in ``sky/server/requests/payloads.py``, which every request body of SkyPilot's client
    includes), with ``active_workspace`` set to the active workspace. Its
    ``kubernetes.allowed_contexts`` names the clusters when the plugin config does not.

    Read from SkyPilot's files while SkyPilot is not imported (see the module docstring).
    Otherwise from SkyPilot's loaded config, as that function's client branch does: called
    outside one of SkyPilot's client calls the function itself answers as the API server
    would (``annotations.is_on_api_server`` is only cleared by a ``client_api`` call), with
    nothing."""
    if not skypilot_loaded():
        read = skypilot_files.request_config(os.environ)
        if read is not None:
            return read
    from sky import skypilot_config

    return skypilot_files.as_sent(skypilot_config.to_dict(), str(skypilot_config.get_active_workspace()))


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

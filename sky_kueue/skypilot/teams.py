"""Which team a request belongs to, and whether the requester may act for it.

Why these rules: a team's LocalQueue is its share of the cluster, so the team decides the
queue and nothing else may. A task names its team with the ``sky-kueue.io/team`` label
(``resources.labels``, or the pod label the policy itself writes, so that applying the
policy twice gives the same answer). The label is honoured only if the requester belongs
to that team: listed by user (:func:`lists_user`), by workspace, or because the team is open
(``users: ["*"]``). Without a label the team follows from the user and workspace alone,
and an ambiguous or missing answer is a rejection that tells the user which label to add
or, when no team accepts them at all, where an admin adds them (``teams.<team>.users``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sky_kueue.skypilot import labels
from sky_kueue.skypilot.config import (
    ANY_USER,
    IDENTIFY_BY_ID,
    IDENTIFY_BY_NAME,
    USER_ID_PREFIX,
    PluginConfig,
    TeamConfig,
)
from sky_kueue.skypilot.request import PolicyRequest, UserIdentity


@dataclass(frozen=True)
class TeamChoice:
    """The resolved team.

    Attributes:
        name: team name.
        team: its settings.
        how: how it was chosen, for notes (e.g. ``"task label"``).
    """

    name: str
    team: TeamConfig
    how: str


@dataclass(frozen=True)
class TeamProblem:
    """Why no team could be chosen.

    Attributes:
        kind: ``unknown``, ``conflict``, ``not-member``, ``ambiguous`` or ``none``.
        message: user-facing sentence(s).
    """

    kind: str
    message: str


def lists_user(team: TeamConfig, user: UserIdentity | None, identify_users_by: str = IDENTIFY_BY_NAME) -> bool:
    """Whether ``team.users`` names ``user`` (``"*"`` aside).

    An ``id:<user id>`` entry matches SkyPilot's user id, the one identity an API server with
    authentication vouches for (``sky/server/requests/executor.py`` ``prepare_request`` puts
    the authenticated user's id and name in place of what the client sent). A bare entry
    matches the user name, or the id as before ``id:`` entries existed, and only while
    ``policy.identify_users_by`` is ``name``: without authentication both are whatever the
    client sends, and with it names are display names SkyPilot does not keep unique
    (``global_user_state.get_user_by_name`` returns a list; a service account is named by
    whoever creates it).
    """
    if user is None:
        return False
    for entry in team.users:
        if entry.startswith(USER_ID_PREFIX):
            if entry.removeprefix(USER_ID_PREFIX) == user.id:
                return True
        elif identify_users_by != IDENTIFY_BY_ID and entry in (user.name, user.id):
            return True
    return False


def is_member(
    team: TeamConfig, user: UserIdentity | None, workspace: str | None, identify_users_by: str = IDENTIFY_BY_NAME
) -> bool:
    """Whether ``user`` (or a request from ``workspace``) may submit as ``team``."""
    if ANY_USER in team.users:
        return True
    if lists_user(team, user, identify_users_by):
        return True
    return workspace is not None and workspace in team.workspaces


def resolve_team(request: PolicyRequest, config: PluginConfig, label_values: Iterable[str]) -> TeamChoice | TeamProblem:
    """Choose the team of a request.

    Args:
        request: the request (user and workspace are used).
        config: plugin config.
        label_values: every value of the team label found on the task's candidates.

    Returns:
        The chosen team, or the problem to report.
    """
    user, workspace = request.user, request.workspace
    by = config.policy.identify_users_by
    who = _describe(user, workspace, by)
    named = sorted(set(label_values))
    if len(named) > 1:
        return TeamProblem("conflict", f"the task names several teams ({', '.join(named)}); name exactly one")
    if named:
        name = named[0]
        team = config.teams.get(name)
        if team is None:
            return TeamProblem(
                "unknown",
                f"unknown team {name!r} in label {labels.TEAM_LABEL}; known teams: {_names(config.teams)}",
            )
        if not is_member(team, user, workspace, by):
            return TeamProblem(
                "not-member",
                f"{who} may not submit as team {name!r} ({_membership_hint(config, user, workspace, name)})",
            )
        return TeamChoice(name, team, "task label")
    by_workspace = [n for n, t in config.teams.items() if workspace is not None and workspace in t.workspaces]
    if len(by_workspace) == 1:
        return TeamChoice(by_workspace[0], config.teams[by_workspace[0]], f"workspace {workspace!r}")
    by_user = [n for n, t in config.teams.items() if lists_user(t, user, by)]
    if len(by_user) == 1 and not by_workspace:
        return TeamChoice(by_user[0], config.teams[by_user[0]], _describe(user, workspace, by))
    candidates = by_workspace or by_user
    if candidates:
        return TeamProblem(
            "ambiguous",
            f"{who} belongs to several teams ({', '.join(sorted(candidates))}); "
            f"add the label {labels.TEAM_LABEL}: <team> to resources.labels",
        )
    mine = _teams_of(config, user, workspace)
    if not mine:  # a label would not help: say where an admin adds the user
        return TeamProblem("none", f"no team for {who} ({_membership_hint(config, user, workspace)})")
    return TeamProblem(
        "none",
        f"no team for {who}; add the label {labels.TEAM_LABEL}: <team> to resources.labels "
        f"(teams you may use: {', '.join(mine)})",
    )


def _teams_of(config: PluginConfig, user: UserIdentity | None, workspace: str | None) -> list[str]:
    """The teams ``user`` (from ``workspace``) may submit as, in config order."""
    return [n for n, t in config.teams.items() if is_member(t, user, workspace, config.policy.identify_users_by)]


def _membership_hint(
    config: PluginConfig, user: UserIdentity | None, workspace: str | None, team: str | None = None
) -> str:
    """Which teams the requester may use or, if none, where an admin adds them."""
    mine = _teams_of(config, user, workspace)
    if mine:
        return f"teams you may use: {', '.join(mine)}"
    if user is None:
        return "teams you may use: none; without a user only a team with users: ['*'] accepts a request"
    entry = f"{USER_ID_PREFIX}{user.id}" if config.policy.identify_users_by == IDENTIFY_BY_ID else user.name
    return f"teams you may use: none; an admin adds {entry!r} to teams.{team or '<team>'}.users in the sky-kueue config"


def _describe(user: UserIdentity | None, workspace: str | None, identify_users_by: str = IDENTIFY_BY_NAME) -> str:
    if user is not None:
        return f"user {user.name!r}" + (f" (id {user.id})" if identify_users_by == IDENTIFY_BY_ID else "")
    if workspace is not None:
        return f"this request (no user, workspace {workspace!r})"
    return "this request (no user)"


def _names(teams: Iterable[str]) -> str:
    return ", ".join(sorted(teams))

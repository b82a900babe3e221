"""Open teams: teams whose ``users`` list ``"*"``, and the one warning line they get.

Why a warning and not an error: ``"*"`` is valid and right for a sandbox or a demo
(``configs/sky-kueue-demo.yaml`` opens every team on purpose), but on a shared cluster it lets
every SkyPilot user - and requests that carry no user at all - submit as the team, to its
LocalQueue at its priority classes (:func:`sky_kueue.skypilot.teams.is_member`). So the
commands that write or check a plugin config (``sky-kueue setup``, ``sky-kueue
check-config``) say so on stderr, in the same words, and still succeed.
"""

from __future__ import annotations

from sky_kueue.skypilot.config import ANY_USER, PluginConfig


def open_teams(config: PluginConfig) -> tuple[str, ...]:
    """The teams anyone may submit as (``users`` contains ``"*"``), in config order."""
    return tuple(name for name, team in config.teams.items() if ANY_USER in team.users)


def open_team_warnings(config: PluginConfig) -> tuple[str, ...]:
    """One ``warning:`` line per open team: who can use it, and what to write instead."""
    return tuple(
        f"warning: team {name!r} is open (users: ['{ANY_USER}']): every SkyPilot user may submit to "
        f"{config.teams[name].namespace}/{config.teams[name].local_queue}; list its users (or workspaces) "
        "instead on a shared cluster"
        for name in open_teams(config)
    )

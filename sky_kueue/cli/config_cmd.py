"""``sky-kueue check-config``: validate a plugin config (sky-kueue.yaml) and summarise it."""

from __future__ import annotations

from pathlib import Path

import click

from sky_kueue.cli import errors
from sky_kueue.skypilot import skypilot_files
from sky_kueue.skypilot.config import ConfigError, PluginConfig, load_config
from sky_kueue.skypilot.enabled_contexts import refused_team_clusters
from sky_kueue.skypilot.open_teams import open_team_warnings


@click.command("check-config")
@click.argument("config_path", type=click.Path(path_type=Path))
@click.option(
    "--skypilot/--no-skypilot",
    default=True,
    show_default=True,
    help="Check the teams' contexts against the ones SkyPilot here enables (read from its config and the kubeconfig).",
)
def check_config(config_path: Path, skypilot: bool) -> None:
    """Validate CONFIG_PATH; print one line per team, or one error line and exit 2.

    Also warns (on stderr) about each open team (``users: ["*"]``: anyone may use its queue)
    and each context of a team that SkyPilot here does not enable: the policy leaves such
    clusters out of a launch."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        errors.fail(str(exc))
    for name, team in config.teams.items():
        burst = (
            f", burst after {team.burst.max_queue_wait_seconds}s to {'/'.join(team.burst.clouds)}" if team.burst else ""
        )
        classes = ", ".join(team.priority_classes.allowed)
        where = (
            "; ".join(f"{c.context}: {c.namespace}/{c.local_queue}" for c in config.team_clusters(team))
            if team.clusters
            else f"{team.namespace}/{team.local_queue}"
        )
        click.echo(f"{name}: {where}, classes {classes} (default {team.priority_classes.default}){burst}")
    for line in open_team_warnings(config):
        click.echo(line, err=True)
    for line in _skypilot_context_warnings(config) if skypilot else ():
        click.echo(line, err=True)
    click.echo(f"ok: {config_path} ({len(config.teams)} teams)")


def _skypilot_context_warnings(config: PluginConfig) -> tuple[str, ...]:
    """Warnings for the teams' contexts that SkyPilot here does not enable (its own rule:
    ``kubernetes.allowed_contexts``, workspace, kubeconfig), read from SkyPilot's files without
    importing SkyPilot (``skypilot_files``), so the check answers in well under a second."""
    if not any(c.context is not None for team in config.teams.values() for c in config.team_clusters(team)):
        return ()
    enabled = skypilot_files.enabled_contexts()
    if enabled is None:
        return ("note: SkyPilot finds no Kubernetes context here; the teams' contexts were not checked",)
    return tuple(f"warning: {w}" for w in refused_team_clusters(config, enabled))

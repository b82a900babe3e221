"""``sky-kueue check-config``: validate a plugin config (sky-kueue.yaml) and summarise it."""

from __future__ import annotations

from pathlib import Path

import click

from sky_kueue.cli import errors
from sky_kueue.skypilot.config import ConfigError, load_config


@click.command("check-config")
@click.argument("config_path", type=click.Path(path_type=Path))
def check_config(config_path: Path) -> None:
    """Validate CONFIG_PATH; print one line per team, or one error line and exit 2."""
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
    click.echo(f"ok: {config_path} ({len(config.teams)} teams)")

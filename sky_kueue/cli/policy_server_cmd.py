"""``sky-kueue policy-server``: serve the admin policy to SkyPilot's RestfulAdminPolicy.

Point SkyPilot at it with ``admin_policy: http://127.0.0.1:<port>/policy``. The command
loads the plugin config before binding, so a bad config stops it with a one-line error; bound
beyond the loopback it refuses to start without ``--token-file``.
SkyPilot itself is not imported. The server's log (one line per request and per decision,
with the time) goes to stderr through the CLI's logging (:mod:`sky_kueue.cli.console`).
"""

from __future__ import annotations

from pathlib import Path

import click

from sky_kueue.cli import console, errors, options
from sky_kueue.skypilot.cluster_view import ManifestError
from sky_kueue.skypilot.config import ConfigError
from sky_kueue.skypilot.policy_server import DEFAULT_HOST, DEFAULT_PORT, TokenError, load_token, make_server


@click.command("policy-server")
@click.option(
    "--host",
    default=DEFAULT_HOST,
    show_default=True,
    help="Address to bind (loopback by default; any other needs --token-file).",
)
@click.option("--port", type=click.IntRange(0, 65535), default=DEFAULT_PORT, show_default=True)
@click.option(
    "--config",
    "config_path",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The sky-kueue plugin config (sky-kueue.yaml).",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Require this token (Bearer, or HTTP Basic password) on every policy request.",
)
@options.metrics_options()
def policy_server(
    host: str, port: int, config_path: Path, token_file: Path | None, metrics_port: int | None, metrics_host: str
) -> None:
    """Serve the sky-kueue admin policy over HTTP."""
    console.show_info(timestamps=True)  # a server: its request log is its output
    try:
        token = load_token(token_file) if token_file is not None else None
        server = make_server(config_path, host=host, port=port, token=token)
    except (ConfigError, ManifestError, TokenError) as exc:
        errors.fail(str(exc))
    except OSError as exc:
        errors.fail(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
    registry = server.metrics.registry
    metrics_server = options.serve_metrics_or_fail(registry, metrics_host, metrics_port, server.server_close)
    click.echo(f"sky-kueue policy server: admin_policy: {server.url}")
    if metrics_server is not None:
        click.echo(f"sky-kueue policy server: metrics: {metrics_server.url}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        click.echo("stopped", err=True)
    finally:
        if metrics_server is not None:
            metrics_server.stop()
        server.server_close()

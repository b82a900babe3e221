"""``sky-kueue sandbox``: a local cluster to try sky-kueue without one.

Why a foreground process: the sandbox is for trying things out and for demos; running in the
foreground, printing its URL and stopping cleanly on Ctrl-C (or SIGTERM from a supervisor)
leaves nothing behind. ``serve`` runs the bare API server (no Kueue behaviour): useful to
point kubectl or the kubernetes client at an empty cluster that speaks Kueue's APIs.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

#: Where ``serve`` writes its kubeconfig unless told otherwise.
DEFAULT_KUBECONFIG_PATH = "~/.sky-kueue/sandbox/kubeconfig"


@click.group()
def sandbox() -> None:
    """A local Kubernetes API server with Kueue's APIs, for tests and demos."""


@sandbox.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port."
)
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    default=DEFAULT_KUBECONFIG_PATH,
    show_default=True,
    type=click.Path(dir_okay=False),
    help="Where to write a kubeconfig for the server.",
)
def serve(host: str, port: int, kubeconfig_path: str) -> None:
    """Run the bare API server in the foreground until Ctrl-C or SIGTERM."""
    from sky_kueue.sandbox.apiserver import ApiServer

    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server = ApiServer(host, port).start()
        except OSError as failure:
            raise click.ClickException(f"cannot listen on {host}:{port}: {failure.strerror}") from failure
        try:
            try:
                written = server.write_kubeconfig(kubeconfig_path)
            except OSError as failure:
                raise click.ClickException(
                    f"cannot write kubeconfig {kubeconfig_path}: {failure.strerror}; pass --kubeconfig PATH"
                ) from failure
            click.echo(f"API server listening on {server.url}")
            click.echo(f"kubeconfig: {written}")
            click.echo(f"try: kubectl --kubeconfig {written} get namespaces")
            stop.wait()
            click.echo("stopping")
        finally:
            server.stop()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)

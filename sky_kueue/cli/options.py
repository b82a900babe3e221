"""Options every cluster-facing command shares, declared once (as SkyPilot's CLI shares its
common options): ``--kubeconfig``, ``--context`` and ``--output text|json``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sky_kueue.cli.errors import UserError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from sky_kueue.metrics_http import MetricsServer

F = TypeVar("F", bound=Callable[..., Any])

#: What ``--kubeconfig`` defaults to, for help texts.
DEFAULT_KUBECONFIG_HELP = "Kubeconfig of the cluster (default: $KUBECONFIG or ~/.kube/config)."
#: The formats of ``--output``.
OUTPUT_FORMATS = ("text", "json")


def kubeconfig_option(help_text: str = DEFAULT_KUBECONFIG_HELP) -> Callable[[F], F]:
    """``--kubeconfig FILE`` (a ``Path``, None when absent) as the ``kubeconfig`` argument."""
    return click.option(
        "--kubeconfig", "kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None, help=help_text
    )


def context_option(dest: str = "context") -> Callable[[F], F]:
    """``--context NAME``: the kubeconfig context (None: the current one)."""
    return click.option("--context", dest, default=None, help="Kubeconfig context (default: the current one).")


def output_option() -> Callable[[F], F]:
    """``--output/-o text|json`` as the ``output`` argument."""
    return click.option(
        "--output", "-o", "output", type=click.Choice(OUTPUT_FORMATS), default="text", show_default=True
    )


def file_option(
    flag: str, dest: str, help_text: str, *, multiple: bool = False, required: bool = False
) -> Callable[[F], F]:
    """An option naming an input file (a ``Path``; repeatable with ``multiple``). Directories
    pass click (``sky_kueue.inputs.files`` explains them in one line)."""
    return click.option(
        flag,
        dest,
        multiple=multiple,
        required=required,
        type=click.Path(path_type=Path),
        help=help_text,
    )


def metrics_options() -> Callable[[F], F]:
    """``--metrics-port`` (absent: no endpoint; 0: any free port, printed) and ``--metrics-host``
    as the ``metrics_port`` and ``metrics_host`` arguments."""
    from sky_kueue.metrics_http import DEFAULT_METRICS_HOST

    def decorate(command: F) -> F:
        command = click.option(
            "--metrics-host",
            "metrics_host",
            default=DEFAULT_METRICS_HOST,
            show_default=True,
            help="Address /metrics binds (loopback by default; a pod binds 0.0.0.0 for Prometheus).",
        )(command)
        return click.option(
            "--metrics-port",
            "metrics_port",
            type=click.IntRange(0, 65535),
            default=None,
            help="Serve Prometheus metrics on this port at /metrics (default: off; 0: any free port).",
        )(command)

    return decorate


def serve_metrics_or_fail(
    registry: CollectorRegistry, host: str, port: int | None, cleanup: Callable[[], None]
) -> MetricsServer | None:
    """The ``/metrics`` endpoint ``--metrics-port`` asks for (None when absent); a port that
    cannot be bound is bad input (one line, exit 2), reported after ``cleanup``."""
    if port is None:
        return None
    from sky_kueue.metrics_http import serve_metrics

    try:
        return serve_metrics(registry, host, port)
    except OSError as err:
        cleanup()
        raise UserError(f"--metrics-port: cannot listen on {host}:{port}: {err.strerror or err}") from None

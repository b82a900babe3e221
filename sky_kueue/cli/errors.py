"""One-line errors for the CLI: what was wrong and where, never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import click

#: Exit code for bad input: an unreadable or invalid file or option, a bad kubeconfig or
#: context (click's convention for usage errors).
EXIT_BAD_INPUT = 2
#: Exit code when the cluster cannot be read (unreachable, forbidden, Kueue not installed).
EXIT_CLUSTER_ERROR = 1


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)

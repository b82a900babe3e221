"""One-line errors for the CLI: what was wrong and where, never a traceback."""

from __future__ import annotations

import sys
from typing import NoReturn

import click


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` to stderr and exit with ``code``."""
    click.echo(f"error: {message}", err=True)
    sys.exit(code)

"""One error path for the CLI: a user's mistake is one :class:`UserError`, reported once.

Every command raises :class:`UserError` (directly or through :func:`fail`) for what the user
can fix: an unreadable or invalid file or option, a bad kubeconfig or context, a cluster that
cannot be read. The root group (:class:`sky_kueue.cli.main.LazyGroup`) turns click's own
usage errors into the same type, and click's root handler prints it as one line,
``error: <what was wrong, where, what to do>``, and exits with its code; never a traceback.
The codes every cluster-facing command follows are tabled in docs/exit-codes.md.
"""

from __future__ import annotations

from typing import IO, Any, NoReturn

import click

#: Exit code for bad input: an unreadable or invalid file or option, a bad kubeconfig or
#: context (click's convention for usage errors).
EXIT_BAD_INPUT = 2
#: Exit code when the cluster cannot be read (unreachable, forbidden, Kueue not installed).
EXIT_CLUSTER_ERROR = 1


class UserError(click.ClickException):
    """A mistake the user can fix: printed as one line, exit code 2 unless told otherwise."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, message: str, code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(" ".join(message.split()))
        self.exit_code = code

    def show(self, file: IO[Any] | None = None) -> None:
        click.echo(f"error: {self.format_message()}", err=file is None, file=file)


def fail(message: str, code: int = EXIT_BAD_INPUT) -> NoReturn:
    """Raise :class:`UserError` (``error: message`` on stderr, exit ``code``)."""
    raise UserError(message, code)


def from_usage(err: click.UsageError, ctx: click.Context) -> UserError:
    """Click's usage error (a bad option value, an unknown command) as one line."""
    where = err.ctx.command_path if err.ctx is not None else ctx.command_path
    return UserError(f"{where}: {err.format_message()}")

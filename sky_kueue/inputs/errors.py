"""The one error type of the input boundary."""

from __future__ import annotations


class InputError(ValueError):
    """Input refused at the boundary; the message is one line naming the file and the problem.

    Callers re-raise it as their own error type (``ModelError``, ``ConfigError``,
    ``TraceError``, ``WireError``) so each entry point keeps one error path.
    """

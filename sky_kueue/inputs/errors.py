"""The one error type of the input boundary."""

from __future__ import annotations


class InputError(ValueError):
    """Input refused at the boundary; one line naming the input and the problem.

    Callers re-raise it as their own error type (``ModelError``, ``ConfigError``,
    ``TraceError``, ``WireError``) so each entry point keeps one error path.

    Attributes:
        source: the file (or request field) the input came from.
        reason: what is wrong with it, with the location inside it when known.
        line: the 1-based line of a YAML problem, when known.
        problem: the bare problem, without its location, for callers that place it themselves.
    """

    def __init__(self, source: str, reason: str, line: int | None = None, problem: str | None = None) -> None:
        self.source = source
        self.reason = reason
        self.line = line
        self.problem = problem if problem is not None else reason
        super().__init__(f"{source}: {reason}")

"""Time as an injected dependency.

Why: aging is a function of elapsed time (wait, run, anti-flapping windows, decay). Every
component that needs "now" takes a :class:`Clock` instead of calling :func:`time.time`, so
tests and the simulator replay hours of history in microseconds and decisions are
reproducible (the crash test recomputes each step at the time it was taken). Times are
POSIX seconds as ``float`` throughout the controller, the same unit as Kubernetes
``lastTransitionTime`` values once parsed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """Returns the current time in POSIX seconds."""

    def __call__(self) -> float: ...


def system_clock() -> float:
    """The wall clock (``time.time``)."""
    return time.time()


@dataclass
class ManualClock:
    """A clock that only moves when told to; for tests and simulations."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        """Moves the clock forward by ``seconds`` (never backwards) and returns the new time.

        Raises:
            ValueError: ``seconds`` is negative.
        """
        if seconds < 0:
            raise ValueError(f"a clock cannot go backwards (advance by {seconds} s)")
        self.now += seconds
        return self.now

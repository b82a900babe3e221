"""The clock the API server stamps objects with.

Why injectable: the sandbox's Kueue emulation runs hours of cluster time in seconds, so the
timestamps the server writes (``creationTimestamp``, ``deletionTimestamp``) must come from the
same, possibly scaled, clock as the emulation's scheduling decisions. Timeouts that belong to
the HTTP conversation with a client (``timeoutSeconds`` of a watch, bookmark cadence, fault
delays) are real-world waits and deliberately do not go through this clock.
"""

from __future__ import annotations

import datetime
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock time."""

    def now(self) -> datetime.datetime:
        """Returns the current time as a timezone-aware UTC datetime."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime.datetime:
        return datetime.datetime.now(datetime.timezone.utc)


class ManualClock:
    """A clock that only moves when told to; for tests."""

    def __init__(self, start: datetime.datetime | None = None) -> None:
        self._now = start or datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)

    def now(self) -> datetime.datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += datetime.timedelta(seconds=seconds)


def format_timestamp(moment: datetime.datetime) -> str:
    """Formats a time as Kubernetes writes ``metav1.Time``: RFC 3339, whole seconds, ``Z``."""
    return moment.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: str) -> datetime.datetime:
    """Parses a ``metav1.Time`` string (``2025-01-01T00:00:00Z``) into an aware datetime."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))

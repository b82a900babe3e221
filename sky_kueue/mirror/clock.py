"""The mirror's sense of time, injectable.

Why: transitions are stamped with when the mirror saw them, the queue view shows ages, and
a prediction runs "now"; tests and the sandbox run on a manual clock. Durations that belong
to the HTTP conversation (timeouts, backoff) are real waits and use ``time.monotonic``.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Protocol


class Clock(Protocol):
    """A source of wall-clock time."""

    def now(self) -> datetime:
        """The current time, timezone-aware (UTC)."""
        ...


class SystemClock:
    """The real wall clock."""

    def now(self) -> datetime:
        return datetime.now(timezone.utc)


def parse_timestamp(value: object) -> datetime | None:
    """A Kubernetes ``metav1.Time`` (``2026-01-01T10:00:00Z``) as an aware datetime, or None."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)

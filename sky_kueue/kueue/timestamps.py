"""RFC 3339 timestamps as Kueue's objects carry them (``2026-01-01T12:00:00Z``).

Why a module of its own: the schema check and the conversion to model objects both read
every timestamp of a snapshot, and a snapshot repeats a few thousand texts; one cached
parser serves both passes, as :mod:`sky_kueue.kueue.quantity` does for quantities.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone

#: Timestamp texts whose parse is kept.
TIMESTAMP_TEXTS_CACHED = 8192


@functools.lru_cache(maxsize=TIMESTAMP_TEXTS_CACHED)
def parse(text: str) -> datetime:
    """``text`` as an aware datetime (UTC when it names no zone).

    Raises:
        ValueError: not a timestamp.
    """
    parsed = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)

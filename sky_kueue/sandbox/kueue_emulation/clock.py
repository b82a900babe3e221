"""A clock that runs faster than real time, for hours of cluster time in seconds."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable


class ScaledClock:
    """``now`` advances ``time_scale`` seconds per real second (implements the server's Clock)."""

    def __init__(
        self,
        time_scale: float = 1.0,
        start: datetime.datetime | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if time_scale <= 0:
            raise ValueError(f"time scale must be positive, got {time_scale}")
        self.time_scale = time_scale
        self._start = start or datetime.datetime.now(datetime.timezone.utc)
        self._monotonic = monotonic
        self._origin = monotonic()

    def now(self) -> datetime.datetime:
        elapsed = (self._monotonic() - self._origin) * self.time_scale
        return self._start + datetime.timedelta(seconds=elapsed)

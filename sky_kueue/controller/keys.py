"""Idempotency keys: how the controller makes each aging step happen exactly once.

Kueue gives every Workload a UID and counts its evictions in
``status.schedulingStats.evictions`` (incremented on every eviction, never reset while the
object lives). The pair *(Workload UID, eviction count)* therefore names one stretch of a
Workload's life without ambiguity:

* an **eviction** is named by the victim's UID and the count *after* it (1 for the first);
* a **pending episode** (the Workload waiting for quota) is named by its UID and the count
  at that moment: a relaunched SkyPilot Workload waits as ``<new uid>#0``, a requeued
  retriable Workload as ``<uid>#<k>`` after its k-th eviction.

The store has a unique constraint on each key, so re-delivered watch events (the mirror is
at-least-once) cannot count a preemption twice, and an aging step is decided once per
pending episode. When ``schedulingStats`` is absent (an old Kueue), the Evicted condition's
``lastTransitionTime`` stands in for the count (``<uid>@<time>``).
"""

from __future__ import annotations

from dataclasses import dataclass

_COUNT_SEPARATOR = "#"
_MARKER_SEPARATOR = "@"


@dataclass(frozen=True, order=True)
class EpisodeKey:
    """(Workload UID, eviction count), or (UID, marker) when the count is unknown."""

    workload_uid: str
    evictions: int | None
    marker: str | None = None

    def __post_init__(self) -> None:
        if not self.workload_uid:
            raise ValueError("an episode key needs a workload UID")
        if (self.evictions is None) == (self.marker is None):
            raise ValueError("an episode key needs exactly one of an eviction count or a marker")
        if self.evictions is not None and self.evictions < 0:
            raise ValueError(f"eviction count must be >= 0, got {self.evictions}")

    @property
    def token(self) -> str:
        """The stored form: ``<uid>#<count>`` or ``<uid>@<marker>``."""
        if self.evictions is not None:
            return f"{self.workload_uid}{_COUNT_SEPARATOR}{self.evictions}"
        return f"{self.workload_uid}{_MARKER_SEPARATOR}{self.marker}"

    @classmethod
    def parse(cls, token: str) -> EpisodeKey:
        """Inverse of :attr:`token`.

        Raises:
            ValueError: ``token`` is not in either form.
        """
        uid, sep, count = token.rpartition(_COUNT_SEPARATOR)
        if sep and uid and count.isdigit():
            return cls(uid, int(count))
        uid, sep, marker = token.partition(_MARKER_SEPARATOR)
        if sep and uid and marker:
            return cls(uid, None, marker)
        raise ValueError(f"not an episode key: {token!r} (expected '<uid>#<count>' or '<uid>@<marker>')")

    def __str__(self) -> str:
        return self.token

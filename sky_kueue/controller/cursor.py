"""The durable Workload cursor: up to which resourceVersion every Workload change is handled.

Why: after a SIGKILL the next session resumes the mirror's Workload watch from this version
(:class:`~sky_kueue.mirror.Mirror` ``resume``), so a preemption whose Workload was finished
and garbage-collected while no controller ran is still replayed and recorded. The cursor
may lag (it is written at most every ``persist_interval_seconds``): replaying a change
twice is harmless, every record is idempotent (:mod:`sky_kueue.controller.keys`).

Versions are compared as integers (etcd revisions); a version that is not an integer never
replaces one that is.

The cursor also keeps the identity of the cluster its version belongs to
(:mod:`sky_kueue.mirror.server_state`): a version of another cluster, or of a state that
went back since, is no position to resume from. After such a reset the cursor is
rebased (:meth:`WorkloadCursor.rebase`): the version first, then the cluster, so a crash in between
finds the old cluster with the new version and resets (idempotently) again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from sky_kueue.controller.clock import Clock
from sky_kueue.controller.state_spec import ControllerState
from sky_kueue.mirror.server_state import as_revision

#: The durable cursor is written at most this often (it may lag; a replay is idempotent).
CURSOR_PERSIST_INTERVAL_SECONDS = 0.5
#: Cursor key of the Workload watch in the runtime state.
WORKLOADS_CURSOR = "workloads"
#: Cursor key of the cluster identity the Workload cursor's version belongs to.
WORKLOADS_CLUSTER_CURSOR = "workloads-cluster"


class WorkloadCursor:
    """The handled version in memory, and its throttled durable copy."""

    def __init__(
        self,
        runtime: ControllerState | None,
        clock: Clock,
        *,
        persist_interval_seconds: float = CURSOR_PERSIST_INTERVAL_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._runtime = runtime
        self._clock = clock
        self._interval = persist_interval_seconds
        self._monotonic = monotonic
        self.saved: str | None = runtime.cursor(WORKLOADS_CURSOR) if runtime is not None else None
        self.version: str | None = self.saved
        #: The cluster identity ``version`` belongs to (None: unknown).
        self.cluster: str | None = runtime.cursor(WORKLOADS_CLUSTER_CURSOR) if runtime is not None else None
        self._saved_at = 0.0

    @property
    def revision(self) -> int | None:
        """The handled version as an integer (None: unknown)."""
        return as_revision(self.version)

    def advance(self, version: str) -> None:
        """Everything up to ``version`` is handled (written now unless written recently)."""
        if as_revision(version) is None and as_revision(self.version) is not None:
            return
        self.version = version
        self.save(force=False)

    def rebase(self, version: str, cluster: str | None) -> None:
        """Everything up to ``version`` of ``cluster`` is handled, even if ``version`` is older
        than the cursor (the server's state went back); written now.

        Raises:
            StoreError: the runtime state could not be written.
        """
        self.version = version
        self.save(force=True)
        self.remember_cluster(cluster)

    def remember_cluster(self, cluster: str | None) -> None:
        """Records the cluster identity the cursor's version belongs to (None: unknown, kept).

        Raises:
            StoreError: the runtime state could not be written.
        """
        if cluster is None or cluster == self.cluster:
            return
        if self._runtime is not None:
            self._runtime.save_cursor(WORKLOADS_CLUSTER_CURSOR, cluster, self._clock())
        self.cluster = cluster

    def save(self, *, force: bool) -> None:
        """Writes the cursor (with ``force``, even if it was written a moment ago).

        Raises:
            StoreError: the runtime state could not be written.
        """
        if self._runtime is None or self.version is None or self.version == self.saved:
            return
        now = self._monotonic()
        if not force and now - self._saved_at < self._interval:
            return
        self._runtime.save_cursor(WORKLOADS_CURSOR, self.version, self._clock())
        self.saved, self._saved_at = self.version, now

"""Where the admin policy reads past runs for the run-time estimate: the controller's store.

Why the controller's store: it is the one record of when each job was admitted and when it
finished (:mod:`sky_kueue.controller.history`); the policy only reads it. Which store, by the
controller's own rule (:mod:`sky_kueue.controller.state_spec`): ``$SKY_KUEUE_STATE``
(``sqlite:PATH``, a path, or ``kubernetes[:NAMESPACE]``: ``JobHistory`` objects read with the
official client, as kubectl finds the cluster), else the default SQLite file when it exists.
No store, or one that cannot be read, means no history: the estimate falls back to "none"
and the policy goes on (a warning once per store and problem, never per launch).

Reads are cached for :data:`HISTORY_CACHE_SECONDS`: a policy server answering many launches
reads the store at most that often, and a run finished a minute ago is not yet missed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from sky_kueue.controller.history import JobHistory, Phase, StoreError
from sky_kueue.controller.state_spec import (
    DEFAULT_STATE_PATH,
    STATE_ENV_VAR,
    StateKind,
    StateSpec,
    open_state,
    parse_state_spec,
)
from sky_kueue.skypilot.runtime_estimate import PastRun
from sky_kueue.skypilot.runtime_history import past_runs

logger = logging.getLogger(__name__)

#: How long one read of the store serves estimates.
HISTORY_CACHE_SECONDS = 60.0


def configured_spec(environ: Mapping[str, str]) -> StateSpec | None:
    """The store named by ``$SKY_KUEUE_STATE``, else the default SQLite file if it exists.

    Raises:
        ValueError: ``$SKY_KUEUE_STATE`` is malformed (one line).
    """
    text = environ.get(STATE_ENV_VAR)
    if text:
        return parse_state_spec(text, f"${STATE_ENV_VAR}")
    default = Path(os.path.expanduser(DEFAULT_STATE_PATH))
    return StateSpec(StateKind.SQLITE, default) if default.is_file() else None


def read_histories(spec: StateSpec) -> list[JobHistory]:
    """Every finished job's history in the store.

    Raises:
        StoreError: the store cannot be opened or read.
        MirrorError: a Kubernetes store's cluster cannot be reached.
    """
    api_client = None
    if spec.kind is StateKind.KUBERNETES:
        from sky_kueue.mirror import connection

        api_client = connection.connect().api_client
    opened = open_state(spec, api_client=api_client, read_only=True)
    try:
        store = opened.store
        out: list[JobHistory] = []
        for summary in store.jobs():
            if summary.phase is not Phase.FINISHED:
                continue
            history = store.load(summary.key)
            if history is not None:
                out.append(history)
        return out
    finally:
        opened.close()
        if api_client is not None:
            api_client.close()


class HistorySource:
    """Past runs from the controller's store, cached (see the module docstring).

    Args:
        environ: the environment (default: the process's, read on each refresh).
        clock: monotonic seconds.
        reader: reads a store's histories (tests).
    """

    def __init__(
        self,
        environ: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        reader: Callable[[StateSpec], list[JobHistory]] = read_histories,
    ) -> None:
        self._environ = environ
        self._clock = clock
        self._reader = reader
        self._lock = threading.Lock()
        self._cached: tuple[float, tuple[PastRun, ...]] | None = None
        self._warned: set[str] = set()

    def runs(self) -> tuple[PastRun, ...]:
        """The finished runs (empty when there is no store or it cannot be read)."""
        now = self._clock()
        with self._lock:
            if self._cached is not None and now - self._cached[0] < HISTORY_CACHE_SECONDS:
                return self._cached[1]
            runs = self._read()
            self._cached = (now, runs)
            return runs

    def _read(self) -> tuple[PastRun, ...]:
        environ = os.environ if self._environ is None else self._environ
        failures: tuple[type[BaseException], ...] = (ValueError, StoreError, OSError)
        try:
            spec = configured_spec(environ)
            if spec is None:
                return ()
            if spec.kind is StateKind.KUBERNETES:
                # Only a Kubernetes store reaches a cluster; the mirror's errors import the
                # Kubernetes client (0.5 s), which a dry run on a snapshot never needs.
                from sky_kueue.mirror import MirrorError

                failures = (*failures, MirrorError)
            return past_runs(self._reader(spec))
        except failures as exc:
            problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            level = logging.DEBUG if problem in self._warned else logging.WARNING
            self._warned.add(problem)
            logger.log(level, "sky-kueue: no job history for run-time estimates (%s)", problem)
            return ()

"""The controller's own durable state next to the history: watch cursors and a heartbeat.

Why a watch cursor: a SkyPilot pod group preempted by Kueue ends ``Finished`` and is
garbage-collected within seconds (Kueue ``pkg/controller/jobs/pod/pod_controller.go``: an
unretriable group is finished once its pods are gone). A controller that was down
during that window and simply re-lists on restart never sees the object, so the preemption
would be lost. Instead the controller remembers the ``resourceVersion`` of the last Workload
event it fully handled and, on restart, watches *from there*: the API server replays every
change since, deletions included (it keeps a window of history; a 410 means the window was
exceeded and the controller falls back to a list, logging the gap). The cursor is written
only after the events before it were handled, and lazily (at most every few hundred
milliseconds), so it may lag: replaying a few events twice is harmless because every
history write is idempotent. That is at-least-once delivery across SIGKILL.

Why a heartbeat: ``sky-kueue controller status`` and an exec liveness probe read the state
file, not the API server; the heartbeat says which replica wrote last, whether it led, and
when.

The tables live in the history store's SQLite file (created after the history schema, so the
file stays a valid :class:`~sky_kueue.controller.sqlite_store.SqliteHistoryStore`), written
through their own connection in WAL mode.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sky_kueue.controller.history import StoreError
from sky_kueue.controller.sqlite_store import DEFAULT_BUSY_TIMEOUT_MILLISECONDS, connect
from sky_kueue.controller.state_spec import DEFAULT_STATE_PATH, STATE_ENV_VAR

__all__ = ["DEFAULT_STATE_PATH", "STATE_ENV_VAR", "Heartbeat", "RuntimeState"]

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS controller_cursors (
        resource TEXT PRIMARY KEY,
        resource_version TEXT NOT NULL,
        updated_at REAL NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS controller_heartbeat (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        identity TEXT NOT NULL,
        leader INTEGER NOT NULL,
        at REAL NOT NULL,
        details TEXT NOT NULL
    )""",
)


@dataclass(frozen=True)
class Heartbeat:
    """The last heartbeat written by any controller process using this state file."""

    identity: str
    leader: bool
    at: float
    details: dict[str, Any]


class RuntimeState:
    """Watch cursors and the heartbeat, in the state file (thread-safe)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        busy_timeout_milliseconds: int = DEFAULT_BUSY_TIMEOUT_MILLISECONDS,
    ) -> None:
        """Opens the state file; open the history store on it first (it creates the file).

        Raises:
            StoreError: the file cannot be opened or its tables created.
        """
        self.path = Path(path)
        self._lock = threading.Lock()
        self._read_only = read_only
        try:
            self._conn = connect(self.path, read_only=read_only, busy_timeout_milliseconds=busy_timeout_milliseconds)
            if not read_only:
                self._conn.execute("PRAGMA journal_mode = WAL")
                self._conn.execute("PRAGMA synchronous = FULL")
                for statement in _SCHEMA:
                    self._conn.execute(statement)
        except sqlite3.Error as err:
            raise StoreError(f"{self.path}: cannot open the controller state: {err}") from err

    def _has_tables(self) -> bool:
        row = self._conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name IN ('controller_cursors', 'controller_heartbeat')"
        ).fetchone()
        return int(row[0]) == len(_SCHEMA)

    def _read_row(self, sql: str, params: tuple[Any, ...], what: str) -> Any:
        """One row of a query (None: no such row, or a read-only file without our tables).

        Raises:
            StoreError: the read failed (the message names ``what``).
        """
        with self._lock:
            try:
                if self._read_only and not self._has_tables():
                    return None
                return self._conn.execute(sql, params).fetchone()
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot read {what}: {err}") from err

    def cursor(self, resource: str) -> str | None:
        """The resourceVersion up to which ``resource`` events were handled, if any.

        Raises:
            StoreError: the read failed.
        """
        row = self._read_row(
            "SELECT resource_version FROM controller_cursors WHERE resource = ?", (resource,), "the watch cursor"
        )
        return None if row is None else str(row[0])

    def save_cursor(self, resource: str, resource_version: str, at: float) -> None:
        """Durably records that every ``resource`` event up to ``resource_version`` was handled.

        Raises:
            StoreError: the write failed.
        """
        with self._lock:
            try:
                self._conn.execute(
                    """INSERT INTO controller_cursors (resource, resource_version, updated_at) VALUES (?, ?, ?)
                       ON CONFLICT(resource) DO UPDATE SET
                           resource_version = excluded.resource_version, updated_at = excluded.updated_at""",
                    (resource, resource_version, at),
                )
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot write the watch cursor: {err}") from err

    def clear_cursor(self, resource: str) -> None:
        """Forgets the cursor (after a 410: the next start lists instead of replaying).

        Raises:
            StoreError: the write failed.
        """
        with self._lock:
            try:
                self._conn.execute("DELETE FROM controller_cursors WHERE resource = ?", (resource,))
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot clear the watch cursor: {err}") from err

    def beat(self, identity: str, leader: bool, at: float, details: dict[str, Any]) -> None:
        """Records a heartbeat (one row, overwritten).

        Raises:
            StoreError: the write failed.
        """
        with self._lock:
            try:
                self._conn.execute(
                    """INSERT INTO controller_heartbeat (id, identity, leader, at, details) VALUES (1, ?, ?, ?, ?)
                       ON CONFLICT(id) DO UPDATE SET identity = excluded.identity, leader = excluded.leader,
                           at = excluded.at, details = excluded.details""",
                    (identity, int(leader), at, json.dumps(details, sort_keys=True)),
                )
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot write the heartbeat: {err}") from err

    def heartbeat(self) -> Heartbeat | None:
        """The last heartbeat, if any controller ever wrote one here.

        Raises:
            StoreError: the read failed.
        """
        row = self._read_row(
            "SELECT identity, leader, at, details FROM controller_heartbeat WHERE id = 1", (), "the heartbeat"
        )
        if row is None:
            return None
        return Heartbeat(str(row[0]), bool(row[1]), float(row[2]), json.loads(row[3]))

    def cursors(self) -> dict[str, str]:
        """Every stored cursor, resource -> resourceVersion.

        Raises:
            StoreError: the read failed.
        """
        with self._lock:
            try:
                if self._read_only and not self._has_tables():
                    return {}
                rows = self._conn.execute("SELECT resource, resource_version FROM controller_cursors").fetchall()
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot read the watch cursors: {err}") from err
        return {str(r[0]): str(r[1]) for r in rows}

    def close(self) -> None:
        with self._lock:
            self._conn.close()

"""The embedded history store: one SQLite file, safe against SIGKILL at any instruction.

Why SQLite: the controller needs a durable, transactional record that survives Workload
deletion (SkyPilot's relaunch replaces the Workload) and controller crashes, with no extra
infrastructure for a laptop run or a single replica with a volume. Several replicas share
the in-cluster store instead (:mod:`sky_kueue.controller.kube_store`, ``--state kubernetes``),
which implements the same :class:`~sky_kueue.controller.history.HistoryStore` Protocol.

Durability choices:

* ``journal_mode=WAL``: readers (``sky-kueue aging explain``, ``controller status``) never
  block the writer and see a consistent snapshot.
* ``synchronous=FULL``: every commit is fsynced. With ``NORMAL``, WAL mode is still safe
  against a killed *process* (the OS keeps the written pages), but a power loss may drop
  the last commits. A dropped "preemption recorded" cannot always be recovered: the
  preempted Workload of an unretriable SkyPilot pod group is garbage-collected soon after.
  Commits are rare (a few per Workload transition) and cost ~0.1 ms here, so we pay it.
* Each public method is one ``BEGIN IMMEDIATE`` transaction (the write lock is taken up
  front, so two writers never deadlock upgrading a read lock). A fact and the phase change
  it causes are written together: after a crash either both exist or neither.
* Idempotency keys (:mod:`sky_kueue.controller.keys`) are UNIQUE columns; replays are
  ``INSERT OR IGNORE`` and report "already recorded".

Exactly-once aging: a step is *decided* (boost stored under its episode key) before the
patch is sent, and *actuated* (compare-and-set on the step's revision) after the API server
accepted it. A crash between the two leaves the step ``decided``; the next reconcile of the
Workload finds it and re-sends the same absolute patch. A crash after the patch but before
the mark re-sends it too, which is harmless. A crash before the decision leaves nothing, and
the decision is recomputed from the same history, giving the same boost.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import quote

from sky_kueue.controller.history import (
    AgingStep,
    BurstRecord,
    EvictionRecord,
    HistoryStore,
    HoldRecord,
    HoldRelease,
    JobHistory,
    JobSummary,
    Phase,
    PreemptionRecord,
    StepDecision,
    StepState,
    StoreError,
    StoreWriteStats,
    Transition,
    TransitionCause,
    identity_mismatch_message,
    one_job,
    reference_candidates,
    transition_key,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import JobIdentity, JobOwner

log = logging.getLogger(__name__)

#: Bumped on every incompatible schema change; a newer file is refused, not rewritten.
SCHEMA_VERSION = 1
#: How long a writer waits for another connection's write lock before failing.
DEFAULT_BUSY_TIMEOUT_MILLISECONDS = 5_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_key TEXT PRIMARY KEY,
    namespace TEXT NOT NULL,
    pod_group TEXT,
    managed_job_id TEXT,
    managed_job_name TEXT,
    user_name TEXT,
    cluster_name TEXT,
    base_priority INTEGER,
    first_seen REAL NOT NULL,
    team TEXT
);
CREATE TABLE IF NOT EXISTS aliases (
    alias TEXT PRIMARY KEY,
    job_key TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS transitions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    job_key TEXT NOT NULL,
    cause TEXT NOT NULL,
    at REAL NOT NULL,
    workload_uid TEXT NOT NULL,
    cluster TEXT
);
CREATE INDEX IF NOT EXISTS transitions_by_job ON transitions (job_key, seq);
CREATE TABLE IF NOT EXISTS preemptions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    job_key TEXT NOT NULL,
    workload_name TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT NOT NULL,
    preemptor_uid TEXT,
    preemptor_job_uid TEXT,
    preemptor_priority INTEGER,
    message TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS preemptions_by_job ON preemptions (job_key, seq);
CREATE TABLE IF NOT EXISTS evictions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    job_key TEXT NOT NULL,
    workload_name TEXT NOT NULL,
    at REAL NOT NULL,
    reason TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    underlying_cause TEXT
);
CREATE INDEX IF NOT EXISTS evictions_by_job ON evictions (job_key, seq);
CREATE TABLE IF NOT EXISTS steps (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    job_key TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    policy TEXT NOT NULL,
    boost INTEGER NOT NULL,
    revision INTEGER NOT NULL,
    decided_at REAL NOT NULL,
    revised_at REAL,
    state TEXT NOT NULL,
    actuated_boost INTEGER,
    actuated_at REAL,
    actuator TEXT,
    detail TEXT,
    explanation TEXT NOT NULL,
    cluster TEXT
);
CREATE INDEX IF NOT EXISTS steps_by_job ON steps (job_key, seq);
CREATE INDEX IF NOT EXISTS steps_by_state ON steps (state, seq);
CREATE TABLE IF NOT EXISTS bursts (
    job_key TEXT PRIMARY KEY,
    decided_at REAL NOT NULL,
    reason TEXT NOT NULL,
    detail TEXT NOT NULL,
    preemptions INTEGER NOT NULL,
    predicted_wait_seconds REAL
);
"""
#: Held relaunches (:class:`~sky_kueue.controller.history.HoldRecord`), one row per Workload UID.
#: Added after schema version 1 shipped, so it is created on any writable open: an older file
#: gains it without a version bump, and a read-only open of a file without it reads no holds.
_HOLDS_SCHEMA = """
CREATE TABLE IF NOT EXISTS holds (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    workload_uid TEXT NOT NULL UNIQUE,
    job_key TEXT NOT NULL,
    workload_namespace TEXT NOT NULL,
    workload_name TEXT NOT NULL,
    held_at REAL NOT NULL,
    reason TEXT NOT NULL,
    preemptions INTEGER NOT NULL,
    predicted_wait_seconds REAL,
    released_at REAL,
    release_kind TEXT,
    release_reason TEXT,
    release_cluster TEXT
)
"""
#: The owner's team (``JobIdentity.team``), added after schema version 1 shipped: a writable
#: open adds the column to an older file (its rows read as team unknown, filled in by the first
#: claimant in the job's namespace); a read-only open of such a file reads no team.
_TEAM_COLUMN = "ALTER TABLE jobs ADD COLUMN team TEXT"
#: The cluster a transition's or a step's Workload lives in (``Transition.cluster``), added the
#: same way: a writable open adds the columns, an older file's rows read as cluster unknown.
_CLUSTER_TABLES = ("transitions", "steps")
#: The tables a sky-kueue store must hold (runtime-state tables are checked by their owner).
_SCHEMA_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))

_JOB_TABLES = ("transitions", "preemptions", "evictions", "steps")


def connect(path: Path, *, read_only: bool, busy_timeout_milliseconds: int) -> sqlite3.Connection:
    """A connection to the state file shared by the history store and the runtime state.

    Autocommit (transactions are explicit), usable from the controller's threads behind the
    caller's lock, and waiting up to ``busy_timeout_milliseconds`` for another process's
    write lock. Read-only opens never create the file.

    Raises:
        sqlite3.Error: the file cannot be opened.
    """
    if read_only:
        uri = f"file:{quote(str(path.resolve()))}?mode=ro"
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    else:
        conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_milliseconds)}")
    return conn


#: What to do about a damaged state file (said in every such error).
_DAMAGED_ADVICE = (
    "restore it from a backup, or move it aside to start a new history "
    "(jobs then age from what the cluster shows; their past preemptions are forgotten)"
)


class SqliteHistoryStore:
    """:class:`~sky_kueue.controller.history.HistoryStore` on one SQLite file."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        busy_timeout_milliseconds: int = DEFAULT_BUSY_TIMEOUT_MILLISECONDS,
    ) -> None:
        """Opens (and, unless ``read_only``, creates) the store at ``path``.

        Raises:
            StoreError: the file is missing (read-only), not a SQLite database, not a
                sky-kueue store, from a newer version, or its directory does not exist.
        """
        self.path = Path(path)
        self._lock = threading.RLock()
        self._writes = 0
        self._mismatched: set[str] = set()  # owned keys of claimants of another owner's history
        if read_only and not self.path.is_file():
            raise StoreError(f"no history store at {self.path}")
        if not read_only and not self.path.parent.is_dir():
            raise StoreError(f"cannot create history store {self.path}: directory {self.path.parent} does not exist")
        try:
            self._conn = connect(self.path, read_only=read_only, busy_timeout_milliseconds=busy_timeout_milliseconds)
            self._conn.row_factory = sqlite3.Row
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise StoreError(
                    f"{self.path} has schema version {version}; this sky-kueue understands up to {SCHEMA_VERSION}"
                )
            if read_only:
                if version != SCHEMA_VERSION:
                    raise StoreError(f"{self.path} is not a sky-kueue history store")
            else:
                mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StoreError(f"{self.path}: cannot enable WAL journal mode (got {mode})")
                self._conn.execute("PRAGMA synchronous = FULL")
                if version == 0:
                    self._create_schema()
                else:
                    self._check_integrity()
                self._conn.execute(_HOLDS_SCHEMA)
                if not self._has_team_column():
                    self._conn.execute(_TEAM_COLUMN)
                for table in _CLUSTER_TABLES:
                    if not self._has_column(table, "cluster"):
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN cluster TEXT")
            self._team = self._has_team_column()  # False only on a read-only open of an older file
            self._holds = bool(
                self._conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'holds'").fetchone()
            )
        except sqlite3.Error as err:
            detail = " ".join(str(err).split())
            raise StoreError(
                f"{self.path} is not a usable sky-kueue history store: {detail}; {_DAMAGED_ADVICE}"
            ) from err

    # --- plumbing ---------------------------------------------------------------------

    def _has_team_column(self) -> bool:
        return self._has_column("jobs", "team")

    def _has_column(self, table: str, column: str) -> bool:
        return any(str(row[1]) == column for row in self._conn.execute(f"PRAGMA table_info({table})"))

    def _check_integrity(self) -> None:
        """Refuse a damaged file at start (SQLite's ``quick_check`` and our tables present).

        Why at start: a controller that runs on a damaged store cannot record or age anything
        and would fail on every event; refusing with one line lets whoever runs it act.
        """
        problems = [str(row[0]) for row in self._conn.execute("PRAGMA quick_check").fetchall()]
        if problems != ["ok"]:
            first = " ".join(problems[0].split())  # SQLite's report spans lines; ours is one
            raise StoreError(f"{self.path} is damaged ({first}); {_DAMAGED_ADVICE}")
        tables = {str(row[0]) for row in self._conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        missing = sorted(_SCHEMA_TABLES - tables)
        if missing:
            raise StoreError(f"{self.path} is damaged (missing tables {', '.join(missing)}); {_DAMAGED_ADVICE}")

    def _create_schema(self) -> None:
        with self._write() as conn:
            if int(conn.execute("PRAGMA user_version").fetchone()[0]) == 0:
                if conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                    raise StoreError(f"{self.path} is a SQLite database but not a sky-kueue history store")
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed if the block succeeds, rolled back otherwise."""
        with self._transaction("BEGIN IMMEDIATE", "write") as conn:
            yield conn
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: commit failed: {err}") from err
            self._writes += 1

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction (one consistent snapshot); rolled back, as it has nothing to commit."""
        with self._transaction("BEGIN", "read") as conn:
            yield conn
            self._rollback()

    @contextmanager
    def _transaction(self, begin: str, what: str) -> Iterator[sqlite3.Connection]:
        """Holds the lock around one transaction; SQLite errors become :class:`StoreError`."""
        with self._lock:
            try:
                self._conn.execute(begin)
            except sqlite3.Error as err:
                raise StoreError(f"{self.path}: cannot start a {what} transaction: {err}") from err
            try:
                yield self._conn
            except sqlite3.Error as err:
                self._rollback()
                raise StoreError(f"{self.path}: {what} failed: {err}") from err
            except BaseException:
                self._rollback()
                raise

    def _rollback(self) -> None:
        try:
            self._conn.execute("ROLLBACK")
        except sqlite3.Error:
            # The transaction is already gone (SQLite rolls back on some errors itself);
            # the original error is the one worth reporting, and it is being re-raised.
            return

    def write_stats(self) -> StoreWriteStats:
        """Write transactions committed since the store was opened (SQLite locks: no conflicts)."""
        return StoreWriteStats(self._writes, 0, len(self._mismatched))

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteHistoryStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # --- job keys ---------------------------------------------------------------------

    @staticmethod
    def _alias_target(conn: sqlite3.Connection, alias: str) -> str | None:
        row = conn.execute("SELECT job_key FROM aliases WHERE alias = ?", (alias,)).fetchone()
        return None if row is None else str(row[0])

    def _job_key(
        self,
        conn: sqlite3.Connection,
        identity: JobIdentity,
        seen_at: float,
        base_priority: int | None = None,
    ) -> str:
        """Resolves (and registers) the job's key inside the caller's transaction.

        A pod-group key seen before the managed-job id was known is merged into the
        managed-job key, so one job never has two histories.
        """
        group_key = identity.pod_group_key
        if identity.managed_job_id:
            key = self._bound_key(conn, identity)
            if group_key is not None:
                target = self._alias_target(conn, group_key)
                if target != key:
                    conn.execute("INSERT OR REPLACE INTO aliases (alias, job_key) VALUES (?, ?)", (group_key, key))
                self._merge(conn, group_key, key)
        else:
            assert group_key is not None
            key = self._alias_target(conn, group_key) or group_key
        conn.execute(
            "INSERT OR IGNORE INTO jobs (job_key, namespace, first_seen) VALUES (?, ?, ?)",
            (key, identity.namespace, seen_at),
        )
        conn.execute(
            """UPDATE jobs SET
                   pod_group = coalesce(pod_group, ?),
                   managed_job_id = coalesce(managed_job_id, ?),
                   managed_job_name = coalesce(managed_job_name, ?),
                   user_name = coalesce(user_name, ?),
                   cluster_name = coalesce(cluster_name, ?),
                   team = coalesce(team, ?),
                   base_priority = coalesce(base_priority, ?),
                   first_seen = min(first_seen, ?)
               WHERE job_key = ?""",
            (
                identity.pod_group,
                identity.managed_job_id,
                identity.managed_job_name,
                identity.user,
                identity.cluster_name,
                identity.team,
                base_priority,
                seen_at,
                key,
            ),
        )
        return key

    def _bound_key(self, conn: sqlite3.Connection, identity: JobIdentity) -> str:
        """The key of ``identity``'s managed-job history: ``managed-job/<id>`` unless another
        owner's history holds it, then the claimant's own :attr:`~JobIdentity.owned_key`
        (the claim is logged and counted once)."""
        key = identity.key
        row = conn.execute("SELECT namespace, team, user_name FROM jobs WHERE job_key = ?", (key,)).fetchone()
        if row is None:
            return key
        conflict = JobOwner(row["namespace"], row["team"], row["user_name"]).conflict(identity.owner)
        if conflict is None:
            return key
        if identity.owned_key not in self._mismatched:
            self._mismatched.add(identity.owned_key)
            log.warning(identity_mismatch_message(identity, key, conflict))
        return identity.owned_key

    @staticmethod
    def _merge(conn: sqlite3.Connection, old: str, new: str) -> None:
        old_row = conn.execute("SELECT * FROM jobs WHERE job_key = ?", (old,)).fetchone()
        if old_row is None:
            return
        for table in _JOB_TABLES:
            conn.execute(f"UPDATE {table} SET job_key = ? WHERE job_key = ?", (new, old))
        conn.execute("UPDATE OR IGNORE bursts SET job_key = ? WHERE job_key = ?", (new, old))
        conn.execute("DELETE FROM bursts WHERE job_key = ?", (old,))
        conn.execute("UPDATE holds SET job_key = ? WHERE job_key = ?", (new, old))
        new_row = conn.execute("SELECT * FROM jobs WHERE job_key = ?", (new,)).fetchone()
        if new_row is None:
            conn.execute("UPDATE jobs SET job_key = ? WHERE job_key = ?", (new, old))
            return
        earlier = old_row if old_row["first_seen"] <= new_row["first_seen"] else new_row
        later = new_row if earlier is old_row else old_row
        base = earlier["base_priority"] if earlier["base_priority"] is not None else later["base_priority"]
        conn.execute(
            """UPDATE jobs SET first_seen = ?, base_priority = ?, pod_group = coalesce(pod_group, ?)
               WHERE job_key = ?""",
            (earlier["first_seen"], base, old_row["pod_group"], new),
        )
        conn.execute("DELETE FROM jobs WHERE job_key = ?", (old,))

    # --- writes -----------------------------------------------------------------------

    def ensure_job(self, identity: JobIdentity, base_priority: int | None, seen_at: float) -> str:
        # Called on every reconcile: when the job is already registered with everything this
        # identity knows, answer from a read and spare a write transaction (and its fsync).
        with self._read() as conn:
            known = self._registered_key(conn, identity, seen_at, base_priority)
        if known is not None:
            return known
        with self._write() as conn:
            return self._job_key(conn, identity, seen_at, base_priority)

    def _registered_key(
        self, conn: sqlite3.Connection, identity: JobIdentity, seen_at: float, base_priority: int | None
    ) -> str | None:
        """The job key if :meth:`_job_key` would change nothing, else None."""
        group_key = identity.pod_group_key
        if identity.managed_job_id:
            key = self._bound_key(conn, identity)
            if group_key is not None and (
                self._alias_target(conn, group_key) != key
                or conn.execute("SELECT 1 FROM jobs WHERE job_key = ?", (group_key,)).fetchone() is not None
            ):
                return None
        else:
            assert group_key is not None
            key = self._alias_target(conn, group_key) or group_key
        row = conn.execute("SELECT * FROM jobs WHERE job_key = ?", (key,)).fetchone()
        if row is None or seen_at < row["first_seen"]:
            return None
        wanted = {
            "pod_group": identity.pod_group,
            "managed_job_id": identity.managed_job_id,
            "managed_job_name": identity.managed_job_name,
            "user_name": identity.user,
            "cluster_name": identity.cluster_name,
            "team": identity.team,
            "base_priority": base_priority,
        }
        if any(value is not None and row[column] is None for column, value in wanted.items()):
            return None
        return key

    @staticmethod
    def _insert_transition(conn: sqlite3.Connection, job_key: str, transition: Transition) -> bool:
        cursor = conn.execute(
            """INSERT OR IGNORE INTO transitions (key, job_key, cause, at, workload_uid, cluster)
               VALUES (?, ?, ?, ?, ?, ?)""",
            (
                transition.key,
                job_key,
                transition.cause.value,
                transition.at,
                transition.workload_uid,
                transition.cluster,
            ),
        )
        return cursor.rowcount == 1

    def record_transition(self, identity: JobIdentity, transition: Transition) -> bool:
        with self._write() as conn:
            key = self._job_key(conn, identity, transition.at)
            return self._insert_transition(conn, key, transition)

    def record_preemption(self, identity: JobIdentity, record: PreemptionRecord) -> bool:
        return self._record_episode(
            identity,
            record.at,
            """INSERT OR IGNORE INTO preemptions (key, job_key, workload_name, at, reason, preemptor_uid,
                   preemptor_job_uid, preemptor_priority, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                record.workload_name,
                record.at,
                record.reason,
                record.preemptor_uid,
                record.preemptor_job_uid,
                record.preemptor_priority,
                record.message,
            ),
            record.key,
            TransitionCause.PREEMPTED,
        )

    def record_eviction(self, identity: JobIdentity, record: EvictionRecord) -> bool:
        return self._record_episode(
            identity,
            record.at,
            """INSERT OR IGNORE INTO evictions (key, job_key, workload_name, at, reason, kind, message,
                   underlying_cause) VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
            (
                record.workload_name,
                record.at,
                record.reason,
                record.kind,
                record.message,
                record.underlying_cause,
            ),
            record.key,
            TransitionCause.EVICTED,
        )

    def _record_episode(
        self,
        identity: JobIdentity,
        at: float,
        insert_sql: str,
        columns: tuple[object, ...],
        episode: EpisodeKey,
        cause: TransitionCause,
    ) -> bool:
        """Inserts one preemption or eviction row and its transition in one transaction.

        The row's first two columns are always the episode token and the job key; the
        transition is written only when the row is new, so a replayed event is a no-op.
        """
        with self._write() as conn:
            key = self._job_key(conn, identity, at)
            cursor = conn.execute(insert_sql, (episode.token, key, *columns))
            if cursor.rowcount != 1:
                return False
            self._insert_transition(
                conn,
                key,
                Transition(transition_key(episode, cause), cause, at, episode.workload_uid),
            )
            return True

    def decide_step(self, identity: JobIdentity, decision: StepDecision) -> AgingStep:
        with self._write() as conn:
            key = self._job_key(conn, identity, decision.decided_at)
            row = conn.execute("SELECT * FROM steps WHERE key = ?", (decision.key.token,)).fetchone()
            explanation = json.dumps(list(decision.explanation))
            if row is None:
                conn.execute(
                    """INSERT INTO steps (key, job_key, namespace, name, policy, boost, revision, decided_at,
                           state, explanation, cluster) VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)""",
                    (
                        decision.key.token,
                        key,
                        decision.workload_namespace,
                        decision.workload_name,
                        decision.policy,
                        decision.boost,
                        decision.decided_at,
                        StepState.DECIDED.value,
                        explanation,
                        decision.cluster,
                    ),
                )
            elif decision.boost > row["boost"] and row["state"] != StepState.SKIPPED.value:
                conn.execute(
                    """UPDATE steps SET boost = ?, revision = revision + 1, revised_at = ?, state = ?,
                           policy = ?, explanation = ? WHERE key = ?""",
                    (
                        decision.boost,
                        decision.decided_at,
                        StepState.DECIDED.value,
                        decision.policy,
                        explanation,
                        decision.key.token,
                    ),
                )
            return self._step(conn, decision.key)

    def mark_actuated(self, key: EpisodeKey, boost: int, revision: int, at: float, actuator: str) -> AgingStep:
        with self._write() as conn:
            conn.execute(
                """UPDATE steps SET state = ?, actuated_boost = ?, actuated_at = ?, actuator = ?
                   WHERE key = ? AND revision = ? AND state = ?""",
                (StepState.ACTUATED.value, boost, at, actuator, key.token, revision, StepState.DECIDED.value),
            )
            return self._step(conn, key)

    def mark_skipped(self, key: EpisodeKey, at: float, detail: str) -> AgingStep:
        with self._write() as conn:
            conn.execute(
                "UPDATE steps SET state = ?, detail = ?, actuated_at = NULL WHERE key = ? AND state = ?",
                (StepState.SKIPPED.value, detail, key.token, StepState.DECIDED.value),
            )
            return self._step(conn, key)

    def record_burst(self, identity: JobIdentity, record: BurstRecord) -> BurstRecord:
        with self._write() as conn:
            key = self._job_key(conn, identity, record.decided_at)
            conn.execute(
                """INSERT OR IGNORE INTO bursts (job_key, decided_at, reason, detail, preemptions,
                       predicted_wait_seconds) VALUES (?, ?, ?, ?, ?, ?)""",
                (
                    key,
                    record.decided_at,
                    record.reason,
                    record.detail,
                    record.preemptions,
                    record.predicted_wait_seconds,
                ),
            )
            stored = self._burst(conn, key)
            assert stored is not None
            return stored

    def record_hold(self, identity: JobIdentity, record: HoldRecord) -> HoldRecord:
        with self._write() as conn:
            key = self._job_key(conn, identity, record.held_at)
            values = dataclasses.asdict(record)
            columns = ", ".join(["job_key", *values])
            marks = ", ".join("?" * (len(values) + 1))
            conn.execute(f"INSERT OR IGNORE INTO holds ({columns}) VALUES ({marks})", (key, *values.values()))
            stored = self._hold(conn, record.workload_uid)
            assert stored is not None
            return stored

    def release_hold(self, identity: JobIdentity, release: HoldRelease) -> HoldRecord | None:
        with self._write() as conn:
            conn.execute(
                """UPDATE holds SET released_at = ?, release_kind = ?, release_reason = ?, release_cluster = ?
                   WHERE workload_uid = ? AND released_at IS NULL""",
                (release.at, release.kind.value, release.reason, release.cluster, release.workload_uid),
            )
            return self._hold(conn, release.workload_uid)

    # --- reads ------------------------------------------------------------------------

    @staticmethod
    def _hold(conn: sqlite3.Connection, workload_uid: str) -> HoldRecord | None:
        row = conn.execute("SELECT * FROM holds WHERE workload_uid = ?", (workload_uid,)).fetchone()
        return None if row is None else _hold_from_row(row)

    def _holds_of(self, conn: sqlite3.Connection, job_key: str) -> tuple[HoldRecord, ...]:
        if not self._holds:
            return ()
        rows = conn.execute("SELECT * FROM holds WHERE job_key = ? ORDER BY seq", (job_key,))
        return tuple(_hold_from_row(r) for r in rows)

    def _step(self, conn: sqlite3.Connection, key: EpisodeKey) -> AgingStep:
        row = conn.execute("SELECT * FROM steps WHERE key = ?", (key.token,)).fetchone()
        if row is None:
            raise StoreError(f"{self.path}: no aging step {key.token}")
        return _step_from_row(row)

    @staticmethod
    def _burst(conn: sqlite3.Connection, job_key: str) -> BurstRecord | None:
        row = conn.execute("SELECT * FROM bursts WHERE job_key = ?", (job_key,)).fetchone()
        if row is None:
            return None
        return BurstRecord(
            decided_at=row["decided_at"],
            reason=row["reason"],
            detail=row["detail"],
            preemptions=row["preemptions"],
            predicted_wait_seconds=row["predicted_wait_seconds"],
        )

    def pending_steps(self) -> Sequence[AgingStep]:
        with self._read() as conn:
            rows = conn.execute("SELECT * FROM steps WHERE state = ? ORDER BY seq", (StepState.DECIDED.value,))
            return tuple(_step_from_row(row) for row in rows.fetchall())

    def _canonical(self, conn: sqlite3.Connection, job_key: str) -> str | None:
        if conn.execute("SELECT 1 FROM jobs WHERE job_key = ?", (job_key,)).fetchone():
            return job_key
        return self._alias_target(conn, job_key)

    def load(self, job_key: str) -> JobHistory | None:
        with self._read() as conn:
            key = self._canonical(conn, job_key)
            if key is None:
                return None
            job = conn.execute("SELECT * FROM jobs WHERE job_key = ?", (key,)).fetchone()
            if job is None:
                return None
            transitions = tuple(
                Transition(r["key"], TransitionCause(r["cause"]), r["at"], r["workload_uid"], _cluster(r))
                for r in conn.execute("SELECT * FROM transitions WHERE job_key = ? ORDER BY seq", (key,))
            )
            preemptions = tuple(
                _record(PreemptionRecord, r)
                for r in conn.execute("SELECT * FROM preemptions WHERE job_key = ? ORDER BY seq", (key,))
            )
            evictions = tuple(
                _record(EvictionRecord, r)
                for r in conn.execute("SELECT * FROM evictions WHERE job_key = ? ORDER BY seq", (key,))
            )
            steps = tuple(
                _step_from_row(r) for r in conn.execute("SELECT * FROM steps WHERE job_key = ? ORDER BY seq", (key,))
            )
            burst = self._burst(conn, key)
            holds = self._holds_of(conn, key)
        identity = None
        if job["managed_job_id"] or job["pod_group"]:
            identity = JobIdentity(
                namespace=job["namespace"],
                pod_group=job["pod_group"],
                managed_job_id=job["managed_job_id"],
                managed_job_name=job["managed_job_name"],
                user=job["user_name"],
                cluster_name=job["cluster_name"],
                team=job["team"] if self._team else None,
                skypilot_owned=True,
            )
        return JobHistory(
            key=key,
            identity=identity,
            base_priority=job["base_priority"],
            first_seen=job["first_seen"],
            transitions=transitions,
            preemptions=preemptions,
            evictions=evictions,
            steps=steps,
            burst=burst,
            holds=holds,
        )

    def resolve(self, text: str) -> str | None:
        """The job key a user means by ``text``.

        Tried in order: an exact key or alias; a managed-job id (``17``); a pod group as
        ``namespace/name``; a bare pod-group, cluster or managed-job name.

        Raises:
            StoreError: ``text`` matches several jobs (the message lists them).
        """
        text = text.strip()
        if not text:
            return None
        with self._read() as conn:
            for candidate in reference_candidates(text):
                found = self._canonical(conn, candidate)
                if found is not None:
                    return found
            rows = conn.execute(
                """SELECT job_key FROM jobs WHERE pod_group = ? OR cluster_name = ? OR managed_job_name = ?
                   ORDER BY job_key""",
                (text, text, text),
            ).fetchall()
        return one_job(text, [str(r[0]) for r in rows])

    def jobs(self) -> Sequence[JobSummary]:
        with self._read() as conn:
            rows = conn.execute(
                """SELECT j.job_key, j.namespace, j.pod_group, j.managed_job_id,
                       (SELECT count(*) FROM preemptions p WHERE p.job_key = j.job_key) AS preemptions,
                       (SELECT count(*) FROM evictions e WHERE e.job_key = j.job_key) AS evictions,
                       (SELECT s.actuated_boost FROM steps s
                            WHERE s.job_key = j.job_key AND s.actuated_at IS NOT NULL
                                AND s.actuated_boost IS NOT NULL
                            ORDER BY s.actuated_at DESC, s.revision DESC, s.seq DESC LIMIT 1)
                            AS boost,
                       (SELECT t.cause FROM transitions t WHERE t.job_key = j.job_key
                            ORDER BY t.at DESC, t.seq DESC LIMIT 1) AS last_cause,
                       (SELECT 1 FROM bursts b WHERE b.job_key = j.job_key) AS burst{held}
                   FROM jobs j ORDER BY j.job_key""".format(
                    held=",\n (SELECT 1 FROM holds h WHERE h.job_key = j.job_key AND h.released_at IS NULL) AS held"
                    if self._holds
                    else ", NULL AS held"
                )
            ).fetchall()
        return tuple(
            JobSummary(
                key=r["job_key"],
                namespace=r["namespace"],
                pod_group=r["pod_group"],
                managed_job_id=r["managed_job_id"],
                preemptions=r["preemptions"],
                evictions=r["evictions"],
                current_boost=r["boost"] or 0,
                phase=_phase_of(r["last_cause"]),
                burst=bool(r["burst"]),
                held=bool(r["held"]),
            )
            for r in rows
        )


def _phase_of(cause: Any) -> Phase | None:
    if cause is None:
        return None
    return Transition("", TransitionCause(cause), 0.0, "").phase


_Record = TypeVar("_Record", PreemptionRecord, EvictionRecord)


def _record(cls: type[_Record], row: sqlite3.Row) -> _Record:
    """A history record from a row whose columns are named like the record's fields."""
    values = {f.name: row[f.name] for f in dataclasses.fields(cls) if f.name != "key"}
    return cls(key=EpisodeKey.parse(row["key"]), **values)


def _hold_from_row(row: sqlite3.Row) -> HoldRecord:
    return HoldRecord(**{f.name: row[f.name] for f in dataclasses.fields(HoldRecord)})


def _step_from_row(row: sqlite3.Row) -> AgingStep:
    return AgingStep(
        key=EpisodeKey.parse(row["key"]),
        job_key=row["job_key"],
        workload_namespace=row["namespace"],
        workload_name=row["name"],
        policy=row["policy"],
        boost=row["boost"],
        revision=row["revision"],
        decided_at=row["decided_at"],
        revised_at=row["revised_at"],
        state=StepState(row["state"]),
        actuated_boost=row["actuated_boost"],
        actuated_at=row["actuated_at"],
        actuator=row["actuator"],
        detail=row["detail"],
        explanation=tuple(json.loads(row["explanation"])),
        cluster=_cluster(row),
    )


def _cluster(row: sqlite3.Row) -> str | None:
    """A row's cluster (None on a read-only open of a file from before the column)."""
    known = "cluster" in row.keys()  # noqa: SIM118 (``in`` on a Row tests its values, not its columns)
    return str(row["cluster"]) if known and row["cluster"] is not None else None


if TYPE_CHECKING:

    def _conforms(store: SqliteHistoryStore) -> HistoryStore:
        return store  # mypy checks that the class implements the Protocol

"""The process the crash test kills: the real engine + SQLite store on a scripted cluster.

Usage: ``crash_writer.py STATE CLUSTER [--crash-after N [--crash-on KIND]] [--from-start]``

The "cluster" is a second SQLite file holding what a real API server would: each
Workload's ``spec.priority`` as last patched (absolute values, like a merge patch) and a
count of patches, plus the delivery cursor of the event stream. The cursor is advanced
durably *before* an event is handled, and a restart re-delivers from ``cursor - OVERLAP``,
so an event may be handled more than once but never skipped: at-least-once delivery, like
a watch resumed from an older resourceVersion.

``--crash-after N`` makes the process SIGKILL itself at the N-th crash point (of the kind
given by ``--crash-on``, if any), where crash points are: after each store write commits
(kind = the method name), right before a patch is sent (``before-patch``), and right after
it landed, before the step is marked actuated (``after-patch``). The kind is written to
stderr just before dying. The parent also kills it from outside at
random times to land inside transactions. Prints ``done`` when the script is exhausted.
"""

from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import sys
from pathlib import Path
from typing import Any

# Import the test helpers as pytest does (``tests/`` on the path, ``controller`` a package).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controller.crash_script import SETTINGS, make_script, snapshot

from sky_kueue.controller.actuators import ActuationOutcome, ActuationResult, WorkloadPatch
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.detection import classify
from sky_kueue.controller.engine import AgingEngine
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

#: Events re-delivered after a restart that were (probably) already handled.
OVERLAP = 3
_WRITES = (
    "ensure_job",
    "record_transition",
    "record_preemption",
    "record_eviction",
    "decide_step",
    "mark_actuated",
    "mark_skipped",
    "record_burst",
)


class CrashPoints:
    """Counts crash points (optionally of one kind) and SIGKILLs the process at the N-th."""

    def __init__(self, crash_after: int | None, kind: str | None) -> None:
        self.remaining = crash_after
        self.kind = kind

    def hit(self, kind: str) -> None:
        if self.remaining is None or (self.kind is not None and kind != self.kind):
            return
        self.remaining -= 1
        if self.remaining <= 0:
            sys.stderr.write(f"crash-point {kind}\n")
            sys.stderr.flush()
            os.kill(os.getpid(), signal.SIGKILL)


class CrashingStore:
    """Delegates to the real store; may die right after a write has committed."""

    def __init__(self, store: SqliteHistoryStore, points: CrashPoints) -> None:
        self._store = store
        self._points = points

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if name not in _WRITES:
            return attr

        def write(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            self._points.hit(name)
            return result

        return write


class Cluster:
    def __init__(self, path: str) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE IF NOT EXISTS cursor (id INTEGER PRIMARY KEY, delivered INTEGER NOT NULL)")
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS workloads (uid TEXT PRIMARY KEY, priority INTEGER, patches INTEGER)"
        )
        self.conn.execute("INSERT OR IGNORE INTO cursor (id, delivered) VALUES (1, 0)")

    @property
    def delivered(self) -> int:
        return int(self.conn.execute("SELECT delivered FROM cursor WHERE id = 1").fetchone()[0])

    def deliver(self, index: int) -> None:
        self.conn.execute("UPDATE cursor SET delivered = ? WHERE id = 1 AND delivered < ?", (index, index))

    def patch(self, uid: str, priority: int) -> None:
        self.conn.execute(
            """INSERT INTO workloads (uid, priority, patches) VALUES (?, ?, 1)
               ON CONFLICT(uid) DO UPDATE SET priority = excluded.priority, patches = patches + 1""",
            (uid, priority),
        )


class ClusterActuator:
    name = "cluster"

    def __init__(self, cluster: Cluster, points: CrashPoints) -> None:
        self._cluster = cluster
        self._points = points

    def apply(self, patch: WorkloadPatch) -> ActuationResult:
        self._points.hit("before-patch")  # crash between deciding and patching
        self._cluster.patch(patch.target.uid, int(patch.body["spec"]["priority"]))
        self._points.hit("after-patch")  # crash after patching, before the step is marked actuated
        return ActuationResult(ActuationOutcome.APPLIED, patch.summary)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("state")
    parser.add_argument("cluster")
    parser.add_argument("--crash-after", type=int, default=None, help="die at the N-th crash point")
    parser.add_argument("--crash-on", default=None, help="count only crash points of this kind")
    parser.add_argument("--from-start", action="store_true", help="re-deliver every event (a full relist)")
    args = parser.parse_args()

    points = CrashPoints(args.crash_after, args.crash_on)
    cluster = Cluster(args.cluster)
    store = SqliteHistoryStore(args.state)
    clock = ManualClock()
    engine = AgingEngine(CrashingStore(store, points), ClusterActuator(cluster, points), SETTINGS, clock=clock)
    script = make_script()
    start = 0 if args.from_start else max(0, cluster.delivered - OVERLAP)
    for index in range(start, len(script)):
        cluster.deliver(index + 1)
        event = script[index]
        clock.now = event.at
        workload, pods = snapshot(event)
        engine.reconcile(classify(workload, pods))
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

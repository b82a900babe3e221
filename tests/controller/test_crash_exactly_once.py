"""Exactly once under SIGKILL: no aging step is lost or applied twice, wherever the
controller dies.

The writer (``crash_writer.py``) runs the real engine and SQLite store over a scripted
cluster timeline of 100 preemptions and is killed over and over: first deterministically
at each interesting kind of crash point (right after a step is decided, between deciding
and patching, after patching but before marking the step actuated, ...), then at random
crash points, then from outside at random times (which lands inside transactions and
inside ``fsync``). Every restart resumes the event stream with an overlap, as a watch
resumed from an older resourceVersion would. Afterwards a full relist must change nothing,
and the store, the "cluster" and an independent pure computation must agree exactly.
"""

from __future__ import annotations

import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sky_kueue.controller import aging
from sky_kueue.controller.history import StepState
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

from .crash_script import BASE_PRIORITY, JOBS, PREEMPTIONS_PER_JOB, SETTINGS, expected_histories, make_script

WRITER = Path(__file__).with_name("crash_writer.py")
#: Crash-point kinds that must each be hit at least once.
REQUIRED_KINDS = (
    "record_preemption",
    "record_transition",
    "decide_step",
    "before-patch",
    "after-patch",
    "mark_actuated",
)
#: Soft wall-clock budget for the random-kill phase (the whole test stays well under 20 s).
RANDOM_PHASE_SECONDS = 5.0
MIN_KILLS = 30
RANDOM_SEED = 7


def run_writer(state: Path, cluster: Path, *args: str, kill_after_seconds: float | None = None) -> tuple[int, str]:
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), str(state), str(cluster), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _, err = proc.communicate(timeout=kill_after_seconds)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate()
    return proc.returncode, err


def dump(state: Path, cluster: Path) -> tuple[object, ...]:
    tables = []
    with sqlite3.connect(state) as conn:
        for table in ("jobs", "aliases", "transitions", "preemptions", "evictions", "steps", "bursts"):
            tables.append(sorted(conn.execute(f"SELECT * FROM {table}").fetchall(), key=repr))
    with sqlite3.connect(cluster) as conn:
        tables.append(sorted(conn.execute("SELECT * FROM workloads").fetchall()))
    return tuple(tables)


@pytest.mark.slow
@pytest.mark.long
def test_sigkill_anywhere_neither_loses_nor_repeats_an_aging_step(tmp_path: Path) -> None:
    state, cluster = tmp_path / "history.db", tmp_path / "cluster.db"
    kinds_hit: set[str] = set()
    kills = 0

    def crashed(returncode: int, stderr: str) -> bool:
        nonlocal kills
        if returncode == 0:
            return False
        assert returncode == -signal.SIGKILL, f"writer failed on its own (rc {returncode}):\n{stderr}"
        kills += 1
        kinds_hit.update(line.split()[1] for line in stderr.splitlines() if line.startswith("crash-point "))
        return True

    # 1. Deterministic: die at the first crash point of each kind, twice each.
    for kind in REQUIRED_KINDS * 2:
        assert crashed(*run_writer(state, cluster, "--crash-after", "1", "--crash-on", kind))
    assert set(REQUIRED_KINDS) <= kinds_hit

    # 2. Random crash points and random external kills: at least MIN_KILLS of them, and for
    # RANDOM_PHASE_SECONDS at most. Once the script is through, the kills land in full
    # relists (``--from-start``), which must be just as harmless.
    rng = random.Random(RANDOM_SEED)
    deadline = time.monotonic() + RANDOM_PHASE_SECONDS
    finished = False
    while kills < MIN_KILLS or (time.monotonic() < deadline and not finished):
        replay = ("--from-start",) if finished else ()
        if rng.random() < 0.6:
            result = run_writer(state, cluster, *replay, "--crash-after", str(rng.randint(1, 40)))
        else:
            result = run_writer(state, cluster, *replay, kill_after_seconds=rng.uniform(0.15, 0.4))
        finished = not crashed(*result) or finished
    if not finished:
        assert run_writer(state, cluster)[0] == 0
    assert kills >= MIN_KILLS

    # A full relist after all this is a no-op: nothing recorded twice, nothing re-patched.
    before = dump(state, cluster)
    assert run_writer(state, cluster, "--from-start")[0] == 0
    assert dump(state, cluster) == before

    script = make_script()
    expected = expected_histories(script)
    pending = [e for e in script if e.kind == "pending"]
    with SqliteHistoryStore(state, read_only=True) as store:
        assert len(store.jobs()) == JOBS
        for key, want in expected.items():
            got = store.load(key)
            assert got is not None
            # Zero lost, zero duplicated preemptions and phase changes.
            assert sorted(p.key for p in got.preemptions) == sorted(p.key for p in want.preemptions)
            assert len(got.preemptions) == PREEMPTIONS_PER_JOB
            assert sorted(t.key for t in got.transitions) == sorted(t.key for t in want.transitions)
            end = script[-1].at
            assert got.wait_seconds(end) == want.wait_seconds(end)
            assert got.run_seconds(end) == want.run_seconds(end)

        with sqlite3.connect(cluster) as conn:
            patched = dict(conn.execute("SELECT uid, priority FROM workloads").fetchall())
        for event in pending:
            key = f"managed-job/{event.job}"
            want_boost = aging.decide(expected[key].as_of(event.created_at), SETTINGS, event.created_at).boost
            got_history = store.load(key)
            assert got_history is not None
            step = got_history.step(EpisodeKey(event.uid, 0))
            # Exactly one decision per pending episode, equal to the policy's value for the history.
            assert step is not None and step.revision == 0
            assert step.state is StepState.ACTUATED
            assert step.boost == step.actuated_boost == want_boost, event.uid
            # What the cluster carries is exactly that boost (absolute, never accumulated).
            assert patched.get(event.uid, BASE_PRIORITY) == BASE_PRIORITY + want_boost, event.uid
        assert len(store.pending_steps()) == 0

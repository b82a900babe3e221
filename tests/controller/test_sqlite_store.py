"""The history stores: durable, idempotent, and (SQLite) strict about what it opens.

The contract tests take ``history_store`` and run against both stores behind the
``HistoryStore`` protocol: SQLite, and the Kubernetes store on the sandbox's API server.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from sky_kueue.controller.history import (
    BurstRecord,
    EvictionRecord,
    HistoryStore,
    Phase,
    PreemptionRecord,
    StepDecision,
    StepState,
    StoreError,
    Transition,
    TransitionCause,
    transition_key,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SCHEMA_VERSION, SqliteHistoryStore
from sky_kueue.mirror.identity import JobIdentity

JOB = JobIdentity("team-b", pod_group="train-17-ab", managed_job_id="17", user="alice", skypilot_owned=True)
GROUP_ONLY = JobIdentity("team-b", pod_group="train-17-ab")


def queued(uid: str, at: float) -> Transition:
    return Transition(transition_key(EpisodeKey(uid, 0), TransitionCause.QUEUED), TransitionCause.QUEUED, at, uid)


def preemption(uid: str, at: float, priority: int | None = 1000) -> PreemptionRecord:
    return PreemptionRecord(EpisodeKey(uid, 1), at, "train-17-ab", "InClusterQueue", "p", None, priority, "msg")


def decision(uid: str, boost: int, at: float) -> StepDecision:
    return StepDecision(EpisodeKey(uid, 0), "team-b", "train-17-ab", "bounded", boost, at, ("why",))


def test_history_survives_closing_and_reopening(tmp_path: Path) -> None:
    path = tmp_path / "history.db"
    with SqliteHistoryStore(path) as s:
        s.ensure_job(JOB, 100, 0.0)
        s.record_transition(JOB, queued("w0", 0.0))
        s.record_preemption(JOB, preemption("w0", 50.0))
        s.decide_step(JOB, decision("w1", 100, 60.0))
    with SqliteHistoryStore(path, read_only=True) as s:
        h = s.load("managed-job/17")
    assert h is not None
    assert (h.base_priority, h.first_seen, len(h.preemptions), len(h.steps)) == (100, 0.0, 1, 1)
    assert h.phase is Phase.WAITING and h.identity == JOB
    assert h.preemptions[0] == preemption("w0", 50.0)


def test_the_store_uses_wal_and_full_synchronous_commits(store: SqliteHistoryStore) -> None:
    assert store._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_facts_are_recorded_once_however_often_they_are_delivered(history_store: HistoryStore) -> None:
    assert history_store.record_preemption(JOB, preemption("w0", 50.0))
    assert not history_store.record_preemption(JOB, preemption("w0", 50.0))
    assert history_store.record_transition(JOB, queued("w1", 60.0))
    assert not history_store.record_transition(JOB, queued("w1", 60.0))
    eviction = EvictionRecord(EpisodeKey("w1", 1), 70.0, "train-17-ab", "PodsReadyTimeout", "PodsReadyTimeout")
    assert history_store.record_eviction(JOB, eviction)
    assert not history_store.record_eviction(JOB, eviction)
    h = history_store.load("managed-job/17")
    assert h is not None
    assert (len(h.preemptions), len(h.evictions), len(h.transitions)) == (1, 1, 3)  # + 2 WAITING transitions


def test_a_step_is_decided_once_raised_never_lowered(history_store: HistoryStore) -> None:
    first = history_store.decide_step(JOB, decision("w1", 100, 10.0))
    assert (first.boost, first.revision, first.state) == (100, 0, StepState.DECIDED)
    assert history_store.decide_step(JOB, decision("w1", 100, 20.0)) == first  # replay: unchanged
    assert history_store.decide_step(JOB, decision("w1", 40, 30.0)) == first  # lower: ignored
    raised = history_store.decide_step(JOB, decision("w1", 150, 40.0))
    assert (raised.boost, raised.revision, raised.decided_at, raised.revised_at) == (150, 1, 10.0, 40.0)


def test_actuation_is_a_compare_and_set_on_the_revision(history_store: HistoryStore) -> None:
    step = history_store.decide_step(JOB, decision("w1", 100, 10.0))
    history_store.decide_step(JOB, decision("w1", 150, 20.0))  # raised while the patch was in flight
    stale = history_store.mark_actuated(step.key, 100, step.revision, 30.0, "kubernetes")
    assert stale.state is StepState.DECIDED  # the raise still needs actuating
    done = history_store.mark_actuated(step.key, 150, stale.revision, 31.0, "kubernetes")
    assert (done.state, done.actuated_boost, done.actuator) == (StepState.ACTUATED, 150, "kubernetes")
    assert history_store.mark_actuated(step.key, 150, stale.revision, 99.0, "again") == done  # idempotent
    assert history_store.pending_steps() == ()


def test_pending_steps_are_those_decided_but_not_actuated_or_skipped(history_store: HistoryStore) -> None:
    a = history_store.decide_step(JOB, decision("w1", 100, 10.0))
    b = history_store.decide_step(JOB, decision("w2", 200, 20.0))
    c = history_store.decide_step(JOB, decision("w3", 300, 30.0))
    history_store.mark_actuated(a.key, 100, 0, 11.0, "k")
    skipped = history_store.mark_skipped(b.key, 21.0, "target-gone: not found")
    assert (skipped.state, skipped.detail) == (StepState.SKIPPED, "target-gone: not found")
    assert [s.key for s in history_store.pending_steps()] == [c.key]
    assert history_store.decide_step(JOB, decision("w2", 999, 40.0)).boost == 200  # a skipped step stays skipped


def test_history_recorded_under_the_pod_group_merges_into_the_managed_job(history_store: HistoryStore) -> None:
    history_store.ensure_job(GROUP_ONLY, 100, 0.0)
    history_store.record_transition(GROUP_ONLY, queued("w0", 0.0))
    history_store.record_preemption(GROUP_ONLY, preemption("w0", 50.0))
    history_store.record_burst(GROUP_ONLY, BurstRecord(55.0, "preemptions", "x", 1))
    assert history_store.resolve("pod-group/team-b/train-17-ab") == "pod-group/team-b/train-17-ab"

    history_store.record_transition(JOB, queued("w1", 60.0))  # now the pods with the job id are seen

    assert [job.key for job in history_store.jobs()] == ["managed-job/17"]
    h = history_store.load("pod-group/team-b/train-17-ab")  # the old key is an alias now
    assert h is not None and h.key == "managed-job/17"
    assert (len(h.preemptions), len(h.transitions), h.first_seen, h.base_priority) == (1, 3, 0.0, 100)
    assert h.burst is not None
    history_store.record_preemption(GROUP_ONLY, preemption("w1", 90.0))  # group-only observations follow the alias
    loaded = history_store.load("managed-job/17")
    assert loaded is not None and len(loaded.preemptions) == 2


def test_the_cluster_of_a_sighting_and_of_a_step_is_kept(history_store: HistoryStore) -> None:
    """Which cluster's Workload a sighting or a step is of (a history shared across clusters);
    unknown (None) stays unknown."""
    cause = TransitionCause.QUEUED
    history_store.record_transition(JOB, Transition(transition_key(EpisodeKey("w1", 0), cause), cause, 1.0, "w1", "a"))
    history_store.record_transition(JOB, queued("w2", 2.0))
    history_store.decide_step(JOB, StepDecision(EpisodeKey("w1", 0), "team-b", "x", "bounded", 100, 3.0, cluster="b"))
    history = history_store.load("managed-job/17")
    assert history is not None
    assert [(t.workload_uid, t.cluster) for t in history.transitions] == [("w1", "a"), ("w2", None)]
    assert [s.cluster for s in history.steps] == ["b"] and [s.cluster for s in history_store.pending_steps()] == ["b"]


def test_a_file_from_before_the_cluster_columns_gains_them(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with SqliteHistoryStore(path) as s:
        s.record_transition(JOB, queued("w1", 1.0))
        s.decide_step(JOB, decision("w1", 100, 2.0))
    conn = sqlite3.connect(path)
    for table in ("transitions", "steps"):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN cluster")
    conn.close()
    with SqliteHistoryStore(path, read_only=True) as reader:  # read as written: cluster unknown
        old = reader.load("managed-job/17")
        assert old is not None and [t.cluster for t in old.transitions] == [None] and old.steps[0].cluster is None
    with SqliteHistoryStore(path) as s:
        cause = TransitionCause.ADMITTED
        s.record_transition(JOB, Transition(transition_key(EpisodeKey("w1", 0), cause), cause, 3.0, "w1", "a"))
        history = s.load("managed-job/17")
        assert history is not None and [t.cluster for t in history.transitions] == [None, "a"]


def test_the_first_base_priority_wins(history_store: HistoryStore) -> None:
    history_store.ensure_job(JOB, 100, 5.0)
    history_store.ensure_job(JOB, 250, 1.0)  # a later Workload already carrying our spec.priority patch
    h = history_store.load("managed-job/17")
    assert h is not None and (h.base_priority, h.first_seen) == (100, 1.0)


def test_the_burst_decision_is_recorded_once(history_store: HistoryStore) -> None:
    first = history_store.record_burst(JOB, BurstRecord(10.0, "preemptions", "preempted 5 times", 5))
    again = history_store.record_burst(JOB, BurstRecord(20.0, "predicted-wait", "other", 6))
    assert again == first
    assert [j.burst for j in history_store.jobs()] == [True]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("managed-job/17", "managed-job/17"),
        ("17", "managed-job/17"),
        ("team-b/train-17-ab", "managed-job/17"),
        ("train-17-ab", "managed-job/17"),
        ("pod-group/team-b/train-17-ab", "managed-job/17"),
        ("18", None),
        ("", None),
    ],
)
def test_users_can_name_a_job_several_ways(history_store: HistoryStore, text: str, expected: str | None) -> None:
    history_store.ensure_job(JOB, 100, 0.0)
    assert history_store.resolve(text) == expected


def test_an_ambiguous_job_reference_is_an_error(history_store: HistoryStore) -> None:
    history_store.ensure_job(JobIdentity("a", pod_group="g"), 1, 0.0)
    history_store.ensure_job(JobIdentity("b", pod_group="g"), 1, 0.0)
    with pytest.raises(StoreError, match="'g' is ambiguous: pod-group/a/g, pod-group/b/g"):
        history_store.resolve("g")


def test_job_summaries_show_preemptions_boost_and_phase(history_store: HistoryStore) -> None:
    history_store.ensure_job(JOB, 100, 0.0)
    history_store.record_preemption(JOB, preemption("w0", 50.0))
    step = history_store.decide_step(JOB, decision("w1", 100, 60.0))
    history_store.mark_actuated(step.key, 100, 0, 61.0, "k")
    (summary,) = history_store.jobs()
    assert (summary.preemptions, summary.current_boost, summary.phase, summary.burst) == (1, 100, Phase.WAITING, False)


def test_opening_read_only_a_missing_file_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="no history store at"):
        SqliteHistoryStore(tmp_path / "missing.db", read_only=True)


def test_creating_in_a_missing_directory_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match=r"directory .* does not exist"):
        SqliteHistoryStore(tmp_path / "nope" / "h.db")


def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello, this is not a database\n" * 100)
    for read_only in (True, False):
        with pytest.raises(StoreError, match="not a usable sky-kueue history store"):
            SqliteHistoryStore(path, read_only=read_only)


def test_another_sqlite_database_is_refused_not_modified(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not a sky-kueue history store"):
        SqliteHistoryStore(path, read_only=True)
    with pytest.raises(StoreError, match="but not a sky-kueue history store"):
        SqliteHistoryStore(path)


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    SqliteHistoryStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="schema version 2; this sky-kueue understands up to 1"):
        SqliteHistoryStore(path)


def test_a_reader_sees_committed_writes_while_the_writer_stays_open(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    with SqliteHistoryStore(path) as writer:
        writer.ensure_job(JOB, 100, 0.0)
        with SqliteHistoryStore(path, read_only=True) as reader:
            assert reader.resolve("17") == "managed-job/17"
            writer.record_preemption(JOB, preemption("w0", 5.0))
            h = reader.load("managed-job/17")
            assert h is not None and len(h.preemptions) == 1

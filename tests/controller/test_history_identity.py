"""A managed-job history is bound to its owner (namespace, team, SkyPilot user), not to the id.

Issue 36, item 2: history was keyed by ``managed-job/<id>`` alone, so a new pod group of
another team carrying the same ``skypilot-managed-job-id`` (forged, or another SkyPilot API
server's job 17) inherited the victim's preemptions, was aged on them, and wrote into them.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sky_kueue.controller import history_document as doc
from sky_kueue.controller.history import HistoryStore, PreemptionRecord, StoreWriteStats
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.metrics import ControllerMetrics, WatchRequests
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.mirror.identity import TEAM_LABEL, JobIdentity, JobOwner, identify_job
from sky_kueue.skypilot import labels

from .builders import skypilot_pod


def team_pod(namespace: str, team: str, user: str, group: str, job_id: str = "17") -> dict[str, Any]:
    """A SkyPilot pod of a managed job as the admin policy places it (team label included)."""
    pod = skypilot_pod(f"{group}-head", group, namespace, job_id=job_id, user=user)
    pod["metadata"]["labels"][TEAM_LABEL] = team
    return pod


def identity_of(pod: dict[str, Any]) -> JobIdentity:
    found = identify_job(None, [pod])
    assert found is not None
    return found


def preemption(uid: str, count: int, at: float) -> PreemptionRecord:
    return PreemptionRecord(EpisodeKey(uid, count), at, "w", "InClusterQueue", "p", None, 1000, "m")


VICTIM = identity_of(team_pod("team-a", "a", "alice", "train-17-aa"))
#: Another team's namespace, claiming job 17 (with the victim's user name, even).
CLAIMANT = identity_of(team_pod("team-x", "x", "alice", "train-17-xx"))


def test_the_policy_and_the_mirror_name_the_same_team_label() -> None:
    assert TEAM_LABEL == labels.TEAM_LABEL


def test_another_teams_pod_group_with_the_same_job_id_inherits_nothing_and_changes_nothing(
    history_store: HistoryStore,
) -> None:
    store = history_store
    victim_key = store.ensure_job(VICTIM, 100, 0.0)
    assert store.record_preemption(VICTIM, preemption("uid-a1", 1, 10.0))
    assert store.record_preemption(VICTIM, preemption("uid-a2", 1, 20.0))

    claimant_key = store.ensure_job(CLAIMANT, 100, 30.0)
    assert claimant_key != victim_key
    claimed = store.load(claimant_key)
    assert claimed is not None and claimed.preemption_count == 0  # nothing inherited: no aging from it
    assert store.record_preemption(CLAIMANT, preemption("uid-x1", 1, 40.0))

    victim = store.load(victim_key)
    assert victim is not None
    assert [p.key.workload_uid for p in victim.preemptions] == ["uid-a1", "uid-a2"]  # unchanged
    assert victim.identity is not None and victim.identity.namespace == "team-a" and victim.identity.team == "a"
    claimed = store.load(claimant_key)
    assert claimed is not None and [p.key.workload_uid for p in claimed.preemptions] == ["uid-x1"]
    assert store.write_stats().identity_mismatches == 1  # counted once, however often it writes


def test_the_same_job_relaunched_in_its_namespace_keeps_one_history(history_store: HistoryStore) -> None:
    # A relaunch is a new pod group (new Workload) of the same owner; on another cluster of the
    # team the namespace has the team's name too (``teams.<t>.clusters`` entries inherit it).
    relaunch = identity_of(team_pod("team-a", "a", "alice", "train-17-ab"))
    key = history_store.ensure_job(VICTIM, 100, 0.0)
    history_store.record_preemption(VICTIM, preemption("uid-a1", 1, 10.0))
    assert history_store.ensure_job(relaunch, 100, 20.0) == key
    history = history_store.load(key)
    assert history is not None and history.preemption_count == 1
    assert history_store.write_stats().identity_mismatches == 0


def test_another_user_or_team_in_the_same_namespace_gets_its_own_history(history_store: HistoryStore) -> None:
    key = history_store.ensure_job(VICTIM, 100, 0.0)
    other_user = identity_of(team_pod("team-a", "a", "mallory", "train-17-m"))
    other_team = identity_of(team_pod("team-a", "b", "alice", "train-17-b"))
    keys = {key, history_store.ensure_job(other_user, 100, 1.0), history_store.ensure_job(other_team, 100, 2.0)}
    assert len(keys) == 3
    assert history_store.write_stats().identity_mismatches == 2


def test_owner_rules() -> None:
    recorded = JobOwner("team-a", "a", "alice@example.com")
    assert recorded.conflict(JobOwner("team-a", "a", "aliceexamplecom")) is None  # the label's spelling
    assert recorded.conflict(JobOwner("team-a", None, None)) is None  # a Workload seen without its pods
    assert recorded.conflict(JobOwner("team-b", "a", "alice@example.com")) == "namespace 'team-b' is not 'team-a'"
    assert JobOwner("team-a").conflict(JobOwner("team-a", "a", "bob")) is None  # old record: filled in
    assert CLAIMANT.owned_key == "managed-job/17/team-x/x/alice"


def _old_format_file(path: Path) -> None:
    """A state file as sky-kueue wrote it before owners were recorded (no ``team`` column)."""
    with SqliteHistoryStore(path) as store:
        old = JobIdentity("team-a", "train-17-aa", "17", user="alice", skypilot_owned=True)
        store.ensure_job(old, 100, 0.0)
        store.record_preemption(old, preemption("uid-a1", 1, 10.0))
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE jobs DROP COLUMN team")
    conn.close()


def test_an_old_state_file_loads_and_is_bound_to_the_namespace_it_recorded(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_format_file(path)
    with SqliteHistoryStore(path, read_only=True) as reader:
        old = reader.load("managed-job/17")
        assert old is not None and old.preemption_count == 1 and old.identity is not None
        assert old.identity.team is None
    with SqliteHistoryStore(path) as store:
        assert store.ensure_job(CLAIMANT, 100, 20.0) != "managed-job/17"  # another namespace: refused
        assert store.ensure_job(VICTIM, 100, 30.0) == "managed-job/17"  # its own namespace: continued
        history = store.load("managed-job/17")
        assert history is not None and history.preemption_count == 1
        assert history.identity is not None and history.identity.team == "a"  # filled in on first sight


def test_an_old_jobhistory_object_loads_without_a_team() -> None:
    spec = doc.JobHistorySpec.model_validate(
        {"job": "managed-job/17", "namespace": "team-a", "managedJobId": "17", "user": "alice"}
    )
    record = doc.decode_spec(spec)
    assert record.history.identity is not None and record.history.identity.team is None
    assert JobOwner(record.namespace).conflict(CLAIMANT.owner) is not None


def test_the_mismatch_counter_is_exported(tmp_path: Path) -> None:
    with SqliteHistoryStore(tmp_path / "state.db") as store:
        store.ensure_job(VICTIM, 100, 0.0)
        store.ensure_job(CLAIMANT, 100, 1.0)
        metrics = ControllerMetrics()
        metrics.bind(_StoreProbe(store))
        value = metrics.registry.get_sample_value("sky_kueue_controller_history_identity_mismatches_total")
    assert value == 1.0


class _StoreProbe:
    """A controller reduced to its history store."""

    leader_transitions = 0

    def __init__(self, store: HistoryStore) -> None:
        self.store = store

    def is_leader(self) -> bool:
        return True

    def queue_depth(self) -> int:
        return 0

    def queue_oldest_age_seconds(self) -> float:
        return 0.0

    def watch_requests(self) -> WatchRequests:
        return WatchRequests(0, 0, 0)

    def store_write_stats(self) -> StoreWriteStats | None:
        return self.store.write_stats()


def test_the_recovery_strategy_reads_only_its_own_teams_history(tmp_path: Path) -> None:
    """A forged pod group that claimed job 17 first holds ``managed-job/17``; SkyPilot's
    relaunch of team a's job 17 (its task labelled ``sky-kueue.io/team: a``) must read team a's
    own history, not the forger's, and none when its team has none."""
    from sky_kueue.controller.skypilot_plugin import AgingSource

    state = tmp_path / "state.db"
    store = SqliteHistoryStore(state)
    try:
        forged_key = store.ensure_job(CLAIMANT, 100, 0.0)
        for n in range(3):
            store.record_preemption(CLAIMANT, preemption(f"uid-x{n}", 1, 10.0 + n))
        own_key = store.ensure_job(VICTIM, 100, 20.0)
        store.record_preemption(VICTIM, preemption("uid-a1", 1, 30.0))
    finally:
        store.close()
    assert forged_key == "managed-job/17" and own_key != forged_key
    source = AgingSource(None, f"sqlite:{state}")
    own = source.history(17, team="a")
    assert own is not None and own.key == own_key and own.preemption_count == 1
    forged = source.history(17, team="x")
    assert forged is not None and forged.key == forged_key
    assert source.history(17, team="b") is None  # no history of team b's job 17: start afresh

"""One job, two clusters: a managed job preempted on one cluster and relaunched on another
(issue 16's placement) is one job to a store both clusters' controllers share, because its
identity is SkyPilot's managed-job id bound to its owner (namespace, team, user), not the
cluster or the Workload. A team's ``clusters`` entries inherit its namespace, so the relaunch
lands in a namespace of the same name; one named otherwise cannot be told from another
owner's claim and gets its own history (tests/controller/test_history_identity.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sky_kueue.controller.history import PreemptionRecord, Transition, TransitionCause, transition_key
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.mirror.identity import identify_job


def pod(namespace: str, group: str, job_id: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"{group}-head",
            "namespace": namespace,
            "labels": {"parent": "skypilot", "kueue.x-k8s.io/pod-group-name": group, "sky-kueue.io/team": "b"},
            "annotations": {"skypilot-managed-job-id": job_id, "skypilot-user": "alice"},
        }
    }


def test_a_relaunch_on_another_cluster_continues_the_same_history(tmp_path: Path) -> None:
    # Clusters A and B both run team b in its namespace team-b.
    on_a = identify_job(None, [pod("team-b", "train-17-ab", "17")])
    on_b = identify_job(None, [pod("team-b", "train-17-ab", "17")])
    assert on_a is not None and on_b is not None
    assert on_a.key == on_b.key == "managed-job/17"

    with SqliteHistoryStore(tmp_path / "state.db") as store:
        store.ensure_job(on_a, 100, 0.0)
        queued_a = EpisodeKey("uid-a", 0)
        store.record_transition(
            on_a, Transition(transition_key(queued_a, TransitionCause.QUEUED), TransitionCause.QUEUED, 0.0, "uid-a")
        )
        store.record_preemption(
            on_a,
            PreemptionRecord(
                EpisodeKey("uid-a", 1), 50.0, "train-17-ab", "InCohortReclaimWhileBorrowing", "p", None, 1000, "m"
            ),
        )
        queued_b = EpisodeKey("uid-b", 0)
        store.record_transition(
            on_b, Transition(transition_key(queued_b, TransitionCause.QUEUED), TransitionCause.QUEUED, 80.0, "uid-b")
        )
        assert [job.key for job in store.jobs()] == ["managed-job/17"]
        history = store.load("managed-job/17")
        assert history is not None
        assert len(history.preemptions) == 1
        assert {t.workload_uid for t in history.transitions} >= {"uid-a", "uid-b"}

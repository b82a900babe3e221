"""One job, two clusters: a managed job preempted on one cluster and relaunched on another
(issue 16's placement) is one job to the controller, because its identity is SkyPilot's
managed-job id, not the cluster, the namespace or the Workload."""

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
            "labels": {"parent": "skypilot", "kueue.x-k8s.io/pod-group-name": group},
            "annotations": {"skypilot-managed-job-id": job_id},
        }
    }


def test_a_relaunch_on_another_cluster_continues_the_same_history(tmp_path: Path) -> None:
    # Cluster A runs team-b in namespace team-b; cluster B in namespace team-b-east.
    on_a = identify_job(None, [pod("team-b", "train-17-ab", "17")])
    on_b = identify_job(None, [pod("team-b-east", "train-17-ab", "17")])
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

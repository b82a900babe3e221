"""The API server's state goes back (etcd restored from a backup) under a running controller.

After the restore, resourceVersions start again below the controller's saved position; a
controller that resumed from that position would skip the events between and lose what
happens next. Here the controller must notice (a list older than what it saw), relist, and
record the preemption that happens after the restore, besides the one it recorded before.
"""

from __future__ import annotations

from pathlib import Path

from sky_kueue.controller.events import ControllerEventKind, Recorder
from tests.controller.live_support import demo_aging
from tests.real_kueue.support import KUEUE_GROUP, KUEUE_VERSION, KueueCluster, condition_true, running_controller
from tests.real_kueue.test_preemption import admitted, seed, skypilot_pod

#: Workload writes made between the backup and the restore, so that the controller's position
#: is well ahead of the restored state's resourceVersions.
CHURN_WRITES = 60


def preempt(kueue: KueueCluster, job_id: str) -> str:
    """team-b's dev job ``job_id`` admitted, then preempted by team-a's; returns the dev group.

    (A second job id after the restore: job 1's next Workload would be its relaunch, aged
    above team-a's maxPriorityThreshold, and not preemptible.)"""
    dev = skypilot_pod("dev", job_id, "team-b", "dev-priority", cpu="6")
    group = dev["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.create_pod(dev)
    kueue.wait_workload("team-b", group, admitted, "admitted")
    kueue.create_pod(skypilot_pod("train", "2", "team-a", "prod-priority", cpu="8"))
    kueue.wait_workload("team-b", group, lambda w: condition_true(w, "Evicted"), "preempted")
    return group


def test_a_preemption_after_an_etcd_restore_is_recorded(kueue: KueueCluster, tmp_path: Path) -> None:
    seed(kueue)
    backup = tmp_path / "etcd-backup"
    kueue.cluster.snapshot_etcd(backup)

    recorder = Recorder()
    with running_controller(
        kueue.cluster, tmp_path / "controller.db", demo_aging(), identity="real-kueue-restore", observers=[recorder]
    ) as (_, store):
        group = preempt(kueue, "1")
        kueue.wait(
            "the first preemption recorded",
            lambda: (lambda h: h is not None and len(h.preemptions) == 1)(store.load("managed-job/1")),
        )
        train = "train-2-fcd1e5cf"
        kueue.wait_workload("team-a", train, admitted, "team-a's job admitted")
        for n in range(CHURN_WRITES):  # the state moves on well past the backup
            kueue.custom.patch_namespaced_custom_object(
                KUEUE_GROUP,
                KUEUE_VERSION,
                "team-a",
                "workloads",
                train,
                {"metadata": {"annotations": {"churn": str(n)}}},
            )

        kueue.cluster.restore_etcd(backup)
        assert kueue.workload("team-b", group) is None  # the restored state predates both jobs
        preempt(kueue, "3")
        kueue.wait(
            "the preemption after the restore recorded",
            lambda: (lambda h: h is not None and len(h.preemptions) == 1)(store.load("managed-job/3")),
            timeout=90,
        )
        first = store.load("managed-job/1")
        assert first is not None and len(first.preemptions) == 1, first
        resets = [e for e in recorder.snapshot() if e.kind is ControllerEventKind.STATE_WENT_BACK]
        assert resets, "the controller did not notice that the API server's state went back"

"""Kueue's real preemption of a SkyPilot pod group, as the mirror and the controller see it.

team-b's dev group borrows the shared CPUs; team-a's prod group reclaims them (the seed's
scenario). Real Kueue, unlike the sandbox: the victim is ``Evicted``/``Preempted`` while it
still holds its quota (``QuotaReserved`` stays True) and its pods keep running, marked with
the ``TerminationTarget`` condition, until their grace period ends; only then is the
preemptor admitted and the victim ``Finished``. The controller must record exactly one
preemption, recognise SkyPilot's relaunch (new pods under the same group name) and age it,
and Kueue must act on the new priority.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.manager import Controller
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from tests.controller.live_support import demo_aging, group_pod
from tests.real_kueue.conftest import REPO
from tests.real_kueue.support import KueueCluster, condition_true, conditions, running_controller

SEED_SETUP = REPO / "configs" / "kueue" / "seed-setup.yaml"
#: The grace period of the tests' pods (SkyPilot's pods keep Kubernetes' 30 s default and
#: trap SIGTERM, so they take all of it; 5 s keeps the test short and shows the same states).
GRACE_SECONDS = 5
#: How long the controller gets to record or patch after Kueue acted.
CONTROLLER_SECONDS = 30.0


def seed(kueue: KueueCluster) -> None:
    kueue.apply(doc for doc in yaml.safe_load_all(SEED_SETUP.read_text()) if doc)


def skypilot_pod(task: str, job_id: str, team: str, priority_class: str, cpu: str) -> dict[str, Any]:
    pod = group_pod(task, job_id, team, priority_class, cpu)
    pod["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
    pod["metadata"]["labels"]["skypilot-user"] = "alice" if team == "team-a" else "bob"
    pod["metadata"]["labels"]["sky-kueue.io/team"] = team
    return pod


@pytest.fixture
def controller(kueue: KueueCluster, tmp_path: Path) -> Iterator[tuple[Controller, SqliteHistoryStore]]:
    with running_controller(
        kueue.cluster, tmp_path / "controller.db", demo_aging(), identity="real-kueue-test"
    ) as running:
        yield running


def admitted(workload: dict[str, Any]) -> bool:
    return condition_true(workload, "Admitted")


def history(store: SqliteHistoryStore, job_id: str) -> JobHistory | None:
    return store.load(f"managed-job/{job_id}")


def test_kueues_preemption_is_recorded_once_and_the_relaunch_is_aged(
    kueue: KueueCluster, controller: tuple[Controller, SqliteHistoryStore]
) -> None:
    preempt_and_relaunch(kueue, controller[1])


def preempt_and_relaunch(kueue: KueueCluster, store: SqliteHistoryStore) -> dict[str, Any]:
    """The seed's story up to an aged relaunch; returns the relaunch's Workload."""
    seed(kueue)
    dev = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="6")
    group = dev["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.create_pod(dev)
    first = kueue.wait_workload("team-b", group, admitted, "admitted")
    kueue.wait(
        "the dev pod Running",
        lambda: (kueue.pod("team-b", f"{group}-head") or {}).get("status", {}).get("phase") == "Running",
    )

    prod = skypilot_pod("train", "2", "team-a", "prod-priority", cpu="8")
    prod_group = prod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.create_pod(prod)
    evicted = kueue.wait_workload("team-b", group, lambda w: condition_true(w, "Evicted"), "evicted")

    # Real Kueue: the victim keeps its quota while its pod runs out its grace period ...
    found = conditions(evicted)
    assert found["Evicted"]["reason"] == "Preempted" and found["Preempted"]["status"] == "True", found
    assert condition_true(evicted, "QuotaReserved"), "the victim's quota is released only when its pods stop"
    # Kueue's pod reconciler marks and deletes the pod just after the Workload's eviction
    pod = kueue.wait(
        "the victim's pod marked TerminationTarget and deleted",
        lambda: (
            lambda p: (
                p
                if p is not None and p["metadata"].get("deletionTimestamp") and "TerminationTarget" in conditions(p)
                else None
            )
        )(kueue.pod("team-b", f"{group}-head")),
    )
    target = conditions(pod)["TerminationTarget"]
    assert target.get("reason") == "WorkloadEvictedDueToPreempted", conditions(pod)
    assert pod["status"]["phase"] == "Running", pod["status"]  # running out its grace period
    assert not admitted(kueue.workload("team-a", prod_group) or {}), "the preemptor waits for the victim's pods"

    # ... then the preemptor is admitted and the unretriable group is Finished.
    kueue.wait_workload("team-a", prod_group, admitted, "admitted after the victim's grace period")
    # Finished once its pod is terminal, then garbage-collected with the pod (it may be gone
    # before a poll sees it Finished).
    kueue.wait(
        "the victim Finished or collected",
        lambda: (lambda w: w is None or condition_true(w, "Finished"))(kueue.workload("team-b", group)),
    )

    recorded = kueue.wait("the controller's history of job 1", lambda: history(store, "1"))
    assert len(recorded.preemptions) == 1, recorded
    episode_uid = first["metadata"]["uid"]

    # SkyPilot relaunches under the same group name once its pods are gone.
    kueue.wait("the preempted pod gone", lambda: kueue.pod("team-b", f"{group}-head") is None)
    kueue.wait("the finished Workload collected", lambda: kueue.workload("team-b", group) is None)
    kueue.create_pod(skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="6"))
    relaunch = kueue.wait_workload(
        "team-b", group, lambda w: w["metadata"]["uid"] != episode_uid, "a new Workload for the relaunch"
    )
    aged = kueue.wait_workload(
        "team-b",
        group,
        lambda w: w["spec"].get("priority") == 200,
        "aged to dev-priority + one boost step (100 + 100)",
        timeout=CONTROLLER_SECONDS,
    )
    assert aged["metadata"]["uid"] == relaunch["metadata"]["uid"]
    final = history(store, "1")
    assert final is not None and len(final.preemptions) == 1, final
    # Kueue acts on the new priority: above team-a's maxPriorityThreshold (100), the relaunch
    # can no longer be preempted by a borrowing prod job, and it waits (prod holds the CPUs).
    assert not admitted(aged)
    return aged

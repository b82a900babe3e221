"""The deterministic cluster timeline replayed by the crash test (shared by both sides).

Four SkyPilot managed jobs, 25 preemptions each (100 in all), interleaved by time. Each
round a job's Workload is created (pending), admitted, then preempted; the preempted
snapshot is, in alternate rounds, the "Finished but preempted" shape of an unretriable
SkyPilot group. Then SkyPilot relaunches it as a new Workload (new UID, same name). Run
lengths vary so that the anti-flapping guard (short runs after a boosted admission) and the
decay (runs longer than ``decay_after_run_seconds``) both fire; preemptors are either a
low class (caps the boost) or prod.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from sky_kueue.controller.aging import ActuatorKind, AgingSettings
from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import managed_job_key

from .builders import T0, WorkloadBuilder, skypilot_pod

JOBS = 4
PREEMPTIONS_PER_JOB = 25
BASE_PRIORITY = 100
PREEMPTOR_CLASSES = (150, 1000)
SEED = 20260101

SETTINGS = AgingSettings(
    policy="bounded",
    preemptions_per_step=2,
    boost_per_step=40,
    max_boost=400,
    age_weight=60,
    max_age_seconds=7_200.0,
    min_run_before_reboost_seconds=300.0,
    decay_after_run_seconds=1_800.0,
    decay_factor=0.5,
    actuator=ActuatorKind.SPEC_PRIORITY,
)


@dataclass(frozen=True)
class Event:
    at: float
    job: int
    kind: str  # pending | admitted | preempted
    uid: str
    round: int
    created_at: float
    admitted_at: float
    preempted_at: float
    preemptor_priority: int

    @property
    def name(self) -> str:
        return f"train-{self.job}-00c0ffee"


def make_script(seed: int = SEED) -> list[Event]:
    rng = random.Random(seed)
    events: list[Event] = []
    for job in range(1, JOBS + 1):
        at = T0 + job * 7
        for round_ in range(PREEMPTIONS_PER_JOB):
            created = at
            admitted = created + rng.choice((5, 40, 200, 900))
            run = rng.choice((30, 120, 299, 300, 700, 1_900, 2_500))
            preempted = admitted + run
            priority = rng.choice(PREEMPTOR_CLASSES)
            uid = f"j{job}-w{round_}"
            for kind, when in (("pending", created), ("admitted", admitted), ("preempted", preempted)):
                events.append(Event(when, job, kind, uid, round_, created, admitted, preempted, priority))
            at = preempted + rng.choice((3, 20, 60))
    events.sort(key=lambda e: (e.at, e.job, ("pending", "admitted", "preempted").index(e.kind)))
    return events


def snapshot(event: Event) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Workload and pods a watch would deliver for ``event``."""
    builder = (
        WorkloadBuilder(event.name, "team-b", uid=event.uid)
        .pod_group()
        .priority(BASE_PRIORITY)
        .created(event.created_at)
        .evictions()
    )
    if event.kind == "pending":
        builder.pending(event.created_at)
    else:
        builder.admitted(event.admitted_at)
    if event.kind == "preempted":
        message = f"Preempted to accommodate a workload (UID: prod-{event.job}-{event.round}, JobUID: UNKNOWN) "
        message += (
            f"due to prioritization in the ClusterQueue; preemptor effective priority: {event.preemptor_priority} "
        )
        message += f"(base: {event.preemptor_priority}, boost: 0)"
        builder.evicted("Preempted", message, event.preempted_at)
        builder.condition("Preempted", True, "InClusterQueue", message, event.preempted_at)
        if event.round % 2:
            builder.finished(event.preempted_at + 1, message="Pods succeeded: 0/2.")
    pods = [skypilot_pod(f"{event.name}-head", event.name, "team-b", job_id=str(event.job))]
    return builder.obj(), pods


def expected_histories(events: list[Event]) -> dict[str, JobHistory]:
    """Each job's history built purely from the script (independent of the store)."""
    histories: dict[str, JobHistory] = {}
    for event in events:
        key = managed_job_key(str(event.job))
        history = histories.get(key) or JobHistory(key, base_priority=BASE_PRIORITY)
        if event.kind == "pending":
            history = history.queued(event.uid, event.created_at)
        elif event.kind == "admitted":
            history = history.admitted(event.uid, event.admitted_at)
        else:
            history = history.with_preemption(
                PreemptionRecord(
                    key=EpisodeKey(event.uid, 1),
                    at=event.preempted_at,
                    workload_name=event.name,
                    reason="InClusterQueue",
                    preemptor_uid=f"prod-{event.job}-{event.round}",
                    preemptor_priority=event.preemptor_priority,
                )
            )
        histories[key] = history
    return histories

"""How a Workload that vanished while the API server's state went back is recorded
(:mod:`sky_kueue.controller.vanished`): from a pod's ``TerminationTarget`` when one remains,
else as an end of unknown kind; never for a Workload that is still listed or whose end was seen."""

from __future__ import annotations

from sky_kueue.controller.history import JobHistory, PreemptionRecord, Transition, TransitionCause
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.vanished import (
    UNKNOWN_END_KIND,
    EndOutcome,
    seen_alive,
    vanished_ends,
)
from sky_kueue.mirror.identity import JobIdentity

from .builders import preemption_message, skypilot_pod

GROUP = "train-17-ab12"
IDENTITY = JobIdentity("team-b", GROUP, "17", skypilot_owned=True)
T0 = 1_767_268_800.0


def _running(uid: str = "uid-a", evictions: int = 0) -> JobHistory:
    return JobHistory("managed-job/17", identity=IDENTITY).queued(uid, T0, evictions).admitted(uid, T0 + 10, evictions)


def test_a_vanished_workload_without_remains_is_an_end_of_unknown_kind() -> None:
    (end,) = vanished_ends(_running(), {"uid-other"}, [], at=T0 + 100, detail="went back")
    assert end.outcome is EndOutcome.UNKNOWN and end.preemption is None
    assert end.eviction is not None
    assert (end.eviction.key.token, end.eviction.kind, end.eviction.at) == (
        "uid-a@unobserved",
        UNKNOWN_END_KIND,
        T0 + 100,
    )
    assert end.eviction.message == "went back"


def test_a_listed_workload_or_one_whose_end_was_seen_is_not_vanished() -> None:
    assert vanished_ends(_running(), {"uid-a"}, [], at=T0, detail="") == []
    preempted = _running().with_preemption(PreemptionRecord(EpisodeKey("uid-a", 1), T0 + 20, GROUP))
    assert vanished_ends(preempted, set(), [], at=T0, detail="") == []


def test_a_termination_target_says_it_was_preempted_under_the_key_kueue_would_have_given() -> None:
    message = preemption_message("uid-prod-1")
    pod = skypilot_pod(f"{GROUP}-head", GROUP, termination=("Preempted", message, T0 + 50))
    (end,) = vanished_ends(_running(evictions=2), set(), [pod], at=T0 + 100, detail="went back")
    assert end.outcome is EndOutcome.PREEMPTED and end.preemption is not None
    record = end.preemption
    assert (record.key.token, record.at, record.preemptor_uid) == ("uid-a#3", T0 + 50, "uid-prod-1")
    assert record.reason == "InClusterQueue"


def test_a_termination_target_of_another_eviction_is_recorded_as_that_eviction() -> None:
    pod = skypilot_pod(f"{GROUP}-head", GROUP, termination=("PodsReadyTimeout", "timed out", T0 + 50))
    (end,) = vanished_ends(_running(), set(), [pod], at=T0 + 100, detail="")
    assert end.outcome is EndOutcome.EVICTED and end.eviction is not None
    assert (end.eviction.key.token, end.eviction.kind) == ("uid-a#1", "PodsReadyTimeout")


def test_every_workload_seen_alive_since_the_last_end_counts_and_the_pods_speak_of_the_newest_only() -> None:
    # The relist already recorded a relaunch (uid-b, queued); the run before it (uid-a) vanished
    # unseen, and so did uid-b. An older Workload whose end was seen is accounted for.
    history = (
        JobHistory("managed-job/17", identity=IDENTITY)
        .queued("uid-old", T0 - 100)
        .with_preemption(PreemptionRecord(EpisodeKey("uid-old", 1), T0 - 50, GROUP))
        .queued("uid-a", T0)
        .admitted("uid-a", T0 + 10)
        .queued("uid-b", T0 + 30)
    )
    assert [e.workload_uid for e in seen_alive(history)] == ["uid-a", "uid-b"]
    pod = skypilot_pod(f"{GROUP}-head", GROUP, termination=("Preempted", preemption_message("p"), T0 + 40))
    ends = vanished_ends(history, set(), [pod], at=T0 + 100, detail="")
    assert [(e.workload_uid, e.outcome) for e in ends] == [
        ("uid-a", EndOutcome.UNKNOWN),
        ("uid-b", EndOutcome.PREEMPTED),
    ]


def test_only_the_listed_clusters_workloads_can_have_vanished() -> None:
    """A history shared across clusters: a Workload seen alive on cluster A is in no list of
    cluster B, and is not gone; B's controller judges its own cluster's Workloads only."""
    on_a = JobHistory("managed-job/17", identity=IDENTITY).with_transition(
        Transition("uid-a#0/queued", TransitionCause.QUEUED, T0, "uid-a", "cluster-a")
    )
    assert seen_alive(on_a, {"cluster-b"}) == []
    assert vanished_ends(on_a, set(), [], at=T0 + 100, detail="", clusters={"cluster-b"}) == []
    (end,) = vanished_ends(on_a, set(), [], at=T0 + 100, detail="", clusters={"cluster-a"})
    assert end.workload_uid == "uid-a" and end.outcome is EndOutcome.UNKNOWN
    # Cluster A replaced under its controller (new identity): what it saw on the old one did vanish.
    assert len(vanished_ends(on_a, set(), [], at=T0 + 100, detail="", clusters={"cluster-a2", "cluster-a"})) == 1
    assert len(vanished_ends(on_a, set(), [], at=T0 + 100, detail="")) == 1  # own cluster unknown: counts

"""The engine, end to end over real detection and a real store, with an injected clock."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sky_kueue.controller.actuators import ActuationOutcome
from sky_kueue.controller.aging import ActuatorKind, AgingSettings, PriorityClassRung
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.detection import Detection, classify
from sky_kueue.controller.engine import AgingEngine
from sky_kueue.controller.history import StepState
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

from .builders import T0, WorkloadBuilder, skypilot_pod
from .fakes import RecordingActuator, transient

GROUP = "train-17-fcd1e5cf"
#: One step of +100 per preemption, no age, no decay: easy numbers to read.
SETTINGS = AgingSettings(
    policy="bounded",
    preemptions_per_step=1,
    boost_per_step=100,
    age_weight=0,
    max_boost=1_000,
    decay_after_run_seconds=1e9,
    actuator=ActuatorKind.SPEC_PRIORITY,
)


class Cluster:
    """Snapshots of one SkyPilot managed job's Workloads, as the mirror would deliver them."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.pods = [skypilot_pod(f"{GROUP}-head", GROUP, job_id="17")]

    def at(self, seconds: float) -> float:
        self.clock.now = T0 + seconds
        return T0 + seconds

    def pending(self, uid: str, created: float, priority: int = 100) -> WorkloadBuilder:
        t = self.at(created)
        return WorkloadBuilder(GROUP, uid=uid).pod_group().priority(priority).created(t).evictions().pending(t)

    def detect(self, builder: WorkloadBuilder, with_pods: bool = True) -> Detection:
        return classify(builder.obj(), self.pods if with_pods else [])


def engine_for(store: SqliteHistoryStore, clock: ManualClock, **kwargs: Any) -> tuple[AgingEngine, RecordingActuator]:
    actuator = kwargs.pop("actuator", None) or RecordingActuator()
    settings = kwargs.pop("settings", SETTINGS)
    return AgingEngine(store, actuator, settings, clock=clock, **kwargs), actuator


def preempt_and_relaunch(cluster: Cluster, engine: AgingEngine, uid: str, created: float) -> str:
    """Runs ``uid`` from pending to preempted (SkyPilot's unretriable shape); returns the next uid."""
    wl = cluster.pending(uid, created)
    engine.reconcile(cluster.detect(wl))
    cluster.at(created + 10)
    engine.reconcile(cluster.detect(wl.admitted(T0 + created + 10)))
    cluster.at(created + 1_000)
    engine.reconcile(cluster.detect(wl.preempted(T0 + created + 1_000, preemptor_uid="uid-prod")))
    cluster.at(created + 1_005)
    engine.reconcile(cluster.detect(wl.finished(T0 + created + 1_005, message="Pods succeeded: 0/2."), False))
    return f"{uid}+"


def test_a_preempted_skypilot_job_is_relaunched_with_an_aged_priority(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    assert actuator.patches == []  # the first Workload waited at its own priority

    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))

    assert outcome.job_key == "managed-job/17"
    assert outcome.step is not None and outcome.step.state is StepState.ACTUATED
    assert actuator.bodies == [
        {"metadata": {"uid": nxt, "annotations": {"sky-kueue.io/aging-step": f"{nxt}#0"}}, "spec": {"priority": 200}}
    ]
    history = store.load("managed-job/17")
    assert history is not None and history.current_boost == 100 and len(history.preemptions) == 1


def test_re_delivered_snapshots_do_not_repeat_anything(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    pending = cluster.pending(nxt, 1_010)
    for _ in range(3):
        engine.reconcile(cluster.detect(pending))
    assert len(actuator.patches) == 1
    history = store.load("managed-job/17")
    assert history is not None and len(history.preemptions) == 1 and len(history.steps) == 2


def test_the_patch_targets_the_waiting_workload_only_never_a_running_one(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    relaunched = cluster.pending(nxt, 1_010)
    # The mirror first shows the relaunch already admitted (the pending snapshot was missed).
    outcome = engine.reconcile(cluster.detect(relaunched.admitted(T0 + 1_020)))
    assert outcome.step is None and actuator.patches == []


def test_other_evictions_are_recorded_but_do_not_age(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    wl = cluster.pending("w0", 0)
    engine.reconcile(cluster.detect(wl.admitted(T0 + 10)))
    cluster.at(900)
    engine.reconcile(cluster.detect(wl.evicted("PodsReadyTimeout", "Exceeded the PodsReady timeout", T0 + 900)))
    engine.reconcile(cluster.detect(wl.released(T0 + 905, "Exceeded the PodsReady timeout")))
    history = store.load("managed-job/17")
    assert history is not None
    assert (len(history.preemptions), [e.reason for e in history.evictions]) == (0, ["PodsReadyTimeout"])
    assert actuator.patches == []  # boost stays 0 on the requeued Workload


def test_a_requeued_retriable_workload_is_aged_in_its_next_episode(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    wl = cluster.pending("job-wl", 0)
    engine.reconcile(cluster.detect(wl.admitted(T0 + 10)))
    cluster.at(1_000)
    engine.reconcile(cluster.detect(wl.preempted(T0 + 1_000)))
    cluster.at(1_002)
    outcome = engine.reconcile(cluster.detect(wl.released(T0 + 1_002, "Preempted")))
    assert outcome.step is not None and outcome.step.key == EpisodeKey("job-wl", 1)
    assert actuator.bodies[0]["spec"] == {"priority": 200}


def test_a_late_preemption_record_re_ages_the_waiting_relaunch(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    old = cluster.pending("w0", 0)
    engine.reconcile(cluster.detect(old.admitted(T0 + 10)))
    # The relaunch is seen before the old Workload's preemption (watch order across objects).
    new = cluster.pending("w1", 1_010)
    first = engine.reconcile(cluster.detect(new))
    assert first.step is not None and first.step.boost == 0
    late = engine.reconcile(cluster.detect(old.preempted(T0 + 1_000)))
    assert late.step is not None and (late.step.key, late.step.boost, late.step.revision) == (
        EpisodeKey("w1", 0),
        100,
        1,
    )
    assert actuator.bodies[-1]["spec"] == {"priority": 200}


def test_the_boost_annotation_is_used_when_the_priority_boost_gate_is_on(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    settings = replace(SETTINGS, actuator=ActuatorKind.AUTO)
    engine, actuator = engine_for(store, clock, settings=settings, priority_boost_gate=True)
    assert engine.mechanism is ActuatorKind.BOOST_ANNOTATION
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert actuator.bodies == [
        {
            "metadata": {
                "uid": nxt,
                "annotations": {"kueue.x-k8s.io/priority-boost": "100", "sky-kueue.io/aging-step": f"{nxt}#0"},
            }
        }
    ]


@pytest.mark.parametrize(
    ("gate", "mechanism"), [(False, ActuatorKind.SPEC_PRIORITY), (None, ActuatorKind.SPEC_PRIORITY)]
)
def test_auto_falls_back_to_spec_priority_without_the_gate(
    store: SqliteHistoryStore, clock: ManualClock, gate: bool | None, mechanism: ActuatorKind
) -> None:
    engine, _ = engine_for(
        store, clock, settings=replace(SETTINGS, actuator=ActuatorKind.AUTO), priority_boost_gate=gate
    )
    assert engine.mechanism is mechanism


def test_a_relaunch_already_relabelled_with_the_aged_class_needs_no_patch(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    ladder = (PriorityClassRung(100, "dev"), PriorityClassRung(150, "dev-aged-1"), PriorityClassRung(300, "dev-aged-2"))
    settings = replace(SETTINGS, actuator=ActuatorKind.PRIORITY_CLASS, priority_class_ladder=ladder)
    engine, actuator = engine_for(store, clock, settings=settings)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    relabelled = cluster.pending(nxt, 1_010, priority=150)  # the recovery strategy chose dev-aged-1
    outcome = engine.reconcile(cluster.detect(relabelled))
    assert actuator.patches == [] and outcome.step is not None and outcome.step.state is StepState.ACTUATED


def test_without_the_relabel_the_ladder_value_is_applied_as_spec_priority(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    ladder = (PriorityClassRung(150, "dev-aged-1"), PriorityClassRung(300, "dev-aged-2"))
    settings = replace(SETTINGS, actuator=ActuatorKind.PRIORITY_CLASS, priority_class_ladder=ladder)
    engine, actuator = engine_for(store, clock, settings=settings)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert actuator.bodies[0]["spec"] == {"priority": 150}  # base 100 + boost 100 -> highest rung <= 200


def test_record_only_decides_but_never_patches(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock, settings=replace(SETTINGS, actuator=ActuatorKind.RECORD_ONLY))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert actuator.patches == []
    assert outcome.step is not None and (outcome.step.state, outcome.step.boost) == (StepState.SKIPPED, 100)


def _versioned(builder: WorkloadBuilder) -> Detection:
    obj = builder.obj()
    obj["metadata"]["resourceVersion"] = "41"  # a band level is written only with one
    return classify(obj, [skypilot_pod(f"{GROUP}-head", GROUP, job_id="17")])


@pytest.mark.parametrize(("policy", "patched"), [(None, False), ("rank", True)], ids=["default", "rank"])
def test_the_default_settings_record_the_preemption_and_change_no_priority(
    store: SqliteHistoryStore, clock: ManualClock, policy: str | None, patched: bool
) -> None:
    # Issue 39 item 3: the default (policy none) leaves Kueue's order as SkyPilot alone has it,
    # where rank writes band levels (a fresh arrival below its class, the relaunch above it).
    settings = AgingSettings() if policy is None else AgingSettings(policy=policy)
    engine, actuator = engine_for(store, clock, settings=settings)
    cluster = Cluster(clock)
    engine.reconcile(_versioned(cluster.pending("w0", 0)))
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    engine.reconcile(_versioned(cluster.pending(nxt, 1_010)))
    cluster.at(1_010 + 3_600)  # and while it waits, however long
    engine.reconcile(_versioned(cluster.pending(nxt, 1_010)))
    assert bool(actuator.patches) is patched
    history = store.load("managed-job/17")
    assert history is not None and len(history.preemptions) == 1


def test_a_transient_failure_leaves_the_step_decided_and_the_next_reconcile_retries(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(store, clock, actuator=RecordingActuator([transient()]))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    pending = cluster.pending(nxt, 1_010)
    failed = engine.reconcile(cluster.detect(pending))
    assert failed.step is not None and failed.step.state is StepState.DECIDED
    assert any("will retry" in note for note in failed.notes)
    assert [s.key for s in store.pending_steps()] == [EpisodeKey(nxt, 0)]
    retried = engine.reconcile(cluster.detect(pending))
    assert retried.step is not None and retried.step.state is StepState.ACTUATED
    assert len(actuator.patches) == 2 and actuator.bodies[0] == actuator.bodies[1]  # same absolute patch


@pytest.mark.parametrize("outcome", [ActuationOutcome.TARGET_GONE, ActuationOutcome.TARGET_REPLACED])
def test_a_vanished_or_replaced_target_skips_the_step(
    store: SqliteHistoryStore, clock: ManualClock, outcome: ActuationOutcome
) -> None:
    engine, _ = engine_for(store, clock, actuator=RecordingActuator([outcome]))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    result = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert result.step is not None and result.step.state is StepState.SKIPPED
    assert result.step.detail is not None and result.step.detail.startswith(outcome.value)


def test_replay_after_a_crash_re_actuates_or_skips_decided_steps(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _ = engine_for(store, clock, actuator=RecordingActuator([transient(), transient()]))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    pending = cluster.pending(nxt, 1_010)
    engine.reconcile(cluster.detect(pending))  # decided, patch failed: as if the process died here

    restarted, actuator = engine_for(store, clock)
    outcomes = restarted.replay_pending(lambda ns, name: cluster.detect(pending))
    assert [o.step.state for o in outcomes if o.step] == [StepState.ACTUATED]
    assert actuator.bodies[0]["spec"] == {"priority": 200}

    other, _ = engine_for(store, clock, actuator=RecordingActuator([transient()]))
    again = cluster.pending("w9", 2_000)
    other.reconcile(cluster.detect(again))
    assert other.replay_pending(lambda ns, name: None) == []
    assert store.pending_steps() == ()


def test_a_pending_step_of_another_clusters_workload_is_left_to_that_cluster(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    """A history shared across clusters: cluster A's controller decided a step whose patch
    failed; cluster B's controller finds no such Workload in its cluster and must not mark the
    step skipped ("target gone"), or A's retry would never patch it. A's controller retries it."""
    on_a, _ = engine_for(store, clock, actuator=RecordingActuator([transient()]), cluster=lambda: "cluster-a")
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, on_a, "w0", 0)
    pending = cluster.pending(nxt, 1_010)
    on_a.reconcile(cluster.detect(pending))
    (step,) = store.pending_steps()
    assert step.cluster == "cluster-a"

    on_b, b_actuator = engine_for(store, clock, cluster=lambda: "cluster-b")
    assert on_b.replay_pending(lambda ns, name: None) == []
    assert store.pending_steps() == (step,) and b_actuator.patches == []

    retried = on_a.replay_pending(lambda ns, name: cluster.detect(pending))
    assert [o.step.state for o in retried if o.step] == [StepState.ACTUATED]
    assert store.pending_steps() == ()


def test_a_burst_decision_is_recorded_once_and_surfaced(store: SqliteHistoryStore, clock: ManualClock) -> None:
    settings = replace(SETTINGS, burst_after_preemptions=2)
    engine, actuator = engine_for(store, clock, settings=settings)
    cluster = Cluster(clock)
    uid = preempt_and_relaunch(cluster, engine, "w0", 0)
    uid = preempt_and_relaunch(cluster, engine, uid, 1_010)
    outcome = engine.reconcile(cluster.detect(cluster.pending(uid, 2_020)))
    assert outcome.burst is not None and outcome.burst.reason == "preemptions"
    annotations = [b["metadata"].get("annotations", {}) for b in actuator.bodies]
    assert any(a.get("sky-kueue.io/burst-decision") == "preemptions" for a in annotations)
    again = engine.reconcile(cluster.detect(cluster.pending(uid, 2_020)))
    assert again.burst is None


def test_a_predicted_wait_over_the_team_limit_marks_the_job_for_burst(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, _ = engine_for(store, clock, settings=replace(SETTINGS, actuator=ActuatorKind.RECORD_ONLY))
    cluster = Cluster(clock)
    wl = cluster.pending("w0", 0)
    assert engine.reconcile(cluster.detect(wl), predicted_wait_seconds=600, wait_limit_seconds=900).burst is None
    outcome = engine.reconcile(cluster.detect(wl), predicted_wait_seconds=1_200, wait_limit_seconds=900)
    assert outcome.burst is not None and outcome.burst.reason == "predicted-wait"


def test_workloads_that_are_not_skypilot_jobs_are_ignored(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock)
    batch = WorkloadBuilder("job-train-abcde").pending(T0).obj()
    bare_group = WorkloadBuilder("someone-elses-group").pod_group().pending(T0).obj()
    assert engine.reconcile(classify(batch)).job_key is None
    assert engine.reconcile(classify(bare_group)).job_key is None
    assert store.jobs() == () and actuator.patches == []


def test_a_known_group_is_followed_after_its_pods_are_gone(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _ = engine_for(store, clock)
    cluster = Cluster(clock)
    wl = cluster.pending("w0", 0)
    engine.reconcile(cluster.detect(wl.admitted(T0 + 10)))
    cluster.at(1_000)
    outcome = engine.reconcile(cluster.detect(wl.preempted(T0 + 1_000), with_pods=False))
    assert outcome.job_key == "managed-job/17" and [str(fact) for fact in outcome.recorded] == ["preemption w0#1"]


def test_an_aging_step_kueue_reset_is_put_back_waiting_or_admitted(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    """Kueue >= v0.16 sets ``spec.priority`` back to the class value at every WorkloadPriorityClass
    create event (every Kueue start); the version it writes keeps our aging-step annotation, and
    the engine puts the step back (on real Kueue: tests/real_kueue/test_priority_reset.py)."""
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)))
    assert len(actuator.patches) == 1
    token = actuator.patches[0].body["metadata"]["annotations"]["sky-kueue.io/aging-step"]
    landed = cluster.pending(nxt, 1_010, priority=200).annotation("sky-kueue.io/aging-step", token)
    engine.reconcile(cluster.detect(landed))
    assert len(actuator.patches) == 1  # the step is on the Workload: nothing to do

    reset = cluster.pending(nxt, 1_010, priority=100).annotation("sky-kueue.io/aging-step", token)
    engine.reconcile(cluster.detect(reset))
    assert len(actuator.patches) == 2 and "100 -> 200" in actuator.patches[1].summary
    assert engine.restored_steps == 1

    admitted_reset = reset.admitted(T0 + 1_020)
    engine.reconcile(cluster.detect(admitted_reset))
    assert len(actuator.patches) == 3 and "100 -> 200" in actuator.patches[2].summary
    assert engine.restored_steps == 2


def test_a_step_is_not_put_back_on_a_snapshot_from_before_it_landed(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    before = cluster.pending(nxt, 1_010)
    engine.reconcile(cluster.detect(before))
    engine.reconcile(cluster.detect(before))  # delivered again: no aging-step annotation yet
    engine.reconcile(cluster.detect(before.admitted(T0 + 1_020)))
    assert len(actuator.patches) == 1 and engine.restored_steps == 0

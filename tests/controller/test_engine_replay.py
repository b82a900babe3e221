"""The engine's side of a restart: replayed snapshots record facts only, and settle steps a
crash left decided (``reconcile(actuate=False)``, ``replay_pending``)."""

from __future__ import annotations

from sky_kueue.controller.actuators import ActuationOutcome
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.history import StepState
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.sqlite_store import SqliteHistoryStore

from .builders import T0
from .fakes import RecordingActuator, transient
from .test_engine import Cluster, engine_for, preempt_and_relaunch


def test_a_replayed_pending_snapshot_records_but_never_patches(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, actuator = engine_for(store, clock)
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    outcome = engine.reconcile(cluster.detect(cluster.pending(nxt, 1_010)), actuate=False)
    assert [str(fact) for fact in outcome.recorded] == [f"queued {nxt}#0"] and outcome.step is None
    assert actuator.patches == []


def test_a_step_whose_patch_landed_before_a_crash_is_confirmed_by_a_later_snapshot(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    # The patch reaches the cluster, then the process dies before marking the step.
    engine, _ = engine_for(store, clock, actuator=RecordingActuator([transient("killed after the patch")]))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    relaunch = cluster.pending(nxt, 1_010)
    engine.reconcile(cluster.detect(relaunch))
    (decided,) = store.pending_steps()
    assert decided.key == EpisodeKey(nxt, 0)

    # After the restart, the replay shows the Workload admitted at the aged priority; it is gone now.
    restarted, actuator = engine_for(store, clock)
    restarted.reconcile(cluster.detect(relaunch.priority(200).admitted(T0 + 1_100)), actuate=False)
    assert store.pending_steps() == ()
    step = store.load("managed-job/17").step(EpisodeKey(nxt, 0))  # type: ignore[union-attr]
    assert step is not None and step.state is StepState.ACTUATED and step.actuator == "fake:confirmed"
    assert actuator.patches == []
    assert restarted.replay_pending(lambda ns, name: None) == []  # nothing left to retry


def test_a_step_whose_workload_was_admitted_unpatched_is_skipped(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _ = engine_for(store, clock, actuator=RecordingActuator([transient()]))
    cluster = Cluster(clock)
    nxt = preempt_and_relaunch(cluster, engine, "w0", 0)
    relaunch = cluster.pending(nxt, 1_010)
    engine.reconcile(cluster.detect(relaunch))
    admitted = cluster.detect(relaunch.admitted(T0 + 1_100))  # admitted at 100: the patch never landed
    restarted, actuator = engine_for(store, clock, actuator=RecordingActuator([ActuationOutcome.APPLIED]))
    restarted.replay_pending(lambda ns, name: admitted)
    step = store.load("managed-job/17").step(EpisodeKey(nxt, 0))  # type: ignore[union-attr]
    assert step is not None and step.state is StepState.SKIPPED and step.detail == "Workload is admitted"
    assert actuator.patches == []  # a running Workload is never raised

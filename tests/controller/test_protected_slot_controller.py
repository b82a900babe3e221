"""protect_within_nominal in the controller: the protected level only within nominal quota.

The engine (``AgingEngine._level``) grants a readmitted relaunch its protected band level only
when it was granted before (sticky) or the mirror says it fits its ClusterQueue's nominal
quota with every admitted Workload at that level or above; otherwise it gets the plain level.
The safety probe judges a held relaunch the same way. Settings as measured in the simulator:
``keep-place``, ``protect_levels: 1``, ``protect_after_preemptions: 2`` (dev class 100:
protected 100, plain 99).
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from collections.abc import Callable
from typing import Any

from sky_kueue.controller.actuators import BAND_LEVEL_ANNOTATION, ActuationOutcome
from sky_kueue.controller.aging import ActuatorKind, AgingSettings
from sky_kueue.controller.aging.protected_slot import ProtectedFit
from sky_kueue.controller.aging.safe_relaunch import Placement
from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.detection import WorkloadFacts, classify, workload_facts
from sky_kueue.controller.engine import AgingEngine, ReconcileOutcome
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind
from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.kube_events import EventReason, events_for
from sky_kueue.controller.safety_probe import MirrorProtectedSlot
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import MirrorStore, normalize

from .builders import T0
from .fakes import RecordingActuator
from .test_engine import Cluster, preempt_and_relaunch
from .test_safety_probe import DEV, ELAPSED_SECONDS, OWN, START, TRAIN, BothProbes, _probe, _store, _workload

SETTINGS = AgingSettings(
    policy="keep-place",
    protect_levels=1,
    protect_after_preemptions=2,
    protect_within_nominal=True,
    actuator=ActuatorKind.SPEC_PRIORITY,
)
PROTECTED, PLAIN = 100, 99


class FakeSlot:
    """A ProtectedSlot with canned answers; records what it was asked."""

    def __init__(self, fit: ProtectedFit | None) -> None:
        self.fit = fit
        self.asked: list[tuple[str, int]] = []

    def protected_fit(self, facts: WorkloadFacts, level: int) -> ProtectedFit | None:
        self.asked.append((facts.name, level))
        return self.fit


def _engine(
    store: SqliteHistoryStore, clock: ManualClock, slot: FakeSlot | None, settings: AgingSettings = SETTINGS
) -> tuple[AgingEngine, RecordingActuator, Cluster]:
    actuator = RecordingActuator()
    engine = AgingEngine(store, actuator, settings, clock=clock, protected_slot=slot)
    return engine, actuator, Cluster(clock)


def _readmitted(
    engine: AgingEngine,
    cluster: Cluster,
    priority: int,
    before: Callable[[], None] = lambda: None,
    *,
    band_level: str | None = None,
) -> ReconcileOutcome:
    """Twice preempted, the job's third Workload is admitted at ``priority`` (its band-level
    annotation ``band_level``); its reconcile (``before`` runs just before it)."""
    uid = preempt_and_relaunch(cluster, engine, "w0", 0)
    uid = preempt_and_relaunch(cluster, engine, uid, 2_000)
    obj = cluster.pending(uid, 4_000, priority=priority).admitted(T0 + 4_010).obj()
    obj["metadata"]["resourceVersion"] = "7"  # a band level is patched on this snapshot only
    if band_level is not None:
        obj["metadata"].setdefault("annotations", {})[BAND_LEVEL_ANNOTATION] = band_level
    cluster.at(4_010)
    before()
    return engine.reconcile(classify(obj, cluster.pods))


def _history(store: SqliteHistoryStore, outcome: ReconcileOutcome) -> JobHistory:
    assert outcome.job_key is not None
    history = store.load(outcome.job_key)
    assert history is not None
    return history


def _patched_priority(outcome: ReconcileOutcome) -> int | None:
    return None if outcome.patch is None else outcome.patch.body["spec"]["priority"]


def test_a_relaunch_whose_protected_level_fits_nominal_quota_is_patched_to_it(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    slot = FakeSlot(ProtectedFit(True, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot)

    outcome = _readmitted(engine, cluster, priority=91)

    assert _patched_priority(outcome) == PROTECTED
    assert slot.asked == [("train-17-fcd1e5cf", PROTECTED)]
    assert "protected level 100: fits nominal quota (ClusterQueue dev-cq)" in outcome.notes


def test_a_relaunch_that_would_exceed_nominal_quota_is_patched_to_the_plain_level(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    slot = FakeSlot(ProtectedFit(False, "ClusterQueue dev-cq (cpu ...)"))
    engine, _, cluster = _engine(store, clock, slot)

    outcome = _readmitted(engine, cluster, priority=91)

    assert _patched_priority(outcome) == PLAIN
    assert any(
        note.startswith("plain level 99: protected level 100 would exceed nominal quota of ClusterQueue dev-cq")
        for note in outcome.notes
    ), outcome.notes


def test_a_granted_protected_level_is_kept_for_the_run(store: SqliteHistoryStore, clock: ManualClock) -> None:
    # The Workload is at 100 by an admitted-level patch: it keeps it, without asking again
    # (other Workloads admitted at 100 since would no longer let it fit).
    slot = FakeSlot(ProtectedFit(False, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot)

    outcome = _readmitted(engine, cluster, priority=PROTECTED, band_level="admitted")

    assert outcome.patch is None and slot.asked == []
    assert "protected level 100: granted before, kept for the run" in outcome.notes


def test_a_relaunch_admitted_at_its_class_value_before_any_band_level_landed_is_judged(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    # 100 is also the class value: without the admitted-level annotation it proves nothing.
    slot = FakeSlot(ProtectedFit(False, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot)

    outcome = _readmitted(engine, cluster, priority=PROTECTED, band_level="waiting")

    assert _patched_priority(outcome) == PLAIN and slot.asked == [("train-17-fcd1e5cf", PROTECTED)]


def test_a_grant_at_the_class_value_is_recorded_and_then_kept(store: SqliteHistoryStore, clock: ManualClock) -> None:
    # Admitted at its class value (100, the protected level) before any band level landed, the
    # relaunch fits: spec.priority needs no change, but the grant is recorded (the annotation
    # alone, on this snapshot only), so a later reconcile keeps it although it would no longer
    # fit, as the simulator keeps a protection decided at admission.
    slot = FakeSlot(ProtectedFit(True, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot)
    uid = preempt_and_relaunch(cluster, engine, "w0", 0)
    uid = preempt_and_relaunch(cluster, engine, uid, 2_000)
    obj = cluster.pending(uid, 4_000, priority=PROTECTED).admitted(T0 + 4_010).obj()
    obj["metadata"]["resourceVersion"] = "7"
    cluster.at(4_010)

    detection = classify(obj, cluster.pods)
    outcome = engine.reconcile(detection)

    assert outcome.patch is not None and outcome.patch.boost == 0
    assert outcome.patch.body["metadata"]["annotations"] == {BAND_LEVEL_ANNOTATION: "admitted"}
    assert outcome.patch.body["metadata"]["resourceVersion"] == "7"
    assert outcome.patch.body["spec"]["priority"] == PROTECTED
    assert outcome.actuation is not None and outcome.actuation.outcome is ActuationOutcome.APPLIED
    assert outcome.patch.summary == "spec.priority 100 kept, recorded as the admitted level on team-b/train-17-fcd1e5cf"
    event = ControllerEvent(ControllerEventKind.RECONCILED, clock(), obj, detection, outcome)
    aged = [r.message for r in events_for(event) if r.reason is EventReason.AGED]
    assert aged == ["sky-kueue kept priority 100 and recorded it as the Workload's band level after 2 preemption(s)"]

    slot.fit = ProtectedFit(False, "ClusterQueue dev-cq")
    slot.asked.clear()
    patched = copy.deepcopy(obj)
    patched["metadata"].setdefault("annotations", {})[BAND_LEVEL_ANNOTATION] = "admitted"
    patched["metadata"]["resourceVersion"] = "8"
    cluster.at(4_600)
    again = engine.reconcile(classify(patched, cluster.pods))
    assert again.patch is None and slot.asked == []
    assert "protected level 100: granted before, kept for the run" in again.notes


def test_a_level_strictly_inside_the_band_is_sticky_without_asking_the_mirror(
    store: SqliteHistoryStore, clock: ManualClock
) -> None:
    settings = dataclasses.replace(SETTINGS, protect_levels=2)  # protected 99, plain 98 after 2 preemptions
    slot = FakeSlot(ProtectedFit(False, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot, settings)

    outcome = _readmitted(engine, cluster, priority=99)

    assert outcome.patch is None and slot.asked == []
    assert "protected level 99: granted before, kept for the run" in outcome.notes


def test_without_a_mirror_or_an_answer_nothing_is_protected(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _, cluster = _engine(store, clock, None)
    outcome = _readmitted(engine, cluster, priority=91)
    assert _patched_priority(outcome) == PLAIN
    assert any("no mirror" in note for note in outcome.notes), outcome.notes


def test_a_mirror_that_cannot_answer_protects_nothing(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _, cluster = _engine(store, clock, FakeSlot(None))
    outcome = _readmitted(engine, cluster, priority=91)
    assert _patched_priority(outcome) == PLAIN
    assert any("the mirror cannot tell" in note for note in outcome.notes), outcome.notes


def test_the_setting_off_protects_as_before(store: SqliteHistoryStore, clock: ManualClock) -> None:
    slot = FakeSlot(ProtectedFit(False, "ClusterQueue dev-cq"))
    engine, _, cluster = _engine(store, clock, slot, dataclasses.replace(SETTINGS, protect_within_nominal=False))

    outcome = _readmitted(engine, cluster, priority=91)

    assert _patched_priority(outcome) == PROTECTED and slot.asked == []
    history = _history(store, outcome)
    assert engine.protected_level(history, clock()) is None


def test_the_engine_tells_the_probe_a_relaunchs_protected_level(store: SqliteHistoryStore, clock: ManualClock) -> None:
    engine, _, cluster = _engine(store, clock, FakeSlot(None))
    outcome = _readmitted(engine, cluster, priority=91)
    history = _history(store, outcome)
    assert engine.protected_level(history, clock()) == PROTECTED
    # Preempted once, below protect_after_preemptions (2): it is not protected once admitted.
    once = history.as_of(history.preemptions[0].at)
    assert len(once.preemptions) == 1 and engine.protected_level(once, clock()) is None


# --- the mirror's answer (MirrorProtectedSlot) ------------------------------------------------
# test_safety_probe's cluster: team-b-cq has 4 CPU nominal, in a cohort with team-a-cq (6 CPU).


def _relaunch(priority: int, cpu: str = "2") -> dict[str, Any]:
    return _workload("dev-2", "team-b", cpu, priority, admitted=True)


def test_the_mirror_counts_admitted_workloads_at_the_level_or_above() -> None:
    relaunch = _relaunch(91)
    own_at_100 = _workload("own-3", "team-b", "2", 100, admitted=True)
    slot = MirrorProtectedSlot(_store(relaunch, own_at_100))
    fit = slot.protected_fit(workload_facts(relaunch), 100)
    assert fit == ProtectedFit(True, "ClusterQueue team-b-cq")  # 2 + 2 <= 4

    slot = MirrorProtectedSlot(_store(relaunch, OWN))  # own: 4 CPU at 100
    fit = slot.protected_fit(workload_facts(relaunch), 100)
    assert fit is not None and not fit.fits
    assert fit.detail == (
        "ClusterQueue team-b-cq (cpu in flavor default-flavor: 2 asked + 4 held at priority 100 or above > 4 nominal)"
    )

    low = _workload("own-3", "team-b", "4", 99, admitted=True)  # below the level: a reclaim takes it first
    fit = MirrorProtectedSlot(_store(relaunch, low)).protected_fit(workload_facts(relaunch), 100)
    assert fit is not None and fit.fits


def test_the_mirror_gives_no_answer_it_cannot_stand_behind() -> None:
    relaunch = _relaunch(91)
    assert MirrorProtectedSlot(_store(OWN)).protected_fit(workload_facts(relaunch), 100) is None  # not mirrored
    pending = _workload("dev-2", "team-b", "2", 91, admitted=False)
    assert MirrorProtectedSlot(_store(pending)).protected_fit(workload_facts(pending), 100) is None
    replaced = copy.deepcopy(relaunch)
    replaced["metadata"]["uid"] = "uid-other"
    assert MirrorProtectedSlot(_store(replaced)).protected_fit(workload_facts(relaunch), 100) is None
    unsynced = MirrorStore()  # ClusterQueues not listed yet
    unsynced.replace(KindName.WORKLOAD, [normalize(KindName.WORKLOAD, "kueue.x-k8s.io/v1beta1", relaunch)], "1")
    unsynced.replace(KindName.WORKLOAD_PRIORITY_CLASS, [], "1")
    assert MirrorProtectedSlot(unsynced).protected_fit(workload_facts(relaunch), 100) is None


def test_the_facts_tell_a_granted_level_from_a_class_value() -> None:
    granted = _relaunch(100)
    granted["metadata"]["annotations"][BAND_LEVEL_ANNOTATION] = "admitted"
    assert workload_facts(granted).band_level == "admitted"
    assert workload_facts(_relaunch(100)).band_level is None


# --- the safety probe with protect_within_nominal ----------------------------------------------


def _protected_placement(store: MirrorStore, level: int | None = 100) -> Placement | None:
    """The probe's answer for DEV when the engine says it would be protected at ``level``."""
    now = (START + datetime.timedelta(seconds=ELAPSED_SECONDS)).timestamp()
    return BothProbes(store, now).placement(workload_facts(DEV), "c", level)


def test_a_relaunch_fitting_nominal_at_its_protected_level_is_safe_though_kueue_borrows() -> None:
    # team-b's low job (4 CPU at 50) fills its nominal quota: Kueue admits dev into team-a's
    # idle quota, borrowing. A reclaim would take low first, though: at 100, dev is protected.
    low = _workload("low-4", "team-b", "4", 50, admitted=True)
    store = _store(DEV, low)
    assert (old := _probe(store).placement(workload_facts(DEV), "c")) is not None and old.borrows

    placement = _protected_placement(store)

    assert placement is not None and placement.safe_now


def test_a_relaunch_exceeding_nominal_at_its_protected_level_is_not_safe_now() -> None:
    peer = _workload("own-3", "team-b", "1", 100, admitted=True)  # 1 + 4 > 4 at 100
    placement = _protected_placement(_store(DEV, peer))
    assert placement is not None and placement.admits_now and placement.borrows
    assert placement.predicted_safe_wait_seconds is None


def test_a_relaunch_kueue_would_not_admit_now_is_not_safe_now() -> None:
    # The old judgement: its turn comes in nominal quota (safe when admitted, not held).
    assert (old := _probe(_store(DEV, OWN, TRAIN)).placement(workload_facts(DEV), "c")) is not None
    assert old.safe_when_admitted

    placement = _protected_placement(_store(DEV, OWN, TRAIN))

    assert placement is not None and not placement.admits_now and placement.borrows
    assert placement.predicted_safe_wait_seconds is None


def test_a_relaunch_without_a_protected_level_is_judged_as_before() -> None:
    store = _store(DEV, OWN)  # admitted now into team-a's idle quota: borrows
    placement = _protected_placement(store, level=None)
    assert placement == _probe(store).placement(workload_facts(DEV), "c")


def test_a_band_level_that_did_not_land_says_so_in_the_notes(store: SqliteHistoryStore, clock: ManualClock) -> None:
    """The plan's note says what was planned; a patch the API server refused (the snapshot's
    Workload was replaced) must not read as applied."""
    engine, actuator, cluster = _engine(store, clock, FakeSlot(ProtectedFit(True, "ClusterQueue dev-cq")))

    outcome = _readmitted(engine, cluster, priority=91, before=lambda: actuator.then(ActuationOutcome.TARGET_REPLACED))

    assert _patched_priority(outcome) == PROTECTED
    assert outcome.notes[-1].startswith("not applied: target-replaced")

"""Holding a repeatedly preempted job's relaunch until Kueue would admit it without borrowing.

The rule is :mod:`sky_kueue.controller.aging.safe_relaunch` (one implementation, shared with
the simulator); this module applies it to live Workloads, exactly once per relaunch:

* **hold**: the decision is stored first (:meth:`HistoryStore.record_hold`, one record per
  Workload UID), then the Workload is patched to ``spec.active: false`` with
  :data:`HOLD_ANNOTATION` carrying the reason users read. Kueue leaves a deactivated pod
  group's gated pods alone (Kueue ``pkg/controller/jobs/pod/pod_controller.go`` ``Stop``
  skips gated pods) and requeues the Workload at its creation time when it is reactivated
  (``pkg/workload/workload.go`` ``GetQueueOrderTimestamp``), so the held relaunch keeps its
  place in line.
* **release**: the release (why, when, where) is stored first
  (:meth:`HistoryStore.release_hold`), then ``spec.active`` goes back to true and the
  annotation is removed.

Crash anywhere and the next reconcile of the Workload resumes from what the store and the
snapshot say (:meth:`HoldKeeper.settle`): a stored hold whose patch never landed is patched
again, a stored release whose patch never landed likewise, and a Workload that carries the
annotation but is active again was reactivated by someone else (a user, or a Kueue release
without the fix for kueue#6719), which is recorded as a release of kind ``reactivated``. A
Workload that is held is never held a second time: the store's record is per UID, and a
released record is final.

Where a release goes: the controller acts on the one cluster it watches and cannot move a
SkyPilot relaunch to another cluster (SkyPilot's recovery strategy places relaunches; the
policy picks a cluster at launch only), so it asks the predictor about its own cluster
only and releases there. The decision's other-cluster rule is the simulator's.

What it cannot do: hold a relaunch Kueue admits before the controller sees it. SkyPilot's
relaunch creates the Workload and Kueue may admit it within its next cycle when idle borrowed
quota is there; the controller then finds it admitted, not pending, and leaves it (evicting a
just-admitted Workload would cost its pods a restart). After a reclaim the owner holds the
quota, so a relaunch usually waits, and the hold then keeps it out of the borrowed quota that
frees later, which is when it matters.

While the job runs in nominal quota nothing about its class changes: the hold only decides
*when* the relaunch enters Kueue; aging patches it as before (once released: a held
Workload is not waiting in Kueue, so the engine does not age it).

Pure: the predictor is reached through :class:`SafetyProbe` (the controller's adapter reads
its mirror, :mod:`sky_kueue.controller.safety_probe`), the store and the actuator through
their Protocols.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from sky_kueue.controller.actuators import (
    ActuationError,
    ActuationOutcome,
    ActuationResult,
    Actuator,
    WorkloadPatch,
    WorkloadRef,
)
from sky_kueue.controller.aging import ActuatorKind
from sky_kueue.controller.aging.safe_relaunch import (
    Placement,
    SafeRelaunchDecision,
    SafeRelaunchInput,
    SafeRelaunchKind,
    SafeRelaunchSettings,
    decide_safe_relaunch,
)
from sky_kueue.controller.detection import HOLD_ANNOTATION, Detection, WorkloadFacts, WorkloadPhase
from sky_kueue.controller.history import (
    BurstRecord,
    HistoryStore,
    HoldRecord,
    HoldRelease,
    JobHistory,
    ReleaseKind,
)

log = logging.getLogger(__name__)

__all__ = ["HOLD_ANNOTATION", "HoldKeeper", "HoldOutcome", "HoldTeams", "SafetyProbe", "TeamHold"]
#: The name a release gives the controller's own cluster when the team names none.
OWN_CLUSTER = "this cluster"
#: The burst record's reason when a hold ends in a burst (the burst path's other reasons are
#: ``preemptions`` and ``predicted-wait``, :class:`sky_kueue.controller.burst.BurstReason`).
SAFE_WAIT_BURST_REASON = "predicted-safe-wait"


class HoldReason(str, Enum):
    """Why a relaunch was held (the ``reason`` label of the holds metric)."""

    #: Kueue would admit it now, into borrowed (reclaimable) quota.
    BORROWING = "borrowing"
    #: Kueue would not admit it now; once it does, it may be into borrowed quota.
    NO_NOMINAL_QUOTA = "no-nominal-quota"


@dataclass(frozen=True)
class TeamHold:
    """One team's safe-relaunch settings, as the controller applies them.

    ``cluster``: how releases name the controller's cluster (the team's context, when its
    config names one). ``burst_clouds``: where the team may burst (empty: it may not).
    """

    team: str
    settings: SafeRelaunchSettings
    cluster: str = OWN_CLUSTER
    burst_clouds: tuple[str, ...] = ()


@dataclass(frozen=True)
class HoldTeams:
    """Which namespaces' jobs the rule applies to (namespace -> team settings)."""

    by_namespace: Mapping[str, TeamHold] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        return any(t.settings.safe_after_preemptions is not None for t in self.by_namespace.values())

    def for_namespace(self, namespace: str) -> TeamHold | None:
        team = self.by_namespace.get(namespace)
        return team if team is not None and team.settings.safe_after_preemptions is not None else None


class SafetyProbe(Protocol):
    """The predictor's answer for one Workload of the controller's cluster."""

    def placement(self, facts: WorkloadFacts, cluster: str, protected_level: int | None = None) -> Placement | None:
        """Would Kueue admit this Workload now (as if active), and would it borrow?

        ``protected_level``: with ``protect_within_nominal``, the band level the relaunch would be
        protected at once admitted; "borrows" then means it would not fit nominal quota at that
        level (None: Kueue's own borrowing decides).

        Returns None when the model cannot answer (unreadable objects, an unknown queue):
        the caller then neither holds a fresh relaunch nor releases a held one early.
        """
        ...


class HoldAction(str, Enum):
    """What :meth:`HoldKeeper.settle` did to the Workload."""

    HELD = "held"  # the hold was decided now (and patched)
    STILL_HELD = "still-held"  # held before; stays held
    RELEASED = "released"  # the release was decided now (and patched)
    BURST = "burst"  # not held: the predicted safe wait exceeds the team's burst limit


@dataclass(frozen=True)
class HoldOutcome:
    """One :meth:`HoldKeeper.settle`: the record, what changed and, for a hold, why."""

    action: HoldAction
    team: str
    record: HoldRecord | None
    decision: SafeRelaunchDecision | None = None
    hold_reason: HoldReason | None = None
    release_kind: ReleaseKind | None = None
    patch: WorkloadPatch | None = None
    actuation: ActuationResult | None = None
    burst: BurstRecord | None = None
    notes: tuple[str, ...] = ()

    @property
    def is_held(self) -> bool:
        return self.action in (HoldAction.HELD, HoldAction.STILL_HELD)


def hold_patch(facts: WorkloadFacts, reason: str) -> WorkloadPatch:
    """``spec.active: false`` and the reason, on this Workload only (UID precondition)."""
    return _active_patch(facts, active=False, annotation=reason, reason=reason)


def release_patch(facts: WorkloadFacts, reason: str) -> WorkloadPatch:
    """``spec.active: true`` and the hold annotation removed (a merge patch's null)."""
    return _active_patch(facts, active=True, annotation=None, reason=reason)


def _active_patch(facts: WorkloadFacts, *, active: bool, annotation: str | None, reason: str) -> WorkloadPatch:
    """``spec.active`` and :data:`HOLD_ANNOTATION` (None removes it) on this Workload only."""
    ref = WorkloadRef.of(facts)
    return WorkloadPatch(
        target=ref,
        body={"metadata": {"uid": facts.uid, "annotations": {HOLD_ANNOTATION: annotation}}, "spec": {"active": active}},
        mechanism=ActuatorKind.RECORD_ONLY,
        boost=0,
        effective_priority=facts.priority,
        summary=f"spec.active {'true' if active else 'false'} on {ref} ({reason})",
    )


def _release_kind(decision: SafeRelaunchDecision) -> ReleaseKind:
    return {
        SafeRelaunchKind.RELEASE_SAFE: ReleaseKind.SAFE,
        SafeRelaunchKind.RELEASE_TIMEOUT: ReleaseKind.TIMEOUT,
        SafeRelaunchKind.BURST: ReleaseKind.BURST,
    }[decision.kind]


#: Records the burst a hold ended in, through the engine's burst path (store, annotation).
BurstSink = Callable[[Detection, BurstRecord], BurstRecord]


class HoldKeeper:
    """Applies the rule to one Workload snapshot at a time (see the module docstring)."""

    def __init__(
        self,
        store: HistoryStore,
        actuator: Actuator,
        teams: HoldTeams,
        probe: SafetyProbe,
    ) -> None:
        self._store = store
        self._actuator = actuator
        self._teams = teams
        self._probe = probe

    @property
    def enabled(self) -> bool:
        return self._teams.enabled

    def applies(self, detection: Detection) -> bool:
        """Whether this snapshot is one the rule looks at: a relaunch waiting for quota
        (active), or one the controller holds (inactive with :data:`HOLD_ANNOTATION`)."""
        facts = detection.workload
        if facts.phase is not WorkloadPhase.PENDING:
            return False
        if not facts.active and facts.hold_reason is not None:
            return True
        return detection.is_pending and self._teams.for_namespace(facts.namespace) is not None

    def settle(
        self,
        detection: Detection,
        history: JobHistory,
        now: float,
        burst: BurstSink,
        protected_level: int | None = None,
    ) -> HoldOutcome | None:
        """Holds, keeps holding or releases the Workload of ``detection``; None: nothing to do.

        ``protected_level``: the level the job's relaunch would be protected at once admitted,
        when the aging settings protect only within nominal quota (the probe judges it there).

        Raises:
            StoreError: the history store failed (nothing after the failure was done).
        """
        facts, identity = detection.workload, detection.identity
        if identity is None or facts.phase is not WorkloadPhase.PENDING:
            return None
        record = history.hold(facts.uid)
        if record is None:
            team = self._teams.for_namespace(facts.namespace)
            if team is None or not detection.is_pending:
                return None  # off for the team; or inactive without a hold of ours: someone else's
            return self._maybe_hold(detection, history, team, now, burst, protected_level)
        # A held relaunch is settled even when its team turned the rule off since (then released).
        team = self._teams.by_namespace.get(facts.namespace) or TeamHold(team="", settings=SafeRelaunchSettings())
        if record.released:
            if not facts.active and facts.hold_reason is not None:  # the release patch never landed
                return self._patch(HoldAction.RELEASED, team, record, release_patch(facts, record.release_reason or ""))
            return None
        if facts.active:
            if facts.hold_reason is not None:  # reactivated by someone else, our annotation still on
                released = self._release(
                    detection, team, record, ReleaseKind.REACTIVATED, now, "reactivated outside sky-kueue"
                )
                return HoldOutcome(HoldAction.RELEASED, team.team, released, release_kind=ReleaseKind.REACTIVATED)
            # The hold was stored but its patch never landed (crash, transient error): send it again.
            return self._patch(HoldAction.STILL_HELD, team, record, hold_patch(facts, record.reason))
        return self._maybe_release(detection, history, team, record, now, burst, protected_level)

    # --- hold ---------------------------------------------------------------------------

    def _input(self, history: JobHistory, team: TeamHold, own: Placement, held: float | None) -> SafeRelaunchInput:
        return SafeRelaunchInput(
            preemptions=history.preemption_count,
            held_seconds=held,
            own=own,
            burst_clouds=team.burst_clouds,
            team=team.team,
        )

    def _maybe_hold(
        self,
        detection: Detection,
        history: JobHistory,
        team: TeamHold,
        now: float,
        burst: BurstSink,
        protected_level: int | None,
    ) -> HoldOutcome | None:
        k = team.settings.safe_after_preemptions
        if k is None or history.preemption_count < k:
            return None  # cheap exit before the predictor runs
        facts = detection.workload
        if facts.is_pod_group and any(p.key.workload_uid == facts.uid for p in history.preemptions):
            # The preempted pod group itself, between its pods' end and Kueue's Finished: it is
            # never admitted again (SkyPilot's pods are not retriable in their group); the
            # relaunch is a new Workload.
            return None
        own = self._probe.placement(facts, team.cluster, protected_level)
        if own is None:
            return None
        decision = decide_safe_relaunch(self._input(history, team, own, None), team.settings)
        if decision.kind is SafeRelaunchKind.BURST:
            if history.burst is not None:
                return None  # decided before: it stays decided (the burst path records once)
            stored = burst(detection, self._burst_record(decision, history, now))
            return HoldOutcome(HoldAction.BURST, team.team, None, decision, burst=stored)
        if decision.kind is not SafeRelaunchKind.HOLD:
            return None  # safe now: it enters Kueue as any relaunch
        assert detection.identity is not None
        record = self._store.record_hold(
            detection.identity,
            HoldRecord(
                workload_uid=facts.uid,
                workload_namespace=facts.namespace,
                workload_name=facts.name,
                held_at=now,
                reason=decision.reason,
                preemptions=history.preemption_count,
                predicted_wait_seconds=decision.predicted_wait_seconds,
            ),
        )
        reason = HoldReason.BORROWING if own.admits_now else HoldReason.NO_NOMINAL_QUOTA
        outcome = self._patch(HoldAction.HELD, team, record, hold_patch(facts, record.reason))
        return replace(outcome, decision=decision, hold_reason=reason)

    # --- release ------------------------------------------------------------------------

    def _maybe_release(
        self,
        detection: Detection,
        history: JobHistory,
        team: TeamHold,
        record: HoldRecord,
        now: float,
        burst: BurstSink,
        protected_level: int | None,
    ) -> HoldOutcome:
        facts = detection.workload
        held = record.held_seconds(now)
        own = self._probe.placement(facts, team.cluster, protected_level)
        if own is None:  # the model cannot answer: not safe as far as we know; the bound still holds
            own = Placement(team.cluster, admits_now=False, borrows=True)
        decision = decide_safe_relaunch(self._input(history, team, own, held), team.settings)
        if decision.kind is SafeRelaunchKind.HOLD:
            return HoldOutcome(HoldAction.STILL_HELD, team.team, record, decision)
        if decision.kind is SafeRelaunchKind.RUN_NOW:  # the rule is off for the team now
            kind, reason = ReleaseKind.DISABLED, "released: safe relaunch is off for the team"
        else:
            kind, reason = _release_kind(decision), decision.reason
        burst_record = None
        if kind is ReleaseKind.BURST and history.burst is None:
            burst_record = burst(detection, self._burst_record(decision, history, now))
        released = self._release(detection, team, record, kind, now, reason, decision.cluster)
        outcome = self._patch(HoldAction.RELEASED, team, released, release_patch(facts, reason))
        return replace(outcome, decision=decision, release_kind=kind, burst=burst_record)

    @staticmethod
    def _burst_record(decision: SafeRelaunchDecision, history: JobHistory, now: float) -> BurstRecord:
        return BurstRecord(
            decided_at=now,
            reason=SAFE_WAIT_BURST_REASON,
            detail=decision.reason,
            preemptions=history.preemption_count,
            predicted_wait_seconds=decision.predicted_wait_seconds,
        )

    def _release(
        self,
        detection: Detection,
        team: TeamHold,
        record: HoldRecord,
        kind: ReleaseKind,
        now: float,
        reason: str,
        cluster: str | None = None,
    ) -> HoldRecord:
        assert detection.identity is not None
        stored = self._store.release_hold(
            detection.identity,
            HoldRelease(record.workload_uid, now, kind, reason, cluster or team.cluster),
        )
        return stored if stored is not None else record

    # --- patches ------------------------------------------------------------------------

    def _patch(self, action: HoldAction, team: TeamHold, record: HoldRecord, patch: WorkloadPatch) -> HoldOutcome:
        """Sends ``patch``; a failure is retried by the next reconcile (see :meth:`settle`).

        Holds are patched whatever ``aging.actuator`` says: a team opts into them explicitly.
        """
        try:
            result = self._actuator.apply(patch)
        except ActuationError as err:
            log.warning("hold patch not applied yet (the next reconcile retries it): %s", err)
            return HoldOutcome(action, team.team, record, patch=patch, notes=(f"patch failed, will retry: {err}",))
        if result.outcome is not ActuationOutcome.APPLIED:
            return HoldOutcome(action, team.team, record, patch=patch, actuation=result, notes=(result.detail,))
        return HoldOutcome(action, team.team, record, patch=patch, actuation=result)

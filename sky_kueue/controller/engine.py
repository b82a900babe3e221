"""The resubmission controller's core loop body: one Workload snapshot in, history recorded
and at most one idempotent patch out.

Why level-triggered: the mirror delivers Workload snapshots at least once and in no
guaranteed order across objects (a relaunched Workload may be seen before the preemption
of its predecessor), and a restarted controller re-lists everything. So
:meth:`AgingEngine.reconcile` never asks "what changed?"; it records every fact the
snapshot implies under its idempotency key (:mod:`sky_kueue.controller.keys`) and then, if
the Workload is waiting for quota, makes sure the job's aging step for this pending episode
is decided and actuated:

1. record the current eviction (a preemption, or another eviction that is not counted);
2. record the phase the snapshot shows (queued, admitted, finished);
3. pending and active → compute the policy's boost from the stored history, store it as
   the step for ``<uid>#<evictions>`` (or raise the stored one; never lower it), then apply
   the patch and mark the step actuated (compare-and-set on its revision).

Crash anywhere and the next reconcile of the same Workload resumes at the first missing
piece; see :mod:`sky_kueue.controller.sqlite_store` for why nothing is lost or repeated.
If a preemption arrives after the relaunched Workload was already aged, the engine re-ages
that waiting Workload at once (the boost can only go up within an episode).

Dependencies point inward: the engine sees the store and the actuator only through their
Protocols, and reads time from an injected clock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from enum import Enum
from typing import Protocol

from sky_kueue.controller import aging
from sky_kueue.controller.actuators import (
    ActuationError,
    ActuationOutcome,
    ActuationResult,
    Actuator,
    PatchPlan,
    WorkloadPatch,
    WorkloadRef,
    burst_annotation_patch,
    choose_priority_class,
    plan_band_patch,
    plan_kueue_patch,
    resolve_mechanism,
)
from sky_kueue.controller.aging import ActuatorKind, AgingDecision, AgingSettings
from sky_kueue.controller.aging.band import BandPolicy, check_class_gaps
from sky_kueue.controller.aging.protected_slot import ProtectedFit, protected_offset
from sky_kueue.controller.burst import decide_burst, preemptions_since_success
from sky_kueue.controller.burst_gate import BurstGates, RelaunchWait
from sky_kueue.controller.clock import Clock, system_clock
from sky_kueue.controller.detection import Detection, DetectionKind, WorkloadFacts, WorkloadPhase
from sky_kueue.controller.history import (
    AgingStep,
    BurstRecord,
    EvictionRecord,
    HistoryStore,
    JobHistory,
    PreemptionRecord,
    StepDecision,
    StepState,
    Transition,
    TransitionCause,
    same_cluster,
    transition_key,
)
from sky_kueue.controller.hold import HoldKeeper, HoldOutcome
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, decide_predicted_burst, max_stays_reached
from sky_kueue.mirror.identity import ADMITTED_BAND_LEVEL, WAITING_BAND_LEVEL, JobIdentity
from sky_kueue.mirror.preemption_message import PreemptionMessage

log = logging.getLogger(__name__)

#: The mechanisms whose effect lives in the Workload's priority, which Kueue can undo.
_KUEUE_PRIORITY_MECHANISMS = frozenset(
    {ActuatorKind.SPEC_PRIORITY, ActuatorKind.BOOST_ANNOTATION, ActuatorKind.PRIORITY_CLASS}
)

#: Pending snapshots kept to re-age a relaunch when its predecessor's preemption arrives
#: late; the oldest entries go first (a cancelled job's entry is never popped otherwise).
MAX_WAITING_SNAPSHOTS = 10_000

#: Resolves a preemptor to its class priority (e.g. through the mirror, by UID).
PreemptorPriority = Callable[[PreemptionMessage], "int | None"]


def message_priority(preemptor: PreemptionMessage) -> int | None:
    """Default resolver: the priority printed in the message (events carry it)."""
    return preemptor.class_priority


class ProtectedSlot(Protocol):
    """Reads, for ``protect_within_nominal``, an admitted Workload's ClusterQueue: its nominal
    quota and the admitted Workloads at a level or above (the controller's mirror:
    :class:`sky_kueue.controller.safety_probe.MirrorProtectedSlot`)."""

    def protected_fit(self, facts: WorkloadFacts, level: int) -> ProtectedFit | None:
        """Whether the admitted Workload of ``facts``, at priority ``level``, fits nominal quota
        with every other admitted Workload of its ClusterQueue at ``level`` or above.

        Returns None when the mirror cannot answer (not synced, the Workload or its
        ClusterQueue missing or not admitted there, an object the model cannot read).
        """
        ...


class FactKind(str, Enum):
    """A fact a reconcile recorded in the history (for the first time)."""

    PREEMPTION = "preemption"
    EVICTION = "eviction"
    QUEUED = "queued"
    ADMITTED = "admitted"
    FINISHED = "finished"


@dataclass(frozen=True)
class RecordedFact:
    """One newly recorded fact: its kind, the episode it names and, for an eviction, why."""

    kind: FactKind
    key: EpisodeKey | None = None
    reason: str = ""

    def __str__(self) -> str:
        text = self.kind.value if self.key is None else f"{self.kind.value} {self.key.token}"
        return f"{text} ({self.reason})" if self.reason else text


@dataclass(frozen=True)
class AgingResult:
    """What aging one Workload did: an aging step (:meth:`AgingEngine._age`), or a band level
    (:meth:`AgingEngine._level`, no stored step)."""

    step: AgingStep | None
    decision: AgingDecision
    patch: WorkloadPatch | None = None
    actuation: ActuationResult | None = None
    burst: BurstRecord | None = None
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ReconcileOutcome:
    """What one reconcile did; for logs, the demo timeline and benchmarks."""

    kind: DetectionKind
    job_key: str | None = None
    recorded: tuple[RecordedFact, ...] = ()
    step: AgingStep | None = None
    decision: AgingDecision | None = None
    patch: WorkloadPatch | None = None
    actuation: ActuationResult | None = None
    burst: BurstRecord | None = None
    notes: tuple[str, ...] = field(default=())
    #: What the safe-relaunch hold did (:mod:`sky_kueue.controller.hold`); None: not applicable.
    hold: HoldOutcome | None = None

    def recorded_any(self, kind: FactKind) -> bool:
        """This reconcile recorded a fact of ``kind`` for the first time."""
        return any(fact.kind is kind for fact in self.recorded)


def _band_mechanism(settings: AgingSettings) -> ActuatorKind:
    """How a band policy reaches Kueue, or why the settings cannot run one.

    A band level sits *below* the class value, so it is written to ``spec.priority`` (always
    mutable, lowered and raised alike); the boost annotation and the SkyPilot-level relabel
    only raise. Protection for a bounded time needs a timer on admitted Workloads, which the
    controller does not run (the simulator measured it worse than protection for the whole
    run, README "Does aging end starvation?").

    Raises:
        SettingsError: an actuator or ``protect_seconds`` a band policy cannot honour.
    """
    if settings.protect_seconds is not None:
        raise aging.SettingsError(
            f"aging.protect_seconds: policy {settings.policy!r} in the controller protects for the whole run; "
            "remove protect_seconds (the simulator alone models a bounded protection)"
        )
    if settings.actuator in (ActuatorKind.AUTO, ActuatorKind.SPEC_PRIORITY):
        return ActuatorKind.SPEC_PRIORITY
    if settings.actuator is ActuatorKind.RECORD_ONLY:
        return ActuatorKind.RECORD_ONLY
    raise aging.SettingsError(
        f"aging.actuator: policy {settings.policy!r} sets spec.priority to levels below the class value; "
        f"{settings.actuator.value!r} can only raise it; use 'auto', 'spec-priority' or 'record-only'"
    )


def band_mechanism(settings: AgingSettings) -> ActuatorKind | None:
    """How the configured band policy reaches Kueue (None: not a band policy).

    Call it before anything starts (the controller does, in its constructor): a setting a
    band policy cannot honour must stop the process before it takes the Lease.

    Raises:
        SettingsError: the actuator or ``protect_seconds`` cannot serve a band policy, or two
            WorkloadPriorityClass values are too close for its band.
    """
    policy = aging.get_policy(settings.policy)
    if not isinstance(policy, BandPolicy):
        return None
    mechanism = _band_mechanism(settings)
    check_class_gaps([rung.value for rung in settings.priority_class_ladder], policy, settings)
    return mechanism


class AgingEngine:
    """Records history and actuates aging for SkyPilot Workloads, exactly once."""

    def __init__(
        self,
        store: HistoryStore,
        actuator: Actuator,
        settings: AgingSettings,
        *,
        clock: Clock = system_clock,
        priority_boost_gate: bool | None = None,
        preemptor_priority: PreemptorPriority = message_priority,
        holds: HoldKeeper | None = None,
        burst_gates: BurstGates | None = None,
        relaunch_wait: RelaunchWait | None = None,
        protected_slot: ProtectedSlot | None = None,
        cluster: Callable[[], str | None] = lambda: None,
    ) -> None:
        """Args:
        cluster: the identity of the cluster the engine's Workloads live in (the live
            controller's mirror reads it; None: unknown). Recorded on each transition and step,
            so that in a history shared by several clusters' controllers, each retries and
            settles only its own cluster's steps (:meth:`replay_pending`).
        """
        self._store = store
        self._cluster = cluster
        #: Where ``protect_within_nominal`` reads nominal quota and admitted Workloads (None:
        #: nowhere, so with that setting no admitted Workload is granted the protected level).
        self._protected_slot = protected_slot
        self._holds = holds
        #: The teams' predicted-wait gates on the preemption burst trigger, by namespace (None,
        #: or a namespace without one: the count alone bursts).
        self._burst_gates = burst_gates
        #: The predictor the gate asks (None: every prediction is unknown, so a gated job stays).
        self._relaunch_wait = relaunch_wait
        self._actuator = actuator
        self._settings = settings
        self._clock = clock
        self._policy = aging.get_policy(settings.policy)
        self._band = self._policy if isinstance(self._policy, BandPolicy) else None
        band = band_mechanism(settings)
        self._mechanism = band if band is not None else resolve_mechanism(settings.actuator, priority_boost_gate)
        self._preemptor_priority = preemptor_priority
        #: The last pending snapshot per job, to re-age it when a late preemption arrives.
        self._waiting: dict[str, Detection] = {}
        #: Actuated aging steps put back on a Workload that had lost them (see :meth:`_reassert`).
        self.restored_steps = 0

    @property
    def mechanism(self) -> ActuatorKind:
        return self._mechanism

    @property
    def holds(self) -> bool:
        """Whether relaunches may be held (some team has safe relaunch on), so resyncs must
        visit held Workloads too (they are not waiting in Kueue, and nothing else changes them)."""
        return self._holds is not None and self._holds.enabled

    def is_held(self, detection: Detection) -> bool:
        """A relaunch this controller holds out of Kueue (inactive with the hold annotation)."""
        facts = detection.workload
        return facts.phase is WorkloadPhase.PENDING and not facts.active and facts.hold_reason is not None

    @property
    def actuates_admitted(self) -> bool:
        """Whether admitted Workloads are patched too (band policies), so resyncs must visit them."""
        return self._band is not None

    def reconcile(
        self,
        detection: Detection,
        *,
        predicted_wait_seconds: float | None = None,
        wait_limit_seconds: float | None = None,
        actuate: bool = True,
    ) -> ReconcileOutcome:
        """Records what ``detection`` implies and ages the Workload if it is waiting.

        Args:
            detection: the classified Workload snapshot.
            predicted_wait_seconds: the admission predictor's estimate, for the burst rule.
            wait_limit_seconds: the team's wait limit, for the burst rule.
            actuate: False records the facts only (no aging decision, no patch). The live
                controller passes False for a snapshot it knows is stale (a watch replayed
                after a restart): a patch planned on a stale "pending" snapshot could land on
                a Workload that has been admitted since, and the current snapshot is
                reconciled right after anyway.

        Raises:
            StoreError: the history store failed; nothing after the failure was done.
        """
        identity = detection.identity
        if identity is None:
            return ReconcileOutcome(detection.kind, notes=("not a SkyPilot job (no managed-job id or pod group)",))
        if not identity.skypilot_owned and self._store.load(identity.key) is None:
            return ReconcileOutcome(detection.kind, notes=("pod group without SkyPilot markers; not tracked",))
        facts = detection.workload
        now = self._clock()
        job_key = self._store.ensure_job(identity, facts.priority, facts.created_at if facts.created_at else now)
        recorded: list[RecordedFact] = []
        notes: list[str] = []

        eviction, eviction_key = detection.eviction, detection.eviction_key
        late_preemption = False
        if eviction is not None and eviction_key is not None:
            at = eviction.at if eviction.at is not None else now
            if eviction.kind.is_preemption:
                preemptor = eviction.preemptor or PreemptionMessage()
                record = PreemptionRecord(
                    key=eviction_key,
                    at=at,
                    workload_name=facts.name,
                    reason=(eviction.preemption_reason.value if eviction.preemption_reason else "Unknown"),
                    preemptor_uid=preemptor.workload_uid,
                    preemptor_job_uid=preemptor.job_uid,
                    preemptor_priority=self._preemptor_priority(preemptor),
                    message=eviction.message,
                )
                if self._store.record_preemption(identity, record):
                    recorded.append(RecordedFact(FactKind.PREEMPTION, eviction_key))
                    late_preemption = True
            else:
                eviction_record = EvictionRecord(
                    key=eviction_key,
                    at=at,
                    workload_name=facts.name,
                    reason=eviction.reason,
                    kind=eviction.kind.value,
                    message=eviction.message,
                    underlying_cause=eviction.underlying_cause,
                )
                if self._store.record_eviction(identity, eviction_record):
                    recorded.append(RecordedFact(FactKind.EVICTION, eviction_key, eviction.reason))
        elif detection.awaiting_workload_condition:
            notes.append("pods carry TerminationTarget but the Workload has no Evicted condition yet")

        episode = detection.episode_key
        if eviction is None or eviction_key is None:
            if detection.kind is DetectionKind.FINISHED:
                at = facts.finished_at if facts.finished_at is not None else now
                if self._record(identity, episode, TransitionCause.FINISHED, at, facts.uid):
                    recorded.append(RecordedFact(FactKind.FINISHED))
                self._waiting.pop(job_key, None)
            elif facts.holds_quota:
                at = facts.running_since if facts.running_since is not None else now
                if self._record(identity, episode, TransitionCause.ADMITTED, at, facts.uid):
                    recorded.append(RecordedFact(FactKind.ADMITTED, episode))
                self._waiting.pop(job_key, None)

        aged: AgingResult | None = None
        if detection.is_pending:
            if self._record_queued(identity, detection, now):
                recorded.append(RecordedFact(FactKind.QUEUED, episode))
            if actuate:
                self._waiting.pop(job_key, None)
                self._waiting[job_key] = detection
                while len(self._waiting) > MAX_WAITING_SNAPSHOTS:
                    self._waiting.pop(next(iter(self._waiting)))
                aged = self._act(detection, job_key, now, predicted_wait_seconds, wait_limit_seconds)
        elif self._band is not None and actuate and facts.holds_quota and eviction is None:
            aged = self._level(detection, job_key, now, None, None)
        elif actuate and facts.holds_quota and eviction is None:
            aged = self.restore_admitted(detection, job_key)
        if not actuate or not detection.is_pending:
            self._confirm_landed(detection)
        held = self._hold(detection, job_key, now) if actuate else None
        projected: BurstRecord | None = None
        if late_preemption and actuate and not detection.is_pending:
            waiting = self._waiting.get(job_key)
            if waiting is not None and waiting.workload.uid != facts.uid:
                notes.append(f"re-aging waiting Workload {waiting.workload.name} after a late preemption record")
                aged = self._act(waiting, job_key, now, predicted_wait_seconds, wait_limit_seconds)
                held = self._hold(waiting, job_key, now) or held
            else:
                projected = self._burst_before_relaunch(detection, job_key, now, notes)
        if held is not None:
            notes.extend(held.notes)
        if aged is None:
            return ReconcileOutcome(
                detection.kind,
                job_key,
                tuple(recorded),
                burst=projected or (held.burst if held is not None else None),
                notes=tuple(notes),
                hold=held,
            )
        return ReconcileOutcome(
            kind=detection.kind,
            job_key=job_key,
            recorded=tuple(recorded),
            step=aged.step,
            decision=aged.decision,
            patch=aged.patch,
            actuation=aged.actuation,
            burst=aged.burst or projected or (held.burst if held is not None else None),
            notes=(*notes, *aged.notes),
            hold=held,
        )

    def _hold(self, detection: Detection, job_key: str, now: float) -> HoldOutcome | None:
        """Holds, keeps or releases a relaunch under the safe-relaunch rule (None: not applicable).

        ``job_key`` is the key the store bound the job to, not ``identity.key``: another owner's
        history may hold that one."""
        if self._holds is None or not self._holds.applies(detection):
            return None
        history = self._store.load(job_key)
        if history is None:
            return None
        return self._holds.settle(detection, history, now, self._record_hold_burst, self.protected_level(history, now))

    def _record_hold_burst(self, detection: Detection, record: BurstRecord) -> BurstRecord:
        """The burst a hold ended in, through the burst path: stored once, surfaced on the Workload."""
        identity, facts = detection.identity, detection.workload
        assert identity is not None
        burst = self._store.record_burst(identity, record)
        if self._mechanism is not ActuatorKind.RECORD_ONLY:
            note = self._annotate_burst(facts.uid, WorkloadRef.of(facts), burst)
            log.info("safe relaunch burst for %s: %s (%s)", facts.name, burst.detail, note)
        return burst

    def _settle_stale_step(self, step: AgingStep, current: Detection, *, skip: bool = True) -> None:
        """A decided step whose Workload stopped waiting: did the patch land before it did?

        A crash between the patch and marking the step leaves it decided although the
        Workload carries the boost; it is then confirmed. Otherwise (with ``skip``) it was
        admitted or finished first and the step is skipped: aging raises waiting Workloads only.
        """
        facts = current.workload
        history = self._store.load(step.job_key)
        base = history.base_priority if history is not None and history.base_priority is not None else facts.priority
        effective = facts.priority + (facts.boost_annotation if self._mechanism is ActuatorKind.BOOST_ANNOTATION else 0)
        if step.boost > 0 and effective >= base + step.boost:
            self._store.mark_actuated(
                step.key, step.boost, step.revision, self._clock(), f"{self._actuator.name}:confirmed"
            )
        elif skip:
            self._store.mark_skipped(step.key, self._clock(), f"Workload is {facts.phase.value}")

    def _confirm_landed(self, detection: Detection) -> None:
        """Confirms a decided step this snapshot shows applied (a replay after a crash between
        the patch and its mark: the Workload may be gone by the time the step is retried)."""
        for step in self._store.pending_steps():
            if step.key == detection.episode_key:
                self._settle_stale_step(step, detection, skip=False)

    def _record_queued(self, identity: JobIdentity, detection: Detection, now: float) -> bool:
        """Records that the Workload waits for quota (since creation, or since its eviction)."""
        facts, eviction, episode = detection.workload, detection.eviction, detection.episode_key
        first_episode = episode.evictions == 0  # never evicted: waiting since creation
        queued_at = facts.created_at if first_episode and facts.created_at is not None else None
        if queued_at is None:
            queued_at = eviction.at if eviction is not None and eviction.at is not None else now
        return self._record(identity, episode, TransitionCause.QUEUED, queued_at, facts.uid)

    def _record(self, identity: JobIdentity, episode: EpisodeKey, cause: TransitionCause, at: float, uid: str) -> bool:
        transition = Transition(transition_key(episode, cause), cause, at, uid, self._cluster())
        return self._store.record_transition(identity, transition)

    def _age(
        self,
        detection: Detection,
        job_key: str,
        now: float,
        predicted_wait_seconds: float | None,
        wait_limit_seconds: float | None,
    ) -> AgingResult:
        identity = detection.identity
        assert identity is not None
        facts = detection.workload
        notes: list[str] = []
        history = self._store.load(job_key)
        assert history is not None, f"job {job_key} vanished from the store"
        decision = self._policy.decide(history, self._settings, now)
        step = self._store.decide_step(
            identity,
            StepDecision(
                key=detection.episode_key,
                workload_namespace=facts.namespace,
                workload_name=facts.name,
                policy=decision.policy,
                boost=decision.boost,
                decided_at=now,
                explanation=decision.explanation(),
                cluster=self._cluster(),
            ),
        )
        base = history.base_priority if history.base_priority is not None else facts.priority
        aged = self._aged_priority(facts, base, step.boost)
        burst = self._burst(detection, history, now, predicted_wait_seconds, wait_limit_seconds, notes, aged)
        if step.state is StepState.ACTUATED:
            patch, result = self._reassert(detection, base, step, notes)
            return AgingResult(step, decision, patch, result, burst=burst, notes=tuple(notes))
        if step.state is not StepState.DECIDED:
            return AgingResult(step, decision, burst=burst, notes=tuple(notes))

        plan = self._plan(detection, base, step)
        if plan.patch is None:
            if plan.satisfied:
                step = self._store.mark_actuated(
                    step.key, step.boost, step.revision, now, f"{self._actuator.name}:noop"
                )
            else:
                step = self._store.mark_skipped(step.key, now, plan.reason)
            notes.append(plan.reason)
            return AgingResult(step, decision, burst=burst, notes=tuple(notes))
        try:
            result = self._actuator.apply(plan.patch)
        except ActuationError as err:
            notes.append(f"actuation failed, will retry: {err}")
            log.warning("aging step %s not actuated yet: %s", step.key.token, err)
            return AgingResult(step, decision, plan.patch, burst=burst, notes=tuple(notes))
        if result.outcome is ActuationOutcome.APPLIED:
            step = self._store.mark_actuated(step.key, step.boost, step.revision, now, self._actuator.name)
        else:
            step = self._store.mark_skipped(step.key, now, f"{result.outcome.value}: {result.detail}")
        return AgingResult(step, decision, plan.patch, result, burst, tuple(notes))

    def _reassert(
        self, detection: Detection, base: int, step: AgingStep, notes: list[str]
    ) -> tuple[WorkloadPatch | None, ActuationResult | None]:
        """Puts an actuated step back on a Workload whose priority no longer carries it.

        Why: Kueue >= v0.16's WorkloadPriorityClass controller sets ``spec.priority`` of every
        Workload of a class back to the class value whenever the class is created or its value
        changes, and every Kueue start, upgrade or leader change delivers a create event for
        every class (``pkg/controller/core/workloadpriorityclass_controller.go``, kueue#8442;
        measured on Kueue v0.17.0 by ``tests/real_kueue/test_priority_reset.py``). The step is
        still decided and durable; only the Workload lost it. Kueue's reset is itself a watch
        event, so the Workload is reconciled again at once and this restores the step within
        the controller's reconcile latency. Only a version that carries the step's
        ``sky-kueue.io/aging-step`` annotation (the patch landed, Kueue's reset keeps the
        annotation) and not its priority is restored: an older snapshot delivered again
        (before the patch) or a Workload already carrying the step is left alone.
        """
        if self._mechanism not in _KUEUE_PRIORITY_MECHANISMS or step.boost <= 0:
            return None, None
        if detection.workload.aging_step != step.key.token:
            # the step's patch is not on this version (a snapshot from before it landed, re-delivered)
            return None, None
        plan = self._plan(detection, base, step, restore=True)
        if plan.patch is None:
            return None, None
        facts = detection.workload
        try:
            result = self._actuator.apply(plan.patch)
        except ActuationError as err:
            notes.append(f"restoring the aging step failed, will retry: {err}")
            log.warning("aging step %s not restored yet: %s", step.key.token, err)
            return plan.patch, None
        if result.outcome is ActuationOutcome.APPLIED:
            self.restored_steps += 1
            log.warning(
                "Workload %s/%s lost its aging step (priority %s, step %s above %s; Kueue resets spec.priority to the "
                "class value when a WorkloadPriorityClass is created or changed, as at every Kueue start): restored",
                facts.namespace,
                facts.name,
                facts.priority,
                step.boost,
                base,
            )
            notes.append(f"restored aging step {step.key.token}: priority {facts.priority} -> {base + step.boost}")
        return plan.patch, result

    def restore_admitted(self, detection: Detection, job_key: str) -> AgingResult | None:
        """An admitted Workload whose actuated step Kueue undid gets it back (see :meth:`_reassert`):
        below its aged priority it is preemptable again by what the step put it above."""
        history = self._store.load(job_key)
        if history is None:
            return None
        step = next(
            (s for s in history.steps if s.key == detection.episode_key and s.state is StepState.ACTUATED), None
        )
        if step is None:
            return None
        base = history.base_priority if history.base_priority is not None else detection.workload.priority
        notes: list[str] = []
        patch, result = self._reassert(detection, base, step, notes)
        if patch is None:
            return None
        decision = self._policy.decide(history, self._settings, self._clock())
        return AgingResult(step, decision, patch, result, notes=tuple(notes))

    def _act(
        self,
        detection: Detection,
        job_key: str,
        now: float,
        predicted_wait_seconds: float | None,
        wait_limit_seconds: float | None,
    ) -> AgingResult:
        """A waiting Workload: its band level (band policies, no stored step) or its aging step."""
        if self._band is not None:
            return self._level(detection, job_key, now, predicted_wait_seconds, wait_limit_seconds)
        return self._age(detection, job_key, now, predicted_wait_seconds, wait_limit_seconds)

    def _burst(
        self,
        detection: Detection,
        history: JobHistory,
        now: float,
        predicted_wait_seconds: float | None,
        wait_limit_seconds: float | None,
        notes: list[str],
        priority: int,
    ) -> BurstRecord | None:
        """Records the burst verdict once per job (and surfaces it on the Workload).

        With a predicted-wait gate for the job's team, a job due a burst by its preemptions
        asks the predictor for its relaunch's on-prem wait at ``priority`` (its priority after
        aging) first; a job it keeps in Kueue records nothing and is judged again at its next
        reconcile (the prediction changes as the cluster does).

        Raises:
            StoreError: the history store failed (the verdict is stored before any patch).
        """
        identity, facts = detection.identity, detection.workload
        assert identity is not None
        if history.burst is not None:
            return None
        gate = self.burst_gate_for(facts.namespace)
        asked = False
        threshold = self._settings.burst_after_preemptions
        count = preemptions_since_success(history, self._settings, now)
        if (
            gate is not None
            and predicted_wait_seconds is None
            and self._relaunch_wait is not None
            and threshold is not None
            and count >= threshold  # the model runs only for a job due a burst
            and not max_stays_reached(count, threshold, gate)  # ... the gate may still keep
        ):
            predicted_wait_seconds = self._relaunch_wait.relaunch_wait(facts, priority, gate.wait_kind)
            asked = True
        verdict = decide_burst(
            history,
            self._settings,
            now,
            predicted_wait_seconds=predicted_wait_seconds,
            wait_limit_seconds=wait_limit_seconds,
            gate=gate,
        )
        if verdict is None:
            if gate is not None and threshold is not None and count >= threshold:
                stay = decide_predicted_burst(count, threshold, predicted_wait_seconds, gate)
                notes.append(f"burst gate: {stay.reason}" + ("" if asked else " (no predictor)"))
            return None
        burst = self._store.record_burst(identity, verdict.record(now))
        notes.append(f"burst: {burst.detail}")
        if self._mechanism is not ActuatorKind.RECORD_ONLY:
            notes.append(self._annotate_burst(facts.uid, WorkloadRef.of(facts), burst))
        return burst

    def burst_gate_for(self, namespace: str) -> PredictedBurstSettings | None:
        """The predicted-wait gate of the team owning ``namespace`` (None: ungated)."""
        return None if self._burst_gates is None else self._burst_gates.for_namespace(namespace)

    def _aged_priority(self, facts: WorkloadFacts, base: int, boost: int) -> int:
        """The priority the Workload waits at once its aging step is actuated."""
        current = facts.priority + (facts.boost_annotation if self._mechanism is ActuatorKind.BOOST_ANNOTATION else 0)
        if self._mechanism is ActuatorKind.RECORD_ONLY:
            return current
        if self._mechanism is ActuatorKind.PRIORITY_CLASS:
            rung = choose_priority_class(self._settings.priority_class_ladder, base, boost)
            return current if rung is None else max(current, rung.value)
        return max(current, base + boost)

    def _burst_before_relaunch(
        self, detection: Detection, job_key: str, now: float, notes: list[str]
    ) -> BurstRecord | None:
        """A gated job just preempted, its relaunch not here yet: judged on the projected relaunch.

        Why now: SkyPilot's recovery strategy bursts a gated team's relaunch only once the
        controller has marked the job (:func:`sky_kueue.controller.burst.relaunch_burst`), and
        the preemption reaches the controller well before SkyPilot notices it and relaunches.
        The relaunch is projected with the aging decision it will get (the same policy on the
        history with this preemption), so its predicted wait is the one it will face.
        """
        facts = detection.workload
        gate = self.burst_gate_for(facts.namespace)
        if gate is None:
            return None
        history = self._store.load(job_key)
        if history is None or history.burst is not None:
            return None
        if self._relaunch_wait is None and not max_stays_reached(
            preemptions_since_success(history, self._settings, now), self._settings.burst_after_preemptions, gate
        ):
            return None  # nothing to ask; the bound, once reached, needs no predictor
        base = history.base_priority if history.base_priority is not None else facts.priority
        decision = self._policy.decide(history, self._settings, now)
        priority = self._aged_priority(facts, base, decision.boost)
        return self._burst(detection, history, now, None, None, notes, priority)

    def _level(
        self,
        detection: Detection,
        job_key: str,
        now: float,
        predicted_wait_seconds: float | None,
        wait_limit_seconds: float | None,
    ) -> AgingResult:
        """Band policies: sets the Workload's ``spec.priority`` to its waiting or admitted level.

        No aging step is stored: setting a level is idempotent (the same history gives the
        same level, and a Workload already at it is not patched), so a crash or a replay at
        worst repeats a no-op. What must not happen is a level planned on a stale snapshot
        landing on a Workload that changed phase since; the patch carries the snapshot's
        resourceVersion (:func:`plan_band_patch`), and a 409 just waits for the next snapshot.
        """
        assert self._band is not None
        facts = detection.workload
        notes: list[str] = []
        history = self._store.load(job_key)
        assert history is not None, f"job {job_key} vanished from the store"
        decision = self._band.decide(history, self._settings, now)
        burst = None
        record_level = False
        if detection.is_pending:
            level, offset = WAITING_BAND_LEVEL, decision.boost
            record_only = self._mechanism is ActuatorKind.RECORD_ONLY
            waiting_level = facts.priority if record_only else decision.base_priority + offset
            burst = self._burst(
                detection, history, now, predicted_wait_seconds, wait_limit_seconds, notes, waiting_level
            )
        else:
            level = ADMITTED_BAND_LEVEL
            offset = decision.admitted_boost if decision.admitted_boost is not None else 0
            offset, record_level = self._within_nominal(facts, decision, offset, notes)
        if self._mechanism is ActuatorKind.RECORD_ONLY:
            notes.append(f"actuator record-only: {level} level {decision.base_priority + offset} not patched")
            return AgingResult(None, decision, burst=burst, notes=tuple(notes))
        plan = plan_band_patch(facts, priority=decision.base_priority + offset, level=level, record_level=record_level)
        notes.append(plan.reason)
        if plan.patch is None:
            return AgingResult(None, decision, burst=burst, notes=tuple(notes))
        try:
            result = self._actuator.apply(plan.patch)
        except ActuationError as err:
            notes.append(f"actuation failed, the next snapshot or resync retries it: {err}")
            log.warning("band level for %s not set yet: %s", facts.name, err)
            return AgingResult(None, decision, plan.patch, burst=burst, notes=tuple(notes))
        if result.outcome is not ActuationOutcome.APPLIED:
            # The note above says what was planned; say that it did not land (the snapshot's
            # Workload changed or is gone, and the next snapshot plans anew).
            notes.append(f"not applied: {result.outcome.value}{f' ({result.detail})' if result.detail else ''}")
        return AgingResult(None, decision, plan.patch, result, burst, tuple(notes))

    def _within_nominal(
        self, facts: WorkloadFacts, decision: AgingDecision, offset: int, notes: list[str]
    ) -> tuple[int, bool]:
        """The admitted offset under ``protect_within_nominal``: the protected ``offset`` only
        when it was granted before (the Workload is at that level: it stays so for the run) or
        the Workload fits its ClusterQueue's nominal quota with every admitted Workload at that
        level or above; otherwise the class's plain level (``released_boost``), where Kueue's
        own order (newest admission first) applies. And whether the grant must be recorded
        although ``spec.priority`` is at the level already: a Workload Kueue admitted at its
        class value (which is the protected level with ``protect_levels: 1``) before any band
        level landed is granted it now, and only the ``admitted`` annotation keeps that grant
        for the run, as the simulator keeps it from admission on.

        Why: protect every relaunch and the protected set outgrows nominal quota, so a reclaim
        reaches it again (:mod:`sky_kueue.controller.aging.protected_slot`).
        """
        released = decision.released_boost
        if not self._settings.protect_within_nominal or released is None or protected_offset(offset, released) is None:
            return offset, False
        protected, plain = decision.base_priority + offset, decision.base_priority + released
        if facts.priority == protected and (
            # Strictly inside the band only an admitted-level patch puts it; at the class value,
            # a Workload admitted before its waiting level landed is there too, and only the
            # annotation an admitted-level patch writes tells the two apart.
            protected < decision.base_priority or facts.band_level == ADMITTED_BAND_LEVEL
        ):
            notes.append(f"protected level {protected}: granted before, kept for the run")
            return offset, False
        if self._protected_slot is None:
            notes.append(f"plain level {plain}: protect_within_nominal has no mirror to read nominal quota from")
            return released, False
        fit = self._protected_slot.protected_fit(facts, protected)
        if fit is None:
            notes.append(f"plain level {plain}: the mirror cannot tell whether protected level {protected} fits")
            return released, False
        if fit.fits:
            notes.append(f"protected level {protected}: fits nominal quota ({fit.detail})")
            return offset, True
        notes.append(f"plain level {plain}: protected level {protected} would exceed nominal quota of {fit.detail}")
        return released, False

    def protected_level(self, history: JobHistory, now: float) -> int | None:
        """The level the job of ``history`` would be protected at once its relaunch is admitted,
        when ``protect_within_nominal`` must judge that (the safe-relaunch hold's probe judges a
        held relaunch by whether that level fits nominal quota).

        None: not a band policy, the setting is off, or the job is not protected once admitted
        (its admitted level is the plain one).
        """
        if self._band is None or not self._settings.protect_within_nominal:
            return None
        decision = self._band.decide(history, self._settings, now)
        offset = protected_offset(decision.admitted_boost, decision.released_boost)
        return None if offset is None else decision.base_priority + offset

    def _plan(self, detection: Detection, base: int, step: AgingStep, *, restore: bool = False) -> PatchPlan:
        facts = detection.workload
        if self._mechanism is ActuatorKind.RECORD_ONLY:
            return PatchPlan(None, False, "actuator record-only: decision recorded, nothing patched")
        if self._mechanism is ActuatorKind.PRIORITY_CLASS:
            rung = choose_priority_class(self._settings.priority_class_ladder, base, step.boost)
            if rung is None:
                return PatchPlan(None, True, f"no ladder class between {base} and {base + step.boost}")
            # The recovery strategy relabels relaunches; if this Workload was created without
            # the aged class, fall back to raising spec.priority to the rung's value.
            return plan_kueue_patch(
                facts,
                base_priority=base,
                boost=rung.value - base,
                mechanism=ActuatorKind.SPEC_PRIORITY,
                step=step.key.token,
                restore=restore,
            )
        return plan_kueue_patch(
            facts, base_priority=base, boost=step.boost, mechanism=self._mechanism, step=step.key.token, restore=restore
        )

    def _annotate_burst(self, uid: str, ref: WorkloadRef, burst: BurstRecord) -> str:
        patch = WorkloadPatch(
            target=ref,
            body=burst_annotation_patch(uid, burst),
            mechanism=ActuatorKind.RECORD_ONLY,
            boost=0,
            effective_priority=0,
            summary=f"burst annotation on {ref}",
        )
        try:
            result = self._actuator.apply(patch)
        except ActuationError as err:
            return f"burst annotation not written (recorded in the store): {err}"
        return f"burst annotation: {result.outcome.value}"

    def replay_pending(
        self, lookup: Callable[[str, str], Detection | None], clusters: Collection[str] | None = None
    ) -> list[ReconcileOutcome]:
        """Re-actuates steps left ``decided`` by a crash or a transient failure.

        Call at startup and whenever actuations may have failed; a step whose Workload is
        gone, replaced or no longer waiting is marked skipped. A step of another cluster's
        Workload (a history shared across clusters) is left to that cluster's controller.

        Args:
            lookup: returns the current snapshot of the Workload ``(namespace, name)``.
            clusters: the cluster identities this controller answers for (default: its
                cluster's now); steps of any other cluster are left alone.
        """
        outcomes: list[ReconcileOutcome] = []
        cluster = self._cluster()
        own = clusters if clusters is not None else ({cluster} if cluster else set())
        for step in self._store.pending_steps():
            if not same_cluster(step.cluster, own):
                continue
            current = lookup(step.workload_namespace, step.workload_name)
            if current is None or current.workload.uid != step.key.workload_uid:
                reason = "target gone" if current is None else "name now belongs to another Workload"
                self._store.mark_skipped(step.key, self._clock(), reason)
                continue
            outcomes.append(self.reconcile(current))
            if not current.is_pending:
                self._settle_stale_step(step, current)
        return outcomes

"""A job's history, as the aging policies read it and as stores persist it.

Why a history and not a counter: Kueue keeps no memory across a SkyPilot relaunch (the new
Workload has a fresh UID, creation time and ``schedulingStats``; Kueue ``pkg/controller/jobs/pod/pod_controller.go``
and ``pkg/workload``), and
there is no aging across priority levels in Kueue (kueue#754, open since 2023). KEP-7990's
``kueue.x-k8s.io/priority-boost`` explicitly leaves "boost a workload preempted too many
times" to an external controller. That controller must remember, per job, every
preemption (reason, preemptor, time), every other eviction (recorded, never counted), when
the job waited and when it ran, and each aging step it decided and actuated. Aging is then
a *pure function of this history* (:mod:`sky_kueue.controller.aging`), which makes a step
reproducible: recomputing it from the same history gives the same boost, so a crash can
never make the controller boost twice.

Everything here is immutable and free of I/O. :class:`HistoryStore` is the port, with two
adapters: the embedded SQLite file (:mod:`sky_kueue.controller.sqlite_store`) and one
``JobHistory`` object per job in the API server (:mod:`sky_kueue.controller.kube_store`) for
an in-cluster deployment with several replicas; ``--state`` chooses
(:mod:`sky_kueue.controller.state_spec`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Protocol

from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import MANAGED_JOB_KEY_PREFIX, JobIdentity, managed_job_key, pod_group_key


class Phase(str, Enum):
    """What the job is doing from the user's point of view."""

    WAITING = "waiting"  # queued in Kueue, or preempted and waiting to be relaunched
    RUNNING = "running"  # holding quota
    FINISHED = "finished"  # done for good; no further aging


class TransitionCause(str, Enum):
    QUEUED = "queued"
    ADMITTED = "admitted"
    PREEMPTED = "preempted"
    EVICTED = "evicted"
    FINISHED = "finished"


_PHASE_OF_CAUSE = {
    TransitionCause.QUEUED: Phase.WAITING,
    TransitionCause.ADMITTED: Phase.RUNNING,
    TransitionCause.PREEMPTED: Phase.WAITING,
    TransitionCause.EVICTED: Phase.WAITING,
    TransitionCause.FINISHED: Phase.FINISHED,
}


def same_cluster(recorded: str | None, own: Collection[str]) -> bool:
    """Whether a record of cluster ``recorded`` may be of a cluster of ``own`` (the identities a
    controller answers for: its cluster's now, and the one it saw before a cluster replaced under
    it). Either unknown (None, or nothing in ``own``): yes."""
    return recorded is None or not own or recorded in own


def transition_key(episode: EpisodeKey, cause: TransitionCause) -> str:
    """The idempotency key of a phase change: one per Workload episode and cause."""
    return f"{episode.token}/{cause.value}"


@dataclass(frozen=True)
class Transition:
    """The job entered ``phase`` at ``at`` because of ``cause`` on Workload ``workload_uid``.

    ``cluster`` is the identity of the cluster that Workload lives in (its ``kube-system``
    UID, :mod:`sky_kueue.mirror.cluster_identity`), recorded on what the controller saw
    (queued, admitted, finished) when it knew it: a history shared by the controllers of
    several clusters (docs/operations.md, "One history across clusters") holds Workloads of
    each, and a controller judges only its own cluster's (what a relist no longer shows,
    :mod:`.vanished`). None: unknown, taken as any cluster's; the transition of a preemption
    or eviction record carries none (an end needs no such judgement).
    """

    key: str
    cause: TransitionCause
    at: float
    workload_uid: str
    cluster: str | None = None

    @property
    def phase(self) -> Phase:
        return _PHASE_OF_CAUSE[self.cause]


@dataclass(frozen=True)
class PreemptionRecord:
    """A Kueue preemption of one of the job's Workloads (counts toward aging)."""

    key: EpisodeKey
    at: float
    workload_name: str
    reason: str = "Unknown"
    preemptor_uid: str | None = None
    preemptor_job_uid: str | None = None
    #: The preemptor's class priority (without boost) when known; caps the boost.
    preemptor_priority: int | None = None
    message: str = ""


@dataclass(frozen=True)
class EvictionRecord:
    """Any other eviction (PodsReadyTimeout, Deactivated, ...): recorded, never counted."""

    key: EpisodeKey
    at: float
    workload_name: str
    reason: str
    kind: str
    message: str = ""
    underlying_cause: str | None = None


class StepState(str, Enum):
    """Where an aging step is in its decide → actuate life."""

    DECIDED = "decided"  # boost chosen and durable; the patch may or may not have landed
    ACTUATED = "actuated"  # the target Workload is known to carry the boost
    SKIPPED = "skipped"  # the target stopped waiting (admitted, gone) before actuation


@dataclass(frozen=True)
class StepDecision:
    """What the controller wants to record as the boost for one pending episode."""

    key: EpisodeKey
    workload_namespace: str
    workload_name: str
    policy: str
    boost: int
    decided_at: float
    explanation: tuple[str, ...] = ()
    #: The identity of the cluster the Workload lives in (None: unknown); see :class:`AgingStep`.
    cluster: str | None = None


@dataclass(frozen=True)
class AgingStep:
    """A stored aging step. ``revision`` grows when a later decision raised the boost.

    ``cluster``: the cluster the step's Workload lives in (as :attr:`Transition.cluster`).
    Only that cluster's controller retries or settles the step: in a history shared across
    clusters, another cluster's controller finds no such Workload and must not mark the step
    skipped ("target gone") while its own controller may still patch it.
    """

    key: EpisodeKey
    job_key: str
    workload_namespace: str
    workload_name: str
    policy: str
    boost: int
    revision: int
    decided_at: float
    state: StepState
    revised_at: float | None = None
    actuated_boost: int | None = None
    actuated_at: float | None = None
    actuator: str | None = None
    detail: str | None = None
    explanation: tuple[str, ...] = ()
    cluster: str | None = None

    @property
    def needs_actuation(self) -> bool:
        return self.state is StepState.DECIDED


@dataclass(frozen=True)
class BurstRecord:
    """The job was marked for cloud fallback (decided once, then only surfaced)."""

    decided_at: float
    reason: str
    detail: str
    preemptions: int
    predicted_wait_seconds: float | None = None


class ReleaseKind(str, Enum):
    """Why a held relaunch was let into Kueue (the ``reason`` label of the releases metric)."""

    #: Kueue would admit it within its ClusterQueue's nominal quota now.
    SAFE = "safe"
    #: Held ``safe_max_hold_seconds``: released as without the rule.
    TIMEOUT = "timeout"
    #: The predicted wait for a safe place exceeded the team's burst limit.
    BURST = "burst"
    #: The team turned the rule off while the relaunch was held.
    DISABLED = "disabled"
    #: Someone else set ``spec.active`` back to true (a user, or a Kueue release without the
    #: fix for kueue#6719 reactivating it when its job changed).
    REACTIVATED = "reactivated"


@dataclass(frozen=True)
class HoldRecord:
    """A relaunch held out of Kueue (``spec.active: false``) until it would not borrow.

    One per Workload UID, decided once and released once (:mod:`sky_kueue.controller.hold`):
    ``held_at``/``reason`` say when and why it was held (``reason`` is what users read,
    "held: waiting for nominal quota (predicted 4m)"); the ``released_*`` fields are set once.
    """

    workload_uid: str
    workload_namespace: str
    workload_name: str
    held_at: float
    reason: str
    preemptions: int
    predicted_wait_seconds: float | None = None
    released_at: float | None = None
    release_kind: str | None = None
    release_reason: str | None = None
    #: Where a release sends the relaunch (the own cluster's context or name).
    release_cluster: str | None = None

    @property
    def released(self) -> bool:
        return self.released_at is not None

    def held_seconds(self, now: float) -> float:
        end = self.released_at if self.released_at is not None else now
        return max(0.0, end - self.held_at)


@dataclass(frozen=True)
class HoldRelease:
    """What a release records on a :class:`HoldRecord` (set once)."""

    workload_uid: str
    at: float
    kind: ReleaseKind
    reason: str
    cluster: str | None = None

    def applied_to(self, record: HoldRecord) -> HoldRecord:
        """``record`` released by this (unchanged when it was released already)."""
        if record.released:
            return record
        return replace(
            record,
            released_at=self.at,
            release_kind=self.kind.value,
            release_reason=self.reason,
            release_cluster=self.cluster,
        )


@dataclass(frozen=True)
class Interval:
    """A stretch of time the job spent in one phase (``end`` is "now" when ``open``)."""

    phase: Phase
    start: float
    end: float
    open: bool
    workload_uid: str

    @property
    def duration(self) -> float:
        return max(self.end - self.start, 0.0)


@dataclass(frozen=True)
class FoldedTotals:
    """Old episodes a size-bounded store folded into counts (see ``JobHistory.folded``).

    ``through`` is the time of the newest folded fact: a fact at or before it that is not
    among the retained records was folded, so a replay of it is a duplicate, not news.
    """

    through: float
    preemptions: int = 0
    evictions: int = 0
    transitions: int = 0
    steps: int = 0


@dataclass(frozen=True)
class JobHistory:
    """Everything known about one job. Build one with the ``with_*`` methods or load it."""

    key: str
    identity: JobIdentity | None = None
    #: The job's own priority (class value, without any boost), from its first Workload.
    base_priority: int | None = None
    first_seen: float | None = None
    transitions: tuple[Transition, ...] = ()
    preemptions: tuple[PreemptionRecord, ...] = ()
    evictions: tuple[EvictionRecord, ...] = ()
    steps: tuple[AgingStep, ...] = ()
    burst: BurstRecord | None = field(default=None)
    #: Relaunches held until they would not borrow, oldest first (one per Workload UID).
    holds: tuple[HoldRecord, ...] = ()
    #: Episodes older than the retained records, folded into counts by a size-bounded store
    #: (None: nothing folded; the SQLite store never folds).
    folded: FoldedTotals | None = None

    # --- derived views -----------------------------------------------------------------

    def ordered_transitions(self) -> tuple[Transition, ...]:
        """Transitions by time; equal times keep recording order (Python's sort is stable)."""
        return tuple(sorted(self.transitions, key=lambda t: t.at))

    def intervals(self, now: float) -> tuple[Interval, ...]:
        """Consecutive same-phase transitions merged; the last one runs until ``now``."""
        runs: list[Transition] = []
        for transition in self.ordered_transitions():
            if not runs or runs[-1].phase is not transition.phase:
                runs.append(transition)
        result: list[Interval] = []
        for index, start in enumerate(runs):
            is_last = index + 1 == len(runs)
            end = max(now, start.at) if is_last else runs[index + 1].at
            result.append(Interval(start.phase, start.at, end, is_last, start.workload_uid))
        return tuple(result)

    def seconds_in(self, phase: Phase, now: float) -> float:
        return sum(i.duration for i in self.intervals(now) if i.phase is phase)

    def wait_seconds(self, now: float) -> float:
        """Cumulative time spent waiting (queued, or preempted and not yet relaunched)."""
        return self.seconds_in(Phase.WAITING, now)

    def run_seconds(self, now: float) -> float:
        """Cumulative time spent holding quota."""
        return self.seconds_in(Phase.RUNNING, now)

    @property
    def phase(self) -> Phase | None:
        ordered = self.ordered_transitions()
        return ordered[-1].phase if ordered else None

    @property
    def last_admission_at(self) -> float | None:
        admissions = [t.at for t in self.transitions if t.cause is TransitionCause.ADMITTED]
        return max(admissions) if admissions else None

    @property
    def current_boost_step(self) -> AgingStep | None:
        """The step whose boost was last actuated on a Workload of this job (None if none)."""
        actuated = [s for s in self.steps if s.actuated_boost is not None and s.actuated_at is not None]
        if not actuated:
            return None
        # Ties (several steps actuated at one instant) go to the step recorded last.
        _, latest = max(enumerate(actuated), key=lambda item: (item[1].actuated_at or 0.0, item[1].revision, item[0]))
        return latest

    @property
    def current_boost(self) -> int:
        """The boost last actuated on a Workload of this job (0 if none)."""
        step = self.current_boost_step
        return step.actuated_boost or 0 if step is not None else 0

    @property
    def preemption_count(self) -> int:
        """Every preemption ever recorded, folded ones included."""
        return len(self.preemptions) + (self.folded.preemptions if self.folded else 0)

    @property
    def eviction_count(self) -> int:
        """Every other eviction ever recorded, folded ones included."""
        return len(self.evictions) + (self.folded.evictions if self.folded else 0)

    def step(self, key: EpisodeKey) -> AgingStep | None:
        return next((s for s in self.steps if s.key == key), None)

    def hold(self, workload_uid: str) -> HoldRecord | None:
        """The hold of Workload ``workload_uid``, if it was ever held."""
        return next((h for h in self.holds if h.workload_uid == workload_uid), None)

    @property
    def current_hold(self) -> HoldRecord | None:
        """The hold not released yet, if any (a job has one relaunch waiting at a time)."""
        return next((h for h in reversed(self.holds) if not h.released), None)

    def as_of(self, at: float) -> JobHistory:
        """The history as it stood at time ``at`` (events after it removed)."""
        return replace(
            self,
            transitions=tuple(t for t in self.transitions if t.at <= at),
            preemptions=tuple(p for p in self.preemptions if p.at <= at),
            evictions=tuple(e for e in self.evictions if e.at <= at),
            steps=tuple(s for s in self.steps if s.decided_at <= at),
            burst=self.burst if self.burst is not None and self.burst.decided_at <= at else None,
            holds=tuple(h for h in self.holds if h.held_at <= at),
        )

    # --- builders (pure; used by tests and the simulator) ------------------------------

    def with_transition(self, transition: Transition) -> JobHistory:
        if any(t.key == transition.key for t in self.transitions):
            return self
        first = transition.at if self.first_seen is None else min(self.first_seen, transition.at)
        return replace(self, transitions=(*self.transitions, transition), first_seen=first)

    def queued(self, workload_uid: str, at: float, evictions: int = 0) -> JobHistory:
        """The job's Workload ``workload_uid`` started waiting for quota."""
        key = transition_key(EpisodeKey(workload_uid, evictions), TransitionCause.QUEUED)
        return self.with_transition(Transition(key, TransitionCause.QUEUED, at, workload_uid))

    def admitted(self, workload_uid: str, at: float, evictions: int = 0) -> JobHistory:
        key = transition_key(EpisodeKey(workload_uid, evictions), TransitionCause.ADMITTED)
        return self.with_transition(Transition(key, TransitionCause.ADMITTED, at, workload_uid))

    def finished(self, workload_uid: str, at: float) -> JobHistory:
        key = transition_key(EpisodeKey(workload_uid, 0), TransitionCause.FINISHED)
        return self.with_transition(Transition(key, TransitionCause.FINISHED, at, workload_uid))

    def with_preemption(self, record: PreemptionRecord) -> JobHistory:
        """Adds a preemption and the WAITING transition it causes (idempotent by key)."""
        if any(p.key == record.key for p in self.preemptions):
            return self
        transition = Transition(
            transition_key(record.key, TransitionCause.PREEMPTED),
            TransitionCause.PREEMPTED,
            record.at,
            record.key.workload_uid,
        )
        return replace(self, preemptions=(*self.preemptions, record)).with_transition(transition)

    def with_eviction(self, record: EvictionRecord) -> JobHistory:
        """Adds a non-preemption eviction and its WAITING transition (idempotent by key)."""
        if any(e.key == record.key for e in self.evictions):
            return self
        transition = Transition(
            transition_key(record.key, TransitionCause.EVICTED),
            TransitionCause.EVICTED,
            record.at,
            record.key.workload_uid,
        )
        return replace(self, evictions=(*self.evictions, record)).with_transition(transition)

    def with_hold(self, record: HoldRecord) -> JobHistory:
        """``record`` added (idempotent by Workload UID: a stored hold is never replaced)."""
        if self.hold(record.workload_uid) is not None:
            return self
        return replace(self, holds=(*self.holds, record))

    def with_release(self, release: HoldRelease) -> JobHistory:
        """The hold of ``release.workload_uid`` released (unchanged if unknown or released)."""
        uid = release.workload_uid
        return replace(self, holds=tuple(release.applied_to(h) if h.workload_uid == uid else h for h in self.holds))

    def with_step(self, step: AgingStep) -> JobHistory:
        """``step`` replacing the step of the same key in place (recording order is what breaks
        ties in :attr:`current_boost_step`), or appended when new."""
        if self.step(step.key) is None:
            return replace(self, steps=(*self.steps, step))
        return replace(self, steps=tuple(step if s.key == step.key else s for s in self.steps))


@dataclass(frozen=True)
class JobSummary:
    """One line of ``controller status`` / the job list of a store."""

    key: str
    namespace: str
    pod_group: str | None
    managed_job_id: str | None
    preemptions: int
    evictions: int
    current_boost: int
    phase: Phase | None
    burst: bool
    #: A relaunch of the job is held now (its Workload inactive until it would not borrow).
    held: bool = False


@dataclass(frozen=True)
class StoreWriteStats:
    """A store's writes since it was opened (for metrics): requests or transactions, and the
    ones refused as stale and retried (compare-and-swap conflicts; 0 for SQLite, which locks)."""

    writes: int
    conflicts: int
    #: Pod groups that claimed a managed job whose history belongs to another owner (each
    #: counted once per process; :func:`identity_mismatch_message`).
    identity_mismatches: int = 0


def identity_mismatch_message(identity: JobIdentity, held_by: str, conflict: str) -> str:
    """The one log line of a claim on another owner's history (names only; no credentials)."""
    owner = identity.owner
    return (
        f"history identity mismatch: a pod group in namespace {owner.namespace} (team {owner.team or 'unknown'}, "
        f"user {owner.user or 'unknown'}) claims managed job {identity.managed_job_id}, whose history {held_by} "
        f"belongs to another owner ({conflict}); it gets its own history {identity.owned_key} and inherits nothing"
    )


class StoreError(RuntimeError):
    """The history store cannot be read or written (path, corruption, version)."""


class StoreClusterError(StoreError):
    """The API server holding the store cannot be reached (the message names its URL), or
    refuses the request (resource not served, forbidden): the cluster's problem, not the
    command line's.

    Attributes:
        unreachable: True when no answer came at all (then the message names the URL).
    """

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


def reference_candidates(text: str) -> list[str]:
    """The job keys a user's reference may name, in the order every store tries them.

    An exact key or alias; a managed-job id (``17``, or ``managed-job/17`` in any spelling
    :func:`~sky_kueue.mirror.identity.managed_job_key` normalises); a pod group as
    ``namespace/name``. A store then falls back to bare names (:func:`one_job`).
    """
    candidates = [text]
    if text.startswith(MANAGED_JOB_KEY_PREFIX):
        candidates.append(managed_job_key(text[len(MANAGED_JOB_KEY_PREFIX) :]))
    if text.isdigit():
        candidates.append(managed_job_key(text))
    namespace, sep, name = text.partition("/")
    if sep and namespace and name:
        candidates.append(pod_group_key(namespace, name))
    return candidates


def one_job(text: str, keys: Sequence[str]) -> str | None:
    """The one job a bare name (pod group, cluster or managed-job name) matched, if any.

    Raises:
        StoreError: it matched several (the message lists them).
    """
    if len(keys) > 1:
        raise StoreError(f"job reference {text!r} is ambiguous: {', '.join(keys)}")
    return keys[0] if keys else None


class HistoryStore(Protocol):
    """Durable per-job history. Every method is one atomic transaction.

    Write methods are idempotent by key, so an at-least-once event stream (watch
    re-delivery, a restart that re-lists everything) records each fact exactly once.
    Implementations must survive the writer being killed at any instruction: a fact is
    either fully recorded with its phase change, or not at all.
    """

    def ensure_job(self, identity: JobIdentity, base_priority: int | None, seen_at: float) -> str:
        """Registers the job (first call wins for ``base_priority``) and returns its key."""
        ...

    def record_transition(self, identity: JobIdentity, transition: Transition) -> bool:
        """Records a phase change; False when its key was already recorded."""
        ...

    def record_preemption(self, identity: JobIdentity, record: PreemptionRecord) -> bool:
        """Records a preemption and its WAITING transition; False when already recorded."""
        ...

    def record_eviction(self, identity: JobIdentity, record: EvictionRecord) -> bool:
        """Records another eviction and its WAITING transition; False if already recorded."""
        ...

    def decide_step(self, identity: JobIdentity, decision: StepDecision) -> AgingStep:
        """Records the step for ``decision.key`` if new, or raises its boost if higher.

        Never lowers a recorded boost. Returns the stored step (which, on a replay, is the
        one decided before the crash, not a recomputation).
        """
        ...

    def mark_actuated(self, key: EpisodeKey, boost: int, revision: int, at: float, actuator: str) -> AgingStep:
        """Marks the step actuated with ``boost`` if it is still at ``revision``."""
        ...

    def mark_skipped(self, key: EpisodeKey, at: float, detail: str) -> AgingStep:
        """Marks a still-decided step as no longer actuatable (target not waiting)."""
        ...

    def record_burst(self, identity: JobIdentity, record: BurstRecord) -> BurstRecord:
        """Records the burst decision once; returns the stored one."""
        ...

    def record_hold(self, identity: JobIdentity, record: HoldRecord) -> HoldRecord:
        """Records the hold of ``record.workload_uid`` once; returns the stored one."""
        ...

    def release_hold(self, identity: JobIdentity, release: HoldRelease) -> HoldRecord | None:
        """Releases the hold of ``release.workload_uid`` once; returns the stored hold (None: never held)."""
        ...

    def pending_steps(self) -> Sequence[AgingStep]:
        """Steps decided but not yet actuated or skipped, oldest first."""
        ...

    def load(self, job_key: str) -> JobHistory | None:
        """The job's full history (``job_key`` may be an alias), or None if unknown."""
        ...

    def resolve(self, text: str) -> str | None:
        """The job key matching a user-given job reference, or None.

        Raises:
            StoreError: the reference matches several jobs.
        """
        ...

    def jobs(self) -> Sequence[JobSummary]: ...

    def write_stats(self) -> StoreWriteStats:
        """Writes since the store was opened, and the stale ones retried (for metrics)."""
        ...

    def close(self) -> None: ...

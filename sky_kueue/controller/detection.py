"""Classifying a Kueue Workload (and its pods) into what the controller must react to.

Why this is subtle (Kueue ``apis/kueue/v1beta2/workload_types.go`` and ``pkg/scheduler/preemption/preemption.go``):

* A preemption is ``Evicted=True`` with reason ``Preempted`` plus ``Preempted=True`` whose
  reason says where the preemptor came from (``InClusterQueue``, ``InCohortReclamation``,
  ``InCohortReclaimWhileBorrowing``, ``InCohortFairSharing``) and whose message names the
  preemptor's Workload UID: "Preempted to accommodate a workload (UID: U, JobUID: J) due
  to ...". Older Kueue releases wrote "(UID: U)" only; events append the priorities.
* Other evictions look alike but are not preemptions and must not age a job:
  ``PodsReadyTimeout`` (waitForPodsReady is on by default since Kueue 0.19),
  ``InactiveWorkload``/``Deactivated*``, ``AdmissionCheck``, ``ClusterQueueStopped``,
  ``LocalQueueStopped``, ``NodeFailures``, ``FlavorMigration``, ``EvictedOnManagerCluster``.
* SkyPilot's pod groups are unretriable, so a preempted one ends ``Finished=True`` (reason
  ``Succeeded``, "Pods succeeded: 0/N.") *with* ``Evicted=True/Preempted`` still set. That
  is a preemption, not a completion.
* Kueue marks each pod it evicts with the condition ``TerminationTarget`` (reason
  ``WorkloadEvictedDueTo<Reason>``) before deleting it: a second, independent signal. It
  corroborates the Workload condition and supplies the preemptor when the condition
  message was truncated. A pods-only signal has no Workload UID and eviction count, so it
  cannot form an idempotency key (:mod:`sky_kueue.controller.keys`); it is reported for the
  caller to fetch the Workload, never recorded on its own.

Both served API versions are read (v1beta2 ``spec.priorityClassRef`` and
``accumulatedPastExecutionTimeSeconds``; v1beta1 ``spec.priorityClassName`` and the typo
``accumulatedPastExexcutionTimeSeconds``). Pure: plain dicts in, frozen values out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from enum import Enum
from typing import Any

from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import (
    AGING_STEP_ANNOTATION,
    BAND_LEVEL_ANNOTATION,
    HOLD_ANNOTATION,
    IS_GROUP_WORKLOAD_ANNOTATION,
    JobIdentity,
    identify_job,
    pod_group_of,
)
from sky_kueue.mirror.preemption_message import (
    PreemptionMessage,
    PreemptionReason,
    parse_preemptor,
    preemption_reason,
)


class WorkloadPhase(str, Enum):
    """Kueue's own status order (``pkg/workload/workload.go`` ``Status()``)."""

    PENDING = "pending"
    QUOTA_RESERVED = "quotaReserved"
    ADMITTED = "admitted"
    FINISHED = "finished"


class EvictionKind(str, Enum):
    """The ``Evicted`` condition's reason, normalized."""

    PREEMPTED = "Preempted"
    PODS_READY_TIMEOUT = "PodsReadyTimeout"
    DEACTIVATED = "Deactivated"
    ADMISSION_CHECK = "AdmissionCheck"
    CLUSTER_QUEUE_STOPPED = "ClusterQueueStopped"
    LOCAL_QUEUE_STOPPED = "LocalQueueStopped"
    NODE_FAILURES = "NodeFailures"
    FLAVOR_MIGRATION = "FlavorMigration"
    EVICTED_ON_MANAGER_CLUSTER = "EvictedOnManagerCluster"
    OTHER = "Other"

    @property
    def is_preemption(self) -> bool:
        """Only preemptions age a job; everything else is recorded and not counted."""
        return self is EvictionKind.PREEMPTED


#: Old (before Kueue #3593) and current names of a deactivation eviction.
_DEACTIVATED_REASONS = ("InactiveWorkload", "Deactivated")
_DEACTIVATED_PREFIX = "DeactivatedDueTo"


class SignalSource(str, Enum):
    WORKLOAD_CONDITION = "workload-condition"
    POD_TERMINATION_TARGET = "pod-termination-target"


class DetectionKind(str, Enum):
    """What a Workload snapshot means for the job it belongs to."""

    PENDING = "pending"
    RUNNING = "running"
    PREEMPTED = "preempted"
    EVICTED = "evicted"
    FINISHED = "finished"


@dataclass(frozen=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str
    at: float | None


@dataclass(frozen=True)
class Eviction:
    """The Workload's current eviction (``Evicted=True``), possibly inferred from pods."""

    kind: EvictionKind
    reason: str
    message: str
    at: float | None
    #: Total evictions counted by Kueue including this one; None without schedulingStats.
    ordinal: int | None
    preemption_reason: PreemptionReason | None = None
    preemptor: PreemptionMessage | None = None
    underlying_cause: str | None = None
    #: Quota is still reserved: the pods are terminating.
    in_progress: bool = False
    sources: frozenset[SignalSource] = frozenset({SignalSource.WORKLOAD_CONDITION})


@dataclass(frozen=True)
class PodTermination:
    """A pod's ``TerminationTarget`` condition: Kueue is deleting it for an eviction."""

    pod_name: str
    pod_uid: str | None
    pod_group: str | None
    evicted_reason: str
    kind: EvictionKind
    message: str
    at: float | None
    preemptor: PreemptionMessage | None


@dataclass(frozen=True)
class WorkloadFacts:
    """The fields of a Workload the controller uses, the same for v1beta1 and v1beta2."""

    uid: str
    namespace: str
    name: str
    api_version: str
    created_at: float | None
    priority: int
    priority_class: str | None
    #: The ``kueue.x-k8s.io/priority-boost`` annotation, 0 when absent or not an int32.
    boost_annotation: int
    phase: WorkloadPhase
    active: bool
    quota_reserved_at: float | None
    admitted_at: float | None
    finished_at: float | None
    finished_reason: str | None
    #: Evicted reason -> count, from ``status.schedulingStats.evictions``; None if absent.
    eviction_counts: Mapping[str, int] | None
    is_pod_group: bool
    accumulated_execution_seconds: int | None
    conditions: Mapping[str, Condition]
    #: ``metadata.resourceVersion`` of the snapshot ("" when unknown): a patch carrying it
    #: lands only on this exact version (the API server answers 409 otherwise).
    resource_version: str = ""
    #: The ``sky-kueue.io/hold`` annotation: the controller holds this relaunch, and why
    #: (:mod:`sky_kueue.controller.hold`); None when absent.
    hold_reason: str | None = None
    #: The ``sky-kueue.io/band-level`` annotation (``waiting``/``admitted``): which band level
    #: the controller last set ``spec.priority`` to; None when absent.
    band_level: str | None = None
    #: The ``sky-kueue.io/aging-step`` annotation: the token of the aging step whose patch
    #: landed on this Workload; None when absent. Kueue's own priority writes leave it, so a
    #: Workload that carries it but not the step's priority lost the priority to Kueue.
    aging_step: str | None = None
    #: ``spec.queueName``: the LocalQueue the Workload was created in (a relaunch lane's, for a
    #: relaunch the ``KUEUE_AGING`` strategy moved there); None when absent.
    queue_name: str | None = None

    @property
    def total_evictions(self) -> int | None:
        return None if self.eviction_counts is None else sum(self.eviction_counts.values())

    @property
    def preemptions_counted_by_kueue(self) -> int | None:
        if self.eviction_counts is None:
            return None
        return self.eviction_counts.get(kueue_api.EVICTED_BY_PREEMPTION, 0)

    @property
    def holds_quota(self) -> bool:
        return self.phase in (WorkloadPhase.QUOTA_RESERVED, WorkloadPhase.ADMITTED)

    @property
    def running_since(self) -> float | None:
        """When the current admission started (Admitted, else QuotaReserved)."""
        return self.admitted_at if self.admitted_at is not None else self.quota_reserved_at


@dataclass(frozen=True)
class Detection:
    """A classified Workload snapshot."""

    workload: WorkloadFacts
    identity: JobIdentity | None
    eviction: Eviction | None
    pod_signals: tuple[PodTermination, ...] = ()

    @property
    def kind(self) -> DetectionKind:
        if self.eviction is not None and SignalSource.WORKLOAD_CONDITION in self.eviction.sources:
            if self.eviction.kind.is_preemption:
                return DetectionKind.PREEMPTED
            return DetectionKind.EVICTED
        if self.workload.phase is WorkloadPhase.FINISHED:
            return DetectionKind.FINISHED
        if self.workload.holds_quota:
            return DetectionKind.RUNNING
        return DetectionKind.PENDING

    @property
    def is_pending(self) -> bool:
        """Waiting for quota, active, not finished: the only state aging may raise."""
        return (
            self.workload.phase is WorkloadPhase.PENDING
            and self.workload.active
            and not (self.eviction is not None and self.eviction.in_progress)
        )

    @property
    def episode_key(self) -> EpisodeKey:
        """Names the Workload's current pending or running episode (see ``keys``)."""
        return _key(self.workload, self.workload.total_evictions)

    @property
    def eviction_key(self) -> EpisodeKey | None:
        """Names the current eviction; None for a pods-only signal (no stable key)."""
        if self.eviction is None or SignalSource.WORKLOAD_CONDITION not in self.eviction.sources:
            return None
        return _key(self.workload, self.eviction.ordinal)

    @property
    def awaiting_workload_condition(self) -> bool:
        """Pods say "evicted" but the Workload does not yet: fetch it again."""
        return self.eviction is not None and SignalSource.WORKLOAD_CONDITION not in self.eviction.sources


def _key(facts: WorkloadFacts, count: int | None) -> EpisodeKey:
    if count is not None:
        return EpisodeKey(facts.uid, count)
    evicted = facts.conditions.get(kueue_api.CONDITION_EVICTED)
    if evicted is None or evicted.at is None:
        return EpisodeKey(facts.uid, 0)
    return EpisodeKey(facts.uid, None, f"{evicted.at:.0f}")


class DetectionError(ValueError):
    """The object is not a Workload the controller can read."""


# --- parsing helpers -------------------------------------------------------------------


def parse_time(value: object) -> float | None:
    """RFC 3339 (Kubernetes ``metav1.Time``) to POSIX seconds; None when absent or invalid."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def _int_or_none(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def _int32_or_none(value: object) -> int | None:
    number = _int_or_none(value)
    if number is None or not kueue_api.INT32_MIN <= number <= kueue_api.INT32_MAX:
        return None
    return number


def _conditions(obj: Mapping[str, Any]) -> dict[str, Condition]:
    found: dict[str, Condition] = {}
    for raw in (obj.get("status") or {}).get("conditions") or ():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("type"), str):
            continue
        found[raw["type"]] = Condition(
            type=raw["type"],
            status=str(raw.get("status", "")).lower() == "true",
            reason=str(raw.get("reason") or ""),
            message=str(raw.get("message") or ""),
            at=parse_time(raw.get("lastTransitionTime")),
        )
    return found


def eviction_kind(reason: str) -> EvictionKind:
    """Maps an ``Evicted`` reason (or a pod's ``WorkloadEvictedDueTo<reason>``) to a kind."""
    if reason in _DEACTIVATED_REASONS or reason.startswith(_DEACTIVATED_PREFIX):
        return EvictionKind.DEACTIVATED
    try:
        return EvictionKind(reason)
    except ValueError:
        return EvictionKind.OTHER


def _eviction_counts(status: Mapping[str, Any]) -> tuple[dict[str, int] | None, dict[str, str]]:
    stats = status.get("schedulingStats")
    if not isinstance(stats, Mapping) or not isinstance(stats.get("evictions"), list):
        return None, {}
    counts: dict[str, int] = {}
    causes: dict[str, str] = {}
    for entry in stats["evictions"]:
        if not isinstance(entry, Mapping):
            continue
        reason = str(entry.get("reason") or "")
        count = _int_or_none(entry.get("count")) or 0
        counts[reason] = counts.get(reason, 0) + max(count, 0)
        cause = entry.get("underlyingCause")
        if isinstance(cause, str) and cause:
            causes[reason] = cause
    return counts, causes


def workload_facts(obj: Mapping[str, Any]) -> WorkloadFacts:
    """Normalizes a Workload dict of either served version.

    Raises:
        DetectionError: the object is not a Workload or lacks ``metadata.uid``/``name``.
    """
    if not isinstance(obj, Mapping):
        raise DetectionError(f"expected a Workload object, got {type(obj).__name__}")
    kind = obj.get("kind")
    if kind not in (None, "Workload"):
        raise DetectionError(f"expected kind Workload, got {kind!r}")
    metadata = obj.get("metadata") or {}
    uid, name = metadata.get("uid"), metadata.get("name")
    if not isinstance(uid, str) or not uid or not isinstance(name, str) or not name:
        raise DetectionError(f"Workload {name!r} has no metadata.uid/name")
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    annotations = metadata.get("annotations") or {}
    conditions = _conditions(obj)

    class_ref = spec.get("priorityClassRef")
    if isinstance(class_ref, Mapping) and class_ref.get("name"):
        priority_class: str | None = str(class_ref["name"])
    else:
        priority_class = spec.get("priorityClassName") or None

    def true(cond_type: str) -> Condition | None:
        cond = conditions.get(cond_type)
        return cond if cond is not None and cond.status else None

    finished = true(kueue_api.CONDITION_FINISHED)
    admitted = true(kueue_api.CONDITION_ADMITTED)
    reserved = true(kueue_api.CONDITION_QUOTA_RESERVED)
    if finished is not None:
        phase = WorkloadPhase.FINISHED
    elif admitted is not None:
        phase = WorkloadPhase.ADMITTED
    elif reserved is not None or status.get("admission"):
        phase = WorkloadPhase.QUOTA_RESERVED
    else:
        phase = WorkloadPhase.PENDING

    counts, _ = _eviction_counts(status)
    accumulated = status.get("accumulatedPastExecutionTimeSeconds")
    if accumulated is None:
        accumulated = status.get("accumulatedPastExexcutionTimeSeconds")
    return WorkloadFacts(
        uid=uid,
        namespace=str(metadata.get("namespace") or ""),
        name=name,
        api_version=str(obj.get("apiVersion") or ""),
        created_at=parse_time(metadata.get("creationTimestamp")),
        priority=_int32_or_none(spec.get("priority")) or 0,
        priority_class=priority_class,
        boost_annotation=_int32_or_none(annotations.get(kueue_api.PRIORITY_BOOST_ANNOTATION)) or 0,
        phase=phase,
        active=spec.get("active", True) is not False,
        quota_reserved_at=reserved.at if reserved else None,
        admitted_at=admitted.at if admitted else None,
        finished_at=finished.at if finished else None,
        finished_reason=finished.reason if finished else None,
        eviction_counts=counts,
        is_pod_group=annotations.get(IS_GROUP_WORKLOAD_ANNOTATION) == "true",
        accumulated_execution_seconds=_int_or_none(accumulated),
        conditions=conditions,
        resource_version=str(metadata.get("resourceVersion") or ""),
        hold_reason=_annotation_text(annotations.get(HOLD_ANNOTATION)),
        band_level=_annotation_text(annotations.get(BAND_LEVEL_ANNOTATION)),
        aging_step=_annotation_text(annotations.get(AGING_STEP_ANNOTATION)),
        queue_name=str(spec.get("queueName")) if spec.get("queueName") else None,
    )


def _annotation_text(value: object) -> str | None:
    return None if value is None else str(value)


def pod_termination(pod: Mapping[str, Any]) -> PodTermination | None:
    """Reads a pod's ``TerminationTarget=True`` condition; None when the pod has none."""
    metadata = pod.get("metadata") or {}
    for raw in (pod.get("status") or {}).get("conditions") or ():
        if not isinstance(raw, Mapping) or raw.get("type") != kueue_api.POD_CONDITION_TERMINATION_TARGET:
            continue
        if str(raw.get("status", "")).lower() != "true":
            continue
        reason = str(raw.get("reason") or "")
        evicted_reason = reason.removeprefix(kueue_api.POD_TERMINATION_REASON_PREFIX)
        message = str(raw.get("message") or "")
        return PodTermination(
            pod_name=str(metadata.get("name") or ""),
            pod_uid=metadata.get("uid"),
            pod_group=pod_group_of(pod),
            evicted_reason=evicted_reason,
            kind=eviction_kind(evicted_reason),
            message=message,
            at=parse_time(raw.get("lastTransitionTime")),
            preemptor=parse_preemptor(message),
        )
    return None


def _merged(primary: PreemptionMessage | None, secondary: PreemptionMessage | None) -> PreemptionMessage | None:
    if primary is None:
        return secondary
    return primary.merged(secondary)


def _current_eviction(
    facts: WorkloadFacts, status: Mapping[str, Any], signals: Sequence[PodTermination]
) -> Eviction | None:
    evicted = facts.conditions.get(kueue_api.CONDITION_EVICTED)
    preempted = facts.conditions.get(kueue_api.CONDITION_PREEMPTED)
    _, causes = _eviction_counts(status)
    if evicted is not None and evicted.status:
        kind = eviction_kind(evicted.reason)
        if kind is not EvictionKind.PREEMPTED and preempted is not None and preempted.status:
            kind = EvictionKind.PREEMPTED  # Preempted=True always accompanies a preemption.
        matching = [s for s in signals if s.kind is kind]
        preemptor = None
        reason = None
        if kind.is_preemption:
            message_preemptor = parse_preemptor(evicted.message)
            if preempted is not None and preempted.status:
                message_preemptor = _merged(parse_preemptor(preempted.message), message_preemptor)
            for signal in matching:
                message_preemptor = _merged(message_preemptor, signal.preemptor)
            preemptor = message_preemptor
            reason = preemption_reason(
                preempted.reason if preempted is not None and preempted.status else None, preemptor
            )
        cause = None
        if evicted.reason.startswith(_DEACTIVATED_PREFIX):
            cause = evicted.reason.removeprefix(_DEACTIVATED_PREFIX)
        cause = causes.get(evicted.reason, cause)
        sources = {SignalSource.WORKLOAD_CONDITION}
        if matching:
            sources.add(SignalSource.POD_TERMINATION_TARGET)
        return Eviction(
            kind=kind,
            reason=evicted.reason,
            message=evicted.message,
            at=evicted.at,
            ordinal=facts.total_evictions,
            preemption_reason=reason,
            preemptor=preemptor,
            underlying_cause=cause,
            in_progress=facts.holds_quota,
            sources=frozenset(sources),
        )
    if signals and (evicted is None) and facts.phase is not WorkloadPhase.FINISHED:
        # Pods are being evicted but this Workload snapshot predates the condition.
        first = min(signals, key=lambda s: (s.at is None, s.at or 0.0, s.pod_name))
        return Eviction(
            kind=first.kind,
            reason=first.evicted_reason,
            message=first.message,
            at=first.at,
            ordinal=None,
            preemption_reason=preemption_reason(None, first.preemptor) if first.kind.is_preemption else None,
            preemptor=first.preemptor,
            in_progress=facts.holds_quota,
            sources=frozenset({SignalSource.POD_TERMINATION_TARGET}),
        )
    return None


def classify(workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]] = ()) -> Detection:
    """Classifies one Workload snapshot, with the pods of its group when available.

    Args:
        workload: the Workload as returned by the API (either served version).
        pods: the pods of the same group (same namespace and pod-group name); used for the
            SkyPilot job identity and as the ``TerminationTarget`` second signal.

    Raises:
        DetectionError: ``workload`` is not a readable Workload.
    """
    facts = workload_facts(workload)
    signals = tuple(s for s in (pod_termination(p) for p in pods) if s is not None)
    status = workload.get("status") or {}
    return Detection(
        workload=facts,
        identity=identify_job(workload, pods),
        eviction=_current_eviction(facts, status, signals),
        pod_signals=signals,
    )

"""Typed transitions of a Workload, derived from two consecutive states of the object.

Why derive them from object states rather than from Events: Kueue's Events are best-effort,
rate-limited and expire after an hour; the Workload's conditions are the record
(Kueue ``apis/kueue/v1beta2/workload_types.go`` and ``pkg/scheduler/preemption/preemption.go``). A watch delivers
every state change in order, including the last state of
a deleted object, so comparing each state with the previous one yields every transition,
even for a preempted SkyPilot pod group that finishes and is garbage-collected within a
second (Kueue ``pkg/controller/jobs/pod/pod_controller.go``: an unretriable group is
finished once its pods are gone): the preemption must be recorded from the watch event,
before the object disappears.

The rules, per condition (Kueue ``apis/kueue/v1beta2/workload_types.go`` and
``pkg/scheduler/preemption/preemption.go``):

* ``created``: the object appeared.
* ``quota-reserved`` / ``admitted``: ``QuotaReserved`` / ``Admitted`` became True.
* ``evicted``: ``Evicted`` became True, or stayed True with a new reason or transition time,
  or the eviction counters of ``status.schedulingStats`` grew (an eviction whose False state
  in between was never observed). ``reason`` is the Evicted reason (``Preempted``,
  ``PodsReadyTimeout``, ``Deactivated``/``InactiveWorkload``, ``AdmissionCheck``,
  ``ClusterQueueStopped``, ...).
* ``preempted``: an eviction with reason ``Preempted``, or ``Preempted`` became True.
  ``reason`` is the ``Preempted`` condition's reason (``InClusterQueue``,
  ``InCohortReclamation``, ``InCohortFairSharing``, ``InCohortReclaimWhileBorrowing``); the
  preemptor's Workload UID is parsed from "Preempted to accommodate a workload (UID: U,
  JobUID: J) ..." and resolved to a Workload by the store.
* ``requeued``: ``Requeued`` became True (reason ``Preempted``, ``BackoffFinished``, ...).
* ``finished``: ``Finished`` became True. A SkyPilot group that was preempted finishes with
  reason ``Succeeded`` ("Pods succeeded: 0/N."); :attr:`Transition.preempted` tells it apart
  from a real completion.
* ``deleted``: the object is gone; transitions its last state implies come first.
* ``updated``: any other change (priority, spec, a new pending message).

Several transitions from one change are emitted in the order above.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import SkyPilotIdentity
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.preemption_message import PreemptionReason, parse_preemptor, preemption_reason
from sky_kueue.mirror.server_state import ResetReason

QUOTA_RESERVED = kueue_api.CONDITION_QUOTA_RESERVED
ADMITTED = kueue_api.CONDITION_ADMITTED
EVICTED = kueue_api.CONDITION_EVICTED
PREEMPTED = kueue_api.CONDITION_PREEMPTED
REQUEUED = kueue_api.CONDITION_REQUEUED
FINISHED = kueue_api.CONDITION_FINISHED
EVICTED_BY_PREEMPTION = kueue_api.EVICTED_BY_PREEMPTION


class TransitionKind(str, enum.Enum):
    CREATED = "created"
    QUOTA_RESERVED = "quota-reserved"
    ADMITTED = "admitted"
    EVICTED = "evicted"
    PREEMPTED = "preempted"
    REQUEUED = "requeued"
    FINISHED = "finished"
    DELETED = "deleted"
    UPDATED = "updated"
    # Stream markers: not changes of one Workload. A subscription receives them only when it
    # names them (``kinds=None`` means the Workload kinds above).
    #: A list of ``object_kind`` was stored (initial sync, or a relist after a gap); with
    #: ``resuming``, changes since the resumed resourceVersion follow as ``resumed`` transitions.
    SYNCED = "synced"
    #: A resumed watch has replayed every change up to the list it started with.
    CAUGHT_UP = "caught-up"
    #: The watch of ``object_kind`` reached ``resource_version`` (a bookmark: nothing changed).
    BOOKMARK = "bookmark"
    #: A pod of a SkyPilot group was added or changed (``key``: the group's Workload).
    POD_CHANGED = "pod-changed"
    #: A pod of a SkyPilot group is gone.
    POD_DELETED = "pod-deleted"


#: The transitions of one Workload (what ``kinds=None`` subscribes to).
WORKLOAD_KINDS: frozenset[TransitionKind] = frozenset(
    {
        TransitionKind.CREATED,
        TransitionKind.QUOTA_RESERVED,
        TransitionKind.ADMITTED,
        TransitionKind.EVICTED,
        TransitionKind.PREEMPTED,
        TransitionKind.REQUEUED,
        TransitionKind.FINISHED,
        TransitionKind.DELETED,
        TransitionKind.UPDATED,
    }
)


class ChangeSource(str, enum.Enum):
    """How the mirror learned of the change."""

    #: a list (initial sync, or a relist after 410): intermediate states may have been missed
    LIST = "list"
    #: a watch event: every state in order
    WATCH = "watch"
    #: synthesized from the current state for a late subscriber (``replay=True``)
    REPLAY = "replay"
    #: an event of a watch resumed from an older resourceVersion, at or before the list the
    #: mirror started with: a past state (the store already holds a newer one, or none if
    #: the object was deleted while nobody watched)
    RESUMED = "resumed"
    #: a relist after a gap (410 Gone, or an API server that lost our resourceVersion):
    #: changes in between were not seen
    RELIST = "relist"


@dataclass(frozen=True)
class Preemptor:
    """Who preempted a workload, as far as it can be resolved.

    Attributes:
        uid: the preemptor Workload's UID (from the condition message).
        job_uid: the preemptor's job UID; None for pod groups (Kueue writes ``UNKNOWN``).
        key: ``namespace/name`` of the preemptor Workload, if the mirror knows that UID.
        cluster_queue: the preemptor's ClusterQueue (from the message's preemptor path, or
            the resolved Workload).
    """

    uid: str
    job_uid: str | None = None
    key: str | None = None
    cluster_queue: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"uid": self.uid, "jobUid": self.job_uid, "workload": self.key, "clusterQueue": self.cluster_queue}


@dataclass(frozen=True)
class Change:
    """One transition as derived from two states (before the store adds sequence and context)."""

    kind: TransitionKind
    reason: str = ""
    message: str = ""
    preemptor_uid: str | None = None
    preemptor_job_uid: str | None = None
    preemptor_cluster_queue: str | None = None


@dataclass(frozen=True)
class Transition:
    """A typed change of one Workload, as delivered to subscribers.

    Attributes:
        sequence: position in the mirror's transition stream (1, 2, ...): a total order.
        kind: what happened.
        key: ``namespace/name`` of the Workload.
        uid: its UID (a relaunched SkyPilot group has the same key and a new UID).
        workload: the Workload after the change (for ``deleted``, its last state); read-only.
        reason: the relevant condition's reason (see the module docstring).
        message: that condition's message.
        preemptor: for ``preempted``, who preempted it.
        preempted: the Workload carries ``Evicted=True/Preempted`` (a "finished" SkyPilot
            group that was in fact preempted).
        identity: the SkyPilot job, when its pods have been seen.
        cluster_queue: where the Workload holds (or asked for) quota, when known.
        source: list, watch or replay.
        observed_at: when the mirror processed it (the mirror's clock).
        resource_version: the object's resourceVersion after the change.
        object_kind: the kind a marker speaks of (Workload for Workload transitions).
        pod: for ``pod-changed``/``pod-deleted``, the pod (trimmed, see ``identity.trim_pod``).
        resuming: for ``synced``, a resumed watch replays older changes next.
        reset: for ``synced``, why the API server's state went back (an etcd restore, another
            cluster): changes a consumer handled may be undone, changes it never saw are gone
            (:mod:`sky_kueue.mirror.server_state`); None when it did not.
    """

    sequence: int
    kind: TransitionKind
    key: str
    uid: str
    workload: Mapping[str, Any]
    observed_at: datetime
    source: ChangeSource
    reason: str = ""
    message: str = ""
    preemptor: Preemptor | None = None
    preempted: bool = False
    identity: SkyPilotIdentity | None = None
    cluster_queue: str | None = None
    resource_version: str = ""
    object_kind: KindName = KindName.WORKLOAD
    pod: Mapping[str, Any] | None = None
    resuming: bool = False
    reset: ResetReason | None = None

    @property
    def namespace(self) -> str:
        return self.key.partition("/")[0]

    @property
    def name(self) -> str:
        return self.key.partition("/")[2]

    def to_json(self) -> dict[str, Any]:
        return {
            "sequence": self.sequence,
            "kind": self.kind.value,
            "workload": self.key,
            "uid": self.uid,
            "reason": self.reason,
            "message": self.message,
            "preemptor": self.preemptor.to_json() if self.preemptor else None,
            "preempted": self.preempted,
            "skypilot": self.identity.to_json() if self.identity else None,
            "clusterQueue": self.cluster_queue,
            "source": self.source.value,
            "observedAt": self.observed_at.isoformat(),
            "resourceVersion": self.resource_version,
        }


# --- reading a Workload -----------------------------------------------------------------


def condition(obj: Mapping[str, Any] | None, ctype: str) -> Mapping[str, Any] | None:
    """The condition of type ``ctype`` in ``status.conditions``, or None."""
    if obj is None:
        return None
    status = obj.get("status")
    if not isinstance(status, dict):
        return None
    for cond in status.get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def is_true(cond: Mapping[str, Any] | None) -> bool:
    return cond is not None and cond.get("status") == "True"


def _same(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(a.get(k) == b.get(k) for k in ("status", "reason", "message", "lastTransitionTime"))


def _became_true(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Status flipped to True (for conditions that are set once per phase)."""
    return is_true(new) and not is_true(old)


def _newly_true(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """True now, and not the same True condition as before (a repeated event counts)."""
    return is_true(new) and not (is_true(old) and _same(old, new))


def eviction_count(obj: Mapping[str, Any] | None, reason: str | None = None) -> int:
    """Total of ``status.schedulingStats.evictions[].count`` (of one reason, if given)."""
    if obj is None:
        return 0
    status = obj.get("status")
    stats = status.get("schedulingStats") if isinstance(status, dict) else None
    evictions = stats.get("evictions") if isinstance(stats, dict) else None
    total = 0
    for entry in evictions or []:
        if isinstance(entry, dict) and (reason is None or entry.get("reason") == reason):
            try:
                total += int(entry.get("count") or 0)
            except (TypeError, ValueError):
                continue
    return total


def preemption_count(obj: Mapping[str, Any] | None) -> int:
    """How often the Workload was preempted (``status.schedulingStats`` in Kueue
    ``apis/kueue/v1beta2/workload_types.go``)."""
    return eviction_count(obj, EVICTED_BY_PREEMPTION)


def is_preempted(obj: Mapping[str, Any] | None) -> bool:
    """``Evicted=True`` with reason ``Preempted``."""
    evicted = condition(obj, EVICTED)
    return is_true(evicted) and evicted is not None and evicted.get("reason") == EVICTED_BY_PREEMPTION


def _text(cond: Mapping[str, Any] | None, key: str) -> str:
    return str(cond.get(key) or "") if cond is not None else ""


def derive(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[Change]:
    """The transitions from state ``old`` to state ``new`` (None = absent), in order.

    ``old is None`` means the object is new to the mirror; ``new is None`` is not used (the
    store calls ``derive(old, last_state)`` and appends ``deleted`` itself).
    """
    changes: list[Change] = []
    if new is None:
        return changes
    if old is None:
        changes.append(Change(TransitionKind.CREATED))
    old_qr, new_qr = condition(old, QUOTA_RESERVED), condition(new, QUOTA_RESERVED)
    if _became_true(old_qr, new_qr):
        changes.append(Change(TransitionKind.QUOTA_RESERVED, _text(new_qr, "reason"), _text(new_qr, "message")))
    old_ad, new_ad = condition(old, ADMITTED), condition(new, ADMITTED)
    if _became_true(old_ad, new_ad):
        changes.append(Change(TransitionKind.ADMITTED, _text(new_ad, "reason"), _text(new_ad, "message")))
    old_ev, new_ev = condition(old, EVICTED), condition(new, EVICTED)
    old_pr, new_pr = condition(old, PREEMPTED), condition(new, PREEMPTED)
    evicted = _newly_true(old_ev, new_ev) or (
        is_true(new_ev) and old is not None and eviction_count(new) > eviction_count(old)
    )
    preempted = False
    if evicted:
        reason = _text(new_ev, "reason")
        changes.append(Change(TransitionKind.EVICTED, reason, _text(new_ev, "message")))
        preempted = reason == EVICTED_BY_PREEMPTION
    if preempted or _newly_true(old_pr, new_pr):
        message = _text(new_pr, "message") if is_true(new_pr) else _text(new_ev, "message")
        said = parse_preemptor(message)
        reason = preemption_reason(_text(new_pr, "reason") if is_true(new_pr) else None, said)
        changes.append(
            Change(
                TransitionKind.PREEMPTED,
                "" if reason is PreemptionReason.UNKNOWN else reason.value,
                message,
                preemptor_uid=said.workload_uid if said else None,
                preemptor_job_uid=said.job_uid if said else None,
                preemptor_cluster_queue=said.cluster_queue if said else None,
            )
        )
    old_rq, new_rq = condition(old, REQUEUED), condition(new, REQUEUED)
    if _newly_true(old_rq, new_rq):
        changes.append(Change(TransitionKind.REQUEUED, _text(new_rq, "reason"), _text(new_rq, "message")))
    old_fi, new_fi = condition(old, FINISHED), condition(new, FINISHED)
    if _became_true(old_fi, new_fi):
        changes.append(Change(TransitionKind.FINISHED, _text(new_fi, "reason"), _text(new_fi, "message")))
    if not changes and old is not None and _resource_version(old) != _resource_version(new):
        changes.append(Change(TransitionKind.UPDATED))
    return changes


def _resource_version(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("resourceVersion", "")) if isinstance(meta, dict) else ""

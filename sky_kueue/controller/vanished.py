"""What became of a job's Workload that vanished while the API server's state went back.

Why: after an etcd restore or a replaced cluster (:mod:`sky_kueue.mirror.server_state`) the
controller lists everything again, but a Workload preempted and collected in between is in
no list, and no watch can replay it any more. What remains is read instead:

* the durable history says which Workloads of the job the controller saw alive after the
  job's last observed end: their last phase change is ``queued`` or ``admitted``, with the
  episode's eviction count in the key (:mod:`sky_kueue.controller.keys`). The relist may
  already have recorded the relaunch that replaced one, so every such Workload counts, not
  only the newest;
* the pods of the job's group may still carry Kueue's ``TerminationTarget`` condition
  (reason ``WorkloadEvictedDueTo<Reason>``, and the preemptor in its message, Kueue
  ``pkg/controller/jobs/pod/pod_controller.go``): the Workload was evicted, and why. They
  speak of the newest vanished Workload only, and only while no other Workload holds the
  group (the caller passes none otherwise: they would be the relaunch's).

With a ``TerminationTarget`` the eviction is recorded as Kueue counted it: keyed
``<uid>#<count + 1>``, the key the Workload's own condition would have given, so seeing
the Workload again later records nothing twice. Without one the end is recorded as an
eviction of kind :data:`UNKNOWN_END_KIND` (keyed ``<uid>@unobserved``): visible in the
job's history, never counted toward aging, and reported by the caller (a warning and the
``unobserved_ends`` metric), never silently dropped. Kueue's own Events (``Preempted`` on
the Workload) would say more; reading them needs an RBAC grant the controller does not
hold, so they are not read.

In a history shared by several clusters' controllers (docs/operations.md, "One history
across clusters") only the Workloads seen alive on the controller's own cluster are judged
(the cluster recorded with each sighting, :attr:`Transition.cluster`): another cluster's
live Workload is in no list of this one, and is not gone. "Own" includes the cluster this
controller saw before its cluster was replaced under it (the identity its cursor was saved
with): those Workloads did vanish.

Pure: a history and plain pod dicts in, records out.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sky_kueue.controller.detection import pod_termination
from sky_kueue.controller.history import (
    EvictionRecord,
    JobHistory,
    PreemptionRecord,
    TransitionCause,
    same_cluster,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import JobIdentity
from sky_kueue.mirror.preemption_message import preemption_reason

#: The ``kind`` of the eviction recorded for a Workload whose end nobody observed.
UNKNOWN_END_KIND = "Unknown"
#: The reason recorded with it.
UNOBSERVED_END_REASON = "EndNotObserved"
#: The episode marker of such an end (its eviction count is unknown).
UNOBSERVED_MARKER = "unobserved"


class EndOutcome(str, enum.Enum):
    """How a vanished Workload ended, as far as what remains tells (the metric's label)."""

    PREEMPTED = "preempted"
    EVICTED = "evicted"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class VanishedEnd:
    """The record to write for one vanished Workload (exactly one of the two is set)."""

    identity: JobIdentity
    workload_uid: str
    outcome: EndOutcome
    preemption: PreemptionRecord | None = None
    eviction: EvictionRecord | None = None


_ALIVE = (TransitionCause.QUEUED, TransitionCause.ADMITTED)


def seen_alive(history: JobHistory, clusters: Collection[str] = ()) -> list[EpisodeKey]:
    """The episodes of the Workloads the history last saw waiting or running, after the job's
    last observed end (eviction, preemption, finish), oldest first; with ``clusters``, only
    those seen on one of them (or on a cluster not recorded)."""
    last: dict[str, tuple[EpisodeKey | None, float, str | None]] = {}
    for transition in history.ordered_transitions():
        if transition.cause not in _ALIVE:
            # An end: its Workload, and any seen alive only before it, are accounted for.
            last = {
                uid: seen for uid, seen in last.items() if uid != transition.workload_uid and seen[1] >= transition.at
            }
            continue
        last.pop(transition.workload_uid, None)  # re-inserted last: the newest sight
        try:
            episode: EpisodeKey | None = EpisodeKey.parse(transition.key.rpartition("/")[0])
        except ValueError:
            episode = None
        last[transition.workload_uid] = (episode, transition.at, transition.cluster)
    return [episode for episode, _, seen_on in last.values() if episode is not None and same_cluster(seen_on, clusters)]


def vanished_ends(
    history: JobHistory,
    listed_uids: Container[str],
    pods: Sequence[Mapping[str, Any]],
    *,
    at: float,
    detail: str,
    clusters: Collection[str] = (),
) -> list[VanishedEnd]:
    """The records of how the job's Workloads seen alive ended, for those in no list now.

    Args:
        history: the job's durable history.
        listed_uids: the UIDs of the Workloads the server holds now.
        clusters: the identities of the cluster listed: its own now, and the one the
            controller saw before, when the cluster was replaced under it (empty: unknown,
            every sighting counts).
        pods: the pods of the job's group as listed now, when no Workload holds the group.
        at: when the ends were noticed (used when no pod says when it happened).
        detail: why the ends were not observed (kept in the records' messages).
    """
    identity = history.identity
    if identity is None:
        return []
    vanished = [episode for episode in seen_alive(history, clusters) if episode.workload_uid not in listed_uids]
    return [
        _end(identity, episode, pods if index == len(vanished) - 1 else (), at, detail)
        for index, episode in enumerate(vanished)
    ]


def _end(
    identity: JobIdentity, episode: EpisodeKey, pods: Sequence[Mapping[str, Any]], at: float, detail: str
) -> VanishedEnd:
    uid = episode.workload_uid
    name = identity.pod_group or ""
    signals = [s for s in (pod_termination(p) for p in pods) if s is not None]
    if not signals:
        key = EpisodeKey(uid, None, UNOBSERVED_MARKER)
        record = EvictionRecord(key, at, name, UNOBSERVED_END_REASON, UNKNOWN_END_KIND, detail)
        return VanishedEnd(identity, uid, EndOutcome.UNKNOWN, eviction=record)
    signal = min(signals, key=lambda s: (s.at is None, s.at or 0.0, s.pod_name))
    if episode.evictions is not None:
        key = EpisodeKey(uid, episode.evictions + 1)
    else:
        key = EpisodeKey(uid, None, UNOBSERVED_MARKER)
    when = signal.at if signal.at is not None else at
    if signal.kind.is_preemption:
        preemptor = signal.preemptor
        preemption = PreemptionRecord(
            key=key,
            at=when,
            workload_name=name,
            reason=preemption_reason(None, preemptor).value,
            preemptor_uid=preemptor.workload_uid if preemptor else None,
            preemptor_job_uid=preemptor.job_uid if preemptor else None,
            preemptor_priority=preemptor.class_priority if preemptor else None,
            message=signal.message,
        )
        return VanishedEnd(identity, uid, EndOutcome.PREEMPTED, preemption=preemption)
    eviction = EvictionRecord(key, when, name, signal.evicted_reason, signal.kind.value, signal.message)
    return VanishedEnd(identity, uid, EndOutcome.EVICTED, eviction=eviction)

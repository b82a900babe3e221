"""What Kueue's preemption messages say about the preemptor: read in one place.

Kueue writes who preempted a Workload only as text: the ``Evicted``/``Preempted``
conditions say "Preempted to accommodate a workload (UID: U, JobUID: J) due to <human
reason>; preemptor path: /cohort/cq; preemptee path: ..." (Kueue
``pkg/scheduler/preemption/preemption.go``, ``preemptionMessage`` and
``HumanReadablePreemptionReasons``), and the Event appends "; preemptor effective priority:
P (base: B, boost: X)". Older releases wrote "(UID: U)" only; a pod's ``TerminationTarget``
condition repeats the message. ``UNKNOWN`` values (the JobUID of a pod-group preemptor)
become None. The mirror's transitions and the controller's detection both read it here.

Pure: strings in, frozen values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum


class PreemptionReason(str, Enum):
    """The ``Preempted`` condition's reason: where the preemptor sits."""

    IN_CLUSTER_QUEUE = "InClusterQueue"
    IN_COHORT_RECLAMATION = "InCohortReclamation"
    IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
    IN_COHORT_FAIR_SHARING = "InCohortFairSharing"
    UNKNOWN = "Unknown"


#: Kueue's ``HumanReadablePreemptionReasons``, to recover the reason from a message when only
#: the text is available (a pod's condition, an ``Evicted`` condition without ``Preempted``).
HUMAN_PREEMPTION_REASONS: Mapping[str, PreemptionReason] = {
    "prioritization in the ClusterQueue": PreemptionReason.IN_CLUSTER_QUEUE,
    "reclamation within the cohort": PreemptionReason.IN_COHORT_RECLAMATION,
    "Fair Sharing within the cohort": PreemptionReason.IN_COHORT_FAIR_SHARING,
    "reclamation within the cohort while borrowing": PreemptionReason.IN_COHORT_RECLAIM_WHILE_BORROWING,
}

_UNKNOWN = "UNKNOWN"
_PREEMPTOR_RE = re.compile(
    r"Preempted to accommodate a workload \(UID: (?P<uid>[^,)\s]+)(?:, JobUID: (?P<job>[^)\s]+))?\)"
    r"(?: due to (?P<human>[^;]+))?"
)
_PREEMPTOR_PATH_RE = re.compile(r"preemptor path: (?P<path>[^;]+)")
_PREEMPTOR_PRIORITY_RE = re.compile(
    r"preemptor effective priority: (?P<eff>-?\d+)(?: \(base: (?P<base>-?\d+), boost: (?P<boost>-?\d+)\))?"
)


@dataclass(frozen=True)
class PreemptionMessage:
    """What a preemption message says about the workload that caused a preemption."""

    workload_uid: str | None = None
    job_uid: str | None = None
    #: ``/cohort/.../clusterqueue`` of the preemptor.
    path: str | None = None
    human_reason: str | None = None
    effective_priority: int | None = None
    base_priority: int | None = None
    boost: int | None = None

    @property
    def class_priority(self) -> int | None:
        """The preemptor's priority without any boost (its class), when the text had it."""
        return self.base_priority if self.base_priority is not None else self.effective_priority

    @property
    def cluster_queue(self) -> str | None:
        """The preemptor's ClusterQueue: the last element of its path."""
        if not self.path:
            return None
        return self.path.strip().rstrip("/").rsplit("/", 1)[-1] or None

    @property
    def reason(self) -> PreemptionReason | None:
        """The reason recovered from the human text (None if the text has none we know)."""
        return HUMAN_PREEMPTION_REASONS.get((self.human_reason or "").strip())

    def merged(self, other: PreemptionMessage | None) -> PreemptionMessage:
        """This message, with what it lacks taken from ``other`` (another copy of it)."""
        if other is None:
            return self

        def pick(mine: object, theirs: object) -> object:
            return mine if mine is not None else theirs

        return PreemptionMessage(
            workload_uid=self.workload_uid or other.workload_uid,
            job_uid=self.job_uid or other.job_uid,
            path=self.path or other.path,
            human_reason=self.human_reason or other.human_reason,
            effective_priority=pick(self.effective_priority, other.effective_priority),  # type: ignore[arg-type]
            base_priority=pick(self.base_priority, other.base_priority),  # type: ignore[arg-type]
            boost=pick(self.boost, other.boost),  # type: ignore[arg-type]
        )


def parse_preemptor(message: str) -> PreemptionMessage | None:
    """Reads the preemptor out of a preemption message (condition, event or pod condition).

    Returns:
        What the message says, or None when it is not a preemption message.
    """
    match = _PREEMPTOR_RE.search(message)
    if match is None:
        return None

    def known(value: str | None) -> str | None:
        return None if value is None or value.strip() in ("", _UNKNOWN) else value.strip()

    path = _PREEMPTOR_PATH_RE.search(message)
    priority = _PREEMPTOR_PRIORITY_RE.search(message)
    return PreemptionMessage(
        workload_uid=known(match.group("uid")),
        job_uid=known(match.group("job")),
        path=known(path.group("path")) if path else None,
        human_reason=known(match.group("human")),
        effective_priority=int(priority.group("eff")) if priority else None,
        base_priority=int(priority.group("base")) if priority and priority.group("base") else None,
        boost=int(priority.group("boost")) if priority and priority.group("boost") else None,
    )


def preemption_reason(condition_reason: str | None, message: PreemptionMessage | None) -> PreemptionReason:
    """The ``Preempted`` condition's reason when it has one we know, else the message's."""
    if condition_reason:
        try:
            return PreemptionReason(condition_reason)
        except ValueError:
            pass
    found = message.reason if message is not None else None
    return found or PreemptionReason.UNKNOWN

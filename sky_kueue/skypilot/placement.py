"""Which of a team's clusters a task goes to first: rank the clusters by predicted admission.

Why rank instead of trying them in turn: SkyPilot 0.14.1 walks ``resources.ordered`` front to
back and moves to the next Kubernetes context only after ``kubernetes.kueue.admission_timeout``
expires while Kueue still gates the pods (``sky/provision/kubernetes/instance.py``, the
admission wait), 24 h by default; the order in ``allowed_contexts`` is blind to queues.
Kueue's own answer for many clusters, MultiKueue, dispatches a copy of the Workload to every
worker cluster and keeps the first that admits (``pkg/controller/admissionchecks/multikueue``),
which needs a manager cluster. sky-kueue already has each cluster's Kueue state and an exact
model of its scheduler, so it can put the cluster that admits soonest first.

The order, best first (ties keep the admin's order of ``teams.<team>.clusters``):

1. admitted now, without preempting anyone;
2. admitted after preempting: fewest victims, then the lowest-priority victims (preempting
   costs someone else their progress, so the cheaper preemption wins);
3. pending, by the expected wait of the ETA model (``sky_kueue.kueue.eta``); a wait without
   an estimate after every estimated one;
4. no prediction from a view that answers (offline description, model failure);
5. no prediction because the cluster's mirror has not synced in time: still a candidate,
   never silently dropped;

and left out of ``ordered``, each with a note: clusters where the task can never fit, clusters
that cannot be reached (unless no cluster can be reached: then the offline answers stand in,
as they do for a single cluster), and clusters excluded by a check (missing queue, a class
the team may not use there).

Pure: this module sees verdicts, never a cluster.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from sky_kueue.skypilot.config import TeamCluster
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict
from sky_kueue.skypilot.view import ContextHealth


class Standing(enum.Enum):
    """Where a cluster ends up after ranking."""

    #: In ``resources.ordered`` at its rank.
    RANKED = "ranked"
    #: Left out: the task can never fit its ClusterQueue there.
    NEVER_FITS = "never-fits"
    #: Left out: the cluster cannot be reached.
    UNREACHABLE = "unreachable"
    #: Left out by a check (queue missing, class not allowed there, ...).
    EXCLUDED = "excluded"


@dataclass(frozen=True)
class ClusterAssessment:
    """What the decision learnt about one of the team's clusters.

    Attributes:
        cluster: the team's queue on that cluster.
        verdict: the predicted admission (UNKNOWN when there is none).
        health: how current the cluster's view is.
        health_detail: why it is not ``READY``, if so.
        excluded_because: set when a check rules the cluster out (the reason, one sentence).
    """

    cluster: TeamCluster
    verdict: AdmissionVerdict
    health: ContextHealth = ContextHealth.READY
    health_detail: str = ""
    excluded_because: str | None = None


@dataclass(frozen=True)
class RankedCluster:
    """One cluster's place in the ranking.

    Attributes:
        cluster: the team's queue on that cluster.
        standing: ranked, or why it was left out.
        verdict: the prediction it was ranked by.
        reason: one sentence: why it is where it is.
    """

    cluster: TeamCluster
    standing: Standing
    verdict: AdmissionVerdict
    reason: str

    @property
    def outcome(self) -> str:
        """The outcome shown to users: the verdict's, or why the cluster was left out."""
        if self.standing in (Standing.UNREACHABLE, Standing.EXCLUDED):
            return self.standing.value
        return self.verdict.outcome.value

    @property
    def context_name(self) -> str:
        return self.cluster.context or "(current context)"


@dataclass(frozen=True)
class Ranking:
    """The ranking of a team's clusters for one task.

    Attributes:
        clusters: every cluster, ranked ones first in rank order, then the ones left out.
    """

    clusters: tuple[RankedCluster, ...]

    @property
    def ranked(self) -> tuple[RankedCluster, ...]:
        """The clusters that go into ``resources.ordered``, best first."""
        return tuple(c for c in self.clusters if c.standing is Standing.RANKED)

    @property
    def notes(self) -> tuple[str, ...]:
        """One note per cluster left out."""
        return tuple(
            f"context {c.context_name} skipped: {c.reason}" for c in self.clusters if c.standing is not Standing.RANKED
        )


#: Rank tiers (lower is better).
_TIER_ADMIT_NOW = 0
_TIER_ADMIT_AFTER_PREEMPTION = 1
_TIER_WAIT_ESTIMATED = 2
_TIER_WAIT = 3
_TIER_UNKNOWN = 4
_TIER_NOT_SYNCED = 5


def _sort_key(assessment: ClusterAssessment) -> tuple[int, int, int]:
    verdict = assessment.verdict
    if assessment.health is ContextHealth.NOT_SYNCED:
        return (_TIER_NOT_SYNCED, 0, 0)
    outcome = verdict.outcome
    if outcome is AdmissionOutcome.ADMIT_NOW:
        return (_TIER_ADMIT_NOW, 0, 0)
    if outcome is AdmissionOutcome.ADMIT_AFTER_PREEMPTION:
        return (_TIER_ADMIT_AFTER_PREEMPTION, len(verdict.preempts), verdict.preempted_priority or 0)
    if outcome is AdmissionOutcome.WAIT and verdict.expected_wait_seconds is not None:
        return (_TIER_WAIT_ESTIMATED, verdict.expected_wait_seconds, 0)
    if outcome is AdmissionOutcome.WAIT:
        return (_TIER_WAIT, 0, 0)
    return (_TIER_UNKNOWN, 0, 0)


def _reason(assessment: ClusterAssessment) -> str:
    verdict = assessment.verdict
    if assessment.health is ContextHealth.NOT_SYNCED:
        return f"no prediction: {assessment.health_detail or 'its mirror has not synced'}"
    if verdict.outcome is AdmissionOutcome.WAIT and verdict.expected_wait_seconds is not None:
        basis = f" ({verdict.expected_wait_basis})" if verdict.expected_wait_basis else ""
        return f"expected wait {verdict.expected_wait_seconds}s{basis}: {verdict.reason}"
    return verdict.reason


def rank(assessments: Sequence[ClusterAssessment]) -> Ranking:
    """Rank a team's clusters for one task (see the module docstring for the order).

    Args:
        assessments: one per cluster, in the admin's order.

    Returns:
        The ranking; its ``ranked`` part may be empty (nothing can ever fit, or every
        cluster was excluded by a check).
    """
    usable = [a for a in assessments if a.excluded_because is None]
    reachable = [a for a in usable if a.health is not ContextHealth.UNREACHABLE]
    # With no cluster reachable, the offline answers stand in (a single cluster's behaviour).
    drop_unreachable = bool(reachable)
    candidates: list[ClusterAssessment] = []
    left_out: list[RankedCluster] = []
    for assessment in assessments:
        if assessment.excluded_because is not None:
            left_out.append(
                RankedCluster(assessment.cluster, Standing.EXCLUDED, assessment.verdict, assessment.excluded_because)
            )
        elif drop_unreachable and assessment.health is ContextHealth.UNREACHABLE:
            detail = assessment.health_detail or "the cluster cannot be reached"
            left_out.append(RankedCluster(assessment.cluster, Standing.UNREACHABLE, assessment.verdict, detail))
        elif assessment.verdict.outcome is AdmissionOutcome.NEVER_FITS:
            left_out.append(
                RankedCluster(
                    assessment.cluster,
                    Standing.NEVER_FITS,
                    assessment.verdict,
                    f"the task can never fit there: {assessment.verdict.reason}",
                )
            )
        else:
            candidates.append(assessment)
    ordered = sorted(candidates, key=_sort_key)  # stable: ties keep the admin's order
    ranked = [RankedCluster(a.cluster, Standing.RANKED, a.verdict, _reason(a)) for a in ordered]
    return Ranking(tuple(ranked + left_out))


#: The ranking of a placement that was not ranked (built by hand, e.g. in tests).
NO_RANKING = Ranking(())

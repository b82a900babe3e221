"""A prediction of what Kueue will do with a hypothetical workload, as the policy needs it.

Why a separate, small type: the admission predictor belongs to the Kueue model
(``sky_kueue.kueue.predictor``), which knows nothing about SkyPilot. The policy, the launch
CLI and the cloud-burst rule only need the outcome class, who would be preempted and an
expected wait. ``cluster_view`` translates the model's answer into this type, so the burst
rule can be tested with hand-made verdicts and the model can change without touching it.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class AdmissionOutcome(enum.Enum):
    """What Kueue would do with the workload if it were submitted now."""

    #: Fits in the ClusterQueue's available quota (borrowing included) right now.
    ADMIT_NOW = "admit-now"
    #: Fits once the listed lower-priority workloads are preempted.
    ADMIT_AFTER_PREEMPTION = "admit-after-preemption"
    #: Must wait for quota to be released; ``expected_wait_seconds`` may estimate how long.
    WAIT = "wait"
    #: Larger than the ClusterQueue could ever hold (Kueue: ``ExceedsMaxQuota``/``NoFit``).
    NEVER_FITS = "never-fits"
    #: No prediction is available (no cluster view, or the model could not decide).
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class AdmissionVerdict:
    """A predicted admission.

    Attributes:
        outcome: the outcome class.
        reason: one human-readable sentence explaining the outcome.
        preempts: ``namespace/name`` of the Workloads that would be preempted.
        expected_wait_seconds: estimated wait for ``WAIT`` (None when unknown).
        preempted_priority: the highest priority among ``preempts`` (None when unknown);
            placement prefers clusters whose victims matter least.
        expected_wait_basis: where the run times behind ``expected_wait_seconds`` came from
            (``declared``, ``history of 7 runs``; empty when none were needed).
    """

    outcome: AdmissionOutcome
    reason: str = ""
    preempts: tuple[str, ...] = ()
    expected_wait_seconds: int | None = None
    preempted_priority: int | None = None
    expected_wait_basis: str = ""

    @property
    def admits(self) -> bool:
        """True when the workload would run without waiting for quota to free up."""
        return self.outcome in (AdmissionOutcome.ADMIT_NOW, AdmissionOutcome.ADMIT_AFTER_PREEMPTION)


#: The verdict of a view that cannot predict.
UNKNOWN_VERDICT = AdmissionVerdict(AdmissionOutcome.UNKNOWN, "no admission prediction is available")

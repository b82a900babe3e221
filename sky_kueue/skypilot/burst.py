"""Cloud burst: keep a job on Kubernetes, give it a cloud fallback, or send it to the clouds.

Why it is decided at submission: SkyPilot 0.14.1 fails over from a Kubernetes context to the
next ``ordered:`` candidate only after ``kubernetes.kueue.admission_timeout`` expires while
Kueue still gates the pods (24 h by default; SkyPilot 0.14.1 ``sky/backends/cloud_vm_ray_backend.py`` failover and
``kueue.admission_timeout``). The policy knows the
team's tolerance for waiting and, when a cluster view is available, a prediction of Kueue's
admission, so it chooses up front:

* admitted now, or after preempting lower-priority work -> stay on Kubernetes;
* predicted to wait no longer than the team's limit -> stay on Kubernetes;
* predicted to wait longer, or no prediction at all -> ``ordered: [the Kubernetes context,
  then the team's clouds]`` with ``admission_timeout`` = the limit, so SkyPilot gives up on
  the queue exactly when the team would rather pay for a cloud;
* can never fit the ClusterQueue -> skip Kubernetes and use the clouds directly.

Teams without burst settings (or tasks that opted out) always stay on Kubernetes; a job
that can never fit is then rejected by the policy instead.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sky_kueue.skypilot.config import BurstSettings
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict


class BurstAction(enum.Enum):
    """How the task's resources are rewritten."""

    KEEP_KUBERNETES = "keep-kubernetes"
    ADD_CLOUD_FALLBACK = "add-cloud-fallback"
    SKIP_KUBERNETES = "skip-kubernetes"


@dataclass(frozen=True)
class BurstPlan:
    """The burst decision for one task.

    Attributes:
        action: what to do with the resources.
        admission_timeout_seconds: value for ``kubernetes.kueue.admission_timeout``.
        clouds: the clouds to add (fallback) or to use instead of Kubernetes (skip).
        message: one sentence explaining the choice.
    """

    action: BurstAction
    admission_timeout_seconds: int
    clouds: tuple[str, ...] = ()
    message: str = ""


def plan_burst(
    verdict: AdmissionVerdict,
    burst: BurstSettings | None,
    default_timeout_seconds: int,
) -> BurstPlan:
    """Choose the burst action for a task from its predicted admission.

    Args:
        verdict: predicted admission on the team's ClusterQueue.
        burst: the team's burst settings, or None when this task must not burst.
        default_timeout_seconds: the team's admission timeout for Kubernetes-only jobs.

    Returns:
        The plan. With ``burst`` None the action is always ``KEEP_KUBERNETES``; the caller
        decides what to do with a job that can never fit.
    """
    keep = BurstPlan(BurstAction.KEEP_KUBERNETES, default_timeout_seconds)
    if burst is None:
        return keep
    limit = burst.max_queue_wait_seconds
    clouds = tuple(burst.clouds)
    outcome = verdict.outcome
    if outcome is AdmissionOutcome.ADMIT_NOW:
        return BurstPlan(BurstAction.KEEP_KUBERNETES, default_timeout_seconds, (), "Kueue would admit it now")
    if outcome is AdmissionOutcome.ADMIT_AFTER_PREEMPTION:
        victims = f" ({', '.join(verdict.preempts)})" if verdict.preempts else ""
        return BurstPlan(
            BurstAction.KEEP_KUBERNETES,
            default_timeout_seconds,
            (),
            f"Kueue would admit it after preempting lower-priority work{victims}",
        )
    if outcome is AdmissionOutcome.NEVER_FITS:
        why = f": {verdict.reason}" if verdict.reason else ""
        return BurstPlan(
            BurstAction.SKIP_KUBERNETES,
            default_timeout_seconds,
            clouds,
            f"it can never fit the team's ClusterQueue{why}; running on {', '.join(clouds)} instead",
        )
    eta = verdict.expected_wait_seconds
    if outcome is AdmissionOutcome.WAIT and eta is not None and eta <= limit:
        return BurstPlan(
            BurstAction.KEEP_KUBERNETES,
            default_timeout_seconds,
            (),
            f"expected wait {eta}s is within the team's limit of {limit}s",
        )
    if outcome is AdmissionOutcome.WAIT:
        expected = f"expected wait {eta}s" if eta is not None else "it would wait for quota"
        why = f"{expected} exceeds the team's limit of {limit}s"
    else:
        why = "no admission prediction is available"
    return BurstPlan(
        BurstAction.ADD_CLOUD_FALLBACK,
        limit,
        clouds,
        f"{why}; waiting at most {limit}s in Kueue, then trying {', '.join(clouds)}",
    )

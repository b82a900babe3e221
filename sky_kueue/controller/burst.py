"""When to give up on the on-prem queue and mark a job for cloud fallback ("burst").

Why: aging bounds how long a preempted job starves, but a cap exists on purpose (a dev job
must not outrank prod), so a job can still lose repeatedly. SkyPilot can fail over from
Kubernetes to a cloud within one launch when the task lists both (``ordered:`` resources
plus ``kubernetes.kueue.admission_timeout``; SkyPilot 0.14.1 ``sky/backends/cloud_vm_ray_backend.py`` failover and
``kueue.admission_timeout``). Two triggers:

* the job was preempted ``burst_after_preemptions`` times since its last successful run (a
  run of at least ``decay_after_run_seconds``, the same notion the aging decay uses);
* the predicted wait (from the admission predictor) exceeds the team's limit
  (``burst_max_predicted_wait_seconds``, or a per-team value passed by the caller).

With a predicted-wait gate (:mod:`sky_kueue.controller.predicted_burst`, the team's
``burst.cloud_startup_seconds`` and ``burst.predicted_wait_margin_seconds``), the first trigger
bursts only when the predicted on-prem wait also exceeds the cloud start-up plus the margin;
otherwise the job stays in Kueue (reason ``predicted-on-prem-wait`` when it bursts). The gate
keeps a job at most ``burst.predicted_wait_gate_max_stays`` times; at the next due preemption
it bursts whatever the prediction (reason ``predicted-wait-gate-max-stays``).

The verdict is pure; the controller records it once (``HistoryStore.record_burst``) and
surfaces it. Rewriting the task for the cloud is the SkyPilot front door's job: at the
relaunch, the ``KUEUE_AGING`` recovery strategy asks :func:`relaunch_burst` and keeps only
the candidates :func:`is_burst_target` accepts (a public cloud, or a Kubernetes context the
team names as a burst target).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from sky_kueue.controller.aging.settings import AgingSettings
from sky_kueue.controller.history import BurstRecord, JobHistory, Phase
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, decide_predicted_burst, gated_verdict


class BurstReason(str, Enum):
    PREEMPTIONS = "preemptions"
    PREDICTED_WAIT = "predicted-wait"
    #: Due a burst by its preemptions, and the predicted on-prem wait exceeds the cloud start-up
    #: plus the margin (the predicted-wait gate).
    PREDICTED_ON_PREM_WAIT = "predicted-on-prem-wait"
    #: Due a burst by its preemptions, and the gate already kept it on-prem as often as the
    #: team allows (``burst.predicted_wait_gate_max_stays``): bursts whatever the prediction.
    PREDICTED_WAIT_GATE_MAX_STAYS = "predicted-wait-gate-max-stays"


@dataclass(frozen=True)
class BurstVerdict:
    reason: BurstReason
    detail: str
    preemptions: int
    predicted_wait_seconds: float | None

    def record(self, now: float) -> BurstRecord:
        return BurstRecord(
            decided_at=now,
            reason=self.reason.value,
            detail=self.detail,
            preemptions=self.preemptions,
            predicted_wait_seconds=self.predicted_wait_seconds,
        )


def last_successful_run_end(history: JobHistory, settings: AgingSettings, now: float) -> float | None:
    """When the job last completed ``decay_after_run_seconds`` of running, if ever."""
    latest: float | None = None
    for interval in history.intervals(now):
        if interval.phase is Phase.RUNNING and interval.duration >= settings.decay_after_run_seconds:
            latest = interval.start + settings.decay_after_run_seconds
    return latest


def preemptions_since_success(history: JobHistory, settings: AgingSettings, now: float) -> int:
    since = last_successful_run_end(history, settings, now)
    return sum(1 for p in history.preemptions if p.at <= now and (since is None or p.at > since))


def decide_burst(
    history: JobHistory,
    settings: AgingSettings,
    now: float,
    *,
    predicted_wait_seconds: float | None = None,
    wait_limit_seconds: float | None = None,
    gate: PredictedBurstSettings | None = None,
) -> BurstVerdict | None:
    """Whether the job should be marked for cloud fallback now.

    Args:
        history: the job's history.
        settings: ``burst_after_preemptions`` and ``burst_max_predicted_wait_seconds``.
        now: evaluation time.
        predicted_wait_seconds: the admission predictor's estimate for the pending Workload
            (None: unknown; ``math.inf``: beyond the predictor's horizon).
        wait_limit_seconds: the team's limit; overrides the settings' limit when given.
        gate: the team's predicted-wait gate on the preemption trigger (None: no gate).
            With a gate an unknown prediction keeps the job in Kueue.

    Returns:
        The verdict, or None when no trigger fires (or bursting is not configured).
    """
    count = preemptions_since_success(history, settings, now)
    threshold = settings.burst_after_preemptions
    if threshold is not None and count >= threshold and gate is not None:
        gated = decide_predicted_burst(count, threshold, predicted_wait_seconds, gate)
        if gated.bursts:
            reason = (
                BurstReason.PREDICTED_WAIT_GATE_MAX_STAYS
                if gated.max_stays_reached
                else BurstReason.PREDICTED_ON_PREM_WAIT
            )
            return BurstVerdict(reason, gated.reason, count, predicted_wait_seconds)
    elif threshold is not None and count >= threshold:
        return BurstVerdict(
            BurstReason.PREEMPTIONS,
            f"preempted {count} times since the last successful run (burst_after_preemptions {threshold})",
            count,
            predicted_wait_seconds,
        )
    limit = wait_limit_seconds if wait_limit_seconds is not None else settings.burst_max_predicted_wait_seconds
    if limit is not None and predicted_wait_seconds is not None and predicted_wait_seconds > limit:
        return BurstVerdict(
            BurstReason.PREDICTED_WAIT,
            f"predicted wait {predicted_wait_seconds:.0f}s exceeds the limit {limit:.0f}s",
            count,
            predicted_wait_seconds,
        )
    return None


def relaunch_burst(
    history: JobHistory,
    settings: AgingSettings,
    now: float,
    *,
    enabled: bool = True,
    source: str = "controller history",
    gate: PredictedBurstSettings | None = None,
) -> tuple[bool, str]:
    """Whether a relaunch about to happen should go to the team's burst targets, and why.

    This is the question SkyPilot's recovery asks through the ``KUEUE_AGING`` strategy
    (:mod:`sky_kueue.controller.skypilot_plugin`) just before it relaunches a preempted job:
    yes once the controller marked the job (``history.burst``), or once the job was preempted
    ``burst_after_preemptions`` times since its last successful run. The predicted-wait
    trigger needs the admission predictor and is the controller's to apply, not the relaunch's.

    Args:
        history: the job's history (the controller's, or the strategy's own count).
        settings: the aging settings of ``sky-kueue.yaml``.
        now: the relaunch time.
        enabled: ``aging.enabled``; when false nothing bursts.
        source: where ``history`` came from, for the reason.
        gate: the team's predicted-wait gate: the preemption count alone then bursts only once
            the gate kept the job ``gate.max_stays`` times (that needs no prediction); otherwise
            only the controller's mark does (no prediction exists at the relaunch).
    """
    if not enabled or settings.burst_after_preemptions is None:
        return False, "aging is disabled or burst_after_preemptions is not set"
    if history.burst is not None:
        return True, f"the controller marked it for a cloud burst: {history.burst.detail}"
    if gate is not None:
        count = preemptions_since_success(history, settings, now)
        # No prediction exists at the relaunch: only the gate's bound can burst it here.
        bounded = gated_verdict(count, settings.burst_after_preemptions, gate, lambda: None)
        if bounded is not None and bounded.max_stays_reached:
            return True, f"{bounded.reason} ({source})"
        return False, "the predicted-wait gate decides (the controller has not marked it for a cloud burst)"
    verdict = decide_burst(history, settings, now)  # no predicted wait: preemptions only
    if verdict is None:
        return False, f"below burst_after_preemptions {settings.burst_after_preemptions} ({source})"
    return True, f"{verdict.detail} ({source})"


#: SkyPilot's cloud names for Kubernetes (``k8s`` is the infra alias of ``kubernetes``).
KUBERNETES_CLOUD_NAMES = frozenset({"kubernetes", "k8s"})


def is_burst_target(cloud: str | None, region: str | None, burst_contexts: frozenset[str]) -> bool:
    """Whether a resource candidate on ``cloud``/``region`` is somewhere a burst may go.

    A named cloud other than Kubernetes is; a Kubernetes candidate is only when its context
    (SkyPilot's region for Kubernetes) is one a team lists as a burst target
    (``teams.<t>.burst.clouds: [k8s/<context>]``), never the team's own Kueue cluster. A
    candidate without a cloud is not: SkyPilot's optimizer may place it on Kubernetes.
    """
    if cloud is None:
        return False
    if cloud.lower() in KUBERNETES_CLOUD_NAMES:
        return region is not None and region in burst_contexts
    return True

"""Burst only when on-prem would be slower than the cloud: the predictor-gated burst decision.

Why: bursting every relaunch at a job's first preemption ends relaunch starvation, but it also
sends to the cloud work the on-prem cluster would have run a few minutes later. On the reclaim
storms that cost about one on-prem GPU-hour per burst GPU-hour (benchmarks/README.md, "burst").
A cloud node is not instant either (``cloud_startup_seconds``: provisioning, SkyPilot's runtime,
the image pull). So once a job is due a burst (``burst_after_preemptions`` preemptions since its
last successful run, :func:`sky_kueue.controller.burst.preemptions_since_success`), the
admission predictor is asked how long its relaunch would wait on-prem, and the job bursts only
when that wait exceeds the cloud start-up plus a margin. Otherwise it stays in Kueue, where the
relaunch's admission timeout (``burst_max_predicted_wait_seconds``) still sends it to the cloud
if the prediction was wrong.

Which wait (:class:`PredictedWaitKind`): ``safe`` is the wait until Kueue admits the relaunch
within its ClusterQueue's nominal quota, where the owner's return cannot reclaim it (the
safe-relaunch rule's notion, :mod:`sky_kueue.controller.aging.safe_relaunch`); ``any`` is the
wait for any admission, borrowed or not (the default, see :data:`DEFAULT_PREDICTED_WAIT_KIND`).

A prediction that does not exist has one defined meaning each:

* **unknown** (``None``: some run time the wait depends on is not known, or the model cannot
  read the cluster): the job **stays**. Nothing says the cloud is faster, and the relaunch's
  admission timeout bounds how long it can wait on-prem.
* **beyond the predictor's horizon** (``math.inf``): the job **bursts**, as any wait above
  the threshold does.

How often the gate may keep a job (``max_stays``, ``teams.<t>.burst.predicted_wait_gate_max_stays``):
the compared wait is for *any* admission, so a job kept on-prem may be admitted into borrowed
quota, reclaimed, kept again, without bound (measured: on the reclaim storm the gated job's most
preemptions exceeded SkyPilot alone's). The stays so far are counted from the history: every
preemption since the last successful run from ``burst_after_preemptions`` on is one the gate was
asked about, and each earlier one it was asked about kept the job (a burst ends the count, the
job leaves Kueue), so ``preemptions - burst_after_preemptions`` is exact and survives a
controller restart without new state. Once it reaches ``max_stays`` the job bursts whatever the
prediction, unknown included.

Pure: no I/O, no clock. One implementation for the controller (:mod:`sky_kueue.controller.hold`,
:meth:`sky_kueue.controller.engine.ResubmissionEngine.reconcile`) and the simulator
(``rank+predicted``, :mod:`sky_kueue.sim.policies`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

#: Seconds from a burst decision to the job running in the cloud, unless a team says otherwise
#: (``teams.<t>.burst.cloud_startup_seconds``): the simulator's default start-up (a fresh GPU
#: node, SkyPilot's runtime and a multi-GB training image), see ``sky_kueue.sim.simulator``.
DEFAULT_CLOUD_STARTUP_SECONDS = 600.0
#: How much longer than the cloud start-up the predicted on-prem wait must be before a job
#: bursts (``teams.<t>.burst.predicted_wait_margin_seconds``). Chosen by measurement
#: (``benchmarks/anti_starvation.py``, burst rows ``rank+predicted``, seeds 0-4; see
#: benchmarks/README.md "burst" for the margins tried).
#: 300 s kept the p99 wait after preemption at least 3x under the baseline's on 9 of 10 storm
#: runs; 900 s and 1,800 s (with a 3,600-s relaunch timeout) lost less on-prem goodput
#: but kept the 3x on 6 and 5 of 10.
DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS = 300.0
#: How many due preemptions the gate may answer "stay" before it bursts whatever the prediction
#: (``teams.<t>.burst.predicted_wait_gate_max_stays``; None: unbounded). 1: the gate may keep a
#: job on-prem at its first due preemption; at the next one the job bursts. Chosen by
#: measurement (``benchmarks/anti_starvation.py``, burst rows ``rank+predicted``, seeds 0-4, the
#: storms and ``dev-starvation``; benchmarks/README.md "burst"): unbounded, jobs kept on-prem
#: were reclaimed up to 10 times, more than SkyPilot alone on 2 runs; with 1 the most is 2-3
#: (baseline 4-17) and the p99 wait after preemption is 3.9-16.1x under the baseline's on all
#: 15 runs, keeping about three quarters of the goodput the unbounded gate saved over bursting
#: at once.
DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS: int | None = 1


class PredictedWaitKind(str, Enum):
    """Which on-prem wait the decision compares with the cloud start-up."""

    #: Until Kueue admits the relaunch within nominal quota (not reclaimable).
    SAFE = "safe"
    #: Until Kueue admits the relaunch at all (possibly into borrowed quota).
    ANY = "any"


#: The wait the controller and ``rank+predicted`` compare, unless told otherwise. Measured: on the
#: storms and ``dev-starvation`` a borrowing team's usage stays above its nominal quota, so a
#: safe place is almost never predicted and ``safe`` bursts nearly every relaunch (on-prem
#: goodput 3.5-10.1 points under the baseline, as bursting at once); ``any`` keeps more work.
DEFAULT_PREDICTED_WAIT_KIND = PredictedWaitKind.ANY


class PredictedBurstSettingsError(ValueError):
    """An out-of-range predicted-burst setting (the message names it)."""


@dataclass(frozen=True)
class PredictedBurstSettings:
    """One team's thresholds.

    Attributes:
        cloud_startup_seconds: burst decision to the job running in the cloud.
        margin_seconds: the on-prem wait must exceed the start-up by more than this.
        wait_kind: which predicted wait is compared (:class:`PredictedWaitKind`).
        max_stays: due preemptions the gate may keep the job on-prem before it bursts whatever
            the prediction (None: unbounded; 0: every due preemption bursts, as without a gate).
    """

    cloud_startup_seconds: float = DEFAULT_CLOUD_STARTUP_SECONDS
    margin_seconds: float = DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS
    wait_kind: PredictedWaitKind = DEFAULT_PREDICTED_WAIT_KIND
    max_stays: int | None = DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS

    def __post_init__(self) -> None:
        stays = self.max_stays
        if stays is not None and (isinstance(stays, bool) or not isinstance(stays, int) or stays < 0):
            raise PredictedBurstSettingsError(f"max_stays: expected an integer >= 0 or None, got {stays!r}")
        for name, value in (
            ("cloud_startup_seconds", self.cloud_startup_seconds),
            ("margin_seconds", self.margin_seconds),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise PredictedBurstSettingsError(f"{name}: expected a finite number of seconds >= 0, got {value!r}")

    @property
    def threshold_seconds(self) -> float:
        """A predicted on-prem wait above this bursts."""
        return self.cloud_startup_seconds + self.margin_seconds


class BurstChoice(str, Enum):
    """The decision's answer."""

    BURST = "burst"
    STAY = "stay"


@dataclass(frozen=True)
class PredictedBurstVerdict:
    """Burst or stay, and the reason a user reads (recorded with a burst, shown in Events)."""

    choice: BurstChoice
    reason: str
    preemptions: int
    #: The prediction the decision used (None: unknown; ``math.inf``: beyond the horizon).
    predicted_wait_seconds: float | None
    threshold_seconds: float
    #: True when the job bursts because the gate already kept it ``max_stays`` times.
    max_stays_reached: bool = False

    @property
    def bursts(self) -> bool:
        return self.choice is BurstChoice.BURST


def _duration(seconds: float) -> str:
    return "beyond the predictor's horizon" if math.isinf(seconds) else f"{seconds:.0f}s"


def max_stays_reached(preemptions: int, after_preemptions: int | None, settings: PredictedBurstSettings) -> bool:
    """Whether the gate already kept a job with ``preemptions`` since its last success as often
    as ``settings.max_stays`` allows (then it bursts without asking the predictor)."""
    if after_preemptions is None or settings.max_stays is None or preemptions < after_preemptions:
        return False
    return preemptions - after_preemptions >= settings.max_stays


def decide_predicted_burst(
    preemptions: int,
    after_preemptions: int | None,
    predicted_wait_seconds: float | None,
    settings: PredictedBurstSettings,
) -> PredictedBurstVerdict:
    """Whether a job due a burst goes to the cloud now or stays in Kueue.

    Args:
        preemptions: the job's preemptions since its last successful run.
        after_preemptions: ``burst_after_preemptions`` (None: the preemption trigger is off).
        predicted_wait_seconds: the predictor's wait for the relaunch's on-prem admission of
            ``settings.wait_kind`` (None: unknown; ``math.inf``: not within its horizon).
        settings: the team's thresholds.

    A job the gate already kept ``settings.max_stays`` times (its due preemptions before this
    one, ``preemptions - after_preemptions``) bursts whatever the prediction.

    Raises:
        ValueError: a negative preemption count or predicted wait.
    """
    if preemptions < 0:
        raise ValueError(f"preemptions: expected >= 0, got {preemptions}")
    if predicted_wait_seconds is not None and (math.isnan(predicted_wait_seconds) or predicted_wait_seconds < 0):
        raise ValueError(f"predicted_wait_seconds: expected >= 0, inf or None, got {predicted_wait_seconds}")
    threshold = settings.threshold_seconds
    wait = settings.wait_kind.value

    def verdict(choice: BurstChoice, reason: str, *, bound: bool = False) -> PredictedBurstVerdict:
        return PredictedBurstVerdict(choice, reason, preemptions, predicted_wait_seconds, threshold, bound)

    if after_preemptions is None or preemptions < after_preemptions:
        limit = "off" if after_preemptions is None else str(after_preemptions)
        return verdict(
            BurstChoice.STAY,
            f"preempted {preemptions}x since the last successful run (burst_after_preemptions {limit})",
        )
    stays = preemptions - after_preemptions
    if max_stays_reached(preemptions, after_preemptions, settings):
        return verdict(
            BurstChoice.BURST,
            f"preempted {preemptions}x; the burst gate already kept it on-prem {stays}x "
            f"(predicted_wait_gate_max_stays {settings.max_stays} reached): burst whatever the prediction",
            bound=True,
        )
    if predicted_wait_seconds is None:
        return verdict(
            BurstChoice.STAY,
            f"preempted {preemptions}x but the {wait} on-prem wait is unknown: stays in Kueue "
            "(its admission timeout still bursts it)",
        )
    said = (
        f"preempted {preemptions}x; predicted {wait} on-prem wait {_duration(predicted_wait_seconds)}"
        f" vs cloud start-up {settings.cloud_startup_seconds:.0f}s + margin {settings.margin_seconds:.0f}s"
    )
    if predicted_wait_seconds > threshold:
        return verdict(BurstChoice.BURST, f"{said}: burst")
    return verdict(BurstChoice.STAY, f"{said}: stays on-prem")


def gated_verdict(
    preemptions: int,
    after_preemptions: int | None,
    settings: PredictedBurstSettings,
    predicted_wait: Callable[[], float | None],
) -> PredictedBurstVerdict | None:
    """:func:`decide_predicted_burst` for a job due a burst, asking ``predicted_wait`` (it runs
    the model) only when the answer depends on it: None when the job is not due a burst, and
    no prediction once the gate kept it ``settings.max_stays`` times."""
    if after_preemptions is None or preemptions < after_preemptions:
        return None
    bound = max_stays_reached(preemptions, after_preemptions, settings)
    wait = None if bound else predicted_wait()
    return decide_predicted_burst(preemptions, after_preemptions, wait, settings)

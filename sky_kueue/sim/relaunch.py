"""SkyPilot's relaunch after a Kueue preemption, as delays.

Why model it: a preempted SkyPilot pod group never returns to Kueue's queue; SkyPilot's
jobs controller notices the loss, tears the cluster down and launches it again, which
creates a *new* Workload at the back of its priority level (SkyPilot 0.14.1 ``sky/jobs/recovery_strategy.py``,
Kueue ``pkg/scheduler/scheduler.go`` ``requeueAndUpdate``). The time between the preemption and the new Workload is
quota the job does not compete for, and the relaunch order decides who starves.

The model, per preemption of a job:

1. **Detection**: the controller polls every :data:`STATUS_CHECK_GAP_SECONDS` (SkyPilot's
   ``JOB_STATUS_CHECK_GAP_SECONDS``), so the loss is seen after a uniform delay in
   ``[0, gap]``.
2. **Recovery backoff**: SkyPilot's backoff, :data:`RECOVERY_BACKOFF_INITIAL_SECONDS`
   (its ``RETRY_INIT_GAP_SECONDS``) growing by :data:`RECOVERY_BACKOFF_MULTIPLIER` per
   retry up to :data:`RECOVERY_BACKOFF_MAX_SECONDS` (5x the initial gap), each value
   jittered by +-:data:`RECOVERY_BACKOFF_JITTER`; as in SkyPilot's ``Backoff``, the
   jittered value is what the next retry multiplies. The retry count is the job's
   preemption count. (In SkyPilot 0.14.1 the backoff strictly separates failed launch
   attempts, and a recovery whose launch is accepted at once does not wait; counting it
   per preemption is the conservative reading the issue asks for, and
   :attr:`RelaunchModel.backoff` can be turned off to model the optimistic one.)

Randomness comes from an RNG the caller derives per job and preemption, so two policies
replaying the same trace see the same delays for the same (job, preemption) pair.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

#: SkyPilot's jobs controller status poll (``JOB_STATUS_CHECK_GAP_SECONDS``).
STATUS_CHECK_GAP_SECONDS = 15.0
#: SkyPilot's recovery gap (``StrategyExecutor.RETRY_INIT_GAP_SECONDS``).
RECOVERY_BACKOFF_INITIAL_SECONDS = 60.0
RECOVERY_BACKOFF_MULTIPLIER = 1.6
#: ``Backoff(max_backoff_factor=5)``: 5 x the initial gap.
RECOVERY_BACKOFF_MAX_SECONDS = 300.0
#: +-40 % (``Backoff.JITTER``).
RECOVERY_BACKOFF_JITTER = 0.4


@dataclass(frozen=True)
class RelaunchDelay:
    """The wait between a preemption and the relaunched Workload's creation."""

    detection_s: float
    backoff_s: float

    @property
    def total_s(self) -> float:
        return self.detection_s + self.backoff_s


@dataclass(frozen=True)
class RelaunchModel:
    """How long SkyPilot takes to relaunch a preempted job (see the module docstring)."""

    detection_gap_s: float = STATUS_CHECK_GAP_SECONDS
    backoff: bool = True
    backoff_initial_s: float = RECOVERY_BACKOFF_INITIAL_SECONDS
    backoff_multiplier: float = RECOVERY_BACKOFF_MULTIPLIER
    backoff_max_s: float = RECOVERY_BACKOFF_MAX_SECONDS
    backoff_jitter: float = RECOVERY_BACKOFF_JITTER

    def next_backoff(self, previous_s: float | None, rng: random.Random) -> float:
        """The backoff after ``previous_s`` (None: the first retry), jitter included."""
        if previous_s is None:
            base = min(self.backoff_initial_s, self.backoff_max_s)
        else:
            base = min(previous_s * self.backoff_multiplier, self.backoff_max_s)
        return base + rng.uniform(-self.backoff_jitter * base, self.backoff_jitter * base)

    def delay(self, previous_backoff_s: float | None, rng: random.Random) -> RelaunchDelay:
        """The delay of the next relaunch; ``previous_backoff_s`` is this job's last backoff."""
        detection = rng.uniform(0.0, self.detection_gap_s) if self.detection_gap_s > 0 else 0.0
        backoff = self.next_backoff(previous_backoff_s, rng) if self.backoff else 0.0
        return RelaunchDelay(detection, backoff)

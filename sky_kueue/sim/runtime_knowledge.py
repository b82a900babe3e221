"""What the placement may know of a job's run time in the simulator: what the plugin knows.

Why: the simulator knows every job's true run time, the plugin does not. Placement that
ranks clusters by expected wait with true run times measures an oracle, not sky-kueue. The
plugin's run time comes from :func:`sky_kueue.skypilot.runtime_estimate.estimate_runtime`
(the task's declaration, else the median of the team's finished runs of the same name, else
none); this module feeds that same function from a trace:

* **declared**: a seeded draw picks :attr:`DeclarationModel.fraction` of the jobs whose users
  declare a run time. A declaration is the true run time times :attr:`DeclarationModel.factor`,
  rounded *up* to the next value of :data:`DECLARATION_STEPS_SECONDS` (people write ``30m``,
  ``2h``, ``1d``, not ``1h47m``; rounding up alone overstates a run by up to 2x for short
  jobs). Default :data:`DEFAULT_DECLARED_FRACTION` = 0.3: the label is an opt-in SkyPilot does
  not know (its task schema has no expected-duration field), so we assume a minority of users
  write it, which keeps the figures from overstating the plugin; the factor defaults to 1
  (no bias beyond the rounding).
* **history**: the finished runs seen so far in the simulation (from the last admission to
  the finish, as the controller's JobHistory records them; failed runs are not kept, their
  length says nothing of a normal run), keyed by team and job name.
* **job name**: a synthetic or CSV trace has no task names, so a job's name is its shape
  (GPUs and priority class, :func:`job_name`): the closest stand-in for "the same task again"
  that does not peek at the run time. On the synthetic trace run times are drawn
  independently, so the history median is a weak predictor there; that is stated, not fixed.

An estimate is frozen when the job is first placed: the policy writes it onto the task's pods
once, and relaunches keep what was written (``written_estimate`` in the estimator module).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from sky_kueue.sim.traces import JobSpec
from sky_kueue.skypilot.runtime_estimate import (
    MAX_DECLARED_RUNTIME_SECONDS,
    NO_ESTIMATE,
    PastRun,
    RuntimeEstimate,
    estimate_runtime,
)

#: Share of jobs whose users declare a run time, by default (see the module docstring).
DEFAULT_DECLARED_FRACTION = 0.3
#: Declared run time over true run time before rounding up, by default.
DEFAULT_DECLARATION_FACTOR = 1.0
#: Values people declare, ascending (seconds): a declaration is rounded up to the next one;
#: beyond the last, to whole days.
DECLARATION_STEPS_SECONDS: tuple[int, ...] = (
    300,
    600,
    900,
    1_800,
    3_600,
    7_200,
    10_800,
    14_400,
    21_600,
    28_800,
    43_200,
    86_400,
    172_800,
    259_200,
)
_DAY_SECONDS = 86_400


@dataclass(frozen=True)
class DeclarationModel:
    """Which jobs declare a run time, and how wrong the declaration is.

    Attributes:
        fraction: share of jobs that declare (0..1).
        factor: declared over true run time before rounding up (> 0; 1: honest).
    """

    fraction: float = DEFAULT_DECLARED_FRACTION
    factor: float = DEFAULT_DECLARATION_FACTOR

    def validate(self) -> None:
        """Raises ValueError naming the bad knob."""
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"declared-runtime fraction must be in [0, 1], got {self.fraction:g}")
        if not (self.factor > 0 and math.isfinite(self.factor)):
            raise ValueError(f"declared-runtime factor must be a positive number, got {self.factor:g}")


def round_up_declaration(seconds: float) -> int:
    """The next value people write, at or above ``seconds``."""
    for step in DECLARATION_STEPS_SECONDS:
        if seconds <= step:
            return step
    return math.ceil(seconds / _DAY_SECONDS) * _DAY_SECONDS


def declared_runtime(spec: JobSpec, model: DeclarationModel, seed: int) -> int | None:
    """The run time this job's user declares (None: no declaration); the same for a seed."""
    if random.Random(f"{seed}/declares/{spec.job_id}").random() >= model.fraction:
        return None
    return min(round_up_declaration(spec.duration_s * model.factor), MAX_DECLARED_RUNTIME_SECONDS)


def job_name(spec: JobSpec) -> str:
    """The job's task name in the simulator: its shape (traces carry no names)."""
    return f"{spec.gpus}gpu-{spec.priority_class}"


class RuntimeKnowledge:
    """Declarations and the finished runs seen so far; estimates through the plugin's estimator."""

    def __init__(self, model: DeclarationModel, seed: int) -> None:
        model.validate()
        self.model = model
        self.seed = seed
        self._past: dict[tuple[str, str], list[PastRun]] = {}

    def estimate(self, spec: JobSpec) -> RuntimeEstimate:
        """The expected run time the policy would write for this job now."""
        declared = declared_runtime(spec, self.model, self.seed)
        name = job_name(spec)
        past = self._past.get((spec.team, name), [])
        if declared is None and not past:
            return NO_ESTIMATE
        return estimate_runtime([str(declared)] if declared is not None else [], name, [spec.team], past)

    def record_finished(self, spec: JobSpec, run_seconds: float, finished_at: float) -> None:
        """A run of ``spec`` finished: the controller's history now holds it."""
        if run_seconds <= 0:
            return
        self._past.setdefault((spec.team, job_name(spec)), []).append(
            PastRun(namespace=spec.team, job_name=job_name(spec), run_seconds=run_seconds, finished_at=finished_at)
        )

"""Past runs of jobs, read off the controller's job histories (pure).

What a "run" is here, because :class:`~sky_kueue.controller.history.JobHistory` has no run
time of its own: the controller records phase changes (queued, admitted, preempted, evicted,
finished) per job. A job whose last transition is ``finished`` ran from its last
``admitted`` transition to that finish; that span is its run. Why the last admission and not
the sum of every running interval: a SkyPilot relaunch of a preempted managed job restarts
the task (unless the user checkpoints), so the final, uninterrupted span is what a fresh
admission of the same job is expected to hold its quota for.

What it cannot tell: ``finished`` covers success and failure alike (Kueue's ``Finished``
condition, ``pkg/workload``), so a job that failed fast shortens the median; and only managed
jobs carry a job name on their pods (``skypilot-managed-job-name``, SkyPilot 0.14.1
``sky/templates/kubernetes-ray.yml.j2``), so plain ``sky launch`` clusters have no history.
"""

from __future__ import annotations

from collections.abc import Iterable

from sky_kueue.controller.history import JobHistory, TransitionCause
from sky_kueue.skypilot.runtime_estimate import PastRun


def past_run(history: JobHistory) -> PastRun | None:
    """The job's finished run, or None (not finished, never admitted, or no job name)."""
    identity = history.identity
    if identity is None or not identity.managed_job_name:
        return None
    ordered = history.ordered_transitions()
    if not ordered or ordered[-1].cause is not TransitionCause.FINISHED:
        return None
    finish = ordered[-1]
    admissions = [t for t in ordered[:-1] if t.cause is TransitionCause.ADMITTED]
    if not admissions:
        return None
    seconds = finish.at - admissions[-1].at
    if seconds <= 0:
        return None
    return PastRun(identity.namespace, identity.managed_job_name, seconds, finish.at)


def past_runs(histories: Iterable[JobHistory]) -> tuple[PastRun, ...]:
    """Every finished run among ``histories`` (see :func:`past_run`)."""
    runs = (past_run(h) for h in histories)
    return tuple(r for r in runs if r is not None)

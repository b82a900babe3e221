"""Band policies: order and protect relaunched jobs *inside* their priority class.

Why not a boost: Kueue has one priority for two jobs. It orders each ClusterQueue (priority,
then queue-order time; ``pkg/cache/queue/cluster_queue.go``) and it licenses preemption
(``LowerPriority`` preempts strictly lower, ``borrowWithinCohort.maxPriorityThreshold``
shields victims above the threshold; ``pkg/scheduler/preemption/preemption.go``). Raising a
waiting job above its class's running jobs therefore also lets it preempt them, and the
simulator measured exactly that: every boost policy multiplied in-queue preemptions and
thrown-away work on the reclaim storms (README, "Does aging end starvation?").

A band policy never lets a job leave its class. It encodes small offsets *below* the
class value ``c`` (the job's base priority, from its WorkloadPriorityClass), so nothing
ever rises above what the administrator declared and every ``maxPriorityThreshold`` equal
to a class value keeps its meaning. With ``K = rank_levels`` and ``P = protect_levels``::

    waiting Workload, job preempted n times:  c - P - K + min(n, K - 1)   (K > 0)
                                              c - P                       (K = 0)
    admitted Workload:                        c - P + min(n, P)           for the first
                                              protect_seconds of the run, then c - P

* **Rank** (``K > 0``): a fresh arrival waits at the bottom of the band, a relaunch above
  it, the more often preempted the higher; Kueue therefore admits relaunches of a class
  before its fresh arrivals. A waiting Workload always stays *strictly below* every
  admitted Workload of its class (at most ``c - P - 1`` against at least ``c - P``), so it
  can never preempt a peer under ``LowerPriority`` nor ``LowerOrNewerEqualPriority``: the
  place in line comes without the licence to preempt.
* **Protect** (``P > 0``): Kueue picks preemption victims lowest priority first, then the
  most recently admitted (``preemption.go`` candidate ordering). A relaunch that was just
  readmitted is the newest, so without protection it is the first victim of the next
  reclaim, again and again. Admitted relaunches sit above never-preempted peers, the more
  often preempted the higher, so a reclaim takes the least-preempted work first. It is an
  order, not an immunity: a higher class still preempts a protected job, and a reclaim
  under ``reclaimWithinCohort: Any`` still takes it when nothing else frees enough quota
  (the cooldown idea of Volcano's ``cdp`` plugin and Kueue's minimum-admit-duration
  proposals, kueue#9876 and kueue#9596, limited to what the class allows).

What the cluster's classes must look like: consecutive WorkloadPriorityClass values more
than ``P + K`` apart, so a band never reaches the class below
(:func:`check_class_gaps`); thresholds (``maxPriorityThreshold``) set to class values.
With the defaults (8 + 8) classes 100 apart, or Kueue's example values, are far enough.

The registered policies: ``keep-place`` (rank and protect), ``rank`` (rank
only, admitted Workloads at ``c``) and ``protect`` (protect only, waiting at ``c - P``).
Measured against SkyPilot alone (``benchmarks/anti_starvation.py``, seeds 0-4): ``rank`` cuts
relaunch starvation and the wait after a preemption where relaunches starve (``dev-starvation``,
the hot storm) and never delays the high class, but some runs of every trace see more starved
jobs or a job preempted more often; protection halves the maximum preemptions per job on some
runs but loses more work, because the victim it spares is the one that had run least.

**The closed loop** (``tests/sim/test_rank_loop.py``): where a queue's quota is taken back faster
than a job can finish (Kueue's perf mix: its own higher class every 1,200 s, 200-s gaps for a
500-s job), ranking relaunches ahead of fresh arrivals readmits the same jobs into every doomed
gap; the preemptions SkyPilot alone spreads over the class fall on a few jobs (49 against 8).
``rank_max_preemptions`` (unset by default) sends a job preempted more often than that back to
the fresh arrivals' level, in arrival order, which ends the loop at a cost where the rank helps. In the controller
(:meth:`sky_kueue.controller.engine.AgingEngine.reconcile`) a band policy sets ``spec.priority``
of every waiting *and* admitted Workload of a job to its level, each patch conditional on the
snapshot's resourceVersion, so a level planned while the Workload waited never lands after
it was admitted.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from sky_kueue.controller.aging.decision import AgingDecision, ExplanationStep
from sky_kueue.controller.aging.registry import register_policy
from sky_kueue.controller.aging.settings import AgingSettings, SettingsError
from sky_kueue.controller.history import JobHistory, Phase


@dataclass(frozen=True)
class BandLevels:
    """The offsets below the class value one job's Workloads get (all <= 0)."""

    pending: int
    admitted: int
    #: The admitted offset once ``protect_seconds`` of the run have passed.
    released: int


@dataclass(frozen=True)
class BandPolicy:
    """A policy that keeps every job inside its class (see the module docstring)."""

    name: str
    summary: str
    rank: bool
    protect: bool

    def widths(self, settings: AgingSettings) -> tuple[int, int]:
        """``(K, P)``: the rank and protect levels this policy uses."""
        return (settings.rank_levels if self.rank else 0, settings.protect_levels if self.protect else 0)

    def levels(self, preemptions: int, settings: AgingSettings) -> BandLevels:
        """The offsets for a job preempted ``preemptions`` times so far."""
        k, p = self.widths(settings)
        pending = -p - k + min(self.ranked_preemptions(preemptions, settings), k - 1) if k > 0 else -p
        protected = max(preemptions - settings.protect_after_preemptions + 1, 0)
        return BandLevels(pending=pending, admitted=-p + min(protected, p), released=-p)

    def _waiting_text(self, n: int, base: int, settings: AgingSettings) -> str:
        k, p = self.widths(settings)
        if not k:
            return f"c - P = {base} - {p}"
        ranked = self.ranked_preemptions(n, settings)
        text = f"c - P - K + min(n, K - 1) = {base} - {p} - {k} + {min(ranked, k - 1)}"
        if ranked != n:
            cap = settings.rank_max_preemptions
            text += f" (n counts as 0: more than rank_max_preemptions={cap}, back in arrival order)"
        return text

    @staticmethod
    def ranked_preemptions(preemptions: int, settings: AgingSettings) -> int:
        """The preemptions that count for the rank: all of them, or none once there are more than
        ``rank_max_preemptions`` (the job then waits at the fresh arrivals' level)."""
        cap = settings.rank_max_preemptions
        return 0 if cap is not None and preemptions > cap else preemptions

    def decide(self, history: JobHistory, settings: AgingSettings, now: float) -> AgingDecision:
        history = history.as_of(now)
        base = history.base_priority if history.base_priority is not None else 0
        n = len(history.preemptions)
        k, p = self.widths(settings)
        levels = self.levels(n, settings)
        intervals = history.intervals(now)
        wait = sum(i.duration for i in intervals if i.phase is Phase.WAITING)
        run = sum(i.duration for i in intervals if i.phase is Phase.RUNNING)
        protect_for = settings.protect_seconds
        protect_text = "the whole run" if protect_for is None else f"the first {protect_for:.0f}s of the run"
        steps = (
            ExplanationStep(
                "history",
                f"{n} preemptions",
                f"policy {self.name}; class value (base priority) {base}; waited {wait:.0f}s, ran {run:.0f}s",
            ),
            ExplanationStep(
                "band",
                f"[{base - p - k}, {base}]",
                f"rank_levels K={k}, protect_levels P={p}: nothing leaves the class, nothing rises above {base}",
            ),
            ExplanationStep(
                "waiting",
                f"{base + levels.pending}",
                self._waiting_text(n, base, settings),
            ),
            ExplanationStep(
                "admitted",
                f"{base + levels.admitted}",
                f"c - P + min(n, P) = {base} - {p} + {min(n, p)} for {protect_text}, then {base + levels.released}",
            ),
        )
        return AgingDecision(
            policy=self.name,
            job_key=history.key,
            now=now,
            boost=levels.pending,
            base_priority=base,
            current_boost=history.current_boost,
            preemptions=n,
            counted_preemptions=n,
            held_preemptions=0,
            other_evictions=len(history.evictions),
            preemption_credit=float(n),
            aged_wait_seconds=0.0,
            wait_seconds=wait,
            run_seconds=run,
            preemption_points=0,
            age_points=0,
            uncapped_boost=levels.pending,
            boost_limit=0,
            steps=steps,
            admitted_boost=levels.admitted,
            released_boost=levels.released,
            protect_seconds=protect_for,
        )


def check_class_gaps(values: Sequence[int], policy: BandPolicy, settings: AgingSettings) -> None:
    """Refuses class values too close for ``policy``'s band (one band would reach the next class).

    Raises:
        SettingsError: two consecutive class values are at most ``P + K`` apart.
    """
    k, p = policy.widths(settings)
    ordered = sorted(set(values))
    for low, high in itertools.pairwise(ordered):
        if high - (p + k) <= low:
            raise SettingsError(
                f"aging: policy {policy.name!r} needs WorkloadPriorityClass values more than "
                f"rank_levels + protect_levels = {p + k} apart, but {low} and {high} are {high - low} apart; "
                "lower rank_levels/protect_levels or spread the classes"
            )


KEEP_PLACE = register_policy(
    BandPolicy(
        name="keep-place",
        summary="inside the class: relaunches wait ahead of fresh arrivals and are readmitted protected",
        rank=True,
        protect=True,
    )
)
RANK = register_policy(
    BandPolicy(
        name="rank",
        summary="inside the class: relaunches wait ahead of fresh arrivals, no protection once admitted",
        rank=True,
        protect=False,
    )
)
PROTECT = register_policy(
    BandPolicy(
        name="protect",
        summary="inside the class: readmitted relaunches are the last victims of their class, no rank",
        rank=False,
        protect=True,
    )
)

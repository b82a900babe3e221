"""Sizing the relaunch lane: the curve of lane size x k against the targets, and the smallest
lane that meets them.

Why a sweep: the lane's bound (max preemptions per job <= k, :mod:`sky_kueue.sim.lane`) holds
at any size, but a lane too small makes relaunches wait for it (relaunch starvation), and
every GPU carved into it leaves its donor's fresh work a GPU less of nominal quota (the high
class's wait, goodput). The right size depends on the team's own work, so it is measured on
their trace, every lane against SkyPilot alone (``baseline``) on the same run.

The targets (issue 39), each against the baseline of the same trace and seed: max preemptions
per job at most :data:`MAX_PREEMPTIONS`; relaunch-starved jobs 0 where the baseline has at
most :data:`RELAUNCH_STARVED_ZERO_UP_TO`, else at most 1/:data:`RELAUNCH_STARVED_REDUCTION`
of the baseline's; p99 wait after a preemption at least :data:`P99_WAIT_REDUCTION` times
lower; goodput at most :data:`GOODPUT_MAX_LOSS_POINTS` under; the high class's p95 wait at
most :data:`HIGH_P95_MAX_INCREASE` higher (an increase within
:data:`HIGH_P95_SLACK_SECONDS` is no regression, as in ``benchmarks/anti_starvation.py``).
Figures are rounded as that benchmark rounds them (goodput to 0.1 point, waits to seconds),
so the two judge a run alike.

"Smallest" is the fewest nominal GPUs carved over all lanes (the lanes' cost); among equal
costs the larger k (fewer relaunches sent to the lane), then the per-team scope. Where no lane
meets every target, the sweep also names the *closest*: the fewest targets missed, then one
that keeps the bound's target (max preemptions: a miss there means relaunches too large for
the lane), then the same order. A lane that takes all of its donor's GPUs is measured but
never recommended: the donor team would keep no guaranteed quota, all its work would borrow,
and with no ClusterQueue left to reclaim for it, preemption mostly stops, which says nothing
about a lane.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import compare, policies
from sky_kueue.sim.lane import LaneScope, LaneSettings
from sky_kueue.sim.metrics import PolicyMetrics
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import Trace

MAX_PREEMPTIONS = 2
RELAUNCH_STARVED_ZERO_UP_TO = 2
RELAUNCH_STARVED_REDUCTION = 2.0
P99_WAIT_REDUCTION = 3.0
GOODPUT_MAX_LOSS_POINTS = 1.0
HIGH_P95_MAX_INCREASE = 0.05
HIGH_P95_SLACK_SECONDS = 60.0
#: Lane sizes (GPUs per lane) and counts k swept unless told otherwise.
DEFAULT_SWEEP_GPUS = (2, 4, 8, 12, 16, 24, 32)
DEFAULT_SWEEP_AFTER = (1, 2)
#: The resubmission policy whose priorities order the lane unless told otherwise.
DEFAULT_LANE_POLICY = "rank"
TARGETS = ("max_preemptions", "relaunch_starved", "p99_wait_after_preemption", "goodput", "high_p95")


@dataclass(frozen=True)
class LaneFigures:
    """What the targets compare, rounded as ``benchmarks/anti_starvation.py`` rounds them."""

    max_preemptions: int
    relaunch_starved: int
    p50_wait_after_preemption_s: int
    p99_wait_after_preemption_s: int
    goodput_pct: float
    high_p95_wait_s: int
    #: Every starved job (not a target: issue 39's targets count only relaunch-starved jobs, which a
    #: small lane with k=1 does not reduce to starved ones: shown so the lane's cost to jobs
    #: preempted once, and to fresh work, is seen beside its bound).
    starved: int = 0

    def to_json(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def figures(m: PolicyMetrics, high_class: str) -> LaneFigures:
    return LaneFigures(
        max_preemptions=m.preemptions_per_job_max,
        relaunch_starved=m.relaunch_starved,
        p50_wait_after_preemption_s=round(m.p50_wait_after_preemption_s),
        p99_wait_after_preemption_s=round(m.p99_wait_after_preemption_s),
        goodput_pct=round(100 * m.gpu_goodput, 1),
        high_p95_wait_s=round(m.classes[high_class].p95_wait_s),
        starved=m.starved,
    )


def targets_met(f: LaneFigures, b: LaneFigures) -> dict[str, bool]:
    """Each target of the module docstring: ``f`` (a policy) against ``b`` (the baseline)."""
    if b.relaunch_starved <= RELAUNCH_STARVED_ZERO_UP_TO:
        starved = f.relaunch_starved == 0
    else:
        starved = f.relaunch_starved * RELAUNCH_STARVED_REDUCTION <= b.relaunch_starved
    high_limit = max(b.high_p95_wait_s * (1 + HIGH_P95_MAX_INCREASE), b.high_p95_wait_s + HIGH_P95_SLACK_SECONDS)
    return {
        "max_preemptions": f.max_preemptions <= MAX_PREEMPTIONS,
        "relaunch_starved": starved,
        "p99_wait_after_preemption": f.p99_wait_after_preemption_s * P99_WAIT_REDUCTION
        <= b.p99_wait_after_preemption_s,
        "goodput": f.goodput_pct >= b.goodput_pct - GOODPUT_MAX_LOSS_POINTS,
        "high_p95": f.high_p95_wait_s <= high_limit,
    }


@dataclass(frozen=True)
class SweepPoint:
    """One lane of the sweep and how it did."""

    policy: str
    scope: LaneScope
    gpus: int
    after_preemptions: int
    #: Nominal GPUs carved over all lanes (the lane's cost; a lane is at most its donor's GPUs).
    carved_gpus: int
    figures: LaneFigures
    met: dict[str, bool]
    lane_entries: int
    lane_misfits: int
    lane_preempted: int
    #: A lane took all of its donor's GPUs (never recommended, module docstring).
    empties_donor: bool = False

    @property
    def meets_all(self) -> bool:
        return all(self.met.values())

    def to_json(self) -> dict[str, object]:
        return {
            "policy": self.policy,
            "scope": self.scope.value,
            "gpus": self.gpus,
            "after_preemptions": self.after_preemptions,
            "carved_gpus": self.carved_gpus,
            **self.figures.to_json(),
            "met": self.met,
            "meets_all": self.meets_all,
            "lane_entries": self.lane_entries,
            "lane_misfits": self.lane_misfits,
            "lane_preempted": self.lane_preempted,
            "empties_donor": self.empties_donor,
        }


@dataclass(frozen=True)
class LaneSweep:
    trace: str
    seed: int
    baseline: LaneFigures
    points: tuple[SweepPoint, ...]
    recommended: SweepPoint | None = field(default=None)
    #: The point missing the fewest targets (the recommended one when it exists).
    closest: SweepPoint | None = field(default=None)

    def to_json(self) -> dict[str, object]:
        return {
            "trace": self.trace,
            "seed": self.seed,
            "baseline": self.baseline.to_json(),
            "points": [p.to_json() for p in self.points],
            "recommended": None if self.recommended is None else self.recommended.to_json(),
            "closest": None if self.closest is None else self.closest.to_json(),
        }


def _cost(p: SweepPoint) -> tuple[int, int, bool]:
    return (p.carved_gpus, -p.after_preemptions, p.scope is not LaneScope.TEAM)


def smallest(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The cheapest point meeting every target (module docstring), or None."""
    meeting = [p for p in points if p.meets_all and not p.empties_donor]
    if not meeting:
        return None
    return min(meeting, key=_cost)


def closest(points: Sequence[SweepPoint]) -> SweepPoint | None:
    """The point missing the fewest targets, then keeping the bound's, then the cheapest
    (None: no point that leaves every donor some quota)."""
    kept = [p for p in points if not p.empties_donor]
    if not kept:
        return None
    return min(kept, key=lambda p: (sum(1 for ok in p.met.values() if not ok), not p.met["max_preemptions"], *_cost(p)))


#: progress(points done, points in all)
SweepProgressFn = Callable[[int, int], None]


def sweep(
    trace: Trace,
    config: SimConfig,
    *,
    scopes: Sequence[LaneScope] = (LaneScope.TEAM, LaneScope.COHORT),
    gpus: Sequence[int] = DEFAULT_SWEEP_GPUS,
    after: Sequence[int] = DEFAULT_SWEEP_AFTER,
    policy: str = DEFAULT_LANE_POLICY,
    lane: LaneSettings | None = None,
    settings: AgingSettings | None = None,
    progress: SweepProgressFn | None = None,
) -> LaneSweep:
    """Every lane of ``scopes`` x ``gpus`` x ``after`` over ``trace``, against the baseline
    (``lane``: what every lane keeps of these settings, e.g. the cohort lanes' donor and the
    reclaim policy; its size, k and scope are the sweep's).

    Raises:
        UnknownSimPolicyError: ``policy`` cannot carry a lane.
        ValueError: a size or count is below 1.
        ModelError: the lanes cannot be carved from the trace's cluster.
    """
    base_lane = lane if lane is not None else LaneSettings()
    high = trace.class_order()[-1]
    base_metrics = compare.compare(trace, [policies.BASELINE], config).metrics[policies.BASELINE]
    base = figures(base_metrics, high)
    points: list[SweepPoint] = []
    total = len(scopes) * len(gpus) * len(after)
    for scope in scopes:
        suffix = policies.LANE_SUFFIX if scope is LaneScope.TEAM else policies.COHORT_LANE_SUFFIX
        for size in gpus:
            for k in after:
                point_lane = replace(base_lane, gpus=size, after_preemptions=k, scope=scope)
                resolved = policies.resolve(policy + suffix, settings, lane=point_lane)
                name = f"{resolved.name}@{size}/k{k}"
                result = compare.compare(trace, [replace_name(resolved, name)], config)
                run = result.runs[name]
                f = figures(result.metrics[name], high)
                points.append(
                    SweepPoint(
                        policy=resolved.name,
                        scope=scope,
                        gpus=size,
                        after_preemptions=k,
                        carved_gpus=run.lane_gpus,
                        figures=f,
                        met=targets_met(f, base),
                        lane_entries=run.lane_entries,
                        lane_misfits=run.lane_misfits,
                        lane_preempted=run.lane_preempted,
                        empties_donor=run.lane_empties_donor,
                    )
                )
                if progress is not None:
                    progress(len(points), total)
    return LaneSweep(trace.name, config.seed, base, tuple(points), smallest(points), closest(points))


def replace_name(policy: policies.ResubmissionPolicy, name: str) -> policies.ResubmissionPolicy:
    """``policy`` under another name (each point of a sweep is its own run)."""
    assert isinstance(policy, (policies.BaselinePolicy, policies.RegistryPolicy))
    return replace(policy, name=name)

"""Anti-starvation benchmark: every policy against baseline, seeds 0-4, the issues' criteria.

For each trace and each seed, one run per policy on the same jobs; every figure is a policy
against the ``baseline`` of the *same* trace and seed (SkyPilot without sky-kueue). Traces:
the two reclaim storms, ``dev-starvation`` (a low-class team living on borrowed quota, owners
returning every 5-40 min), the calibrated synthetic trace at loads 0.85 and 0.7, and Kueue's
performance-test mix (``kueue-perf``: only SkyPilot alone, the default, ``rank``, ``rank cap=2``, the lanes and
``rank+predicted``, :data:`PERF_POLICIES`; judged like the synthetic traces); each row carries the
run's realised load. Modes:

* ``in-cluster``: no bursting. Criteria (issue 24, "Done means"): on the storms and
  ``dev-starvation``, ``max_preemptions`` at most half of the baseline's (or at most 2),
  ``relaunch_starved`` at least 3x fewer (0 where the baseline has at most 2), p99
  completion-time inflation of preempted jobs lower, high class p95 wait at most +5 %,
  ``in_queue_preemptions`` and ``inverted_preemptions`` no more than the baseline, goodput at
  least the baseline's minus one point. On the synthetic traces the no-harm criteria (the
  last four) and ``starved`` no more than the baseline (:data:`NO_HARM_ONLY_TRACES`).
  Policies: ``rank``, ``keep-place``, ``rank+safe``, ``safe-place``
  (``keep-place`` protecting only within nominal quota, with the safe-relaunch hold:
  :data:`sky_kueue.sim.policies.SAFE_PLACE`), the controller's default settings
  (:data:`DEFAULT_SETTINGS_POLICY`, policy ``none``) and ``rank cap=2`` (``rank`` with
  ``rank_max_preemptions: 2``, :data:`RANK_CAPPED`).
* ``burst``: ``--allow-burst`` for the policies (baseline keeps SkyPilot's behaviour), with
  the default ``burst_after_preemptions`` (1) and, as ``<policy>@2``, with 2; ``rank+safe``
  and ``safe-place`` burst from a hold instead (when no safe place is predicted within the
  relaunch's limit);
  ``rank+predicted`` bursts a relaunch due a burst only when the predictor's on-prem wait
  exceeds the cloud start-up plus a margin, and at the next due preemption whatever the
  prediction (at most one stay, :mod:`sky_kueue.controller.predicted_burst`).
  Criteria: ``relaunch_starved`` 0, no job preempted more than 3 times, p99 wait after
  preemption at least 5x lower, and the predictor-gated burst's pair: p99 wait after
  preemption at least 3x lower (``p99_wait_3x``) with on-prem goodput at most one point under
  the baseline's (``goodput``, the no-harm check); burst GPU-hours and cost reported.
* ``lane``: the relaunch lane (issue 39, :mod:`sky_kueue.sim.lane`) beside ``baseline``, ``rank``
  and ``safe-place``, all judged on issue 39's five targets
  (:func:`sky_kueue.sim.lane_sizing.targets_met`: max preemptions at most 2, relaunch-starved 0
  where the baseline has at most 2 else at least halved, p99 wait after preemption at least 3x
  lower, goodput within one point, high class p95 within +5 %). Each trace's lanes, one per team
  (``rank+lane``) and one per cohort (``rank+cohort-lane``), are the sizes ``sky-kueue simulate
  --lane-sweep`` chose on seed 0 (:data:`LANE_RECIPES`), and the per-team one again reclaiming
  only from lower priorities (:data:`LANE_RECLAIM_VARIANT`). The burst mode's ``rank+predicted`` is
  shown beside them on the same targets (``rank+predicted (burst)``).
* **no harm** (issue 39 item 3: may this be the default?), every in-cluster and lane row
  (:func:`no_harm`): no job preempted more often than SkyPilot alone's most-preempted one, no more
  starved jobs, in-queue or inverted preemptions, the high class's p95 within +5 % (or +60 s) and
  goodput within one point, each against SkyPilot alone on the same trace and seed.
* with ``--team``, in the cluster: ``rank+team`` (``rank`` plus the safe-relaunch rule's
  team-scoped nominal reservation: a starved relaunch held for nominal quota also holds back its
  own team's pending work of its class or lower) and its variants ``rank+team/newer``,
  ``/long`` and ``/cap`` (:data:`TEAM_VARIANTS`), judged on the in-cluster criteria;
  ``--in-cluster-only`` skips the burst mode.
* with ``--extra``: ``checkpoint`` (jobs checkpoint every :data:`CHECKPOINT_EVERY_SECONDS`,
  every policy, no criteria) and ``reserve`` (a Workload waiting :data:`RESERVE_AFTER_SECONDS`
  reserves its cohort, judged on the in-cluster criteria against the plain baseline).

The completion-time inflation of a preempted job is (completion - first submission) / run
time (:mod:`sky_kueue.sim.metrics`); wasted GPU-hours per preempted job are the preempted
runs' GPU-hours over the jobs preempted at least once.

Every in-cluster row also splits the preemptions of its most-preempted job, and of the jobs
preempted 3+ times, by cause (:func:`sky_kueue.sim.metrics.preemption_cause`): (a) reclaim by
another ClusterQueue, (b) its own ClusterQueue's higher class, (c) its own class or lower,
(d) other. ``--markdown`` prints them as ranges over the seeds (:func:`causes_markdown`) with
the floor check: whether the top job's (b) alone exceeds the largest maximum the
``max_preemptions`` criterion allows on that seed (:func:`allowed_max_preemptions`). Those
preemptions are licensed by the admin's classes, so a policy that keeps the classes and
Kueue's choice of victim inside a class cannot take them away.

Run: ``.venv/bin/python benchmarks/anti_starvation.py [--seeds 0,1,2,3,4] [--jobs N]
[--markdown] [--extra] [--team] [--in-cluster-only]`` (JSON on stdout; ``--markdown`` prints the tables instead). One
simulator run (policy, trace, seed, mode) per task, on ``--jobs`` processes (default: every usable core;
``--workers`` is the same option), with the same tables and JSON as ``--jobs 1`` (:mod:`sky_kueue.sim.sweep`);
a run two modes share (same trace, seed, configuration and policy) is made once (:func:`deduplicated`).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field, replace
from typing import Any

from sky_kueue.controller.aging import AgingSettings, get_policy
from sky_kueue.controller.aging.safe_relaunch import TeamReservationScope
from sky_kueue.controller.aging.settings import DEFAULT_POLICY_NAME
from sky_kueue.kueue import objects as o
from sky_kueue.sim import lane_sizing, policies
from sky_kueue.sim.lane import DEFAULT_LANE_RECLAIM, LaneScope, LaneSettings
from sky_kueue.sim.metrics import IN_QUEUE_REASON, REPEAT_PREEMPTED_MIN, CauseSplit, PolicyMetrics
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.sweep import SweepResult, SweepRun, TraceSpec, run_sweep, usable_cores

#: (label, trace name, load_trace arguments)
TRACES: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("reclaim-storm", "reclaim-storm", {}),
    ("reclaim-storm-hot", "reclaim-storm-hot", {}),
    ("dev-starvation", "dev-starvation", {}),
    ("synthetic-0.85", "synthetic", {"jobs": 2_000, "load": 0.85}),
    ("synthetic-0.7", "synthetic", {"jobs": 2_000, "load": 0.7}),
    ("kueue-perf", "kueue-perf", {}),
)
#: Kueue's performance-test mix (15,000 jobs; about 45 s a run on an idle core, 10-20x a storm's):
#: only SkyPilot alone, ``rank``, :data:`RANK_CAPPED`, the lanes and ``rank+predicted`` run on it
#: (its medium jobs all starve under every policy, README "Does aging end starvation?").
PERF_TRACE = "kueue-perf"
PERF_POLICIES: dict[str, tuple[str, ...]] = {
    "in-cluster": ("baseline", "rank"),
    "lane": ("baseline", "rank"),
    "burst": ("baseline", "rank+predicted"),
}
DEFAULT_SEEDS = "0,1,2,3,4"
IN_CLUSTER_POLICIES = ("baseline", "rank", "keep-place", "rank+safe", policies.SAFE_PLACE)
#: ``rank`` with ``aging.parameters.rank_max_preemptions`` set (the fix for its closed loop on the
#: perf mix, ``tests/sim/test_rank_loop.py``): a job preempted more often waits in arrival order.
RANK_CAP = 2
RANK_CAPPED = policies.RegistryPolicy(
    name=f"rank cap={RANK_CAP}", policy=get_policy("rank"), settings=AgingSettings(rank_max_preemptions=RANK_CAP)
)
#: The controller's default settings (policy ``none``), measured like any policy: the no-harm table's
#: answer to issue 39 item 3 is this row, run through the controller's path, not assumed.
DEFAULT_SETTINGS_POLICY = policies.RegistryPolicy(
    name=f"default ({DEFAULT_POLICY_NAME})", policy=get_policy(DEFAULT_POLICY_NAME), settings=AgingSettings()
)
#: ``--team``: the safe-relaunch rule's team-scoped nominal reservation, measured not to pay
#: (benchmarks/README.md), so off by default to keep the run under 10 minutes.
TEAM_POLICY = "rank+team"
#: Variants of ``rank+team`` (the safe-relaunch rule's team-scoped nominal reservation, scope
#: ``head``): name suffix -> settings changed. ``newer``: hold only the team work created after
#: the relaunch; ``long``: reserve only when the safe wait predicted without it is unknown or
#: longer than :data:`TEAM_RESERVATION_LONG_WAIT_SECONDS`; ``cap``: at most
#: :data:`TEAM_RESERVATION_CAP` Workloads held back per reservation.
TEAM_RESERVATION_LONG_WAIT_SECONDS = 600.0
TEAM_RESERVATION_CAP = 2
TEAM_VARIANTS: dict[str, dict[str, Any]] = {
    "newer": {"team_reservation": TeamReservationScope.NEWER},
    "long": {"team_reservation_min_wait_seconds": TEAM_RESERVATION_LONG_WAIT_SECONDS},
    "cap": {"team_reservation_max_held": TEAM_RESERVATION_CAP},
}
#: ``lane`` mode: per trace, the lanes ``sky-kueue simulate --lane-sweep`` chose on seed 0 (the
#: smallest meeting every target, else the closest; never one that takes its donor's whole quota):
#: (scope, GPUs per lane, k, donor ClusterQueue of the cohort lane or None for the largest). On the
#: storms the cohort's lane is carved from the light team-c (the cohort's real lender), from whose
#: 12-GPU lane on reclaim-storm only the p99 wait missed; carved from team-a it slowed team-a's high class.
LANE_RECIPES: dict[str, tuple[tuple[LaneScope, int, int, str | None], ...]] = {
    "reclaim-storm": ((LaneScope.TEAM, 8, 2, None), (LaneScope.COHORT, 12, 2, "team-c-cq")),
    "reclaim-storm-hot": ((LaneScope.TEAM, 4, 1, None), (LaneScope.COHORT, 4, 1, None)),
    "dev-starvation": ((LaneScope.TEAM, 4, 2, None), (LaneScope.COHORT, 4, 2, None)),
    "synthetic-0.85": ((LaneScope.TEAM, 16, 1, None), (LaneScope.COHORT, 2, 1, None)),
    "synthetic-0.7": ((LaneScope.TEAM, 16, 2, None), (LaneScope.COHORT, 16, 1, None)),
    # --lane-sweep-gpus 5,10,15 (a medium job asks for 5 GPUs, a queue's nominal quota is 20)
    "kueue-perf": ((LaneScope.TEAM, 10, 2, None), (LaneScope.COHORT, 5, 1, None)),
}
#: ``lane`` mode: each trace's per-team lane of :data:`LANE_RECIPES` again with
#: ``reclaimWithinCohort: LowerPriority`` (``lane.reclaim_within_cohort``): the relaunch takes the
#: lane's lent quota back only from borrowers of lower priority, and waits for the others.
LANE_RECLAIM_VARIANT = o.PreemptionPolicy.LOWER_PRIORITY
LANE_BASE_POLICIES = ("baseline", "rank", policies.SAFE_PLACE)
#: The resubmission policy whose priorities order the lanes.
LANE_ORDER_POLICY = "rank"
#: The burst mode's policy also shown in the lane table, judged on the lane's targets (the default
#: for a team with burst clouds).
LANE_BURST_POLICY = "rank+predicted"
#: The modes whose rows are also judged on :func:`no_harm`.
NO_HARM_MODES = ("in-cluster", "lane")
BURST_POLICIES = ("baseline", "rank", "rank+safe", "rank+predicted", policies.SAFE_PLACE)
#: Burst settings shown beside the default: the policy bursts after this many preemptions.
BURST_ALTERNATIVE_PREEMPTIONS = 2
#: Traces judged on the no-harm criteria and the starved count only (issue 24's Done means).
NO_HARM_ONLY_TRACES = frozenset({"synthetic-0.85", "synthetic-0.7", PERF_TRACE})
#: The in-cluster criteria that ask for an improvement (the others ask for no harm).
IMPROVEMENT_CRITERIA = ("relaunch_starved", "max_preemptions", "p99_inflation")
CHECKPOINT_POLICIES = ("baseline", "rank")
CHECKPOINT_EVERY_SECONDS = 1_800.0
#: The reservation lever (``simulate --reserve-after``): policies and waits measured.
RESERVE_POLICIES = ("baseline", "rank")
RESERVE_AFTER_SECONDS = (3_600.0, 14_400.0)
RELAUNCH_STARVED_REDUCTION = 3.0
MAX_PREEMPTIONS_FRACTION = 0.5
#: A max preemptions per job at or below this meets the criterion whatever the baseline's.
MAX_PREEMPTIONS_ENOUGH = 2
HIGH_P95_MAX_INCREASE = 0.05
#: A p95 of 1 s (one Kueue cycle) is "no wait"; below this slack an increase is not a regression.
HIGH_P95_SLACK_SECONDS = 60.0
GOODPUT_MAX_LOSS_POINTS = 1.0
BURST_MAX_PREEMPTIONS = 3
BURST_WAIT_AFTER_PREEMPTION_REDUCTION = 5.0
#: The predictor-gated burst's target (``rank+predicted``): p99 wait after preemption at least
#: this many times lower than the baseline's, with on-prem goodput within
#: :data:`GOODPUT_MAX_LOSS_POINTS` of it (both judged on every burst row).
PREDICTED_WAIT_AFTER_PREEMPTION_REDUCTION = 3.0


@dataclass(frozen=True)
class Row:
    trace: str
    seed: int
    mode: str
    policy: str
    figures: dict[str, Any]
    met: dict[str, bool]
    #: In the cluster and the lane modes: the no-harm checks of :func:`no_harm` (issue 39 item 3).
    no_harm: dict[str, bool] = field(default_factory=dict)


def _cause_figures(prefix: str, split: CauseSplit) -> dict[str, int]:
    return {
        f"{prefix}_reclaim": split.reclaim,
        f"{prefix}_higher_class": split.higher_class,
        f"{prefix}_own_class_or_lower": split.own_class_or_lower,
        f"{prefix}_other": split.other,
    }


def allowed_max_preemptions(baseline_max: int) -> float:
    """The largest max preemptions per job the in-cluster criterion accepts against a baseline
    whose max is ``baseline_max``."""
    return max(MAX_PREEMPTIONS_FRACTION * baseline_max, MAX_PREEMPTIONS_ENOUGH)


def _figures(m: PolicyMetrics, high: str, load: float) -> dict[str, Any]:
    causes = m.causes
    return {
        "load": load,
        "starved": m.starved,
        "relaunch_starved": m.relaunch_starved,
        "max_preemptions": m.preemptions_per_job_max,
        "in_queue_preemptions": m.preemptions_by_reason.get(IN_QUEUE_REASON, 0),
        "inverted_preemptions": m.inverted_preemptions,
        "goodput_pct": round(100 * m.gpu_goodput, 1),
        "high_p95_wait_s": round(m.classes[high].p95_wait_s),
        "lost_gpu_hours": round(m.lost_gpu_hours),
        "p50_wait_after_preemption_s": round(m.p50_wait_after_preemption_s),
        "p99_wait_after_preemption_s": round(m.p99_wait_after_preemption_s),
        "p50_inflation": round(m.p50_inflation, 1),
        "p99_inflation": round(m.p99_inflation, 1),
        "max_inflation": round(m.max_inflation, 1),
        "wasted_gpu_h_per_preempted": round(m.wasted_gpu_hours_per_preempted_job, 2),
        "safe_holds": m.safe.holds,
        "bursts": m.bursts,
        "burst_gpu_hours": round(m.burst_gpu_hours),
        "burst_cost_usd": round(m.burst_cost),
        **_cause_figures("top", causes.top),
        "top_tied_jobs": causes.top_tied_jobs,
        "max_higher_class_per_job": causes.max_higher_class,
        "repeat_jobs": causes.repeat_jobs,
        **_cause_figures("repeat", causes.repeat),
    }


def _with_floor(f: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``f`` plus the floor check against the baseline ``b`` of the same trace and seed: whether
    the most-preempted job's higher-class preemptions alone (``higher_class_floor``), or any
    job's (``any_higher_class_floor``), exceed what the max-preemptions criterion allows; and
    whether the top job's (b) and (d) together do (``higher_class_and_other_floor``: on the
    storms (d) is Kueue's reclaim while borrowing, which also needs a higher class)."""
    allowed = allowed_max_preemptions(b["max_preemptions"])
    return f | {
        "allowed_max_preemptions": allowed,
        "higher_class_floor": f["top_higher_class"] > allowed,
        "any_higher_class_floor": f["max_higher_class_per_job"] > allowed,
        "higher_class_and_other_floor": f["top_higher_class"] + f["top_other"] > allowed,
    }


def _no_worse(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """The checks every judgement here shares, each against the baseline ``b``: no more starved
    jobs, in-queue or inverted preemptions, the high class's p95 wait within +5 % (or +60 s),
    goodput within one point."""
    high_limit = max(b["high_p95_wait_s"] * (1 + HIGH_P95_MAX_INCREASE), b["high_p95_wait_s"] + HIGH_P95_SLACK_SECONDS)
    return {
        "starved": f["starved"] <= b["starved"],
        "in_queue_preemptions": f["in_queue_preemptions"] <= b["in_queue_preemptions"],
        "inverted_preemptions": f["inverted_preemptions"] <= b["inverted_preemptions"],
        "high_p95": f["high_p95_wait_s"] <= high_limit,
        "goodput": f["goodput_pct"] >= b["goodput_pct"] - GOODPUT_MAX_LOSS_POINTS,
    }


def _in_cluster(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    rs_ok = (
        f["relaunch_starved"] == 0
        if b["relaunch_starved"] <= 2
        else (f["relaunch_starved"] * RELAUNCH_STARVED_REDUCTION <= b["relaunch_starved"])
    )
    shared = _no_worse(f, b)
    return {
        "relaunch_starved": rs_ok,
        "max_preemptions": f["max_preemptions"]
        <= max(MAX_PREEMPTIONS_FRACTION * b["max_preemptions"], MAX_PREEMPTIONS_ENOUGH),
        "p99_inflation": f["p99_inflation"] < b["p99_inflation"] or f["p99_inflation"] == b["p99_inflation"] == 0,
        # in this order: the README's "criteria missed" breaks ties by it
        **{k: shared[k] for k in ("high_p95", "in_queue_preemptions", "inverted_preemptions", "goodput", "starved")},
    }


def no_harm(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """Issue 39 item 3's question, "does the default do no harm?": whether ``f`` does no harm
    against SkyPilot alone ``b`` on the same trace and seed: no job preempted more often than
    the baseline's most-preempted one, and :func:`_no_worse`."""
    return {"max_preemptions": f["max_preemptions"] <= b["max_preemptions"], **_no_worse(f, b)}


def _judged_in_cluster(trace: str, f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    """The in-cluster criteria issue 24 applies to ``trace`` (:data:`NO_HARM_ONLY_TRACES`)."""
    met = _in_cluster(f, b)
    if trace in NO_HARM_ONLY_TRACES:
        return {k: v for k, v in met.items() if k not in IMPROVEMENT_CRITERIA}
    return {k: v for k, v in met.items() if k != "starved"}


def _burst(f: dict[str, Any], b: dict[str, Any]) -> dict[str, bool]:
    return {
        "relaunch_starved": f["relaunch_starved"] == 0,
        "max_preemptions": f["max_preemptions"] <= BURST_MAX_PREEMPTIONS,
        "p99_wait_after_preemption": f["p99_wait_after_preemption_s"] * BURST_WAIT_AFTER_PREEMPTION_REDUCTION
        <= b["p99_wait_after_preemption_s"],
        "p99_wait_3x": f["p99_wait_after_preemption_s"] * PREDICTED_WAIT_AFTER_PREEMPTION_REDUCTION
        <= b["p99_wait_after_preemption_s"],
        "goodput": f["goodput_pct"] >= b["goodput_pct"] - GOODPUT_MAX_LOSS_POINTS,
    }


def _burst_policies(settings: AgingSettings) -> list[str | policies.ResubmissionPolicy]:
    """The burst setting's policies: defaults, then each at the alternative preemption count."""
    alternative = policies.with_burst_defaults(AgingSettings(burst_after_preemptions=BURST_ALTERNATIVE_PREEMPTIONS))
    named: list[str | policies.ResubmissionPolicy] = list(BURST_POLICIES)
    for name in BURST_POLICIES:
        # Suffixed policies and the safe-place recipe keep their own rule (they burst from a hold
        # or through the gate, not on the preemption count).
        if name != policies.BASELINE and "+" not in name and name != policies.SAFE_PLACE:
            named.append(
                policies.RegistryPolicy(
                    name=f"{name}@{BURST_ALTERNATIVE_PREEMPTIONS}", policy=get_policy(name), settings=alternative
                )
            )
    return named


def _in_cluster_policies(settings: AgingSettings, *, team_variants: bool) -> list[str | policies.ResubmissionPolicy]:
    """The in-cluster policies; with ``team_variants`` also ``rank+team`` and its :data:`TEAM_VARIANTS`."""
    baseline, *others = IN_CLUSTER_POLICIES
    named: list[str | policies.ResubmissionPolicy] = [baseline, DEFAULT_SETTINGS_POLICY, *others, RANK_CAPPED]
    if not team_variants:
        return named
    named.append(TEAM_POLICY)
    team = policies.resolve(TEAM_POLICY, settings)
    assert isinstance(team, policies.RegistryPolicy) and team.safe_relaunch is not None
    for suffix, changes in TEAM_VARIANTS.items():
        named.append(replace(team, name=f"rank+team/{suffix}", safe_relaunch=replace(team.safe_relaunch, **changes)))
    return named


def _lane_policies(trace: str) -> list[str | policies.ResubmissionPolicy]:
    """The ``lane`` mode's policies for ``trace``: the baselines, then :data:`LANE_RECIPES`."""
    named: list[str | policies.ResubmissionPolicy] = list(LANE_BASE_POLICIES)
    recipes = [(*recipe, DEFAULT_LANE_RECLAIM) for recipe in LANE_RECIPES.get(trace, ())]
    recipes += [
        (*recipe, LANE_RECLAIM_VARIANT) for recipe in LANE_RECIPES.get(trace, ()) if recipe[0] is LaneScope.TEAM
    ]
    for scope, gpus, after, donor, reclaim in recipes:
        suffix = policies.LANE_SUFFIX if scope is LaneScope.TEAM else policies.COHORT_LANE_SUFFIX
        lane = LaneSettings(gpus=gpus, after_preemptions=after, donor=donor, reclaim_within_cohort=reclaim)
        policy = policies.resolve(LANE_ORDER_POLICY + suffix, lane=lane)
        assert isinstance(policy, policies.RegistryPolicy)
        label = f"{policy.name} {gpus} GPUs k={after}" + (f" from {donor}" if donor else "")
        if reclaim is not DEFAULT_LANE_RECLAIM:
            label += f" reclaim {reclaim.value}"
        named.append(replace(policy, name=label))
    return named


def _lane_met(metrics: PolicyMetrics, base: PolicyMetrics, high: str) -> dict[str, bool]:
    """Issue 39's targets (:func:`sky_kueue.sim.lane_sizing.targets_met`)."""
    return lane_sizing.targets_met(lane_sizing.figures(metrics, high), lane_sizing.figures(base, high))


def _spec(label: str, seed: int) -> TraceSpec:
    for name, source, kwargs in TRACES:
        if name == label:
            return TraceSpec(source, seed, **kwargs)
    raise ValueError(f"unknown trace {label!r}")


#: (mode, policies, SimConfig changes, aging settings the policy names resolve with)
Mode = tuple[str, list[str | policies.ResubmissionPolicy], dict[str, Any], AgingSettings]


def _modes(trace: str, extra: bool, in_cluster_only: bool, team_variants: bool) -> list[Mode]:
    burst_settings = policies.with_burst_defaults(AgingSettings())
    modes: list[Mode] = [
        ("in-cluster", _in_cluster_policies(AgingSettings(), team_variants=team_variants), {}, AgingSettings()),
        ("lane", _lane_policies(trace), {}, AgingSettings()),
    ]
    if not in_cluster_only:
        modes.append(("burst", _burst_policies(burst_settings), {"allow_burst": True}, burst_settings))
    if extra:
        modes.append(
            ("checkpoint", list(CHECKPOINT_POLICIES), {"checkpoint_every_s": CHECKPOINT_EVERY_SECONDS}, AgingSettings())
        )
    if trace == PERF_TRACE:
        return [
            (mode, [p for p in names if _on_perf(mode, p)], changes, settings)
            for mode, names, changes, settings in modes
        ]
    return modes


def _on_perf(mode: str, policy: str | policies.ResubmissionPolicy) -> bool:
    """Whether ``policy`` runs in ``mode`` on the perf mix (:data:`PERF_POLICIES`)."""
    if isinstance(policy, str):
        return policy in PERF_POLICIES.get(mode, ())
    return policy in (RANK_CAPPED, DEFAULT_SETTINGS_POLICY) or getattr(policy, "lane", None) is not None


#: A sweep run's place in the tables: (trace label, seed, mode, reserve-after seconds or None).
Key = tuple[str, int, str, float | None]


def plan(
    seeds: list[int], *, extra: bool = False, in_cluster_only: bool = False, team_variants: bool = False
) -> list[tuple[Key, SweepRun]]:
    """Every simulator run of the benchmark, in (trace, seed, mode, policy) order: one policy
    over one trace each, so the runs spread evenly over the workers."""
    out: list[tuple[Key, SweepRun]] = []
    for name, _, _ in TRACES:
        modes = _modes(name, extra, in_cluster_only, team_variants)
        for seed in seeds:
            spec = _spec(name, seed)
            for mode, names, config_changes, settings in modes:
                config = replace(SimConfig(seed=seed), **config_changes)
                for policy in names:
                    resolved = policies.resolve(policy, settings) if isinstance(policy, str) else policy
                    # a lane run's records carry its lane's figures (GPUs carved, misfits, preemptions)
                    run = SweepRun(spec, resolved, config, keep_records=mode == "lane")
                    out.append(((name, seed, mode, None), run))
            if extra:
                for policy in RESERVE_POLICIES:
                    for after in RESERVE_AFTER_SECONDS:
                        config = replace(SimConfig(seed=seed), reserve_after_s=after)
                        run = SweepRun(spec, policies.resolve(policy), config, keep_records=False)
                        out.append(((name, seed, "reserve", after), run))
    return out


def _weight(run: SweepRun) -> float:
    """Longest first: the perf mix's runs take 10-20x a storm's, dev-starvation's and synthetic's several times."""
    if run.trace.source == PERF_TRACE:
        return 2.0
    return 0.0 if run.trace.source.startswith("reclaim") else 1.0


def rows_of(seeds: list[int], planned: list[tuple[Key, SweepRun]], results: list[SweepResult]) -> list[Row]:
    """The rows of ``results`` (of the runs ``planned``, in that order), each policy judged
    against the baseline of its trace, seed and mode."""
    metrics: dict[Key, dict[str, PolicyMetrics]] = {}
    lanes: dict[tuple[Key, str], dict[str, int]] = {}
    for (key, run), result in zip(planned, results, strict=True):
        metrics.setdefault(key, {})[run.policy.name] = result.metrics
        if key[2] == "lane" and result.records is not None:
            records = result.records
            lanes[(key, run.policy.name)] = {
                "lane_gpus": records.lane_gpus,
                "lane_misfits": records.lane_misfits,
                "lane_preempted": records.lane_preempted,
            }
    rows: list[Row] = []
    for name, _, _ in TRACES:
        for seed in seeds:
            trace = _spec(name, seed).build()
            load, _ = trace.realized_load()
            high = trace.class_order()[-1]
            plain_base: dict[str, Any] = {}
            modes = [key for key in metrics if key[:2] == (name, seed) and key[3] is None]
            for key in modes:
                mode = key[2]
                base = _figures(metrics[key]["baseline"], high, load)
                if mode == "in-cluster":
                    plain_base = base  # SkyPilot alone: what the reservation rows are judged against
                for policy, policy_metrics in metrics[key].items():
                    figures = _figures(policy_metrics, high, load)
                    if mode == "in-cluster":
                        figures = _with_floor(figures, base)
                    if mode == "lane":
                        figures |= lanes.get((key, policy), {})
                    met: dict[str, bool] = {}
                    if policy != "baseline" and mode == "in-cluster":
                        met = _judged_in_cluster(name, figures, base)
                    elif policy != "baseline" and mode == "burst":
                        met = _burst(figures, base)
                    elif policy != "baseline" and mode == "lane":
                        met = _lane_met(policy_metrics, metrics[key]["baseline"], high)
                    harm = no_harm(figures, base) if policy != "baseline" and mode in NO_HARM_MODES else {}
                    rows.append(Row(name, seed, mode, policy, figures, met, harm))
            lane_key, burst_key = (name, seed, "lane", None), (name, seed, "burst", None)
            burst_policy = metrics.get(burst_key, {}).get(LANE_BURST_POLICY)
            if lane_key in metrics and burst_policy is not None:
                # The burst default beside the lanes, on the lane targets and against the same SkyPilot alone.
                lane_base = metrics[lane_key]["baseline"]
                base = _figures(lane_base, high, load)
                figures = _figures(burst_policy, high, load) | {"lane_gpus": 0, "lane_misfits": 0}
                met = _lane_met(burst_policy, lane_base, high)
                label = f"{LANE_BURST_POLICY} (burst)"
                rows.append(Row(name, seed, "lane", label, figures, met, no_harm(figures, base)))
            for key in metrics:
                if key[:3] == (name, seed, "reserve") and key[3] is not None:
                    for policy, policy_metrics in metrics[key].items():
                        figures = _figures(policy_metrics, high, load) | {"reservations": policy_metrics.reservations}
                        met = _judged_in_cluster(name, figures, plain_base)
                        label = f"{policy}, reserve after {key[3] / 3600:g} h"
                        rows.append(Row(name, seed, "reserve", label, figures, met))
    return rows


def run(
    seeds: list[int],
    *,
    workers: int | None = None,
    extra: bool = False,
    in_cluster_only: bool = False,
    team_variants: bool = False,
) -> list[Row]:
    """All rows, in (trace, seed) order, computed by ``workers`` processes (default: every
    usable core); the same rows whatever the number (:mod:`sky_kueue.sim.sweep`)."""
    planned = plan(seeds, extra=extra, in_cluster_only=in_cluster_only, team_variants=team_variants)
    unique, where = deduplicated([r for _, r in planned])
    done, total = 0, len(unique)

    def progress(result: SweepResult) -> None:
        nonlocal done
        done += 1
        print(f"{done}/{total} runs", file=sys.stderr, end="\r" if done < total else "\n", flush=True)

    done_unique = run_sweep(unique, workers=workers, weight=_weight, on_done=progress)
    return rows_of(seeds, planned, [done_unique[i] for i in where])


def deduplicated(runs: list[SweepRun]) -> tuple[list[SweepRun], list[int]]:
    """The distinct runs of ``runs`` and, for each run, the index of its distinct run.

    Why: the in-cluster and lane modes both run SkyPilot alone, ``rank`` and ``safe-place`` on the
    same trace, seed and configuration; a run is a pure function of those
    (:mod:`sky_kueue.sim.sweep`), so each is made once (with its records if any mode keeps them)."""
    index: dict[tuple[TraceSpec, str, SimConfig], int] = {}
    unique: list[SweepRun] = []
    where: list[int] = []
    for run in runs:
        key = (run.trace, run.policy.name, run.config)
        found = index.get(key)
        if found is None:
            index[key] = found = len(unique)
            unique.append(run)
        elif unique[found].policy != run.policy:
            raise ValueError(f"two different policies are both named {run.policy.name!r}")
        elif run.keep_records and not unique[found].keep_records:
            unique[found] = replace(unique[found], keep_records=True)
        where.append(found)
    return unique, where


def _spread(rows: list[Row], key: str) -> str:
    return " / ".join(f"{r.figures[key]:,}" for r in rows)


def _met_cell(row: Row) -> str:
    """``6/7`` and, when some failed, which (``6/7 no max_preemptions``)."""
    if not row.met:
        return "-"
    failed = [name for name, ok in row.met.items() if not ok]
    cell = f"{len(row.met) - len(failed)}/{len(row.met)}"
    return f"{cell} no {', '.join(failed)}" if failed else cell


def markdown(rows: list[Row]) -> str:
    """One table per mode: each cell lists the seeds' values, separated by slashes."""
    out: list[str] = []
    in_cluster = (
        "load",
        "starved",
        "relaunch_starved",
        "max_preemptions",
        "p99_inflation",
        "max_inflation",
        "wasted_gpu_h_per_preempted",
        "in_queue_preemptions",
        "inverted_preemptions",
        "goodput_pct",
        "high_p95_wait_s",
        "safe_holds",
    )
    columns = {
        "in-cluster": in_cluster,
        "burst": (
            "load",
            "relaunch_starved",
            "max_preemptions",
            "p99_wait_after_preemption_s",
            "p99_inflation",
            "wasted_gpu_h_per_preempted",
            "bursts",
            "burst_gpu_hours",
            "burst_cost_usd",
            "goodput_pct",
        ),
        "lane": (
            "load",
            "max_preemptions",
            "relaunch_starved",
            "starved",
            "p50_wait_after_preemption_s",
            "p99_wait_after_preemption_s",
            "goodput_pct",
            "high_p95_wait_s",
            "lane_gpus",
            "lane_misfits",
        ),
        "checkpoint": ("starved", "max_preemptions", "lost_gpu_hours", "goodput_pct", "p99_wait_after_preemption_s"),
        "reserve": ("reservations", *(k for k in in_cluster if k != "safe_holds")),
    }
    for mode, keys in columns.items():
        if not any(r.mode == mode for r in rows):
            continue
        out.append(f"\n{mode}:\n")
        out.append("| trace | policy | " + " | ".join(keys) + " | criteria met (per seed) |")
        out.append("| --- | --- | " + " | ".join("---" for _ in keys) + " | --- |")
        for trace, _, _ in TRACES:
            policies_seen: list[str] = []
            for r in rows:
                if r.mode == mode and r.trace == trace and r.policy not in policies_seen:
                    policies_seen.append(r.policy)
            for policy in policies_seen:
                mine = [r for r in rows if r.mode == mode and r.trace == trace and r.policy == policy]
                met = " / ".join(_met_cell(r) for r in mine)
                cells = " | ".join(_spread(mine, k) for k in keys)
                out.append(f"| {trace} | {policy} | {cells} | {met} |")
    if any(r.mode == "in-cluster" for r in rows):
        out.append("\nin-cluster, where the most-preempted job's preemptions come from:\n")
        out.append(causes_markdown(rows))
    out.append("\n" + verdicts(rows))
    if any(r.no_harm for r in rows):
        out.append("\nno harm (each against SkyPilot alone on the same trace and seed):\n")
        out.append(no_harm_markdown(rows))
    return "\n".join(out)


#: The figure behind each no-harm criterion, and its short name in the table.
_NO_HARM_FIGURES = {
    "max_preemptions": ("max_preemptions", "max"),
    "starved": ("starved", "starved"),
    "in_queue_preemptions": ("in_queue_preemptions", "in-queue"),
    "inverted_preemptions": ("inverted_preemptions", "inverted"),
    "high_p95": ("high_p95_wait_s", "high p95"),
    "goodput": ("goodput_pct", "goodput"),
}


def no_harm_markdown(rows: list[Row]) -> str:
    """Per mode and policy judged on :func:`no_harm`: the runs doing no harm, and every harm as
    ``trace seed: criterion policy's/baseline's`` (the default's question, issue 39 item 3)."""
    bases = {(r.trace, r.seed, r.mode): r.figures for r in rows if r.policy == "baseline"}
    lines = [
        "| mode | policy | runs doing no harm | where it harms (seed: criterion, policy / SkyPilot alone) |",
        "| --- | --- | --- | --- |",
    ]
    seen: list[tuple[str, str]] = []
    for r in rows:
        # a policy of both modes ran once (:func:`deduplicated`): shown with the in-cluster ones
        shown = (r.mode, r.policy) in seen or (r.mode == "lane" and ("in-cluster", r.policy) in seen)
        if r.no_harm and not shown:
            seen.append((r.mode, r.policy))
    for mode, policy in seen:
        mine = [r for r in rows if r.mode == mode and r.policy == policy and r.no_harm]
        ok = sum(1 for r in mine if all(r.no_harm.values()))
        by_trace: dict[str, list[str]] = {}
        for r in mine:
            base = bases[(r.trace, r.seed, r.mode)]
            harms = []
            for criterion, fine in r.no_harm.items():
                if not fine:
                    key, short = _NO_HARM_FIGURES[criterion]
                    harms.append(f"{short} {r.figures[key]:,} / {base[key]:,}")
            if harms:
                by_trace.setdefault(r.trace, []).append(f"s{r.seed} " + ", ".join(harms))
        where = "; ".join(f"{trace}: " + "; ".join(cells) for trace, cells in by_trace.items()) or "-"
        lines.append(f"| {mode} | {policy} | {ok}/{len(mine)} | {where} |")
    return "\n".join(lines)


def _range(values: list[float]) -> str:
    """``lo-hi`` over the seeds (one value when they agree)."""
    lo, hi = min(values), max(values)
    return f"{lo:g}" if lo == hi else f"{lo:g}-{hi:g}"


def _share(rows: list[Row], prefix: str, cause: str) -> str:
    """The range over ``rows`` of ``cause``'s percentage of the ``prefix`` preemptions."""
    shares = []
    for r in rows:
        total = sum(r.figures[f"{prefix}_{c}"] for c in _CAUSES)
        if total:
            shares.append(round(100 * r.figures[f"{prefix}_{cause}"] / total))
    return _range([float(s) for s in shares]) if shares else "-"


_CAUSES = ("reclaim", "higher_class", "own_class_or_lower", "other")


def causes_markdown(rows: list[Row]) -> str:
    """Per trace judged on max preemptions and per in-cluster policy, ranges over the seeds of
    the most-preempted job's preemptions by cause, the share of each cause over the jobs
    preempted 3+ times, and per seed whether the top job's higher-class preemptions alone (and
    with (d)) exceed the allowed max (the floor)."""
    repeat = f"{REPEAT_PREEMPTED_MIN}+"
    lines = [
        "| trace | policy | max preemptions | top job: (a) reclaim | (b) higher class | (c) own class or lower "
        f"| (d) other | (b) share of top job (%) | jobs preempted {repeat} | their (a) / (b) / (c) / (d) (%) "
        "| allowed max | top job's (b) > allowed (per seed) | any job's (b) > allowed (runs) "
        "| top job's (b) + (d) > allowed (per seed) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for trace, _, _ in TRACES:
        if trace in NO_HARM_ONLY_TRACES:
            continue
        seen: list[str] = []
        for r in rows:
            if r.mode == "in-cluster" and r.trace == trace and r.policy not in seen:
                seen.append(r.policy)
        for policy in seen:
            mine = [r for r in rows if r.mode == "in-cluster" and r.trace == trace and r.policy == policy]
            f = [r.figures for r in mine]
            tops = " | ".join(_range([x[f"top_{c}"] for x in f]) for c in _CAUSES)
            top_share = _share(mine, "top", "higher_class")
            shares = " / ".join(_share(mine, "repeat", c) for c in _CAUSES)
            floors = " / ".join("yes" if x["higher_class_floor"] else "no" for x in f)
            anywhere = sum(1 for x in f if x["any_higher_class_floor"])
            with_other = " / ".join("yes" if x["higher_class_and_other_floor"] else "no" for x in f)
            lines.append(
                f"| {trace} | {policy} | {_range([x['max_preemptions'] for x in f])} | {tops} | {top_share} "
                f"| {_range([x['repeat_jobs'] for x in f])} | {shares} "
                f"| {_range([x['allowed_max_preemptions'] for x in f])} | {floors} | {anywhere}/{len(f)} "
                f"| {with_other} |"
            )
    return "\n".join(lines)


def verdicts(rows: list[Row]) -> str:
    """Per mode and policy: runs meeting every criterion, and the criteria missed most."""
    lines = ["| mode | policy | runs meeting all criteria | criteria missed (runs) |", "| --- | --- | --- | --- |"]
    seen: list[tuple[str, str]] = []
    for r in rows:
        if r.met and (r.mode, r.policy) not in seen:
            seen.append((r.mode, r.policy))
    for mode, policy in seen:
        mine = [r for r in rows if r.mode == mode and r.policy == policy and r.met]
        ok = sum(1 for r in mine if all(r.met.values()))
        missed: dict[str, int] = {}
        for r in mine:
            for key, value in r.met.items():
                if not value:
                    missed[key] = missed.get(key, 0) + 1
        text = ", ".join(f"{k} {v}" for k, v in sorted(missed.items(), key=lambda kv: -kv[1])) or "-"
        lines.append(f"| {mode} | {policy} | {ok}/{len(mine)} | {text} |")
    return "\n".join(lines)


def report(seeds: list[int], rows: list[Row]) -> dict[str, Any]:
    """The JSON document of a run (also ``benchmarks/simulate.py``'s ``anti_starvation`` part)."""
    return {
        "seeds": seeds,
        "rows": [r.__dict__ for r in rows],
        "all_criteria_met": {f"{r.trace}/{r.seed}/{r.mode}/{r.policy}": all(r.met.values()) for r in rows if r.met},
        "no_harm": {f"{r.trace}/{r.seed}/{r.mode}/{r.policy}": all(r.no_harm.values()) for r in rows if r.no_harm},
    }


def seeds_argument(text: str) -> list[int]:
    """``--seeds``: comma-separated integers (argparse reports anything else in one line)."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=seeds_argument, default=DEFAULT_SEEDS, help="comma-separated seeds")
    parser.add_argument(
        "--jobs",
        "--workers",
        dest="workers",
        metavar="N",
        type=int,
        default=None,
        help=f"processes (default: the usable cores, here {usable_cores()}; 1: in this one)",
    )
    parser.add_argument("--extra", action="store_true", help="also the checkpoint and reservation modes")
    parser.add_argument("--in-cluster-only", action="store_true", help="only the in-cluster mode (no burst)")
    parser.add_argument("--team", action="store_true", help="also rank+team and its variants (in the cluster)")
    parser.add_argument("--markdown", action="store_true", help="print the README's tables instead of JSON")
    args = parser.parse_args(argv)
    seeds: list[int] = args.seeds
    started = time.perf_counter()
    if args.workers is not None and args.workers < 1:
        parser.error(f"--jobs: expected at least 1, got {args.workers}")
    rows = run(
        seeds, workers=args.workers, extra=args.extra, in_cluster_only=args.in_cluster_only, team_variants=args.team
    )
    if args.markdown:
        print(markdown(rows))
        workers = args.workers or usable_cores()
        print(f"\nwall time {time.perf_counter() - started:.0f} s, {workers} workers", file=sys.stderr)
    else:
        print(json.dumps({**report(seeds, rows), "wall_s": round(time.perf_counter() - started, 1)}, indent=2))
    broken = [r for r in rows if r.mode == "lane" and r.figures.get("lane_preempted", 0)]
    for row in broken:
        print(
            f"lane bound broken: {row.trace} seed {row.seed} {row.policy}: {row.figures['lane_preempted']} "
            "preemptions of Workloads admitted in a lane",
            file=sys.stderr,
        )
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())

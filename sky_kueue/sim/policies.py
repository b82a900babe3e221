"""Resubmission policies: what priority a job's next (or waiting) Workload gets.

Why adapters and not copies: the simulator must measure the aging the controller would
actually apply, so ``aging`` here *is* the controller's configured policy from its
registry (:mod:`sky_kueue.controller.aging`), fed the same :class:`JobHistory` the
controller records, under the same :class:`AgingSettings`. The only policy defined here is
``baseline``: SkyPilot without this project, where a relaunch is a new Workload at the
job's own priority and nobody keeps a history.

Names accepted by :func:`resolve`:

* ``baseline``: SkyPilot today (no controller);
* ``aging``: the controller's configured policy (``settings.policy``; the default ``none``,
  which must match ``baseline``, unless the aging config says otherwise);
* any registered aging policy by name (``bounded``, ``ladder``, ``age``, ``none``, ...).
  ``none`` runs the whole controller path but never boosts, so it must match
  ``baseline`` exactly: a check that the controller path alone changes nothing;
* any of those with ``+safe`` (``rank+safe``, ``baseline+safe``): the same policy plus the
  safe-relaunch rule (:mod:`sky_kueue.controller.aging.safe_relaunch`): after the job's
  ``safe_after_preemptions``-th preemption its relaunch is held out of Kueue until Kueue
  would admit it without borrowing (default :data:`SAFE_AFTER_PREEMPTIONS_DEFAULT`);
* any registered policy with ``+predicted`` (``rank+predicted``): with bursting allowed, a
  job due a burst (``burst_after_preemptions``) bursts at its relaunch only when the
  predictor's wait for its on-prem admission exceeds the cloud start-up plus a margin
  (:mod:`sky_kueue.controller.predicted_burst`); otherwise its relaunch enters Kueue, where the
  relaunch's admission timeout still applies;
* ``safe-place``: ``keep-place`` with one protected level, granted after the 2nd preemption
  and only within nominal quota (``protect_within_nominal``,
  :mod:`sky_kueue.controller.aging.protected_slot`), plus the safe-relaunch rule holding a
  relaunch after its 2nd preemption whether or not a safe place is predicted
  (:data:`SAFE_PLACE_POLICY`, the ``SAFE_PLACE_PROTECT_*`` values, :data:`SAFE_PLACE_RELAUNCH`;
  in the controller the same ``aging.parameters`` and a team's ``safe_after_preemptions: 2``,
  ``safe_hold_only_when_predicted: false``);
* any of those with ``+team`` (``rank+team``): ``+safe`` plus the rule's team-scoped
  nominal reservation (``team_reservation: head`` unless ``safe`` sets a scope): while a
  starved relaunch waits for nominal quota, its own team's pending work of its class or
  lower in its ClusterQueue is held back too, until it is admitted;
* ``baseline`` or a registered policy with ``+lane`` (``rank+lane``) or ``+cohort-lane``: after
  the job's ``after_preemptions``-th preemption its relaunch goes to a relaunch lane, a
  ClusterQueue of nominal quota carved from its team's (``+lane``) or shared by the cohort
  (``+cohort-lane``) that no preemption can reach (:mod:`sky_kueue.sim.lane`); the policy
  still sets the relaunch's priority, which orders the lane.

When a boost is decided mirrors the controller (:mod:`sky_kueue.controller.engine`): when
a Workload is created (the controller reconciles it at once; we take its latency as zero),
and again every :data:`AGING_RESYNC_SECONDS` while it waits, since the age factor grows
with time. Within one pending Workload the boost never goes down (the store only raises
a step's boost).

Re-deciding every waiting Workload every five minutes is most of the cost of a long
simulation, and almost always returns the same boost. For the registry's
:class:`~sky_kueue.controller.aging.policies.FoldPolicy` policies the boost of a waiting
job changes over time only through the age factor, whose points step at known aged
waits (``max_age_seconds / age_weight`` apart, see that module's formula), and not at
all once the boost is at its cap. :meth:`RegistryPolicy.decide` therefore also returns
the earliest time the boost can change; the simulator re-decides at the first resync
tick at or after it, which gives the same boosts at the same ticks as re-deciding at
every tick. Other registered policies are re-decided at every tick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Protocol

from sky_kueue.controller import aging, burst
from sky_kueue.controller.aging import AgingDecision, AgingSettings
from sky_kueue.controller.aging.band import BandPolicy
from sky_kueue.controller.aging.policies import FoldPolicy
from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings, TeamReservationScope
from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedBurstVerdict, gated_verdict
from sky_kueue.sim.lane import LaneScope, LaneSettings

BASELINE = "baseline"
AGING = "aging"
#: A policy name ending in this adds the safe-relaunch rule (``rank+safe``).
SAFE_SUFFIX = "+safe"
#: A policy name ending in this adds the safe-relaunch rule with its team reservation (``rank+team``).
TEAM_SUFFIX = "+team"
#: A policy name ending in this gates its bursts on the predicted on-prem wait (``rank+predicted``),
#: keeping a job on-prem at most ``PredictedBurstSettings.max_stays`` times.
PREDICTED_SUFFIX = "+predicted"
#: A policy name ending in this sends relaunches to the team's relaunch lane (``rank+lane``) ...
LANE_SUFFIX = "+lane"
#: ... or to the cohort's shared one (``rank+cohort-lane``).
COHORT_LANE_SUFFIX = "+cohort-lane"
#: The ``safe-place`` recipe (module docstring): its aging settings over the given ones...
SAFE_PLACE = "safe-place"
SAFE_PLACE_POLICY = "keep-place"
SAFE_PLACE_PROTECT_LEVELS = 1
SAFE_PLACE_PROTECT_AFTER_PREEMPTIONS = 2
#: ... and its safe-relaunch rule (the 30-min hold of the rule's default).
SAFE_PLACE_RELAUNCH = SafeRelaunchSettings(
    safe_after_preemptions=SAFE_PLACE_PROTECT_AFTER_PREEMPTIONS, hold_only_when_predicted=False
)
#: ``+safe`` policies hold a relaunch after this many preemptions unless told otherwise
#: (``simulate --safe-after``).
SAFE_AFTER_PREEMPTIONS_DEFAULT = 2
#: How often the controller re-ages a Workload that is still waiting (``controller run
#: --reage-interval``, ``sky_kueue.controller.manager.REAGE_INTERVAL_SECONDS``).
AGING_RESYNC_SECONDS = 300.0


#: ``simulate --allow-burst`` when the aging settings leave it open: burst a job's relaunch after
#: this many preemptions since its last successful run. Measured (``benchmarks/anti_starvation.py``,
#: reclaim storms and synthetic, seeds 0-2, with ``rank``): 1 cuts the p99 wait after preemption
#: 90-640x on all 9 runs; 2 cuts it 9-19x on 7 runs but only 2.0-2.4x on the other two (the
#: job ran for hours between its two preemptions, and that run counts as waiting after the
#: first); 3 and 1,800 s only 2-15x. 1 costs at most 1.6x the burst GPU-hours of 2.
ALLOW_BURST_DEFAULT_PREEMPTIONS = 1
#: ``simulate --allow-burst``: a relaunch waiting longer than this in Kueue fails over to a cloud
#: (SkyPilot's ``kubernetes.kueue.admission_timeout`` set by the controller on relaunches).
ALLOW_BURST_DEFAULT_RELAUNCH_WAIT_SECONDS = 900.0


def with_burst_defaults(settings: AgingSettings) -> AgingSettings:
    """``settings`` with the ``--allow-burst`` defaults where its burst settings are unset."""
    return replace(
        settings,
        burst_after_preemptions=settings.burst_after_preemptions or ALLOW_BURST_DEFAULT_PREEMPTIONS,
        burst_max_predicted_wait_seconds=settings.burst_max_predicted_wait_seconds
        or ALLOW_BURST_DEFAULT_RELAUNCH_WAIT_SECONDS,
    )


class UnknownSimPolicyError(ValueError):
    """A policy name that is neither built in nor registered."""


@dataclass(frozen=True)
class Decision:
    """A boost, and the earliest time it can change while the job keeps waiting."""

    boost: int
    #: None: not before something else happens to the job (preemption, admission).
    next_change_s: float | None
    #: Band policies: the boost the Workload gets once admitted (None: it keeps its
    #: priority), the boost after ``protect_s`` seconds of the run (None: whole run).
    admitted_boost: int | None = None
    released_boost: int | None = None
    protect_s: float | None = None
    #: Grant ``admitted_boost`` only when the job fits its ClusterQueue's nominal quota with the
    #: admitted Workloads at that level or above, else ``released_boost``
    #: (``AgingSettings.protect_within_nominal``, :mod:`sky_kueue.controller.aging.protected_slot`).
    protect_within_nominal: bool = False


class ResubmissionPolicy(Protocol):
    """Decides the boost of a job's pending Workload from the job's history."""

    @property
    def name(self) -> str: ...

    @property
    def summary(self) -> str: ...

    @property
    def keeps_history(self) -> bool:
        """Whether the simulator must record a :class:`JobHistory` for each job."""
        ...

    @property
    def resync_seconds(self) -> float | None:
        """Re-decide waiting Workloads this often (None: only when they are created)."""
        ...

    def decide(self, history: JobHistory | None, now: float) -> Decision:
        """Priority points to add to the job's base priority at ``now``."""
        ...

    def bursts_after_preemption(self, history: JobHistory | None, now: float) -> bool:
        """With bursting allowed: whether the job's relaunch goes to a cloud instead of Kueue."""
        ...

    @property
    def relaunch_wait_limit_s(self) -> float | None:
        """With bursting allowed: a relaunch waiting longer than this in Kueue bursts."""
        ...

    @property
    def safe_relaunch(self) -> SafeRelaunchSettings | None:
        """The safe-relaunch rule's settings (None: relaunches enter Kueue at once)."""
        ...

    @property
    def predicted_burst(self) -> PredictedBurstSettings | None:
        """With bursting allowed: burst at the relaunch only when the predicted on-prem wait
        exceeds these thresholds (None: :meth:`bursts_after_preemption` decides alone)."""
        ...

    def predicted_burst_verdict(
        self, history: JobHistory | None, now: float, predicted_wait: Callable[[], float | None]
    ) -> PredictedBurstVerdict | None:
        """The predictor-gated decision for a relaunch (None: not this policy's, or not due).

        ``predicted_wait`` is called only when the job is due a burst (it runs the model)."""
        ...


@dataclass(frozen=True)
class BaselinePolicy:
    """SkyPilot today: every relaunch is a new Workload at the job's own priority."""

    name: str = BASELINE
    summary: str = "SkyPilot 0.14.1 without sky-kueue: relaunch at the back at the same priority"
    keeps_history: bool = False
    resync_seconds: float | None = None

    relaunch_wait_limit_s: float | None = None
    safe_relaunch: SafeRelaunchSettings | None = None
    predicted_burst: PredictedBurstSettings | None = None
    lane: LaneSettings | None = None

    def decide(self, history: JobHistory | None, now: float) -> Decision:
        return Decision(0, None)

    def predicted_burst_verdict(
        self, history: JobHistory | None, now: float, predicted_wait: Callable[[], float | None]
    ) -> PredictedBurstVerdict | None:
        return None

    def bursts_after_preemption(self, history: JobHistory | None, now: float) -> bool:
        return False  # SkyPilot alone relaunches into Kueue; only its admission_timeout bursts


@dataclass(frozen=True)
class RegistryPolicy:
    """A policy of the controller's aging registry, as the controller would apply it."""

    name: str
    policy: aging.AgingPolicy
    settings: AgingSettings
    resync_seconds: float | None = AGING_RESYNC_SECONDS
    keeps_history: bool = True
    safe_relaunch: SafeRelaunchSettings | None = None
    predicted_burst: PredictedBurstSettings | None = None
    lane: LaneSettings | None = None

    @property
    def summary(self) -> str:
        safe = "" if self.safe_relaunch is None else " + safe relaunch"
        if self.predicted_burst is not None:
            safe += " + predicted-wait burst gate"
        if self.lane is not None:
            safe += " + " + lane_summary(self.lane)
        return f"controller policy {self.policy.name!r}: {self.policy.summary}{safe}"

    def predicted_burst_verdict(
        self, history: JobHistory | None, now: float, predicted_wait: Callable[[], float | None]
    ) -> PredictedBurstVerdict | None:
        """The controller's gated decision (:mod:`sky_kueue.controller.predicted_burst`) for a
        job due a burst by its preemptions since its last successful run."""
        gate = self.predicted_burst
        after = self.settings.burst_after_preemptions
        if gate is None or history is None or after is None:
            return None
        return gated_verdict(burst.preemptions_since_success(history, self.settings, now), after, gate, predicted_wait)

    @property
    def relaunch_wait_limit_s(self) -> float | None:
        return self.settings.burst_max_predicted_wait_seconds

    def bursts_after_preemption(self, history: JobHistory | None, now: float) -> bool:
        """The controller's burst verdict on the preemption count (:mod:`sky_kueue.controller.burst`)."""
        if history is None or self.safe_relaunch is not None or self.predicted_burst is not None:
            return False  # the safe-relaunch rule, or the predicted-wait gate at the relaunch, decides
        verdict = burst.decide_burst(history, self.settings, now)
        return verdict is not None and verdict.reason is burst.BurstReason.PREEMPTIONS

    def decide(self, history: JobHistory | None, now: float) -> Decision:
        if history is None:
            return Decision(0, None)
        decision = self.policy.decide(history, self.settings, now)
        return Decision(
            decision.boost,
            self._next_change(decision, now),
            decision.admitted_boost,
            decision.released_boost,
            decision.protect_seconds,
            self.settings.protect_within_nominal,
        )

    def _next_change(self, decision: AgingDecision, now: float) -> float | None:
        if self.resync_seconds is None:
            return None
        policy = self.policy
        if isinstance(policy, BandPolicy):
            return None  # a band level changes only with a preemption or an admission
        if not isinstance(policy, FoldPolicy):
            return now  # unknown formula: re-decide at every resync tick
        settings = self.settings
        if not policy.use_age or settings.age_weight == 0 or decision.uncapped_boost >= decision.boost_limit:
            return None
        # Age points step when the aged wait reaches max_age * k / age_weight.
        next_points = decision.age_points + 1
        if next_points > settings.age_weight:
            return None
        aged_wait_at_step = settings.max_age_seconds * next_points / settings.age_weight
        return now + max(aged_wait_at_step - decision.aged_wait_seconds, 0.0)


def lane_summary(lane: LaneSettings) -> str:
    """The lane in words, for a policy's summary."""
    scope = "team's" if lane.scope is LaneScope.TEAM else "cohort's shared"
    return f"{scope} {lane.gpus}-GPU relaunch lane after {lane.after_preemptions} preemptions"


def names() -> tuple[str, ...]:
    """Every name :func:`resolve` accepts without a suffix (``+safe``, ``+team``, ``+predicted``, ``+lane``)."""
    return (BASELINE, AGING, SAFE_PLACE, *aging.policy_names())


def safe_settings(settings: AgingSettings, safe: SafeRelaunchSettings | None = None) -> SafeRelaunchSettings:
    """The rule's settings for a ``+safe`` policy: ``safe`` (default: hold after
    :data:`SAFE_AFTER_PREEMPTIONS_DEFAULT` preemptions), bursting from a hold when the
    predicted safe wait exceeds the aging settings' ``burst_max_predicted_wait_seconds``
    (set by ``--allow-burst``) unless ``safe`` sets its own limit."""
    safe = safe if safe is not None else SafeRelaunchSettings(safe_after_preemptions=SAFE_AFTER_PREEMPTIONS_DEFAULT)
    if safe.burst_max_predicted_wait_seconds is None and settings.burst_max_predicted_wait_seconds is not None:
        safe = replace(safe, burst_max_predicted_wait_seconds=settings.burst_max_predicted_wait_seconds)
    return safe


def resolve(
    name: str,
    settings: AgingSettings | None = None,
    safe: SafeRelaunchSettings | None = None,
    predicted: PredictedBurstSettings | None = None,
    lane: LaneSettings | None = None,
) -> ResubmissionPolicy:
    """The policy called ``name`` (see the module docstring).

    Args:
        safe: the safe-relaunch settings of ``+safe`` policies (see :func:`safe_settings`).
        predicted: the thresholds of ``+predicted`` policies (default: the controller's defaults).
        lane: the size and count of ``+lane`` and ``+cohort-lane`` policies (their scope
            comes from the suffix; default :class:`~sky_kueue.sim.lane.LaneSettings`).

    Raises:
        UnknownSimPolicyError: neither built in nor registered (the message lists names).
    """
    settings = settings if settings is not None else AgingSettings()
    for suffix, scope in ((COHORT_LANE_SUFFIX, LaneScope.COHORT), (LANE_SUFFIX, LaneScope.TEAM)):
        if name.endswith(suffix):
            inner = resolve(name[: -len(suffix)], settings)
            if (
                not isinstance(inner, (BaselinePolicy, RegistryPolicy))
                or inner.safe_relaunch is not None
                or inner.predicted_burst is not None
                or inner.lane is not None
            ):
                raise UnknownSimPolicyError(
                    f"unknown policy {name!r}; add {suffix} once, to baseline or a registered policy "
                    f"({', '.join(aging.policy_names())}) without +safe, +team or +predicted"
                )
            chosen = replace(lane if lane is not None else LaneSettings(), scope=scope)
            if isinstance(inner, BaselinePolicy):
                return replace(inner, name=name, lane=chosen, summary=f"{inner.summary} + {lane_summary(chosen)}")
            return replace(inner, name=name, lane=chosen)
    if name.endswith(PREDICTED_SUFFIX):
        inner = resolve(name[: -len(PREDICTED_SUFFIX)], settings)
        if (
            not isinstance(inner, RegistryPolicy)
            or inner.safe_relaunch is not None
            or inner.predicted_burst is not None
            or inner.lane is not None
        ):
            raise UnknownSimPolicyError(
                f"unknown policy {name!r}; add {PREDICTED_SUFFIX} once, to one of {', '.join(names()[1:])}"
            )
        gate = predicted if predicted is not None else PredictedBurstSettings()
        return replace(inner, name=name, predicted_burst=gate)
    if name.endswith(TEAM_SUFFIX):
        safe = safe_settings(settings, safe)
        if safe.team_reservation is TeamReservationScope.OFF:
            safe = replace(safe, team_reservation=TeamReservationScope.HEAD)
        inner_name = name[: -len(TEAM_SUFFIX)]
        if inner_name.endswith((SAFE_SUFFIX, TEAM_SUFFIX)):
            choices = ", ".join(names())
            raise UnknownSimPolicyError(f"unknown policy {name!r}; add {TEAM_SUFFIX} once, to one of {choices}")
        with_safe = resolve(inner_name + SAFE_SUFFIX, settings, safe)
        assert isinstance(with_safe, (BaselinePolicy, RegistryPolicy))
        return replace(with_safe, name=name)
    if name.endswith(SAFE_SUFFIX):
        inner = resolve(name[: -len(SAFE_SUFFIX)], settings)
        if (
            inner.safe_relaunch is not None
            or not isinstance(inner, (BaselinePolicy, RegistryPolicy))
            or inner.lane is not None
        ):
            raise UnknownSimPolicyError(
                f"unknown policy {name!r}; add {SAFE_SUFFIX} once, to one of {', '.join(names())}"
            )
        return replace(inner, name=name, safe_relaunch=safe_settings(settings, safe))
    if name == SAFE_PLACE:
        recipe = replace(
            settings,
            policy=SAFE_PLACE_POLICY,
            protect_levels=SAFE_PLACE_PROTECT_LEVELS,
            protect_after_preemptions=SAFE_PLACE_PROTECT_AFTER_PREEMPTIONS,
            protect_within_nominal=True,
        )
        inner = resolve(SAFE_PLACE_POLICY + SAFE_SUFFIX, recipe, safe if safe is not None else SAFE_PLACE_RELAUNCH)
        assert isinstance(inner, RegistryPolicy)
        return replace(inner, name=name)
    if name == BASELINE:
        return BaselinePolicy()
    registry_name = settings.policy if name == AGING else name
    try:
        policy = aging.get_policy(registry_name)
    except aging.UnknownPolicyError:
        choices = ", ".join(names())
        raise UnknownSimPolicyError(
            f"unknown policy {name!r}; choose from {choices} (each may end in {SAFE_SUFFIX})"
        ) from None
    return RegistryPolicy(name=name, policy=policy, settings=settings)

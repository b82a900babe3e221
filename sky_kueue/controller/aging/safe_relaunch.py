"""Safe relaunch: hold a repeatedly preempted job's relaunch until it would not borrow.

Why: a Workload admitted into *borrowed* quota is reclaimed whenever the quota's owner
returns, whatever the priorities (Kueue ``reclaimWithinCohort``;
``pkg/scheduler/preemption/preemption.go`` and KEP-1714's cohort semantics), and a SkyPilot
relaunch is a new Workload that Kueue admits into idle borrowed quota again as soon as it
can. Ordering (``rank``) or protection (``protect``) only chooses which borrower pays. The
one thing this project knows that no peer scheduler does is whether the admission Kueue
would make *now* is borrowed or nominal (:func:`sky_kueue.kueue.whatif.quick_verdict`
reports ``borrowing``: the flavor assigner's ``FindHeightOfLowestSubtreeThatFits`` height,
0 when every flavor/resource fits in the ClusterQueue's own nominal quota; Kueue
``pkg/scheduler/flavorassigner/flavorassigner.go``). So after its ``k``-th preemption a
job's relaunch is *held* (not offered to Kueue; the controller sets ``spec.active: false``
on its Workload, which leaves a gated pod group untouched and requeues it at its creation
time when reactivated, Kueue ``pkg/workload/workload.go`` ``GetQueueOrderTimestamp``) until
Kueue would admit it without borrowing, in its own cluster or in another cluster of its
team, and then released there. Holding is bounded (``safe_max_hold_seconds``), after which
the relaunch goes to Kueue as it would without this rule; a team that may burst goes to
its cloud when the predicted wait for a safe place exceeds its limit.

This module is the decision only, pure (no I/O, no clock): one implementation for the
controller and the simulator. Interface (stable; additions only)::

    settings = SafeRelaunchSettings(safe_after_preemptions=2, safe_max_hold_seconds=1800)
    own = placement_from_verdict("ctx-1", quick_verdict(engine, wl), predicted_safe_wait_seconds=240)
    decision = decide_safe_relaunch(
        SafeRelaunchInput(preemptions=2, held_seconds=None, own=own, others=(...), burst_clouds=("aws",)),
        settings,
    )
    decision.kind        # SafeRelaunchKind.RUN_NOW / HOLD / RELEASE_TIMEOUT / RELEASE_SAFE / BURST
    decision.reason      # "held: waiting for nominal quota (predicted 4m)"
    decision.cluster     # RELEASE_SAFE / RUN_NOW: where it runs; decision.cloud: BURST target
    decision.holds       # whether the Workload must stay (or become) inactive

Order of the rules (first match wins):

1. the rule is off for the team, or the job has fewer than ``safe_after_preemptions``
   preemptions: ``RUN_NOW`` in its own cluster (exactly today's behaviour);
2. Kueue would admit it in its own cluster without borrowing, now or when its turn in the
   queue comes (:attr:`Placement.safe_when_admitted`: a hold would only delay it):
   ``RUN_NOW`` if it was never held, else ``RELEASE_SAFE(own)``;
3. Kueue would admit it now without borrowing in another cluster of the team (first in
   the caller's order): ``RELEASE_SAFE(that cluster)``;
4. it has been held ``safe_max_hold_seconds``: ``RELEASE_TIMEOUT`` (released to its own
   cluster's queue, as without the rule);
5. the team may burst (``burst_clouds`` non-empty and ``burst_max_predicted_wait_seconds``
   set) and the shortest predicted wait for a safe place exceeds that limit, or no
   cluster predicts one at all: ``BURST(first cloud)``;
6. with ``hold_only_when_predicted``, no cluster predicts a safe place within the hold that
   is left: ``RUN_NOW`` (never held) or ``RELEASE_TIMEOUT`` (held);
7. otherwise ``HOLD``, with the shortest predicted wait for a safe place (None: unknown).

**Team-scoped nominal reservation** (:attr:`SafeRelaunchSettings.team_reservation`, off by
default). Why: Kueue judges borrowing on the ClusterQueue's *total* usage and reclaims its
newest, lowest-priority admission first, so a team living above its nominal quota keeps that
quota full with its own fresh work and a held relaunch almost never finds a safe place
(``tests/sim/test_safe_relaunch.py``'s counter-example). With the reservation, when rules
1-4 do not apply, the caller also passes :attr:`SafeRelaunchInput.own_reserved`: the own
cluster's placement as if the team's own pending Workloads of the relaunch's class or lower
in the same ClusterQueue were held back too (:func:`team_work_to_hold` says which: all of
them with ``head``, only those created after the relaunch with ``newer``). If that placement
is safe now, or predicts a safe place within the hold left, the decision is taken on it and
says :attr:`SafeRelaunchDecision.reserves_team_quota`: the caller keeps that work inactive
(``spec.active: false``, the reservation lever of ``sky_kueue.sim.reservation`` scoped to
one team) until the relaunch is admitted, released by timeout, or sent to a cloud, so the
next nominal quota the team frees goes to the relaunch. Other teams' work is never held.
``team_reservation_min_wait_seconds`` reserves only when the safe wait predicted *without*
the reservation is unknown or longer than that; ``team_reservation_max_held`` caps how many
Workloads one reservation holds back (the first ones in Kueue's order, which would take the
quota first). Measured in the simulator (``rank+team``, ``benchmarks/anti_starvation.py
--team``), it does not pay: the controller does not apply it and :meth:`SafeRelaunchSettings.
from_mapping` does not accept its keys (benchmarks/README.md, "team reservation").

A held job is re-decided by the caller whenever the cluster changes (an admission, a
completion, a preemption) and at least at its hold deadline (:attr:`SafeRelaunchDecision.
release_by_seconds`). While it runs in nominal quota nothing about its class or priority
changes: this rule touches only *when and where* a relaunch enters Kueue.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from sky_kueue.kueue.predictor import VerdictKind
from sky_kueue.kueue.whatif import QuickVerdict

#: Bound on a hold: after this long a held relaunch goes to Kueue as without the rule.
#: 30 min: about the p95 wait of a fresh low-class job on the reclaim storms, so holding
#: longer than that costs more than the reclaim it avoids.
DEFAULT_SAFE_MAX_HOLD_SECONDS = 1_800.0
#: See :attr:`SafeRelaunchSettings.hold_only_when_predicted`.
DEFAULT_HOLD_ONLY_WHEN_PREDICTED = True
#: The rule is off unless configured (a team opts in with ``safe_after_preemptions``).
DEFAULT_SAFE_AFTER_PREEMPTIONS: int | None = None


class TeamReservationScope(str, Enum):
    """Which of the team's own pending Workloads a starved relaunch's reservation holds back."""

    #: No reservation (the rule as before).
    OFF = "off"
    #: Only Workloads created after the relaunch: older team work keeps its place ahead of it.
    NEWER = "newer"
    #: Every pending Workload of the relaunch's class or lower: the relaunch is first in its team.
    HEAD = "head"


class SafeRelaunchKind(str, Enum):
    """What happens to the job's relaunch now."""

    #: Not subject to the rule, or safe in its own cluster without a hold: enter Kueue now.
    RUN_NOW = "run-now"
    #: Keep the relaunch out of Kueue (``spec.active: false``).
    HOLD = "hold"
    #: Held ``safe_max_hold_seconds``: enter Kueue in the own cluster, as without the rule.
    RELEASE_TIMEOUT = "release-timeout"
    #: A held (or about to be held) relaunch fits nominal quota in :attr:`~SafeRelaunchDecision.cluster`.
    RELEASE_SAFE = "release-safe"
    #: The predicted wait for a safe place exceeds the team's limit: go to :attr:`~SafeRelaunchDecision.cloud`.
    BURST = "burst"


class SafeRelaunchSettingsError(ValueError):
    """A safe-relaunch setting is invalid; the message is one line naming the key."""


@dataclass(frozen=True)
class SafeRelaunchSettings:
    """The tunables of the rule, for one team (see :meth:`for_team` for per-team values).

    ``safe_after_preemptions``: hold the relaunch after this many preemptions of the job
    (None: the rule is off). ``safe_max_hold_seconds``: the longest hold.
    ``burst_max_predicted_wait_seconds``: a team that may burst goes to its cloud when the
    predicted wait for a safe place exceeds this (None: never burst from a hold).
    ``teams``: per-team ``safe_after_preemptions`` overriding the default (None: off).
    """

    safe_after_preemptions: int | None = DEFAULT_SAFE_AFTER_PREEMPTIONS
    safe_max_hold_seconds: float = DEFAULT_SAFE_MAX_HOLD_SECONDS
    burst_max_predicted_wait_seconds: float | None = None
    teams: Mapping[str, int | None] = field(default_factory=dict)
    #: Hold only when some cluster predicts a safe place within the hold that is left; with
    #: none predicted in time, the relaunch goes to Kueue at once (a hold that can only time
    #: out costs its whole length and saves nothing).
    hold_only_when_predicted: bool = DEFAULT_HOLD_ONLY_WHEN_PREDICTED
    #: Team-scoped nominal reservation (module docstring): which of the team's own work to hold back.
    team_reservation: TeamReservationScope = TeamReservationScope.OFF
    #: Reserve only when the safe wait predicted without the reservation is unknown or longer than this.
    team_reservation_min_wait_seconds: float | None = None
    #: At most this many Workloads held back by one reservation (None: no cap).
    team_reservation_max_held: int | None = None

    def __post_init__(self) -> None:
        _check_count("safe_after_preemptions", self.safe_after_preemptions)
        _check_count("team_reservation_max_held", self.team_reservation_max_held)
        _check_seconds("team_reservation_min_wait_seconds", self.team_reservation_min_wait_seconds, allow_none=True)
        for team, value in self.teams.items():
            _check_count(f"teams.{team}", value)
        _check_seconds("safe_max_hold_seconds", self.safe_max_hold_seconds, allow_none=False)
        _check_seconds("burst_max_predicted_wait_seconds", self.burst_max_predicted_wait_seconds, allow_none=True)

    @property
    def enabled(self) -> bool:
        """Whether the rule applies to any team."""
        return self.safe_after_preemptions is not None or any(v is not None for v in self.teams.values())

    def after_preemptions(self, team: str | None) -> int | None:
        """``safe_after_preemptions`` for ``team`` (its override, else the default)."""
        if team is not None and team in self.teams:
            return self.teams[team]
        return self.safe_after_preemptions

    def for_team(self, team: str | None) -> SafeRelaunchSettings:
        """These settings with ``team``'s ``safe_after_preemptions`` as the default."""
        return SafeRelaunchSettings(
            safe_after_preemptions=self.after_preemptions(team),
            safe_max_hold_seconds=self.safe_max_hold_seconds,
            burst_max_predicted_wait_seconds=self.burst_max_predicted_wait_seconds,
            hold_only_when_predicted=self.hold_only_when_predicted,
            team_reservation=self.team_reservation,
            team_reservation_min_wait_seconds=self.team_reservation_min_wait_seconds,
            team_reservation_max_held=self.team_reservation_max_held,
        )

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any] | None, *, where: str = "safe_relaunch") -> SafeRelaunchSettings:
        """Settings from a config mapping (keys as the fields; absent keys keep defaults).

        Raises:
            SafeRelaunchSettingsError: unknown key, wrong type or out of range (one line).
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise SafeRelaunchSettingsError(f"{where}: expected a mapping, got {type(data).__name__}")
        known = (
            "safe_after_preemptions",
            "safe_max_hold_seconds",
            "burst_max_predicted_wait_seconds",
            "teams",
            "hold_only_when_predicted",
        )
        for key in data:
            if key not in known:
                raise SafeRelaunchSettingsError(f"{where}: unknown key {str(key)!r}; known keys: {', '.join(known)}")
        teams = data.get("teams", {})
        only_predicted = data.get("hold_only_when_predicted", DEFAULT_HOLD_ONLY_WHEN_PREDICTED)
        if not isinstance(only_predicted, bool):
            raise SafeRelaunchSettingsError(
                f"{where}.hold_only_when_predicted: expected true or false, got {only_predicted!r}"
            )
        if not isinstance(teams, Mapping):
            raise SafeRelaunchSettingsError(f"{where}.teams: expected a mapping team: count, got {teams!r}")
        try:
            return cls(
                safe_after_preemptions=data.get("safe_after_preemptions", DEFAULT_SAFE_AFTER_PREEMPTIONS),
                safe_max_hold_seconds=data.get("safe_max_hold_seconds", DEFAULT_SAFE_MAX_HOLD_SECONDS),
                burst_max_predicted_wait_seconds=data.get("burst_max_predicted_wait_seconds"),
                teams={str(k): v for k, v in teams.items()},
                hold_only_when_predicted=only_predicted,
            )
        except SafeRelaunchSettingsError as err:
            raise SafeRelaunchSettingsError(f"{where}.{err}") from None

    def to_mapping(self) -> dict[str, Any]:
        return {
            "safe_after_preemptions": self.safe_after_preemptions,
            "safe_max_hold_seconds": self.safe_max_hold_seconds,
            "burst_max_predicted_wait_seconds": self.burst_max_predicted_wait_seconds,
            "teams": dict(self.teams),
            "hold_only_when_predicted": self.hold_only_when_predicted,
        }


def _check_count(key: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SafeRelaunchSettingsError(f"{key}: expected an integer >= 1 or null, got {value!r}")


def _check_seconds(key: str, value: object, *, allow_none: bool) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise SafeRelaunchSettingsError(f"{key}: expected a finite number of seconds > 0, got {value!r}")


@dataclass(frozen=True)
class Placement:
    """The predictor's answer for the job's relaunch in one cluster.

    ``admits_now``: Kueue would admit it in its next cycles (possibly after preempting).
    ``borrows``: that admission would use quota beyond the ClusterQueue's nominal quota
    for some flavor/resource (reclaimable). ``predicted_safe_wait_seconds``: the predicted
    wait until Kueue would admit it there without borrowing (None: unknown or never
    within the predictor's horizon).
    """

    cluster: str
    admits_now: bool
    borrows: bool
    predicted_safe_wait_seconds: float | None = None
    #: Why it is not safe now, when the predictor can say more than "it borrows" (e.g. the
    #: protected level it would take does not fit nominal quota); shown in a hold's reason.
    why: str = ""

    @property
    def safe_now(self) -> bool:
        """Admitted now within nominal quota: the owner's return cannot reclaim it."""
        return self.admits_now and not self.borrows

    @property
    def safe_when_admitted(self) -> bool:
        """Not admitted now, but its admission (when its turn comes) stays within nominal quota:
        waiting in Kueue's queue costs nothing that a hold would save."""
        return not self.admits_now and not self.borrows

    @property
    def safe_wait_seconds(self) -> float | None:
        """0 when safe now, else the predicted wait for a safe admission."""
        return 0.0 if self.safe_now else self.predicted_safe_wait_seconds


def placement_from_verdict(
    cluster: str, verdict: QuickVerdict, *, predicted_safe_wait_seconds: float | None = None
) -> Placement:
    """A :class:`Placement` from the model's what-if verdict for the relaunch's Workload.

    ``verdict.borrowing`` is the flavor assigner's borrowing height of the chosen
    assignment (0: within the ClusterQueue's nominal quota for every flavor/resource).
    """
    admits = verdict.kind in (VerdictKind.ADMITTED, VerdictKind.ADMITTED_AFTER_PREEMPTION)
    return Placement(
        cluster=cluster,
        admits_now=admits,
        borrows=verdict.borrowing,
        predicted_safe_wait_seconds=predicted_safe_wait_seconds,
    )


@dataclass(frozen=True)
class SafeRelaunchInput:
    """What the decision needs about one job's relaunch.

    ``preemptions``: the job's preemptions so far. ``held_seconds``: how long its relaunch
    has been held (None: not held yet). ``own``: its own cluster; ``others``: its team's
    other clusters, in preference order. ``burst_clouds``: clouds the team may burst to
    (empty: none).
    """

    preemptions: int
    held_seconds: float | None
    own: Placement
    others: tuple[Placement, ...] = ()
    burst_clouds: tuple[str, ...] = ()
    team: str | None = None
    #: The own cluster's placement as if the team's work :func:`team_work_to_hold` names were
    #: inactive (None: not computed; the team reservation is then not considered).
    own_reserved: Placement | None = None


@dataclass(frozen=True)
class SafeRelaunchDecision:
    """The rule's verdict on one relaunch, with the reason a user reads."""

    kind: SafeRelaunchKind
    reason: str
    #: Where the relaunch runs (RUN_NOW, RELEASE_SAFE, RELEASE_TIMEOUT); None for HOLD and BURST.
    cluster: str | None = None
    #: BURST only: the cloud the job goes to.
    cloud: str | None = None
    #: The shortest predicted wait for a safe place (None: unknown or not asked).
    predicted_wait_seconds: float | None = None
    #: HOLD only: seconds of hold left before RELEASE_TIMEOUT.
    release_by_seconds: float | None = None
    #: The team's own newer work must stay (or become) inactive until this relaunch is admitted.
    reserves_team_quota: bool = False

    @property
    def holds(self) -> bool:
        """Whether the relaunch stays out of Kueue (its Workload inactive)."""
        return self.kind is SafeRelaunchKind.HOLD

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "reason": self.reason,
            "cluster": self.cluster,
            "cloud": self.cloud,
            "predicted_wait_seconds": self.predicted_wait_seconds,
            "release_by_seconds": self.release_by_seconds,
            "reserves_team_quota": self.reserves_team_quota,
        }


def format_duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``4m``, ``1h05m``."""
    whole = max(round(seconds), 0)
    if whole < 60:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m"


def _shortest_safe_wait(placements: tuple[Placement, ...]) -> float | None:
    waits = [w for w in (p.safe_wait_seconds for p in placements) if w is not None]
    return min(waits) if waits else None


def decide_safe_relaunch(job: SafeRelaunchInput, settings: SafeRelaunchSettings) -> SafeRelaunchDecision:
    """The rule (see the module docstring for the order) applied to one relaunch."""
    plain = _decide(job, settings)
    reserved = job.own_reserved
    if (
        settings.team_reservation is TeamReservationScope.OFF
        or reserved is None
        or not _team_reservation_may_help(job, plain, settings)
    ):
        return plain
    with_reservation = _decide(replace(job, own=reserved, others=()), settings)
    if with_reservation.kind is SafeRelaunchKind.HOLD or (
        with_reservation.kind in (SafeRelaunchKind.RUN_NOW, SafeRelaunchKind.RELEASE_SAFE) and reserved.safe_now
    ):
        return replace(
            with_reservation,
            reason=f"{with_reservation.reason}; team's newer work held back",
            reserves_team_quota=True,
        )
    return plain


def _team_reservation_may_help(
    job: SafeRelaunchInput, plain: SafeRelaunchDecision, settings: SafeRelaunchSettings
) -> bool:
    """Whether the plain decision leaves the relaunch unsafe and within the hold bound."""
    k = settings.after_preemptions(job.team)
    if k is None or job.preemptions < k:
        return False
    if job.own.safe_now or job.own.safe_when_admitted or any(other.safe_now for other in job.others):
        return False
    if plain.kind in (SafeRelaunchKind.BURST, SafeRelaunchKind.RELEASE_SAFE):
        return False
    waited = job.held_seconds if job.held_seconds is not None else 0.0
    if waited >= settings.safe_max_hold_seconds:
        return False
    floor = settings.team_reservation_min_wait_seconds
    predicted = plain.predicted_wait_seconds
    return floor is None or predicted is None or predicted > floor


@dataclass(frozen=True)
class TeamWorkload:
    """A Workload as the team reservation sees it: Kueue's order key and the job's class.

    ``class_priority``: the value of its WorkloadPriorityClass (not a band level or boost: the
    reservation never holds a higher class). ``created_at``: its queue-order time, seconds.
    """

    key: str
    class_priority: int
    created_at: float


def team_work_to_hold(
    relaunch: TeamWorkload, pending: Sequence[TeamWorkload], settings: SafeRelaunchSettings
) -> tuple[str, ...]:
    """Keys of the team's pending Workloads one reservation holds back.

    ``pending``: the team's other pending Workloads in the relaunch's ClusterQueue, in Kueue's
    order (the caller's: priority, then queue-order time). Held: the relaunch's class or lower,
    and with ``newer`` created after it; with ``team_reservation_max_held`` only the first that
    many (they would take the freed quota first).
    """
    scope = settings.team_reservation
    if scope is TeamReservationScope.OFF:
        return ()
    held = [
        w.key
        for w in pending
        if w.key != relaunch.key
        and w.class_priority <= relaunch.class_priority
        and (scope is TeamReservationScope.HEAD or w.created_at > relaunch.created_at)
    ]
    cap = settings.team_reservation_max_held
    return tuple(held if cap is None else held[:cap])


def _decide(job: SafeRelaunchInput, settings: SafeRelaunchSettings) -> SafeRelaunchDecision:
    own = job.own.cluster
    k = settings.after_preemptions(job.team)
    if k is None:
        return SafeRelaunchDecision(SafeRelaunchKind.RUN_NOW, "safe relaunch off", cluster=own)
    if job.preemptions < k:
        return SafeRelaunchDecision(
            SafeRelaunchKind.RUN_NOW,
            f"preempted {job.preemptions}x, safe relaunch after {k}",
            cluster=own,
        )
    held = job.held_seconds
    if job.own.safe_now or job.own.safe_when_admitted:
        fits = "fits in nominal quota" if job.own.safe_now else "queued for nominal quota"
        wait = job.own.safe_wait_seconds
        if held is None:
            now = f"{fits} now" if job.own.safe_now else fits
            return SafeRelaunchDecision(SafeRelaunchKind.RUN_NOW, now, cluster=own, predicted_wait_seconds=wait)
        return SafeRelaunchDecision(
            SafeRelaunchKind.RELEASE_SAFE,
            f"released: {fits} of {own} after {format_duration(held)} held",
            cluster=own,
            predicted_wait_seconds=wait,
        )
    for other in job.others:
        if other.safe_now:
            return SafeRelaunchDecision(
                SafeRelaunchKind.RELEASE_SAFE,
                f"released: fits in nominal quota of {other.cluster}",
                cluster=other.cluster,
                predicted_wait_seconds=0.0,
            )
    predicted = _shortest_safe_wait((job.own, *job.others))
    waited = held if held is not None else 0.0
    if waited >= settings.safe_max_hold_seconds:
        return SafeRelaunchDecision(
            SafeRelaunchKind.RELEASE_TIMEOUT,
            f"released: held {format_duration(waited)} >= safe_max_hold_seconds "
            f"{format_duration(settings.safe_max_hold_seconds)}",
            cluster=own,
            predicted_wait_seconds=predicted,
        )
    limit = settings.burst_max_predicted_wait_seconds
    if job.burst_clouds and limit is not None and (predicted is None or predicted > limit):
        said = "no safe place predicted" if predicted is None else f"predicted safe wait {format_duration(predicted)}"
        return SafeRelaunchDecision(
            SafeRelaunchKind.BURST,
            f"burst to {job.burst_clouds[0]}: {said} > limit {format_duration(limit)}",
            cloud=job.burst_clouds[0],
            predicted_wait_seconds=predicted,
        )
    left = settings.safe_max_hold_seconds - waited
    if settings.hold_only_when_predicted and (predicted is None or predicted > left):
        said = (
            "no safe place predicted" if predicted is None else f"safe place predicted in {format_duration(predicted)}"
        )
        kind = SafeRelaunchKind.RUN_NOW if held is None else SafeRelaunchKind.RELEASE_TIMEOUT
        return SafeRelaunchDecision(
            kind,
            f"{'not held' if held is None else 'released'}: {said}, beyond the hold left ({format_duration(left)})",
            cluster=own,
            predicted_wait_seconds=predicted,
        )
    said = "predicted wait unknown" if predicted is None else f"predicted {format_duration(predicted)}"
    why = f"; {job.own.why}" if job.own.why else ""
    return SafeRelaunchDecision(
        SafeRelaunchKind.HOLD,
        f"held: waiting for nominal quota ({said}){why}",
        predicted_wait_seconds=predicted,
        release_by_seconds=left,
    )

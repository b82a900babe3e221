"""The built-in aging policies and the one formula they share.

Why aging at all: Kueue orders a ClusterQueue by priority, then by the Workload's creation
time, and a SkyPilot relaunch is a *new* Workload, so a preempted job returns to the back
of its priority band and can be preempted again and again (Kueue ``pkg/cache/queue/cluster_queue.go`` ordering and
``pkg/workload`` ``GetQueueOrderTimestamp``).
Kueue has no aging across priority levels (kueue#754); KEP-7990 adds the
``kueue.x-k8s.io/priority-boost`` annotation and leaves the policy to an external
controller. This module is that policy, as a pure function of the job's history.

The boost policy ``bounded`` (the default until the band policies of
:mod:`sky_kueue.controller.aging.band` measured better) walks the history in time order and
keeps two quantities:

* **preemption credit**: +1 per counted preemption. A preemption is *held* (not counted)
  when the job had been admitted with a boost and ran less than
  ``min_run_before_reboost_seconds`` before it: a boosted job that flaps in and out must
  not climb further (anti-flapping; KEP-7990 notes Kueue has none, kueue#3779 shows the
  loop it prevents). One exception keeps the guard from re-creating the starvation it
  exists to cure: when the preemptor's *class* priority is known to be above the priority
  the job was admitted with, the preemptor outranked the job on its own merit (prod
  preempting a boosted dev job), not through a boost, so the preemption counts. An
  unknown preemptor priority keeps the guard on.
* **aged wait**: seconds spent waiting (queued, or preempted and not yet relaunched).

After every *successful run* (a run of at least ``decay_after_run_seconds``) both are
multiplied by ``decay_factor``: the job got service, so its claim to priority shrinks.
Then::

    steps      = floor(credit / preemptions_per_step)
    age_factor = min(aged_wait / max_age_seconds, 1)            # Slurm's age factor
    age_points = floor(age_weight * age_factor)
                 capped at next_class - 1 - base if cap_at_preemptor_priority and none known
    raw        = steps * boost_per_step + age_points
    limit      = min(max_boost,
                     preemptor_class - 1 - base   if cap_at_preemptor_priority and known,
                     ceiling_priority - base  if ceiling_priority is set)
    boost      = min(max(raw, 0), max(limit, 0))

``preemptor_class`` is the highest class priority among the job's recorded preemptors: a
dev job preempted by prod may rise to just below prod, unless configured otherwise. Age
alone never lifts a job across a class: with no preemptor class known (never preempted,
or preempted by an unknown Workload), the age points stay below ``next_class``, the lowest
``priority_class_ladder`` rung above the base; with no ladder no class above is known and
age is worth 0, and a base at or above every rung leaves only the other limits. Issue 13
measured why: without this, a low job that waited ~12 h outranked running mediums and
preempted them. Preemption steps with an unknown preemptor keep only ``max_boost``. Just
below, not equal: Kueue's ``LowerPriority`` policies preempt only *strictly* lower
priorities, so a job boosted to prod's own value could no longer be preempted by prod,
and prod would queue behind it, inverting the order the cluster's classes declare. The
boost is never negative; the base priority comes from the job's first Workload.

The alternatives exist for comparison (the simulator runs them side by side): ``ladder``
counts every preemption with no age, no anti-flapping and no decay; ``age`` is Slurm's age
factor alone; ``none`` never boosts. All share the caps. Credit is kept as an exact
fraction so ``floor`` never suffers from float rounding.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction

from sky_kueue.controller.aging.decision import AgingDecision, ExplanationStep
from sky_kueue.controller.aging.registry import register_policy
from sky_kueue.controller.aging.settings import AgingSettings
from sky_kueue.controller.history import Interval, JobHistory, Phase, PreemptionRecord
from sky_kueue.kueue.api import INT32_MAX

# Event order at equal times: a phase change first, then a decay, then a preemption.
_ORDER_PHASE = 0
_ORDER_DECAY = 1
_ORDER_PREEMPTION = 2


@dataclass(frozen=True)
class _Decay:
    run: Interval


@dataclass(frozen=True)
class _Parts:
    steps: int
    preemption_points: int
    age_factor: float
    age_points: int
    age_cap: str
    raw: int
    limit: int
    limit_reasons: tuple[str, ...]
    boost: int


def _seconds(value: float) -> str:
    return f"{value:.0f}s"


def _credit(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else f"{float(value):.3g}"


@dataclass(frozen=True)
class FoldPolicy:
    """A policy defined by which parts of the shared formula it uses (see module doc)."""

    name: str
    summary: str
    count_preemptions: bool = True
    use_age: bool = True
    anti_flapping: bool = True
    decay: bool = True

    def decide(self, history: JobHistory, settings: AgingSettings, now: float) -> AgingDecision:
        return _Fold(self, history.as_of(now), settings, now).run()


class _Fold:
    """One evaluation of a :class:`FoldPolicy` (mutable only while it runs)."""

    def __init__(self, policy: FoldPolicy, history: JobHistory, settings: AgingSettings, now: float) -> None:
        self.policy = policy
        self.history = history
        self.settings = settings
        self.now = now
        self.base = history.base_priority if history.base_priority is not None else 0
        self.origin = history.first_seen if history.first_seen is not None else now
        self.credit = Fraction(0)
        self.aged_wait = 0.0
        self.preemptor_class: int | None = None
        self.counted = 0
        self.held = 0
        self.steps: list[ExplanationStep] = []
        self.intervals = history.intervals(now)
        self.wait_seconds = sum(i.duration for i in self.intervals if i.phase is Phase.WAITING)
        self.run_seconds = sum(i.duration for i in self.intervals if i.phase is Phase.RUNNING)

    def rel(self, at: float) -> str:
        return f"t+{_seconds(at - self.origin)}"

    def parts(self) -> _Parts:
        s = self.settings
        steps = math.floor(self.credit / s.preemptions_per_step) if self.policy.count_preemptions else 0
        preemption_points = steps * s.boost_per_step
        age_factor = min(self.aged_wait / s.max_age_seconds, 1.0) if self.policy.use_age else 0.0
        age_points = math.floor(s.age_weight * age_factor)
        age_cap = ""
        if s.cap_at_preemptor_priority and self.preemptor_class is None:
            class_room, age_cap = self._class_room_without_preemptor()
            if class_room is not None:
                age_points = min(age_points, max(class_room, 0))
        raw = preemption_points + age_points
        limit = s.max_boost
        reasons = [f"max_boost {s.max_boost}"]
        if s.cap_at_preemptor_priority and self.preemptor_class is not None:
            room = self.preemptor_class - 1 - self.base
            limit = min(limit, room)
            reasons.append(f"preemptor class {self.preemptor_class} - 1 - base {self.base} = {room}")
        if s.ceiling_priority is not None:
            limit = min(limit, s.ceiling_priority - self.base)
            reasons.append(
                f"ceiling_priority {s.ceiling_priority} - base {self.base} = {s.ceiling_priority - self.base}"
            )
        limit = min(limit, INT32_MAX - self.base)
        limit = max(limit, 0)
        return _Parts(
            steps,
            preemption_points,
            age_factor,
            age_points,
            age_cap,
            raw,
            limit,
            tuple(reasons),
            min(max(raw, 0), limit),
        )

    def _class_room_without_preemptor(self) -> tuple[int | None, str]:
        """Room for age points when no preemptor class is known, and why.

        The next class above the base comes from ``priority_class_ladder``; with no ladder no
        class above is known, so the room is 0 rather than unbounded: age must never lift a
        job past a class it cannot see. ``None``: the base is at or above every rung.
        """
        above = [rung.value for rung in self.settings.priority_class_ladder if rung.value > self.base]
        if above:
            room = min(above) - 1 - self.base
            return room, f"no preemptor known: next class {min(above)} - 1 - base {self.base} = {room}"
        if not self.settings.priority_class_ladder:
            return 0, "no preemptor known and no priority_class_ladder: no class bound, so 0"
        return None, ""

    def run(self) -> AgingDecision:
        history, settings = self.history, self.settings
        intervals = self.intervals
        events: list[tuple[float, int, Interval | _Decay | PreemptionRecord]] = []
        for interval in intervals:
            events.append((interval.start, _ORDER_PHASE, interval))
            if (
                self.policy.decay
                and interval.phase is Phase.RUNNING
                and interval.duration >= settings.decay_after_run_seconds
            ):
                events.append((interval.start + settings.decay_after_run_seconds, _ORDER_DECAY, _Decay(interval)))
        events.extend((record.at, _ORDER_PREEMPTION, record) for record in history.preemptions)
        events.sort(key=lambda event: (event[0], event[1]))

        self.steps.append(self._history_step())
        phase: Phase | None = None
        last_at: float | None = None
        run: Interval | None = None
        run_boost = 0
        for at, _, item in events:
            if last_at is not None and phase is Phase.WAITING and at > last_at:
                self.aged_wait += at - last_at
            last_at = at if last_at is None else max(last_at, at)
            if isinstance(item, Interval):
                phase = item.phase
                if item.phase is Phase.RUNNING:
                    run = item
                    run_boost = self.parts().boost
                    self.steps.append(
                        ExplanationStep(
                            "admitted",
                            f"boost {run_boost}",
                            f"{self.rel(at)}: Workload {item.workload_uid} admitted",
                            at,
                        )
                    )
            elif isinstance(item, _Decay):
                self._decay(at, item.run)
            else:
                self._preemption(item, run, run_boost)
        if last_at is not None and phase is Phase.WAITING and self.now > last_at:
            self.aged_wait += self.now - last_at
        return self._result()

    def _history_step(self) -> ExplanationStep:
        history = self.history
        others = Counter(e.reason for e in history.evictions)
        other_text = ", ".join(f"{reason}x{count}" for reason, count in sorted(others.items())) or "none"
        return ExplanationStep(
            "history",
            f"{len(history.preemptions)} preemptions",
            f"policy {self.policy.name}; base priority {self.base}; "
            f"waited {_seconds(self.wait_seconds)}, ran {_seconds(self.run_seconds)}; "
            f"other evictions (recorded, never counted): {other_text}",
        )

    def _decay(self, at: float, run: Interval) -> None:
        factor = Fraction(str(self.settings.decay_factor))
        before_credit, before_wait = self.credit, self.aged_wait
        self.credit *= factor
        self.aged_wait *= float(factor)
        self.steps.append(
            ExplanationStep(
                "decay",
                f"x{self.settings.decay_factor:g}",
                f"{self.rel(at)}: ran {_seconds(self.settings.decay_after_run_seconds)} "
                f"since {self.rel(run.start)} "
                f"(successful run): credit {_credit(before_credit)} -> {_credit(self.credit)}, "
                f"aged wait {_seconds(before_wait)} -> {_seconds(self.aged_wait)}",
                at,
            )
        )

    def _preemption(self, record: PreemptionRecord, run: Interval | None, run_boost: int) -> None:
        at = record.at
        if record.preemptor_priority is not None:
            self.preemptor_class = (
                record.preemptor_priority
                if self.preemptor_class is None
                else max(self.preemptor_class, record.preemptor_priority)
            )
        who = record.preemptor_uid or "unknown workload"
        cls = "unknown" if record.preemptor_priority is None else str(record.preemptor_priority)
        head = f"{self.rel(at)}: {record.workload_name} preempted ({record.reason}) by {who} (class priority {cls})"
        if not self.policy.count_preemptions:
            self.steps.append(ExplanationStep("preempted", "not counted", f"{head}; policy ignores preemptions", at))
            return
        ran = at - run.start if run is not None and run.start <= at <= run.end + 1e-9 else None
        outranked = record.preemptor_priority is not None and record.preemptor_priority > self.base + run_boost
        if (
            self.policy.anti_flapping
            and ran is not None
            and run_boost > 0
            and ran < self.settings.min_run_before_reboost_seconds
            and not outranked
        ):
            self.held += 1
            self.steps.append(
                ExplanationStep(
                    "preempted",
                    "held",
                    f"{head}; admitted with boost {run_boost}, ran {_seconds(ran)} < "
                    "min_run_before_reboost_seconds "
                    f"{_seconds(self.settings.min_run_before_reboost_seconds)} "
                    "(anti-flapping)",
                    at,
                )
            )
            return
        before = self.credit
        self.credit += 1
        self.counted += 1
        if self.policy.anti_flapping and outranked and run_boost > 0 and ran is not None:
            head += f"; class {record.preemptor_priority} outranks admitted priority {self.base + run_boost}"
        self.steps.append(ExplanationStep("preempted", f"credit {_credit(before)} -> {_credit(self.credit)}", head, at))

    def _result(self) -> AgingDecision:
        s, parts = self.settings, self.parts()
        steps = self.steps
        if self.policy.count_preemptions:
            steps.append(
                ExplanationStep(
                    "preemption steps",
                    f"+{parts.preemption_points}",
                    f"floor(credit {_credit(self.credit)} / preemptions_per_step {s.preemptions_per_step}) = "
                    f"{parts.steps} steps x boost_per_step {s.boost_per_step}",
                )
            )
        if self.policy.use_age:
            steps.append(
                ExplanationStep(
                    "age",
                    f"+{parts.age_points}",
                    f"min(aged wait {_seconds(self.aged_wait)} / "
                    f"max_age_seconds {_seconds(s.max_age_seconds)}, 1) = "
                    f"{parts.age_factor:.3f} x age_weight {s.age_weight}"
                    + (f"; age capped: {parts.age_cap}" if parts.age_cap else ""),
                )
            )
        steps.append(
            ExplanationStep(
                "cap",
                f"<= {parts.limit}",
                "min("
                + ", ".join(parts.limit_reasons)
                + "), never below 0"
                + ("" if s.cap_at_preemptor_priority else "; preemptor cap disabled")
                + (
                    ""
                    if self.preemptor_class is not None or not s.cap_at_preemptor_priority
                    else "; no preemptor priority known"
                ),
            )
        )
        current = self.history.current_boost
        steps.append(
            ExplanationStep(
                "result",
                f"boost {parts.boost}",
                f"min(max({parts.raw}, 0), {parts.limit}); effective priority {self.base} + {parts.boost} = "
                f"{self.base + parts.boost}; currently applied boost {current}",
            )
        )
        return AgingDecision(
            policy=self.policy.name,
            job_key=self.history.key,
            now=self.now,
            boost=parts.boost,
            base_priority=self.base,
            current_boost=current,
            preemptions=len(self.history.preemptions),
            counted_preemptions=self.counted,
            held_preemptions=self.held,
            other_evictions=len(self.history.evictions),
            preemption_credit=float(self.credit),
            aged_wait_seconds=self.aged_wait,
            wait_seconds=self.wait_seconds,
            run_seconds=self.run_seconds,
            preemption_points=parts.preemption_points,
            age_points=parts.age_points,
            uncapped_boost=parts.raw,
            boost_limit=parts.limit,
            steps=tuple(steps),
        )


BOUNDED = register_policy(
    FoldPolicy(
        name="bounded",
        summary="preemption steps + Slurm age factor, capped, with anti-flapping and decay",
    )
)
LADDER = register_policy(
    FoldPolicy(
        name="ladder",
        summary="one step every N preemptions, capped; no age, no anti-flapping, no decay",
        use_age=False,
        anti_flapping=False,
        decay=False,
    )
)
AGE = register_policy(
    FoldPolicy(
        name="age",
        summary="Slurm age factor only: min(wait / max_age, 1) x age_weight, capped",
        count_preemptions=False,
        anti_flapping=False,
        decay=False,
    )
)
NONE = register_policy(
    FoldPolicy(
        name="none",
        summary="never boosts: records and explains preemptions only, as SkyPilot alone orders (default)",
        count_preemptions=False,
        use_age=False,
        anti_flapping=False,
        decay=False,
    )
)

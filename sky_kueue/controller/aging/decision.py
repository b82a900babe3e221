"""The output of an aging policy: a boost and the reasoning that produced it.

Why an explanation travels with every decision: a boost changes who runs first on a shared
cluster, so an operator must be able to answer "why does this job have +200?" from the
record alone (``sky-kueue aging explain``). Each :class:`ExplanationStep` is one rule
applied, in order, with the numbers it used.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ExplanationStep:
    """One rule applied while computing a boost."""

    rule: str
    value: str
    detail: str
    at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "value": self.value, "detail": self.detail, "at": self.at}

    def line(self) -> str:
        return f"{self.rule}: {self.value} ({self.detail})"


@dataclass(frozen=True)
class AgingDecision:
    """The boost a policy assigns to a job's next pending Workload, at time ``now``."""

    policy: str
    job_key: str
    now: float
    boost: int
    base_priority: int
    current_boost: int
    preemptions: int
    counted_preemptions: int
    held_preemptions: int
    other_evictions: int
    #: Preemption credit after decay (what ``preemptions_per_step`` divides).
    preemption_credit: float
    #: Wait used by the age factor (after decay) and the raw totals.
    aged_wait_seconds: float
    wait_seconds: float
    run_seconds: float
    preemption_points: int
    age_points: int
    uncapped_boost: int
    #: The largest boost the caps allow (max_boost, preemptor class, absolute ceiling).
    boost_limit: int
    steps: tuple[ExplanationStep, ...]
    #: Band policies only: the offset from the base priority for the Workload once admitted
    #: (None: an admitted Workload keeps its priority), the offset after ``protect_seconds``
    #: of its run, and that protection time (None: the whole run).
    admitted_boost: int | None = None
    released_boost: int | None = None
    protect_seconds: float | None = None

    @property
    def effective_priority(self) -> int:
        return self.base_priority + self.boost

    def explanation(self) -> tuple[str, ...]:
        return tuple(step.line() for step in self.steps)

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "job": self.job_key,
            "now": self.now,
            "boost": self.boost,
            "base_priority": self.base_priority,
            "effective_priority": self.effective_priority,
            "current_boost": self.current_boost,
            "preemptions": self.preemptions,
            "counted_preemptions": self.counted_preemptions,
            "held_preemptions": self.held_preemptions,
            "other_evictions": self.other_evictions,
            "preemption_credit": self.preemption_credit,
            "aged_wait_seconds": self.aged_wait_seconds,
            "wait_seconds": self.wait_seconds,
            "run_seconds": self.run_seconds,
            "preemption_points": self.preemption_points,
            "age_points": self.age_points,
            "uncapped_boost": self.uncapped_boost,
            "boost_limit": self.boost_limit,
            "admitted_boost": self.admitted_boost,
            "released_boost": self.released_boost,
            "protect_seconds": self.protect_seconds,
            "steps": [step.to_dict() for step in self.steps],
        }

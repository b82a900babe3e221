"""Admission prediction: run Kueue's cycles on a cluster state until it settles.

The settle loop follows the oracle's semantics (``tests/oracle/README.md``): a cycle is
one ``Scheduler.schedule`` run; between cycles the controllers' reactions are applied
(admitted workloads become quota holders, preempted workloads are deleted, parked
workloads of the affected cohort tree return to their queues). The loop stops when no
ClusterQueue has an active head, when a cycle changes nothing and leaves the queues in a
state already seen since the last change, or at the cycle cap.

The result answers, per pending workload: admitted now (with flavors), admitted after
preempting whom, or still pending with Kueue's own message.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import CycleResult, Engine
from sky_kueue.kueue.validation import validate_state

#: The oracle's fixed clock; also the default "now" of a snapshot prediction.
DEFAULT_NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


class VerdictKind(str, enum.Enum):
    ADMITTED = "admitted"
    ADMITTED_AFTER_PREEMPTION = "admitted-after-preemption"
    PENDING = "pending"
    PREEMPTED = "preempted"
    RUNNING = "running"


@dataclass
class Verdict:
    """What happens to one workload, in words a user can act on."""

    workload: str
    kind: VerdictKind
    cluster_queue: str = ""
    cycle: int | None = None
    flavors: dict[str, dict[str, str]] = field(default_factory=dict)
    victims: list[tuple[str, str]] = field(default_factory=list)  # (workload, reason)
    #: per victim, why (fair sharing: the shares compared)
    victim_details: dict[str, str] = field(default_factory=dict)
    preempted_by: str | None = None
    reason: str = ""
    message: str = ""


@dataclass
class CycleRecord:
    """What one scheduling cycle did, in the oracle's terms."""

    admitted: dict[str, dict[str, Any]]
    preempted: dict[str, dict[str, str]]
    pending: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {"admitted": self.admitted, "preempted": self.preempted, "pending": self.pending}


@dataclass
class Prediction:
    """The cycles of a run and the state it settled in."""

    cycles: list[CycleRecord]
    final_admitted: list[str]
    final_preempted: list[str]
    final_pending: list[str]
    verdicts: dict[str, Verdict]
    settled: bool

    def to_json(self, scenario: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        if scenario:
            out["scenario"] = scenario
        out["cycles"] = [c.to_json() for c in self.cycles]
        out["final"] = {
            "admitted": self.final_admitted,
            "preempted": self.final_preempted,
            "pending": self.final_pending,
        }
        return out


def _record(engine: Engine, result: CycleResult) -> CycleRecord:
    admitted: dict[str, dict[str, Any]] = {}
    for entry in result.admitted:
        assert entry.assignment is not None
        admitted[entry.info.key] = {
            "clusterQueue": entry.cq,
            "podSets": {
                ps.name: dict(sorted((r, fa.name) for r, fa in ps.flavors.items())) for ps in entry.assignment.pod_sets
            },
        }
    preempted = {p.victim.key: {"by": p.preemptor.key, "reason": p.reason} for p in result.preempted}
    pending = {key: (info.message or "") for key, info in sorted(engine.pending.items())}
    return CycleRecord(admitted=admitted, preempted=preempted, pending=pending)


def run_until_settled(
    engine: Engine, cap: int, on_cycle: Callable[[CycleResult], None] | None = None
) -> list[CycleResult]:
    """Run cycles (settling each one's events) until the oracle's stop rule holds.

    Stops when no ClusterQueue has an active head (after the first cycle), when a cycle
    changes nothing and leaves the queues in a state already seen since the last change,
    or after ``cap`` recorded cycles. The first cycle is always recorded.
    """
    results: list[CycleResult] = []
    seen = {engine.queue_state()}
    while len(results) < cap:
        if results and not engine.has_active_heads():
            break
        result = engine.cycle()
        engine.settle_events(result)
        state_key = engine.queue_state()
        if not result.changed and results and state_key in seen:
            break
        if result.changed:
            seen = {state_key}
        else:
            seen.add(state_key)
        results.append(result)
        if on_cycle is not None:
            on_cycle(result)
    return results


def predict(state: o.ClusterState, now: datetime | None = None, cycle_cap: int | None = None) -> Prediction:
    """Run Kueue's scheduling cycles on ``state`` until it settles.

    Raises:
        ModelError: if ``state`` fails Kueue's validation.
    """
    validate_state(state)
    clock = now or state.now or DEFAULT_NOW
    engine = Engine(state, clock)
    initially_admitted = sorted(engine.holders)
    cap = cycle_cap if cycle_cap is not None else state.config.cycle_cap
    cycles: list[CycleRecord] = []
    results = run_until_settled(engine, cap, lambda result: cycles.append(_record(engine, result)))
    settled = len(results) < cap or not engine.has_active_heads()
    return _summarise(engine, cycles, results, initially_admitted, settled)


def _summarise(
    engine: Engine,
    cycles: list[CycleRecord],
    results: list[CycleResult],
    initially_admitted: list[str],
    settled: bool,
) -> Prediction:
    preempted_keys: dict[str, tuple[str, str, int]] = {}
    admitted_in: dict[str, tuple[int, Any]] = {}
    victims_of: dict[str, list[tuple[str, str]]] = {}
    details: dict[str, str] = {}
    for result in results:
        for p in result.preempted:
            preempted_keys[p.victim.key] = (p.preemptor.key, p.reason, result.number)
            victims_of.setdefault(p.preemptor.key, []).append((p.victim.key, p.reason))
            if p.detail:
                details[p.victim.key] = p.detail
        for entry in result.admitted:
            admitted_in[entry.info.key] = (result.number, entry)
    final_admitted = sorted(engine.holders)
    verdicts: dict[str, Verdict] = {}
    for key in initially_admitted:
        if key in preempted_keys:
            by, reason, number = preempted_keys[key]
            verdicts[key] = Verdict(key, VerdictKind.PREEMPTED, cycle=number, preempted_by=by, reason=reason)
        else:
            info = engine.holders[key]
            verdicts[key] = Verdict(key, VerdictKind.RUNNING, cluster_queue=info.cluster_queue)
    for key, (number, entry) in admitted_in.items():
        assert entry.assignment is not None
        flavors = {ps.name: {r: fa.name for r, fa in ps.flavors.items()} for ps in entry.assignment.pod_sets}
        victims = victims_of.get(key, [])
        kind = VerdictKind.ADMITTED_AFTER_PREEMPTION if victims else VerdictKind.ADMITTED
        if key in preempted_keys:
            by, reason, pnumber = preempted_keys[key]
            verdicts[key] = Verdict(
                key,
                VerdictKind.PREEMPTED,
                cluster_queue=entry.cq,
                cycle=pnumber,
                flavors=flavors,
                victims=victims,
                preempted_by=by,
                reason=reason,
            )
        else:
            verdicts[key] = Verdict(
                key,
                kind,
                cluster_queue=entry.cq,
                cycle=number,
                flavors=flavors,
                victims=victims,
                victim_details={v: details[v] for v, _ in victims if v in details},
            )
    for key, info in engine.pending.items():
        verdicts[key] = Verdict(
            key,
            VerdictKind.PENDING,
            cluster_queue=info.cluster_queue,
            message=info.message or "",
            reason=info.reason,
            victims=victims_of.get(key, []),
        )
    return Prediction(
        cycles=cycles,
        final_admitted=final_admitted,
        final_preempted=sorted(preempted_keys),
        final_pending=sorted(engine.pending),
        verdicts=verdicts,
        settled=settled,
    )

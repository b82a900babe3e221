"""What the Kueue harness (``benchmarks/kueue_harness``) printed, and how it compares.

The harness runs the served Kueue release's own scheduler on an oracle scenario, cycle by
cycle, and prints one JSON line per scenario: the decisions in the oracle's expected-file
shape (``tests/oracle/README.md``, "Expected-outcome format") plus the wall seconds of each
run. This module reads those lines, compares the decisions with a recorded outcome (the same
three measures as the live-cluster comparison, plus cycle by cycle), and turns same-run
timings into ratios. Pure: no processes, no files.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sky_kueue.realcluster import oracle_agreement
from sky_kueue.realcluster.oracle_agreement import LiveAdmission, LiveOutcome, LivePreemption

#: Keys every harness line has (``main.go``'s ``result``).
RESULT_KEYS = (
    "scenario",
    "kueue_release",
    "cycles",
    "final",
    "settled",
    "hitCap",
    "repeats",
    "deterministic",
    "decisionsDeterministic",
    "setupSeconds",
    "scheduleSeconds",
    "runSeconds",
)
_TIMING_KEYS = ("setupSeconds", "scheduleSeconds", "runSeconds")


class HarnessOutputError(ValueError):
    """A harness line that is not the JSON the harness prints; the message names the line."""


@dataclass(frozen=True)
class HarnessResult:
    """One scenario as the harness ran it (``repeats`` runs, each from a fresh setup)."""

    scenario: str
    kueue_release: str
    #: the oracle-format outcome of the first run: ``cycles`` and ``final``
    outcome: dict[str, Any]
    settled: bool
    hit_cap: bool
    repeats: int
    #: every run printed the same output (pending messages included)
    deterministic: bool
    #: every run made the same admissions and preemptions in the same cycles
    decisions_deterministic: bool
    setup_seconds: tuple[float, ...]
    schedule_seconds: tuple[float, ...]
    run_seconds: tuple[float, ...]

    @property
    def cycles(self) -> int:
        return len(self.outcome["cycles"])

    @property
    def schedule_median(self) -> float:
        """Median seconds inside Kueue's scheduling cycles over the runs."""
        return statistics.median(self.schedule_seconds)

    def expected_json(self) -> dict[str, Any]:
        """The outcome as an oracle expected file, naming the Kueue release that produced it."""
        return {
            "scenario": self.scenario,
            "kueue_release": self.kueue_release,
            "cycles": self.outcome["cycles"],
            "final": self.outcome["final"],
        }

    def timing_json(self) -> dict[str, Any]:
        """One ``kueue_timing.jsonl`` line (medians over the runs)."""
        return {
            "id": self.scenario,
            "cycles": self.cycles,
            "settled": self.settled,
            "hitCap": self.hit_cap,
            "seconds": round(statistics.median(self.run_seconds), 6),
            "setupSeconds": round(statistics.median(self.setup_seconds), 6),
            "scheduleSeconds": round(self.schedule_median, 6),
        }


def parse_line(line: str, where: str) -> HarnessResult:
    """One harness line; raises :class:`HarnessOutputError` naming ``where`` and the problem."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as err:
        raise HarnessOutputError(f"{where}: not JSON ({err.msg})") from None
    if not isinstance(raw, dict):
        raise HarnessOutputError(f"{where}: expected a JSON object")
    missing = [key for key in RESULT_KEYS if key not in raw]
    if missing:
        raise HarnessOutputError(f"{where}: missing {', '.join(missing)}")
    if not isinstance(raw["cycles"], list) or not isinstance(raw["final"], dict):
        raise HarnessOutputError(f"{where}: cycles must be a list and final an object")
    repeats = raw["repeats"]
    if not isinstance(repeats, int) or repeats < 1:
        raise HarnessOutputError(f"{where}: repeats must be a positive integer, got {repeats!r}")
    timings: dict[str, tuple[float, ...]] = {}
    for key in _TIMING_KEYS:
        values = raw[key]
        if (
            not isinstance(values, list)
            or len(values) != repeats
            or not all(isinstance(v, (int, float)) and v >= 0 for v in values)
        ):
            raise HarnessOutputError(f"{where}: {key} must list {repeats} non-negative seconds")
        timings[key] = tuple(float(v) for v in values)
    return HarnessResult(
        scenario=str(raw["scenario"]),
        kueue_release=str(raw["kueue_release"]),
        outcome={"cycles": raw["cycles"], "final": raw["final"]},
        settled=bool(raw["settled"]),
        hit_cap=bool(raw["hitCap"]),
        repeats=repeats,
        deterministic=bool(raw["deterministic"]),
        decisions_deterministic=bool(raw["decisionsDeterministic"]),
        setup_seconds=timings["setupSeconds"],
        schedule_seconds=timings["scheduleSeconds"],
        run_seconds=timings["runSeconds"],
    )


def parse_output(text: str) -> list[HarnessResult]:
    """Every line of a harness run's stdout (blank lines ignored)."""
    return [
        parse_line(line, f"harness output line {number}")
        for number, line in enumerate(text.splitlines(), start=1)
        if line.strip()
    ]


def as_live_outcome(result: HarnessResult) -> LiveOutcome:
    """The harness's decisions in the live comparison's terms (a cycle's index stands for its
    time), so :func:`oracle_agreement.compare` measures them as it measures the live Kueue."""
    live = LiveOutcome()
    for index, cycle in enumerate(result.outcome["cycles"]):
        for key, adm in cycle.get("admitted", {}).items():
            live.admitted[key] = LiveAdmission(adm["clusterQueue"], adm["podSets"], float(index))
        for key, pre in cycle.get("preempted", {}).items():
            live.preempted[key] = LivePreemption(pre["by"], pre["reason"], float(index))
    final = result.outcome["final"]
    live.pending = {key: "" for key in final["pending"]}
    live.initially_admitted = tuple(sorted((set(final["admitted"]) | set(final["preempted"])) - set(live.admitted)))
    return live


def _cycle_decisions(cycle: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    admitted = {
        key: (value["clusterQueue"], {ps: dict(sorted(res.items())) for ps, res in value["podSets"].items()})
        for key, value in cycle.get("admitted", {}).items()
    }
    preempted = {key: (value["by"], value["reason"]) for key, value in cycle.get("preempted", {}).items()}
    return admitted, preempted


@dataclass(frozen=True)
class ScenarioAgreement:
    """The harness's decisions on one scenario against a recorded outcome."""

    scenario: str
    #: the settled admitted / preempted / pending sets are equal
    final_agrees: bool
    #: also every common admission's ClusterQueue and flavors, every preemptor and reason
    decisions_agree: bool
    #: the first cycle's admissions (with flavors) and preemptions (preemptor and reason)
    first_cycle_agrees: bool
    #: every cycle's admissions and preemptions, and as many cycles
    every_cycle_agrees: bool
    harness_cycles: int
    recorded_cycles: int
    differences: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "finalAgrees": self.final_agrees,
            "decisionsAgree": self.decisions_agree,
            "firstCycleAgrees": self.first_cycle_agrees,
            "everyCycleAgrees": self.every_cycle_agrees,
            "harnessCycles": self.harness_cycles,
            "recordedCycles": self.recorded_cycles,
            "differences": list(self.differences),
        }


def compare(result: HarnessResult, recorded: dict[str, Any]) -> ScenarioAgreement:
    """Compare the harness's decisions with a recorded ``expected/*.json`` outcome."""
    settled = oracle_agreement.compare(as_live_outcome(result), recorded, "recorded", live_name="harness")
    ours = [_cycle_decisions(c) for c in result.outcome["cycles"]]
    theirs = [_cycle_decisions(c) for c in recorded.get("cycles", [])]
    first = bool(ours) and bool(theirs) and ours[0] == theirs[0]
    differences = list(settled.differences)
    for index, (mine, want) in enumerate(zip(ours, theirs, strict=False)):
        if mine != want:
            differences.append(f"cycle {index}: admissions or preemptions differ")
            break
    if len(ours) != len(theirs):
        differences.append(f"cycles: recorded {len(theirs)}, harness {len(ours)}")
    return ScenarioAgreement(
        scenario=result.scenario,
        final_agrees=settled.final_agrees,
        decisions_agree=settled.decisions_agree,
        first_cycle_agrees=first,
        every_cycle_agrees=ours == theirs,
        harness_cycles=len(ours),
        recorded_cycles=len(theirs),
        differences=tuple(differences),
    )


def summarize(agreements: Iterable[ScenarioAgreement]) -> dict[str, int]:
    """How many scenarios agree by each measure."""
    rows = list(agreements)
    return {
        "scenarios": len(rows),
        "finalAgrees": sum(r.final_agrees for r in rows),
        "decisionsAgree": sum(r.decisions_agree for r in rows),
        "firstCycleAgrees": sum(r.first_cycle_agrees for r in rows),
        "everyCycleAgrees": sum(r.every_cycle_agrees for r in rows),
    }


@dataclass(frozen=True)
class Ratios:
    """Per-scenario ratios of one timing to Kueue's scheduling time measured in the same run."""

    per_scenario: dict[str, float]

    @property
    def median(self) -> float:
        return statistics.median(self.per_scenario.values())

    @property
    def worst(self) -> float:
        return max(self.per_scenario.values())


def same_run_ratios(ours: dict[str, list[float]], kueue: dict[str, list[float]]) -> Ratios:
    """Each scenario's median of ``ours`` over its median of ``kueue`` (both measured in
    alternation in one run, so they share whatever else the machine did).

    Raises:
        ValueError: the two name different scenarios, one has no samples, or Kueue's median is 0.
    """
    if set(ours) != set(kueue) or not ours:
        raise ValueError(f"timings of different scenarios: {sorted(ours)} vs {sorted(kueue)}")
    out: dict[str, float] = {}
    for name in sorted(ours):
        if not ours[name] or not kueue[name]:
            raise ValueError(f"{name}: no timing samples")
        base = statistics.median(kueue[name])
        if base <= 0:
            raise ValueError(f"{name}: Kueue's scheduling took no measurable time")
        out[name] = statistics.median(ours[name]) / base
    return Ratios(out)


def timing_rows(samples: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Same-run timings of a group of scenarios as a report: per scenario the medians (Kueue's
    scheduling and setup, the ``predict`` process and the in-process prediction), both ratios to
    Kueue's scheduling and each side's cycles; then the median and worst ratio of the group.

    ``samples`` maps a scenario to lists of seconds under ``kueue_schedule_s``,
    ``kueue_setup_s``, ``predict_process_s`` and ``predict_in_process_s`` (one per round) and
    the cycle counts seen under ``kueue_cycles`` and ``predict_cycles``.
    """
    kueue = {name: row["kueue_schedule_s"] for name, row in samples.items()}
    process = same_run_ratios({name: row["predict_process_s"] for name, row in samples.items()}, kueue)
    in_process = same_run_ratios({name: row["predict_in_process_s"] for name, row in samples.items()}, kueue)
    rows: dict[str, Any] = {}
    for name, row in samples.items():
        rows[name] = {
            "kueue_schedule_s": round(statistics.median(row["kueue_schedule_s"]), 3),
            "kueue_setup_s": round(statistics.median(row["kueue_setup_s"]), 3),
            "predict_process_s": round(statistics.median(row["predict_process_s"]), 3),
            "predict_in_process_s": round(statistics.median(row["predict_in_process_s"]), 3),
            "process_ratio": round(process.per_scenario[name], 2),
            "in_process_ratio": round(in_process.per_scenario[name], 2),
            "kueue_cycles": row["kueue_cycles"],
            "predict_cycles": row["predict_cycles"],
        }
    return {
        "scenarios": rows,
        "process_ratio_median": round(process.median, 2),
        "process_ratio_worst": round(process.worst, 2),
        "in_process_ratio_median": round(in_process.median, 2),
        "in_process_ratio_worst": round(in_process.worst, 2),
    }

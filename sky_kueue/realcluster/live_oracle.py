"""The live oracle: replay oracle scenarios on a real Kueue and score it against the recording
and against ``sky-kueue predict``.

Each scenario is replayed by :class:`~.oracle_replay.OracleReplayer`; its settled outcome is
compared (:mod:`.oracle_agreement`) with the recorded ``expected/<id>.json`` next to it (when
there is one) and with the model's prediction for the same file, which is what
``sky-kueue predict --snapshot FILE --output json`` prints. Scenarios are run grouped by the
Kueue manager configuration they need (classical, fair sharing, admission fair sharing); a
``reconfigure`` callback restarts Kueue with it, and without one (a cluster this command
does not own) the scenarios that need another configuration than Kueue's default are
skipped, with that reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sky_kueue.kueue import loader, predictor
from sky_kueue.realcluster import oracle_agreement
from sky_kueue.realcluster.oracle_replay import OracleReplayer, ReplayError, Scenario, read_scenario

#: The configuration key of Kueue's defaults (what ``real-cluster up`` runs).
DEFAULT_CONFIG = "classical"

Reconfigure = Callable[[Scenario], None]
Log = Callable[[str], None]


def scenario_paths(arguments: Iterable[Path]) -> list[Path]:
    """Scenario files from files and directories (a set directory's ``scenarios/``, or a
    directory of ``*.yaml`` files), in order and without repeats."""
    found: list[Path] = []
    for arg in arguments:
        if arg.is_dir():
            inner = arg / "scenarios" if (arg / "scenarios").is_dir() else arg
            found += sorted(inner.glob("*.yaml"))
        else:
            found.append(arg)
    return list(dict.fromkeys(path.resolve() for path in found))


def set_name(path: Path) -> str:
    """The oracle set a scenario belongs to (``public`` for ``public/scenarios/x.yaml``)."""
    return path.parent.parent.name if path.parent.name == "scenarios" else path.parent.name


def recorded_outcome(path: Path) -> dict[str, Any] | None:
    """The recorded ``expected/<id>.json`` of a scenario in a set directory, if there is one."""
    expected = path.parent.parent / "expected" / f"{path.stem}.json"
    if path.parent.name != "scenarios" or not expected.is_file():
        return None
    loaded: dict[str, Any] = json.loads(expected.read_text(encoding="utf-8"))
    return loaded


#: The cycle cap of the settled prediction a capped recording is also compared with (the
#: ``scale-*`` priming used 400).
SETTLED_CYCLE_CAP_CYCLES = 400


def predicted_outcome(path: Path, cycle_cap: int | None = None) -> tuple[dict[str, Any], bool]:
    """What ``sky-kueue predict --snapshot PATH --output json [--cycle-cap N]`` prints for the
    scenario, and whether that run settled before its cycle cap."""
    prediction = predictor.predict(loader.load_state_file(path), cycle_cap=cycle_cap)
    out: dict[str, Any] = prediction.to_json(path.stem)
    return out, prediction.settled


@dataclass
class ScenarioResult:
    """One scenario's replay and its agreement with the recording and the prediction."""

    scenario: str
    set: str
    kueue_config: str
    #: how the scenario was handed to Kueue (``oracle_replay.RELEASES``)
    release: str = "flavor"
    live: oracle_agreement.LiveOutcome | None = None
    recorded: oracle_agreement.Agreement | None = None
    predicted: oracle_agreement.Agreement | None = None
    #: the recording (and predict at the same cap) stopped at the cycle cap before settling;
    #: the live Kueue settles further, so this is compared with predict run to settling too
    hit_cycle_cap: bool = False
    predicted_settled: oracle_agreement.Agreement | None = None
    skipped: str | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario": self.scenario,
            "set": self.set,
            "kueueConfig": self.kueue_config,
            "release": self.release,
            "skipped": self.skipped,
            "error": self.error,
            "notes": self.notes,
            "seconds": round(self.seconds, 1),
            "hitCycleCap": self.hit_cycle_cap,
            "live": self.live.to_json() if self.live else None,
            "recorded": self.recorded.to_json() if self.recorded else None,
            "predict": self.predicted.to_json() if self.predicted else None,
            "predictSettled": self.predicted_settled.to_json() if self.predicted_settled else None,
        }


def read_scenarios(paths: Sequence[Path]) -> list[Scenario]:
    """Read and validate every scenario before anything runs.

    Raises:
        ModelError: a scenario file is unreadable or invalid.
    """
    return [read_scenario(path) for path in paths]


def run(
    scenarios: Sequence[Scenario],
    replayer: OracleReplayer,
    reconfigure: Reconfigure | None,
    log: Log = lambda _: None,
    on_result: Callable[[ScenarioResult], None] = lambda _: None,
) -> list[ScenarioResult]:
    """Replay every scenario (grouped by the Kueue configuration it needs, default first)."""
    order = sorted(range(len(scenarios)), key=lambda i: scenarios[i].config_key != DEFAULT_CONFIG)
    current = DEFAULT_CONFIG
    results: list[ScenarioResult] = []
    try:
        for index in order:
            scenario = scenarios[index]
            result = ScenarioResult(
                scenario=scenario.name,
                set=set_name(scenario.path),
                kueue_config=scenario.config_key,
                release=replayer.release,
            )
            started = time.monotonic()
            if scenario.config_key != current:
                if reconfigure is None:
                    result.skipped = (
                        f"needs Kueue configured with {scenario.config_key}; only a cluster started by "
                        "`sky-kueue real-cluster up` (--dir) is reconfigured"
                    )
                    results.append(result)
                    on_result(result)
                    continue
                log(f"restarting Kueue with {scenario.config_key}")
                reconfigure(scenario)
                current = scenario.config_key
            try:
                result.live = replayer.replay(scenario)
            except ReplayError as err:
                result.error = str(err)
            result.notes = list(replayer.notes)
            result.seconds = time.monotonic() - started
            if result.live is not None:
                recorded = recorded_outcome(scenario.path)
                if recorded is not None:
                    result.recorded = oracle_agreement.compare(result.live, recorded, "recorded")
                predicted, settled = predicted_outcome(scenario.path)
                result.predicted = oracle_agreement.compare(result.live, predicted, "predict")
                result.hit_cycle_cap = not settled
                if not settled:
                    further, _ = predicted_outcome(scenario.path, SETTLED_CYCLE_CAP_CYCLES)
                    result.predicted_settled = oracle_agreement.compare(result.live, further, "predict settled")
            results.append(result)
            on_result(result)
    finally:
        if current != DEFAULT_CONFIG and reconfigure is not None:
            log("restarting Kueue with its default configuration")
            reconfigure(read_default_scenario())
        replayer.close()
    return results


def read_default_scenario() -> Scenario:
    """A scenario-less stand-in that asks :data:`Reconfigure` for Kueue's defaults."""
    from sky_kueue.kueue import objects as o

    return Scenario(path=Path("default"), documents=(), config=o.KueueConfig())


def summary(results: Sequence[ScenarioResult]) -> dict[str, dict[str, int]]:
    """Per set: scenarios replayed, skipped, failed, and agreeing with the recording and with
    predict (on the settled sets, and also on every decision's flavors, preemptor and reason)."""
    out: dict[str, dict[str, int]] = {}
    for result in results:
        row = out.setdefault(
            result.set,
            {
                "scenarios": 0,
                "replayed": 0,
                "skipped": 0,
                "errors": 0,
                "recordedFinal": 0,
                "recordedDecisions": 0,
                "predictFinal": 0,
                "predictDecisions": 0,
                "hitCycleCap": 0,
                "predictSettledFinal": 0,
            },
        )
        row["scenarios"] += 1
        row["skipped"] += result.skipped is not None
        row["errors"] += result.error is not None
        row["hitCycleCap"] += result.hit_cycle_cap
        if result.live is None:
            continue
        row["replayed"] += 1
        if result.recorded is not None:
            row["recordedFinal"] += result.recorded.final_agrees
            row["recordedDecisions"] += result.recorded.decisions_agree
        if result.predicted is not None:
            row["predictFinal"] += result.predicted.final_agrees
            row["predictDecisions"] += result.predicted.decisions_agree
        settled = result.predicted_settled or result.predicted
        if settled is not None:
            row["predictSettledFinal"] += settled.final_agrees
    return out

"""Kueue's own scheduler as the baseline: the Go harness in ``benchmarks/kueue_harness``.

* ``build``: build the harness against the pinned Kueue release (cached; see
  :mod:`sky_kueue.realcluster.harness_build`) and print where the binary is.
* ``agree [SET...]``: run it on oracle sets (default: every public set but ``scale-public``;
  ``scale-public`` takes minutes) and compare its decisions with the recorded
  ``expected/*.json`` (Kueue at ``ff69552``, newer than the served release): per set how many
  scenarios agree on the settled sets, on every decision (flavors, preemptor, reason), on the
  first cycle and on every cycle; whether every run of a scenario decided the same; and the
  scenarios that differ with their first difference.
* ``record PATH... --out DIR``: run it on scenario files (or set directories) and write what
  the served release decides as oracle files: ``DIR/expected/<id>.json`` (the recorded shape,
  with ``kueue_release`` in place of ``kueue_commit``) and ``DIR/kueue_timing.jsonl``. It
  never writes into ``tests/oracle``.

Run: ``.venv/bin/python benchmarks/kueue_baseline.py agree --markdown``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from sky_kueue.realcluster import harness_build, versions
from sky_kueue.realcluster.harness_outcome import ScenarioAgreement, compare, summarize

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "oracle"
DEFAULT_SETS = ("seeds", "public", "hier-public", "fair-public", "afs-public")
#: Runs per scenario in ``agree``: two, so that a scenario Kueue decides differently from one
#: run to the next shows.
AGREE_REPEATS = 2
#: Exit codes, as ``docs/exit-codes.md`` gives them: the harness could not run; bad input.
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2


class BadInput(ValueError):
    """A path or set name the user must fix."""


def _positive(text: str) -> int:
    value = int(text) if text.isdigit() else 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive whole number, got {text!r}")
    return value


def _scenario_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted((path / "scenarios").glob("*.yaml")) or sorted(path.glob("*.yaml"))
            if not found:
                raise BadInput(f"no scenario files (*.yaml) in {path}")
            files += found
        elif path.is_file():
            files.append(path)
        else:
            raise BadInput(f"{path}: no such file or directory")
    return files


def agree(sets: list[str], repeats: int) -> dict[str, Any]:
    """Per set: the agreement counts, the scenarios that differ, and determinism."""
    binary = harness_build.ensure_built(versions.load_pins(), log=lambda line: print(line, file=sys.stderr))
    out: dict[str, Any] = {}
    for name in sets:
        directory = ORACLE / name
        files = sorted((directory / "scenarios").glob("*.yaml"))
        if not files:
            raise BadInput(f"no oracle set {name!r} in {ORACLE}")
        results = harness_build.run(binary, files, repeats)
        rows: list[ScenarioAgreement] = []
        for result in results:
            recorded = json.loads((directory / "expected" / f"{result.scenario}.json").read_text(encoding="utf-8"))
            rows.append(compare(result, recorded))
        summary: dict[str, Any] = summarize(rows)
        summary["decisionsDeterministic"] = sum(r.decisions_deterministic for r in results)
        summary["messagesDeterministic"] = sum(r.deterministic for r in results)
        summary["kueueRelease"] = sorted({r.kueue_release for r in results})
        summary["differing"] = {row.scenario: list(row.differences[:2]) for row in rows if not row.decisions_agree}
        summary["cyclesDiffer"] = sorted(
            row.scenario for row in rows if row.decisions_agree and not row.every_cycle_agrees
        )
        out[name] = summary
    return out


def markdown(report: dict[str, Any]) -> str:
    lines = [
        "| set | scenarios | settled sets agree | every decision agrees | first cycle | every cycle "
        "| same decisions every run |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in report.items():
        lines.append(
            f"| `{name}` | {row['scenarios']} | {row['finalAgrees']} | {row['decisionsAgree']} | "
            f"{row['firstCycleAgrees']} | {row['everyCycleAgrees']} | {row['decisionsDeterministic']} |"
        )
    lines.append("")
    for row in report.values():
        for scenario, differences in row["differing"].items():
            lines.append(f"- `{scenario}`: {'; '.join(differences)}")
    return "\n".join(lines)


def record(paths: list[str], out_dir: Path, repeats: int) -> int:
    files = _scenario_files(paths)
    resolved = out_dir.resolve()
    if resolved == ORACLE.resolve() or ORACLE.resolve() in resolved.parents:
        raise BadInput(f"--out {out_dir} is inside tests/oracle; the shipped oracle is not regenerated")
    binary = harness_build.ensure_built(versions.load_pins(), log=lambda line: print(line, file=sys.stderr))
    results = harness_build.run(binary, files, repeats)
    (out_dir / "expected").mkdir(parents=True, exist_ok=True)
    with (out_dir / "kueue_timing.jsonl").open("w", encoding="utf-8") as timing:
        for result in results:
            path = out_dir / "expected" / f"{result.scenario}.json"
            path.write_text(json.dumps(result.expected_json(), indent=2) + "\n", encoding="utf-8")
            timing.write(json.dumps(result.timing_json()) + "\n")
    unstable = [r.scenario for r in results if not r.decisions_deterministic]
    print(f"recorded {len(results)} scenarios into {out_dir} (Kueue {results[0].kueue_release})", file=sys.stderr)
    if unstable:
        print(f"warning: decisions differed between runs of: {', '.join(unstable)}", file=sys.stderr)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the harness (cached) and print its path")
    agree_parser = sub.add_parser("agree", help="compare the harness's decisions with the recorded oracle")
    agree_parser.add_argument("sets", nargs="*", default=list(DEFAULT_SETS), help="oracle set names")
    agree_parser.add_argument("--repeat", type=_positive, default=AGREE_REPEATS, help="runs per scenario")
    agree_parser.add_argument("--markdown", action="store_true", help="a table instead of JSON")
    record_parser = sub.add_parser("record", help="write the served Kueue's decisions as oracle files")
    record_parser.add_argument("paths", nargs="+", help="scenario files or set directories")
    record_parser.add_argument("--out", type=Path, required=True, help="directory for expected/ and kueue_timing.jsonl")
    record_parser.add_argument("--repeat", type=_positive, default=2, help="runs per scenario (timings are medians)")
    args = parser.parse_args()
    try:
        if args.command == "build":
            print(harness_build.ensure_built(versions.load_pins(), log=lambda line: print(line, file=sys.stderr)))
            return 0
        if args.command == "record":
            return record(args.paths, args.out, args.repeat)
        report = agree(args.sets, args.repeat)
    except BadInput as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except harness_build.HarnessError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_FAILURE
    if args.markdown:
        print(markdown(report))
    else:
        json.dump({"loadavg": [round(x, 2) for x in os.getloadavg()], "sets": report}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The predictor against Kueue's real scheduler: every oracle scenario, every cycle.

Each scenario under ``tests/oracle/<set>`` was run through Kueue's own scheduler (see
``tests/oracle/README.md``). The model must reproduce admissions (with flavors),
preemptions (with preemptor and reason), the pending set and its messages in every
cycle, the number of cycles, and the settled end state.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sky_kueue.kueue import loader, predictor

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SETS = ("seeds", "public", "hier-public", "fair-public", "afs-public")


def _scenarios(sets: tuple[str, ...]) -> list[Path]:
    found = [p for s in sets for p in sorted((ORACLE / s / "scenarios").glob("*.yaml"))]
    assert found, f"no oracle scenarios under {ORACLE}"
    return found


def _check(path: Path) -> None:
    expected = json.loads((path.parent.parent / "expected" / f"{path.stem}.json").read_text())
    got = predictor.predict(loader.load_state_file(path)).to_json(path.stem)
    assert len(got["cycles"]) == len(expected["cycles"]), "number of cycles"
    for i, (g, e) in enumerate(zip(got["cycles"], expected["cycles"], strict=True)):
        assert g["admitted"] == e["admitted"], f"cycle {i} admitted"
        assert g["preempted"] == e["preempted"], f"cycle {i} preempted"
        assert g["pending"] == e["pending"], f"cycle {i} pending (with messages)"
    assert got["final"] == expected["final"], "final state"


@pytest.mark.parametrize("path", _scenarios(SETS), ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_matches_kueue(path: Path) -> None:
    _check(path)


@pytest.mark.parametrize("path", _scenarios(("scale-public",)), ids=lambda p: p.stem)
def test_matches_kueue_at_scale(path: Path) -> None:
    _check(path)

"""``benchmarks/lane_scope.py`` pairs a per-team lane with the cohort lane of the same carved
quota and k, and says which does better on each of issue 39's figures."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def _lane_scope() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # as when run as a script: anti_starvation beside it
    try:
        spec = importlib.util.spec_from_file_location("lane_scope", BENCHMARKS / "lane_scope.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCHMARKS))


def _point(scope: str, gpus: int, k: int, carved: int, **figures: float) -> dict[str, Any]:
    base = {
        "p99_wait_after_preemption_s": 100.0,
        "relaunch_starved": 1,
        "max_preemptions": 2,
        "high_p95_wait_s": 10.0,
        "goodput_pct": 80.0,
    }
    return {
        "scope": scope,
        "gpus": gpus,
        "after_preemptions": k,
        "carved_gpus": carved,
        "empties_donor": figures.pop("empties", False),
        "met": {"max_preemptions": True, "goodput": False},
        **base,
        **figures,
    }


def test_a_team_lane_meets_only_the_cohort_lane_of_its_carved_quota_and_k() -> None:
    ls = _lane_scope()
    sweep = {
        "trace": "t",
        "seed": 0,
        "points": [
            _point("team", 4, 2, 8),
            _point("team", 8, 2, 16, empties=True),
            _point("team", 2, 1, 4),
            _point("cohort", 8, 2, 8),
            _point("cohort", 4, 2, 4),  # same k, another quota
            _point("cohort", 16, 2, 16),
            _point("cohort", 4, 1, 4, empties=True),
        ],
    }
    found = [(t["gpus"], c["gpus"]) for t, c in ls.pairs(sweep)]
    assert found == [(4, 8)]


def test_each_figure_goes_to_the_better_lane_goodput_the_higher() -> None:
    ls = _lane_scope()
    team = _point("team", 4, 2, 8, p99_wait_after_preemption_s=50.0, goodput_pct=70.0, max_preemptions=2)
    cohort = _point("cohort", 8, 2, 8, p99_wait_after_preemption_s=90.0, goodput_pct=75.0, max_preemptions=2)
    assert ls.verdicts(team, cohort) == {
        "p99_wait_after_preemption_s": "team",
        "relaunch_starved": "tie",
        "max_preemptions": "tie",
        "high_p95_wait_s": "tie",
        "goodput_pct": "cohort",
    }
    summary = ls.summary([{"trace": "t", "seed": 0, "points": [team, cohort]}])
    assert summary["t"]["pairs"] == 1
    assert summary["t"]["better"]["goodput_pct"] == {"cohort": 1}
    assert summary["t"]["targets_met"] == {"team": 1, "cohort": 1}

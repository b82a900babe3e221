"""The model gives byte-identical answers to the ones recorded before its speed-ups.

Each case (``tests/sim/model_equivalence.py``) runs the simulator on a benchmark trace, or the
ETA projection on the predictor benchmark's cluster, and compares the digest of everything it
produced with the digest recorded from the model before issue 38's speed-ups. A failure means
a "faster" change altered a decision (an admission, a preemption, a victim, a wait): find the
step that did, never re-record to make it pass. ``full`` cases run only from the module's own
command line (minutes).
"""

from __future__ import annotations

import pytest

from tests.sim import model_equivalence as equivalence


def _check(case: equivalence.Case) -> None:
    want = equivalence.recorded()
    assert case.name in want, f"{case.name}: no digest recorded"
    assert equivalence.digest(case) == want[case.name], f"{case.name}: the model's answers changed"


def test_every_case_has_a_recorded_digest_and_the_names_are_unique() -> None:
    names = [case.name for case in equivalence.CASES]
    assert len(names) == len(set(names))
    assert sorted(equivalence.recorded()) == sorted(names)


def test_a_changed_answer_changes_the_digest() -> None:
    """The digest sees one job's wait moved by a millisecond, and ignores wall time only."""
    case = equivalence.cases("fast")[0]
    assert isinstance(case, equivalence.SimCase)
    out = equivalence.sim_output(case)
    base = equivalence.canonical(out)
    out["run"]["wall_s"] = 123.0
    assert equivalence.canonical(out) == base
    out["run"]["jobs"][0]["wait_s"] += 0.001
    assert equivalence.canonical(out) != base


@pytest.mark.parametrize("case", equivalence.cases("fast"), ids=lambda c: c.name)
def test_fast_cases_match_the_recorded_model(case: equivalence.Case) -> None:
    _check(case)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("case", equivalence.cases("slow"), ids=lambda c: c.name)
def test_slow_cases_match_the_recorded_model(case: equivalence.Case) -> None:
    _check(case)

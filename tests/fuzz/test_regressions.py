"""The past failures named in issue 17, kept as explicit cases (``tests/fuzz/corpus/``).

Each file is the smallest valid snapshot (``base.yaml``) with one fault. Before the input
boundary they crashed (AttributeError, ValueError, RecursionError, decimal.Overflow), hung
(22 s of CPU for ``1E+999999``, billion laughs) or were silently accepted (a negative cpu
clamped to 0, a duplicate Namespace overwriting the first, NaN/-1/Infinity weights, a name
that is a map). Each must now be one line naming the problem, exit code 2, in well under a
second.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fuzz import targets

CORPUS = Path(__file__).parent / "corpus"
#: Every regression case must be refused faster than this.
REGRESSION_TIME_LIMIT_SECONDS = 2.0
#: A cohort chain this long took 35 s in validation, then hit RecursionError in the tree.
COHORT_CHAIN_LENGTH = 3000

#: corpus file -> words the one-line error must contain (the field or the limit).
SNAPSHOT_CASES = {
    "containers-is-a-string": "containers: expected a list",
    "node-selector-is-a-list": "nodeSelector: expected a mapping",
    "overhead-is-a-string": "overhead: expected a mapping",
    "requests-is-a-list": "requests: expected a mapping",
    "timestamp-out-of-range": "invalid timestamp",
    "integer-4301-digits": "invalid integer",
    "nesting-1000-deep": "nested deeper than",
    "quantity-1e999999": "larger than",
    "decimal-overflow": "larger than",
    "billion-laughs": "aliases",
    "negative-cpu": "cpu: must be greater than or equal to 0",
    "duplicate-namespace": "Namespace team-a: defined more than once",
    "weight-nan": "fairSharing.weight",
    "weight-negative": "fairSharing.weight: must be greater than or equal to 0",
    "weight-infinity": "fairSharing.weight",
    "name-is-a-map": "metadata.name: expected a string",
}


def assert_refused(outcome: targets.Outcome, words: str) -> None:
    assert outcome.exception is None, repr(outcome.exception)
    assert outcome.seconds < REGRESSION_TIME_LIMIT_SECONDS, f"took {outcome.seconds:.1f} s"
    assert outcome.code == 2, outcome.stdout[:300] + outcome.stderr[:300]
    lines = outcome.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("error: "), outcome.stderr
    assert words in lines[0], lines[0]


def test_the_base_of_the_corpus_is_valid() -> None:
    outcome = targets.run_cli(["predict", "--snapshot", str(CORPUS / "base.yaml")])
    assert outcome.code == 0, outcome.stderr
    assert "admitted" in outcome.stdout


@pytest.mark.parametrize("case", sorted(SNAPSHOT_CASES))
def test_past_failure_is_one_line(case: str) -> None:
    outcome = targets.run_cli(["predict", "--snapshot", str(CORPUS / f"{case}.yaml")])
    assert_refused(outcome, SNAPSHOT_CASES[case])


def test_a_3000_deep_cohort_chain_is_refused_quickly(tmp_path: Path) -> None:
    cohorts = []
    for index in range(COHORT_CHAIN_LENGTH):
        parent = f"\nspec: {{parentName: c{index + 1}}}" if index < COHORT_CHAIN_LENGTH - 1 else ""
        cohorts.append(f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: c{index}}}{parent}\n")
    path = tmp_path / "chain.yaml"
    path.write_text("---\n".join(cohorts), encoding="utf-8")
    outcome = targets.run_cli(["predict", "--snapshot", str(path)])
    assert_refused(outcome, f"{COHORT_CHAIN_LENGTH} levels up to the root")


def test_a_3000_long_cohort_cycle_is_one_short_line(tmp_path: Path) -> None:
    cohorts = [
        f"apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {{name: c{i}}}\n"
        f"spec: {{parentName: c{(i + 1) % COHORT_CHAIN_LENGTH}}}\n"
        for i in range(COHORT_CHAIN_LENGTH)
    ]
    path = tmp_path / "cycle.yaml"
    path.write_text("---\n".join(cohorts), encoding="utf-8")
    outcome = targets.run_cli(["predict", "--snapshot", str(path)])
    assert_refused(outcome, "cycle in the cohort tree")
    assert len(outcome.stderr) < 400


def test_csv_memory_1e400_is_one_line() -> None:
    outcome = targets.run_cli(
        ["simulate", "--trace", str(CORPUS / "memory-1e400.csv"), "--policies", "baseline", "--quiet"]
    )
    assert_refused(outcome, "column 'memory'")

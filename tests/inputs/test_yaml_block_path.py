"""The YAML reader's block fast path builds exactly what the one-pass reader builds, or hands over.

The fast path (``yaml_reader._load_all_block``) reads kubectl-style block YAML line by line
and leaves everything else to the one-pass reader. Its contract is checked differentially:
on the oracle's scenarios and on seeded mutants of them (indentation shifted, YAML
indicators, quotes, comments, tricky scalars and document markers inserted, lines
duplicated, dropped or swapped), whenever the fast path returns documents, the reader
without it must return the same documents, the same types included; and whenever that
reader refuses the text, the fast path must have handed over.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.inputs import yaml_reader
from sky_kueue.inputs.errors import InputError

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
MUTANTS_PER_FILE = 300
#: Text dropped into a line at a random place (YAML indicators and scalars that resolve to
#: something other than a string).
SNIPPETS = (
    ": ",
    ":",
    " #",
    "#",
    "# c",
    "'",
    '"',
    "\\",
    "{",
    "}",
    "[",
    "]",
    "{}",
    "[]",
    "&a ",
    "*a",
    "!!str ",
    "!x ",
    "|",
    ">",
    "- ",
    "-",
    "? ",
    "~",
    "null",
    "Null",
    "yes",
    "No",
    "on",
    "0x1F",
    "0o17",
    "1_000",
    "1:20",
    "-5",
    "2026-01-01",
    "2026-13-45",
    ".inf",
    ".NaN",
    "1e3",
    "3.",
    "--- ",
    "---",
    "...",
    "\t",
    " ",
    "  ",
    "%",
    "@",
    "`",
    "<<: ",
    ",",
    "=",
    "a: b",
    "- a",
    "x",
    "\u00e9",
    '"a\\nb"',
    "'it''s'",
    "k:",
    "\x07",
)


def _strict_equal(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return (
            list(a) == list(b)
            and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
            and all(_strict_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list):
        return len(a) == len(b) and all(_strict_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b) and repr(a) == repr(b)


def _without_fast_path(text: str) -> list[Any]:
    try:
        return yaml_reader._load_all_one_pass(text, "<mutant>")
    except yaml_reader._HandOver:
        return yaml_reader._load_all_reference(text, "<mutant>")


def _check(text: str) -> bool:
    """Whether the fast path took ``text``; fails when it differs from the reader without it."""
    try:
        fast = yaml_reader._load_all_block(text)
    except yaml_reader._HandOver:
        return False
    try:
        expected = _without_fast_path(text)
    except InputError as exc:
        pytest.fail(f"the fast path accepted text the reader refuses ({exc}):\n{text[:2000]}")
    assert _strict_equal(fast, expected), f"the fast path built different documents from:\n{text[:2000]}"
    return True


def _mutate(lines: list[str], rng: random.Random) -> list[str]:
    out = list(lines)
    for _ in range(rng.randint(1, 3)):
        if not out:
            break
        i = rng.randrange(len(out))
        op = rng.randrange(6)
        if op == 0:
            shift = rng.choice((-2, -1, 1, 2))
            out[i] = out[i][-shift:] if shift < 0 and out[i][:-shift].strip() == "" else " " * max(shift, 0) + out[i]
        elif op in (1, 2):
            pos = rng.randint(0, len(out[i]))
            out[i] = out[i][:pos] + rng.choice(SNIPPETS) + out[i][pos:]
        elif op == 3:
            out.insert(i, out[i])
        elif op == 4:
            del out[i]
        else:
            j = rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
    return out


def _takes_fast_path(path: Path) -> bool:
    try:
        yaml_reader._load_all_block(path.read_text())
    except yaml_reader._HandOver:
        return False
    return True


def _small_scenarios() -> list[Path]:
    """Every fourth small scenario the fast path takes as it is."""
    paths = sorted(ORACLE.glob("*/scenarios/*.yaml"))
    return [p for p in paths if p.stat().st_size < 20_000 and _takes_fast_path(p)][::4]


@pytest.mark.slow  # both readers over every oracle scenario
def test_oracle_scenarios_take_the_fast_path_unchanged() -> None:
    taken = sum(_check(path.read_text()) for path in sorted(ORACLE.glob("*/scenarios/*.yaml")))
    assert taken >= 100  # kubectl-style snapshots are what the fast path is for


@pytest.mark.slow  # a differential fuzz
@pytest.mark.parametrize("path", _small_scenarios(), ids=lambda p: p.stem)
def test_mutants_agree_or_hand_over(path: Path) -> None:
    rng = random.Random(path.stem)
    lines = path.read_text().split("\n")
    taken = sum(_check("\n".join(_mutate(lines, rng))) for _ in range(MUTANTS_PER_FILE))
    assert taken > 0


@pytest.mark.parametrize(
    "text",
    [
        "a:\n- 1\n- x\nb: {}\nc: []\nd:\ne: ''\n",
        "a:\n  - b: 1\n    c:\n    - d\n  - e\n",
        "---\n---\na: 1\n---\n# only a comment\n---\n- x\n",
        "a: 1\n b: 2\n",
        "a:\n  b\n",
        "- a\n  b\n",
        "a: 1\na: 2\n",
        "a: b: c\n",
        "yes: 1\n",
        "a: 10:30\nb: 0x1F\nc: ~\nd: 2026-01-01\ne: 2026-01-01T06:00:00Z\nf: 1.5\ng: .inf\n",
        "a: 2026-13-45\n",
        "a: 'x' # c\n",
        'a: "x\\ny"\n',
        "  a: 1\n",
        "a:\n- b:\n  - c\n",
        "- - a\n",
        "a: x\n--- \nb: y\n...\n",
    ],
)
def test_edge_cases_agree_or_hand_over(text: str) -> None:
    _check(text)

"""Fuzzed input at every entry point: one line and exit code 2, or a valid result; never a
traceback, a hang or a silent accept (issue 17).

Each entry point gets :data:`MUTANTS_PER_ENTRY_POINT` mutants from a fixed seed. Whether a
mutant is valid is decided by how it was made (``tests/fuzz/mutator.py``), so an invalid
input that the program accepts fails the test as surely as a traceback does.
"""

from __future__ import annotations

import http.client
import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sky_kueue.skypilot.policy_server import PolicyServer, make_server, serve_in_thread
from tests.fuzz import targets
from tests.fuzz.mutator import Mutant, dump_yaml
from tests.fuzz.yaml_operators import mutate_yaml

#: A thousand process runs per entry point: the inner loop (-m 'not slow') leaves them out.
pytestmark = pytest.mark.slow

#: Fixed seed: the same mutants on every run, so a failure reproduces.
SEED = 17
MUTANTS_PER_ENTRY_POINT = 1000
#: Problems listed in a failure message.
SHOWN_PROBLEMS = 8


def problem(mutant: Mutant, outcome: targets.Outcome) -> str | None:
    """What is wrong with the program's answer to ``mutant``, or None."""
    if outcome.exception is not None:
        return f"raised {type(outcome.exception).__name__}: {str(outcome.exception)[:160]}"
    if "Traceback" in outcome.stderr or "Traceback" in outcome.stdout:
        return "printed a traceback"
    if outcome.seconds > targets.MUTANT_TIME_LIMIT_SECONDS:
        return f"took {outcome.seconds:.1f} s"
    if mutant.valid:
        if outcome.code != 0:
            return f"valid input refused (exit {outcome.code}): {outcome.stderr.strip()[:200]}"
        return None
    if outcome.code == 0:
        return "invalid input accepted (exit 0)"
    lines = outcome.stderr.rstrip("\n").split("\n")
    if outcome.code != 2:
        return f"exit {outcome.code}, expected 2: {outcome.stderr[:200]}"
    if len(lines) != 1 or not lines[0].startswith("error: "):
        return f"expected one 'error:' line on stderr, got {len(lines)}: {outcome.stderr[:200]!r}"
    if outcome.stdout:
        return f"wrote to stdout on bad input: {outcome.stdout[:100]!r}"
    return None


def fuzz(
    make: Callable[[random.Random, int], Mutant], run: Callable[[Mutant], targets.Outcome], count: int
) -> tuple[list[str], Counter[str]]:
    """Run ``count`` mutants; return the problems and a tally of valid/invalid mutants."""
    rng = random.Random(SEED)
    problems: list[str] = []
    tally: Counter[str] = Counter()
    for index in range(count):
        mutant = make(rng, index)
        tally["valid" if mutant.valid else "invalid"] += 1
        found = problem(mutant, run(mutant))
        if found is not None:
            problems.append(f"#{index} [{mutant.label}] ({'valid' if mutant.valid else 'invalid'}): {found}")
    return problems, tally


def assert_clean(problems: list[str], tally: Counter[str]) -> None:
    assert tally["valid"] > 0 and tally["invalid"] > 0, tally
    assert sum(tally.values()) >= MUTANTS_PER_ENTRY_POINT
    shown = "\n".join(problems[:SHOWN_PROBLEMS])
    assert not problems, f"{len(problems)} of {sum(tally.values())} mutants mishandled:\n{shown}"


def file_runner(path: Path, args: Callable[[Path], list[str]]) -> Callable[[Mutant], targets.Outcome]:
    def run(mutant: Mutant) -> targets.Outcome:
        path.write_bytes(mutant.data)
        return targets.run_cli(args(path))

    return run


def test_predict_snapshot(tmp_path: Path) -> None:
    bases = targets.snapshot_bases()

    def make(rng: random.Random, index: int) -> Mutant:
        _, docs = bases[index % len(bases)]
        return mutate_yaml(rng, docs, targets.SNAPSHOT_TARGET)

    run = file_runner(tmp_path / "snapshot.yaml", lambda p: ["predict", "--snapshot", str(p), "--output", "json"])
    assert_clean(*fuzz(make, run, MUTANTS_PER_ENTRY_POINT))


def test_check_config(tmp_path: Path) -> None:
    bases = targets.config_bases()

    def make(rng: random.Random, index: int) -> Mutant:
        _, docs = bases[index % len(bases)]
        return mutate_yaml(rng, docs, targets.CONFIG_TARGET)

    run = file_runner(tmp_path / "sky-kueue.yaml", lambda p: ["check-config", "--no-skypilot", str(p)])
    assert_clean(*fuzz(make, run, MUTANTS_PER_ENTRY_POINT))


def test_setup_teams(tmp_path: Path) -> None:
    bases = targets.teams_bases()
    out = tmp_path / "out"

    def make(rng: random.Random, index: int) -> Mutant:
        _, docs = bases[index % len(bases)]
        return mutate_yaml(rng, docs, targets.TEAMS_TARGET)

    run = file_runner(tmp_path / "teams.yaml", lambda p: ["setup", "--teams", str(p), "--output", str(out)])
    assert_clean(*fuzz(make, run, MUTANTS_PER_ENTRY_POINT))


def test_simulate_csv_trace(tmp_path: Path) -> None:
    def make(rng: random.Random, index: int) -> Mutant:
        return targets.mutate_csv(rng)

    run = file_runner(
        tmp_path / "trace.csv",
        lambda p: ["simulate", "--trace", str(p), "--policies", "baseline", "--output", "json", "--quiet"],
    )
    assert_clean(*fuzz(make, run, MUTANTS_PER_ENTRY_POINT))


@pytest.fixture(scope="module")
def policy_server() -> Iterator[PolicyServer]:
    server = make_server(targets.ROOT / "configs" / "sky-kueue-demo.yaml", port=0)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def post(server: PolicyServer, body: bytes) -> tuple[int, str]:
    host, port = server.server_address[:2]
    connection = http.client.HTTPConnection(str(host), int(port), timeout=targets.MUTANT_TIME_LIMIT_SECONDS)
    try:
        connection.request("POST", "/policy", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read().decode("utf-8", errors="replace")
    finally:
        connection.close()


def test_policy_server_request_body(policy_server: PolicyServer) -> None:
    """Invalid bodies get 400 with one line; valid ones the answer their unmutated task gets."""
    bases = targets.task_bases()
    expected: dict[int, int] = {}
    for index, (_, task) in enumerate(bases):
        status, text = post(policy_server, targets.encode(targets.request_body(dump_yaml([task]))))
        assert status in (200, 400), text
        expected[index] = status
    rng = random.Random(SEED)
    problems: list[str] = []
    tally: Counter[str] = Counter()
    for index in range(MUTANTS_PER_ENTRY_POINT):
        base = index % len(bases)
        mutant = targets.mutate_request(rng, bases[base][1])
        tally["valid" if mutant.valid else "invalid"] += 1
        status, text = post(policy_server, mutant.data)
        found: str | None = None
        if status >= 500:
            found = f"HTTP {status}: {text[:160]}"
        elif "Traceback" in text:
            found = "answered with a traceback"
        elif mutant.valid and status != expected[base]:
            found = f"valid request answered {status}, unmutated {expected[base]}: {text[:160]}"
        elif not mutant.valid and status != 400:
            found = f"invalid request answered {status}"
        elif not mutant.valid and (not text or "\n" in text.strip()):
            found = f"expected a one-line reason, got {text[:160]!r}"
        if found is not None:
            problems.append(f"#{index} [{mutant.label}] ({'valid' if mutant.valid else 'invalid'}): {found}")
    assert_clean(problems, tally)

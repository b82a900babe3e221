"""Kueue's own scheduler, run by the Go harness (``benchmarks/kueue_harness``), on oracle seeds.

It lives in the real-Kueue tier because it needs what that tier needs: Go and the pinned
``sigs.k8s.io/kueue`` module (CI builds both before the tier runs; a harness that cannot be
built fails here, it is never skipped). No cluster: the harness feeds Kueue's scheduler
directly, as Kueue's own scheduler unit tests do.

The six seed scenarios are small and use nothing that changed between the served release and
the commit the oracle was recorded at (``benchmarks/README.md``, "Kueue's own scheduler as the
baseline"), so the served Kueue must decide exactly what the recording says, cycle by cycle.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.realcluster import harness_build, versions
from sky_kueue.realcluster.harness_outcome import compare

pytestmark = pytest.mark.slow

SEEDS = Path(__file__).resolve().parents[1] / "oracle" / "seeds"


@pytest.fixture(scope="module")
def binary() -> Iterator[Path]:
    try:
        yield harness_build.ensure_built(versions.load_pins(), log=lambda _: None)
    except harness_build.HarnessError as err:
        pytest.fail(f"the Kueue harness cannot be built: {err}", pytrace=False)


def test_the_served_kueue_decides_every_seed_as_recorded(binary: Path) -> None:
    files = sorted((SEEDS / "scenarios").glob("*.yaml"))
    assert len(files) == 6
    results = harness_build.run(binary, files, repeats=2)
    assert [r.scenario for r in results] == [f.stem for f in files]
    for result in results:
        assert result.kueue_release == versions.load_pins().kueue
        assert result.deterministic and result.decisions_deterministic, result.scenario
        assert result.settled and not result.hit_cap, result.scenario
        assert all(seconds > 0 for seconds in result.schedule_seconds), result.scenario
        recorded = json.loads((SEEDS / "expected" / f"{result.scenario}.json").read_text())
        row = compare(result, recorded)
        assert row.every_cycle_agrees and row.decisions_agree, (result.scenario, row.differences)
    preempting = next(r for r in results if r.scenario == "d-single-cq-priority-preempt")
    assert preempting.outcome["cycles"][0]["preempted"] == {
        "research/low-job": {"by": "research/high-job", "reason": "InClusterQueue"}
    }


def test_bad_input_is_one_line_and_exit_2(binary: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("# scenario: x\napiVersion: kueue.x-k8s.io/v1beta1\nkind: Gadget\nmetadata: {name: g}\n")
    proc = subprocess.run([str(binary), str(broken)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f'error: {broken}: document 0: unsupported kind "Gadget"']

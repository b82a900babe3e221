"""The real-SkyPilot loop (``tests/e2e/skypilot_loop.py``) as a test.

Opt-in (``SKY_KUEUE_E2E=1``): it takes several minutes, most of them SkyPilot's own backoff
before it relaunches a preempted job, which is more than the suite's budget on two cores.
``scripts/e2e-skypilot.sh`` runs the same stages and prints their evidence.
"""

from __future__ import annotations

import os
import pathlib
import shutil

import pytest

from tests.e2e.skypilot_loop import Evidence, run

pytestmark = [
    pytest.mark.skipif(os.environ.get("SKY_KUEUE_E2E") != "1", reason="set SKY_KUEUE_E2E=1 (takes minutes)"),
    pytest.mark.skipif(shutil.which("socat") is None, reason="needs socat and nc (scripts/host-tools.sh)"),
]


def test_launch_preempt_relaunch_and_age_with_the_real_skypilot(tmp_path: pathlib.Path) -> None:
    evidence = Evidence()
    run(tmp_path, evidence)
    stages = [stage for stage, _ in evidence.stages]
    assert stages[-1].startswith("STOP:")
    assert "the sky-kueue controller aged the relaunch" in stages

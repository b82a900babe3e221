"""``sky-kueue demo --real`` (``scripts/demo.sh --real``): the seed's story on real Kueue, each
stage seen on the cluster, in the order the README tells it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.real_kueue.conftest import REPO


def test_the_real_demo_tells_the_seed_story_from_kueues_own_conditions() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "sky_kueue.cli.main", "demo", "--real", "-o", "json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["versions"]["kueue"].startswith("v0.")
    stages = {stage["what"].split(" (")[0].split(":")[0]: stage for stage in result["stages"]}
    preempted = next(s for s in result["stages"] if "preempt the dev job" in s["what"])
    assert "Preempted=True/InCohortReclaimWhileBorrowing" in preempted["evidence"]
    assert "QuotaReserved=True" in preempted["evidence"]
    admitted = next(s for s in result["stages"] if s["what"].startswith("the prod job admitted"))
    # the prod job waited out the victim's grace period (10 s in the demo; the demo sees the
    # eviction a moment after Kueue deleted the pod, so allow 2 s of observation delay)
    assert admitted["at_seconds"] - preempted["at_seconds"] >= 8, result["stages"]
    aged = next(s for s in result["stages"] if "aged by the controller" in s["what"])
    assert "spec.priority 200" in aged["evidence"]
    restored = next(s for s in result["stages"] if s["what"].startswith("Kueue restarted"))
    assert "100 -> 200" in restored["evidence"]
    assert len(stages) == len(result["stages"]) == 8

"""protect_within_nominal live: the real controller grants the protected level only within nominal quota.

The cluster of ``test_live_hold``: team-a (prod, 6 CPU nominal, reclaims) and team-b (dev, 4 CPU
nominal) share a cohort. team-b runs ``own`` (4 CPU, its whole nominal quota), then ``x`` and
``y`` (3 CPU each, borrowing team-a's idle quota). team-a's ``train`` (6 CPU) reclaims, taking
team-b's newest admissions, y then x, until team-b is within nominal quota again. SkyPilot
relaunches both, and they wait; train leaves and Kueue readmits them one after the other (one
admission per ClusterQueue and scheduling cycle).

With ``keep-place``, ``protect_levels: 1`` and ``protect_after_preemptions: 1`` (dev class 100:
protected 100, plain 99, a fresh admission 99), x fits team-b's 4 CPU nominal quota at 100 (own
is at 99, below it: a reclaim takes own first), so it is protected; y would not (3 + x's 3 > 4
at 100 or above), so it is admitted at the plain level, where Kueue's own order applies.
With the setting off both are protected: 6 CPU at 100 in a 4 CPU nominal quota.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from sky_kueue.controller.actuators import BAND_LEVEL_ANNOTATION
from sky_kueue.controller.aging import AgingSettings

from .live_support import Live, group_pod, held_quota, live_sandbox
from .test_live_hold import hold_setup

DEV = 100
SETTINGS = AgingSettings(
    policy="keep-place", protect_levels=1, protect_after_preemptions=1, protect_within_nominal=True
)
X, Y = "x-1-fcd1e5cf", "y-2-fcd1e5cf"


def _read(live: Live, name: str) -> dict[str, Any]:
    """The team-b Workload ``name`` as a client reads it from the sandbox API server."""
    api = client.CustomObjectsApi(live.sandbox.api_client())
    found: dict[str, Any] = api.get_namespaced_custom_object("kueue.x-k8s.io", "v1beta1", "team-b", "workloads", name)
    return found


@pytest.mark.parametrize(("within_nominal", "second_level"), [(True, DEV - 1), (False, DEV)], ids=["on", "off"])
def test_only_the_relaunch_that_fits_nominal_quota_gets_the_protected_level(
    tmp_path: Path, within_nominal: bool, second_level: int
) -> None:
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        live.new_controller(dataclasses.replace(SETTINGS, protect_within_nominal=within_nominal), gate=False)
        x, y = group_pod("x", "1", "team-b", "dev-priority", "3"), group_pod("y", "2", "team-b", "dev-priority", "3")
        live.apply(group_pod("own", "3", "team-b", "dev-priority", "4"))
        live.step()
        for job in (x, y):  # admitted in this order, so a reclaim takes y first
            live.clock.advance(10)
            live.apply(job)
            live.step()
        assert [_read(live, n)["spec"]["priority"] for n in (X, Y)] == [DEV - 1, DEV - 1]  # fresh: plain

        train = group_pod("train", "4", "team-a", "prod-priority", "6")
        live.apply(train)
        assert sorted(live.step(60).preempted) == [f"team-b/{X}", f"team-b/{Y}"]
        assert live.step().admitted == ["team-a/train-4-fcd1e5cf"]

        live.apply(x)  # SkyPilot relaunches both while train runs: they wait at the relaunch level
        live.step(10)
        live.apply(y)
        live.step(10)
        # c - P - K + min(n, K - 1) = 100 - 1 - 8 + 1: ahead of a fresh arrival (91)
        assert [_read(live, n)["spec"]["priority"] for n in (X, Y)] == [DEV - 8, DEV - 8]

        live.sandbox.store.delete("pods", train["metadata"]["name"], "team-a")  # team-a's quota is idle again
        assert live.step(10).admitted == [f"team-b/{X}"]  # one admission per ClusterQueue and cycle
        assert _read(live, X)["spec"]["priority"] == DEV
        assert live.step(10).admitted == [f"team-b/{Y}"]

        first, second = _read(live, X), _read(live, Y)
        assert held_quota(first) and held_quota(second)
        assert first["spec"]["priority"] == DEV  # protected: fits 4 CPU nominal with nothing at 100
        # on: plain, as 3 + x's 3 at 100 > 4 nominal; off: protected too, beyond nominal quota
        assert second["spec"]["priority"] == second_level
        for workload in (first, second):
            assert workload["metadata"]["annotations"][BAND_LEVEL_ANNOTATION] == "admitted"
        assert _read(live, "own-3-fcd1e5cf")["spec"]["priority"] == DEV - 1

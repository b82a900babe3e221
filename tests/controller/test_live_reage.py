"""Periodic re-aging: a relaunched job that keeps waiting climbs with its age.

The controller ages a Workload when it sees it; a Workload that then just waits produces
no event, so the election loop queues a pass over every waiting Workload every
``reage_interval_seconds`` of cluster time. The age factor here saturates quickly (+100
after 1,000 s of waiting) so the climb is visible within a few passes, and every write must
hit the waiting relaunch, never a running Workload.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .live_support import Live, demo_aging, group_pod, live_sandbox

AGE_ONLY = {"boost_per_step": 0, "age_weight": 100, "max_age_seconds": 1_000.0, "cap_at_preemptor_priority": False}


def _preempted_and_waiting(live: Live) -> None:
    x = group_pod("x", "1", "team-b", "dev-priority", "6")
    live.apply(x)
    assert live.step().admitted == ["team-b/x-1-fcd1e5cf"]
    live.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2", run_seconds=100_000))
    assert live.step(60).preempted == ["team-b/x-1-fcd1e5cf"]
    assert live.step().admitted == ["team-a/train-2-fcd1e5cf"]
    live.apply(x)  # SkyPilot's relaunch: it cannot fit while the prod job runs
    live.step(10)


def _priority(live: Live) -> int:
    x = live.workload("team-b", "x-1-fcd1e5cf")
    assert x is not None
    return int(x["spec"]["priority"])


def test_a_waiting_relaunch_is_re_aged_every_interval(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        controller = live.new_controller(demo_aging(**AGE_ONLY), gate=False)
        interval = controller.settings.reage_interval_seconds
        assert interval is not None
        _preempted_and_waiting(live)
        first = _priority(live)
        assert first == 100 + 1  # aged 10 s at the relaunch: floor(100 * 10 / 1000)
        seen = [first]
        for _ in range(4):
            live.step(interval)
            controller.step()  # the election loop notices the interval has passed
            live.settle()
            seen.append(_priority(live))
        # waited 10 + k * 300 s since the preemption: floor(100 * min(wait / 1000, 1))
        assert seen == [101, 131, 161, 191, 200]
        x = live.workload("team-b", "x-1-fcd1e5cf")
        assert x is not None
        conditions = {c["type"]: c["status"] for c in (x.get("status") or {}).get("conditions") or []}
        assert conditions.get("QuotaReserved") != "True"  # still waiting: every raise hit a pending Workload


def test_re_aging_can_be_switched_off(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        controller = live.new_controller(demo_aging(**AGE_ONLY), gate=False)
        controller.settings = replace(controller.settings, reage_interval_seconds=None)
        _preempted_and_waiting(live)
        for _ in range(3):
            live.step(300)
            controller.step()
            live.settle()
        assert _priority(live) == 101  # only the reconcile at the relaunch aged it

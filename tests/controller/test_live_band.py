"""Band policies live: the real controller sets waiting and admitted levels in the sandbox.

The scenario of ``test_live_actuators``: team-b's job X is admitted, preempted by team-a's
prod job (class 1000) and relaunched *after* another team-b job, "old", started waiting;
when the prod job leaves, only one of the two fits. Under ``rank`` the relaunch waits one
level above the fresh "old" (dev class 100: fresh 92, relaunch 93) and is admitted first,
yet every waiting level stays below every admitted dev Workload (at 100), and a second prod
job still preempts X: Kueue's class rules are untouched.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller.aging import ActuatorKind, AgingSettings, SettingsError

from .live_support import WORKLOADS, group_pod, held_quota, live_sandbox, updates
from .test_live_actuators import _run

DEV = 100


def _level_writes(events: list[Any]) -> list[tuple[str, int, bool]]:
    """(workload, new spec.priority, was it holding quota) for every spec.priority change in team-b."""
    return [
        (new["metadata"]["name"], new["spec"]["priority"], held_quota(old))
        for old, new in updates(events)
        # team-a's prod jobs get their own class's levels (992 waiting, 1000 admitted)
        if new["metadata"]["namespace"] == "team-b" and old["spec"].get("priority") != new["spec"].get("priority")
    ]


@pytest.mark.parametrize(
    ("policy", "fresh_level", "admitted_level"), [("rank", DEV - 8, DEV), ("keep-place", DEV - 16, DEV - 8)]
)
def test_a_relaunch_keeps_its_place_below_every_admitted_peer(
    tmp_path: Path, policy: str, fresh_level: int, admitted_level: int
) -> None:
    with live_sandbox(tmp_path) as live:
        writes = live.sandbox.store.watch(WORKLOADS)
        live.new_controller(AgingSettings(policy=policy))

        admitted = _run(live)

        assert admitted[0] == "team-b/x-1-fcd1e5cf", admitted  # overtook "old", which waited longer
        x = live.workload("team-b", "x-1-fcd1e5cf")
        old = live.workload("team-b", "old-3-fcd1e5cf")
        assert x is not None and old is not None
        # keep-place protects the readmitted relaunch one level above a fresh admission.
        assert x["spec"]["priority"] == admitted_level + (1 if policy == "keep-place" else 0)
        assert x["metadata"]["annotations"]["sky-kueue.io/band-level"] == "admitted"
        assert old["spec"]["priority"] == fresh_level  # still waiting, at the fresh level

        events = []
        while (event := writes.next(0)) is not None:
            events.append(event)
        writes.close()
        level_writes = _level_writes(events)
        waiting_levels = [p for name, p, held in level_writes if not held and p < admitted_level]
        admitted_levels = [p for name, p, held in level_writes if held]
        assert waiting_levels and admitted_levels
        # No waiting level ever reached an admitted dev level: no licence to preempt a peer,
        # and no level ever left the dev class (prod is 1000).
        assert max(waiting_levels) < min(admitted_levels) <= max(admitted_levels) <= DEV
        assert sorted({p for _, p, _ in level_writes if p < admitted_level}) == [fresh_level, fresh_level + 1]

        # Prod still preempts the readmitted relaunch, as Kueue's class rules say it may.
        live.apply(group_pod("train", "4", "team-a", "prod-priority", "7", gpus="2"))
        assert "team-b/x-1-fcd1e5cf" in live.step(60).preempted


def test_a_band_policy_refuses_settings_it_cannot_honour(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        with pytest.raises(SettingsError, match="'boost-annotation' can only raise it"):
            live.new_controller(AgingSettings(policy="rank", actuator=ActuatorKind.BOOST_ANNOTATION))
        with pytest.raises(SettingsError, match="protects for the whole run"):
            live.new_controller(AgingSettings(policy="keep-place", protect_seconds=600.0))
        close = {"priority_class_ladder": {"dev": 100, "dev-plus": 110}}
        ladder = AgingSettings.from_mapping(close).priority_class_ladder
        with pytest.raises(SettingsError, match="more than rank_levels \\+ protect_levels = 16 apart"):
            live.new_controller(AgingSettings(policy="keep-place", priority_class_ladder=ladder))

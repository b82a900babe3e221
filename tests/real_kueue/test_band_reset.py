"""The ordering policy ``rank`` (a band policy) under Kueue's priority reset: a waiting fresh
arrival's band level sits below its class value; Kueue's restart puts it at the class value
(level with the relaunches the band ranks above it) and the controller sets the level again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.manager import Controller
from sky_kueue.mirror.identity import BAND_LEVEL_ANNOTATION
from tests.real_kueue.support import KueueCluster, conditions, running_controller
from tests.real_kueue.test_preemption import seed, skypilot_pod
from tests.real_kueue.test_priority_reset import WATCH_SECONDS, PriorityLog


@pytest.fixture
def ranking(kueue: KueueCluster, tmp_path: Path) -> Iterator[Controller]:
    with running_controller(
        kueue.cluster, tmp_path / "controller.db", AgingSettings(policy="rank"), identity="real-kueue-rank"
    ) as (
        running,
        _,
    ):
        yield running


def test_a_band_level_reset_by_a_kueue_restart_is_set_again(kueue: KueueCluster, ranking: Controller) -> None:
    seed(kueue)
    waiting = skypilot_pod("dev", "1", "team-b", "dev-priority", cpu="1")
    waiting["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1", "nvidia.com/gpu": "1"},
        "limits": {"nvidia.com/gpu": "1"},
    }  # team-b may not borrow GPUs: it waits
    group = waiting["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"]
    kueue.create_pod(waiting)
    leveled = kueue.wait_workload(
        "team-b",
        group,
        lambda w: BAND_LEVEL_ANNOTATION in w["metadata"].get("annotations", {}),
        "given its band level",
    )
    level = leveled["spec"]["priority"]
    assert level != 100, f"the fresh arrival's band level is its class value ({leveled['metadata']['annotations']})"
    assert conditions(leveled)["QuotaReserved"]["status"] == "False"
    log = PriorityLog(kueue, "team-b", group, leveled["metadata"]["resourceVersion"])
    try:
        kueue.cluster.stop_kueue()
        kueue.cluster.start_kueue()
        kueue.cluster.wait_kueue_ready(time.monotonic() + 60)

        def reset_then_leveled(values: list[tuple[float, int | None]]) -> bool:
            seen = [v for _, v in values]
            return 100 in seen and level in seen[seen.index(100) :]

        assert log.wait_for(reset_then_leveled, WATCH_SECONDS), (
            f"band level {level}; spec.priority versions {log.values}"
        )
    finally:
        log.stop()
    reset_at = next(t for t, v in log.values if v == 100)
    back_at = next(t for t, v in log.values if v == level and t > reset_at)
    print(f"band level {level}: reset to 100 by Kueue, set again {1000 * (back_at - reset_at):.0f} ms later")

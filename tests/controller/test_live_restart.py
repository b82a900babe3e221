"""Nothing is lost across restarts and broken watches.

* A preemption that happens while no controller runs (the Workload is finished and collected
  before any controller could see it) is replayed from the durable watch cursor when the
  next controller starts, before the relaunch it caused is aged: one decision, at the right
  boost, revision 0.
* A watch cut mid-stream resumes from the last resourceVersion; a 410 relists. Either way
  the preemption is recorded once and the relaunch is aged.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sky_kueue.controller.history import StepState
from sky_kueue.sandbox.apiserver import FaultKind

from .live_support import demo_aging, group_pod, live_sandbox

DEV = "dev-1-fcd1e5cf"


def test_a_preemption_while_no_controller_runs_is_replayed_from_the_cursor(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        first = live.new_controller(demo_aging(), identity="first")
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        assert live.step().admitted == [f"team-b/{DEV}"]
        first_uid = live.workload("team-b", DEV)["metadata"]["uid"]  # type: ignore[index]
        first.stop()  # saves the cursor, releases the Lease
        assert live.runtime.cursor("workloads") is not None

        # No controller: team-a preempts team-b; the Workload finishes and is collected; SkyPilot relaunches.
        prod = group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2")
        live.sandbox.apply(prod)
        live.clock.advance(60)
        assert live.sandbox.step().preempted == [f"team-b/{DEV}"]
        live.sandbox.step()
        assert live.workload("team-b", DEV) is None
        live.clock.advance(20)
        live.sandbox.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.sandbox.step()
        relaunch = live.workload("team-b", DEV)
        assert relaunch is not None and relaunch["spec"]["priority"] == 100

        live.new_controller(demo_aging(), identity="second")
        assert any(e.replay for e in live.recorder.snapshot())
        history = live.history("1")
        assert [p.key.token for p in history.preemptions] == [f"{first_uid}#1"]
        (step,) = [s for s in history.steps if s.key.workload_uid == relaunch["metadata"]["uid"]]
        assert (step.boost, step.revision, step.state) == (100, 0, StepState.ACTUATED)
        assert live.workload("team-b", DEV)["spec"]["priority"] == 200  # type: ignore[index]


@pytest.mark.parametrize("fault", [FaultKind.WATCH_CUT, FaultKind.WATCH_GONE])
def test_a_broken_workload_watch_loses_nothing(tmp_path: Path, fault: FaultKind) -> None:
    with live_sandbox(tmp_path) as live:
        # The controller's first Workload watch breaks after its first event.
        armed = live.sandbox.inject(fault, verb="watch", resource="workloads", after_events=1)
        live.new_controller(demo_aging())
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.step()
        live.sandbox.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2"))
        live.step(60)
        live.step()
        live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
        live.step(20)
        assert armed.fired == 1
        history = live.history("1")
        assert len(history.preemptions) == 1
        assert history.current_boost == 100
        assert live.workload("team-b", DEV)["spec"]["priority"] == 200  # type: ignore[index]

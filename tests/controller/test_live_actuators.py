"""Both Kueue-level actuators through the sandbox, with the PriorityBoost gate on and off.

The scenario makes aging visible in Kueue's own queue order: team-b's job X is admitted,
preempted by team-a's prod job and relaunched *after* another team-b job, "old", started
waiting. When the prod job leaves, only one of the two fits. Without aging Kueue admits the
older one; with aging the relaunch, raised to priority 200, goes first. With the gate on the
controller detects it (Kueue's configuration file in ``kueue-system/kueue-manager-config``)
and writes the ``priority-boost`` annotation, leaving ``spec.priority`` alone; with the gate
off it merge-patches ``spec.priority``. Every write to a Workload's priority is checked to
have hit a *waiting* Workload.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller.aging import ActuatorKind

from .live_support import WORKLOADS, Live, demo_aging, group_pod, held_quota, live_sandbox, updates

KUEUE_CONFIG = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
    "data": {
        "controller_manager_config.yaml": (
            "apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nfeatureGates:\n  PriorityBoost: true\n"
        )
    },
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}}


def _priority_writes(events: list[Any]) -> list[tuple[str, bool]]:
    """(workload, was it holding quota) for every change of spec.priority or the boost annotation."""
    boost_key = "kueue.x-k8s.io/priority-boost"
    return [
        (new["metadata"]["name"], held_quota(old))
        for old, new in updates(events)
        if old["spec"].get("priority") != new["spec"].get("priority")
        or (old["metadata"].get("annotations") or {}).get(boost_key)
        != (new["metadata"].get("annotations") or {}).get(boost_key)
    ]


def _run(live: Live) -> list[str]:
    """Preempt and relaunch X behind "old"; return the admissions once the prod job is gone."""
    x = group_pod("x", "1", "team-b", "dev-priority", "6")
    live.apply(x)
    assert live.step().admitted == ["team-b/x-1-fcd1e5cf"]
    prod = group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2")
    live.apply(prod)
    assert live.step(60).preempted == ["team-b/x-1-fcd1e5cf"]
    assert live.step().admitted == ["team-a/train-2-fcd1e5cf"]
    live.apply(group_pod("old", "3", "team-b", "dev-priority", "6"))
    live.step(10)  # "old" waits: 3 CPUs left
    live.apply(x)  # SkyPilot's relaunch: the same group name, a new Workload
    live.step(10)
    live.sandbox.store.delete("pods", prod["metadata"]["name"], "team-a")  # the prod job is torn down
    admitted: list[str] = []
    for _ in range(4):
        admitted += live.step(10).admitted
    return admitted


@pytest.mark.parametrize("gate", [True, False], ids=["gate-on-annotation", "gate-off-spec-priority"])
def test_the_relaunch_is_raised_while_waiting_and_overtakes_an_older_job(tmp_path: Path, gate: bool) -> None:
    with live_sandbox(tmp_path, priority_boost=gate) as live:
        if gate:
            live.sandbox.apply([NAMESPACE, KUEUE_CONFIG])
        writes = live.sandbox.store.watch(WORKLOADS)
        controller = live.new_controller(demo_aging())  # actuator "auto": detect the gate
        assert controller.gate is not None and controller.gate.enabled is (True if gate else None)

        admitted = _run(live)

        assert admitted[0] == "team-b/x-1-fcd1e5cf", admitted  # overtook "old", which waited longer
        x = live.workload("team-b", "x-1-fcd1e5cf")
        assert x is not None
        annotations = x["metadata"].get("annotations") or {}
        if gate:
            assert annotations.get("kueue.x-k8s.io/priority-boost") == "100"
            assert x["spec"]["priority"] == 100
        else:
            assert "kueue.x-k8s.io/priority-boost" not in annotations
            assert x["spec"]["priority"] == 200
        assert annotations["sky-kueue.io/aging-step"].endswith("#0")
        history = live.history("1")
        (step,) = [s for s in history.steps if s.boost > 0]
        assert step.actuator == "kubernetes" and step.actuated_boost == 100
        assert history.current_boost == 100

        events = []
        while (event := writes.next(0)) is not None:
            events.append(event)
        writes.close()
        priority_writes = _priority_writes(events)
        assert priority_writes == [("x-1-fcd1e5cf", False)]  # exactly one write, to the waiting relaunch


def test_without_the_gate_a_boost_annotation_would_change_nothing(tmp_path: Path) -> None:
    """Why the gate is detected: forcing the annotation on a cluster without it leaves FIFO order."""
    with live_sandbox(tmp_path, priority_boost=False) as live:
        live.new_controller(demo_aging(actuator=ActuatorKind.BOOST_ANNOTATION))
        admitted = _run(live)
        assert admitted[0] == "team-b/old-3-fcd1e5cf", admitted


def test_user_hooks_hear_of_the_preemption_and_the_resubmission(tmp_path: Path) -> None:
    import dataclasses

    from sky_kueue import hooks

    heard: list[tuple[str, dict[str, object]]] = []

    def listen(kind: str) -> hooks.Callback:
        return lambda event: heard.append((kind, dataclasses.asdict(event)))

    removers = [
        hooks.register(hooks.HookEvent.PREEMPTED, listen("preempted")),
        hooks.register(hooks.HookEvent.RESUBMITTED, listen("resubmitted")),
    ]
    try:
        with live_sandbox(tmp_path) as live:
            live.new_controller(demo_aging())
            _run(live)
    finally:
        for remove in removers:
            remove()
    kinds = [kind for kind, _ in heard]
    assert "preempted" in kinds and "resubmitted" in kinds
    preempted = next(event for kind, event in heard if kind == "preempted")
    assert preempted["workload"] == "team-b/x-1-fcd1e5cf"
    assert preempted["reason"] == "InCohortReclaimWhileBorrowing"
    resubmitted = next(event for kind, event in heard if kind == "resubmitted")
    assert resubmitted["boost"] == 100

"""The relaunch lane end to end on the sandbox: setup's objects, SkyPilot's relaunch moved into the
lane (the pods the ``KUEUE_AGING`` strategy creates), and what the controller makes of it.

A relaunch is a new pod group under the *same* name, so the pod-group Workload cannot simply
change queues: the job's preempted Workload is Finished, Kueue matches the new pods to it and
never ungates them (the relaunch race), the controller deletes it, and Kueue creates a fresh
Workload from the new pods, in the queue their label names: the lane. The controller then says
so once (``MovedToLane`` Event, ``sky_kueue_controller_lane_entries_total``), and its heartbeat
carries the lane's occupancy and the relaunches waiting for it, which ``controller status`` and
``sky-kueue queue`` show.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller import liveness
from sky_kueue.controller.config_file import lanes_of
from sky_kueue.controller.events import ControllerEventKind
from sky_kueue.controller.kube_events import EventReason, events_for
from sky_kueue.controller.lane_moves import LaneEntries
from sky_kueue.controller.metrics import ControllerMetrics
from sky_kueue.skypilot.config import validate_config
from sky_kueue.skypilot.setup_render import render_objects, render_plugin_config
from sky_kueue.skypilot.setup_spec import TeamsSpec

from .live_support import WORKLOADS, demo_aging, group_pod, live_sandbox
from .test_relaunch_race import GROUP, _finished_preempted_workload

#: team-a and team-b 6 CPUs each; team-b's lane 4 of its 6, after one preemption.
SPEC = TeamsSpec.model_validate(
    {
        "cohort": "team-ab",
        "flavors": {"default-flavor": {"resources": ["cpu", "memory"]}},
        "priority_classes": {"prod-priority": {"value": 1000}, "dev-priority": {"value": 100}},
        "aging": {"ladder": ["dev-priority", {"name": "dev-aged-1", "value": 300}, "prod-priority"]},
        "defaults": {"namespace_selector": "own"},
        "teams": {
            "team-a": {"users": ["alice"], "quotas": {"cpu": "6", "memory": "64Gi"}},
            "team-b": {"users": ["bob"], "quotas": {"cpu": "6", "memory": "64Gi"}},
        },
        "lane": {"quotas": {"cpu": "4", "memory": "16Gi"}, "teams": ["team-b"], "after_preemptions": 1},
    }
)
LANE_CQ = "team-b-cq-relaunch"


def in_lane(pod: dict[str, Any]) -> dict[str, Any]:
    """A relaunch's pod as the ``KUEUE_AGING`` strategy queues it: in team-b's lane."""
    pod["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = "relaunch"
    return pod


def conditions(obj: dict[str, Any] | None) -> dict[str, str]:
    assert obj is not None
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def test_a_relaunch_moved_into_the_lane_is_a_new_workload_there_and_the_controller_reports_it(tmp_path: Path) -> None:
    plugin = validate_config(render_plugin_config(SPEC))
    lanes = lanes_of(plugin)
    with live_sandbox(tmp_path, setup=render_objects(SPEC)) as live:
        store = live.sandbox.store
        # team-b's job 1 was preempted in its own queue: its Finished Workload is not collected
        # yet when SkyPilot relaunches it, moved into the lane
        manifest, status = _finished_preempted_workload("prod-uid", "2026-01-01T12:00:00Z")
        stale = store.create(WORKLOADS, manifest, "team-b")
        store.mutate(WORKLOADS, GROUP, lambda obj: obj.update(status=status), "team-b", subresource="status")
        live.clock.advance(20)
        live.sandbox.apply(in_lane(group_pod("dev", "1", "team-b", "dev-priority", "4")))
        live.sandbox.step()
        assert store.get(WORKLOADS, GROUP, "team-b")["metadata"]["uid"] == stale["metadata"]["uid"]  # adopted

        metrics = ControllerMetrics(lanes=lanes)
        controller = live.new_controller(demo_aging(), observers=[metrics.observe], lanes=lanes)
        assert [e.stale.uid for e in live.recorder.snapshot() if e.stale is not None] == [stale["metadata"]["uid"]]
        live.step(10)  # Kueue creates the relaunch's Workload from its pods: in the lane's queue
        fresh = live.workload("team-b", GROUP)
        assert fresh is not None and fresh["metadata"]["uid"] != stale["metadata"]["uid"]
        assert fresh["spec"]["queueName"] == "relaunch"
        live.step(10)
        admitted = live.workload("team-b", GROUP)
        assert conditions(admitted)["Admitted"] == "True"
        assert admitted is not None and admitted["status"]["admission"]["clusterQueue"] == LANE_CQ

        # announced once, though the controller recorded it queued, then admitted
        entries = LaneEntries(lanes)
        moved = [r for e in live.recorder.snapshot() for r in events_for(e, entries)]
        moved = [r for r in moved if r.reason is EventReason.MOVED_TO_LANE]
        assert [(r.target.name, r.target.uid) for r in moved] == [(GROUP, fresh["metadata"]["uid"])]
        assert "relaunch lane team-b/relaunch (ClusterQueue team-b-cq-relaunch)" in moved[0].message
        sample = metrics.registry.get_sample_value(
            "sky_kueue_controller_lane_entries_total", {"team": "team-b", "cluster_queue": LANE_CQ}
        )
        assert sample == 1.0
        history = live.history("1")
        assert history.preemption_count == 1  # the stale Workload's preemption, recorded before its deletion

        # job 2's relaunch (also due the lane) waits: the lane's 4 CPUs are taken
        live.sandbox.apply(in_lane(group_pod("dev", "2", "team-b", "dev-priority", "4")))
        live.step(10)
        live.step(120)
        waiting = live.workload("team-b", "dev-2-fcd1e5cf")
        assert waiting is not None and conditions(waiting).get("QuotaReserved") != "True"
        live.lease_clock.advance(30)  # the lane report is due again
        controller.step()
        beat = live.runtime.heartbeat()
        assert beat is not None
        (lane,) = beat.details[liveness.LANES_KEY]
        assert (lane["clusterQueue"], lane["scope"], lane["admitted"], lane["waitingCount"]) == (LANE_CQ, "team", 1, 1)
        assert lane["occupancy"] == "cpu 4/4, memory 0/16Gi"
        (relaunch,) = lane["waiting"]
        assert (relaunch["workload"], relaunch["job"]) == ("team-b/dev-2-fcd1e5cf", "dev (#2)")
        assert relaunch["waitSeconds"] == 120  # created at the step before the 120 s

        shown_status = CliRunner().invoke(cli, ["controller", "status", "--state", str(live.state_path), "-o", "json"])
        assert shown_status.exit_code == 0, shown_status.output
        document = json.loads(shown_status.output)
        assert document["lanes"] == [lane] and "lanes" not in document["controller"]
        text = CliRunner().invoke(cli, ["controller", "status", "--state", str(live.state_path)])
        assert "Relaunch lanes" in text.output and "team-b/dev-2-fcd1e5cf" in text.output
        assert "cpu 4/4, memory 0/16Gi" in text.output

        queue = CliRunner(mix_stderr=False).invoke(
            cli, ["queue", "--kubeconfig", str(live.sandbox.kubeconfig_path), "-o", "json", "--no-predict"]
        )
        assert queue.exit_code == 0, queue.stderr
        (shown,) = json.loads(queue.stdout)["lanes"]
        assert (shown["clusterQueue"], shown["occupancy"], shown["admitted"], shown["waitingCount"]) == (
            LANE_CQ,
            "cpu 4/4, memory 0/16Gi",
            1,
            1,
        )
        assert shown["waiting"][0]["workload"] == "team-b/dev-2-fcd1e5cf"
        table = CliRunner(mix_stderr=False).invoke(
            cli, ["queue", "--kubeconfig", str(live.sandbox.kubeconfig_path), "--no-predict"]
        )
        assert "Relaunch lanes" in table.stdout and "team-b/dev-2-fcd1e5cf" in table.stdout
        assert not [e for e in live.recorder.snapshot() if e.kind is ControllerEventKind.STATE_WENT_BACK]

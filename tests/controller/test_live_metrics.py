"""The controller's ``/metrics``, scraped over HTTP from a controller running against the
sandbox through one preemption and one relaunch: each counter moves by exactly what happened;
and its Events on those Workloads, as the API server and ``kubectl describe`` show them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from sky_kueue.controller.kube_events import WorkloadEventRecorder
from sky_kueue.controller.metrics import ControllerMetrics
from sky_kueue.metrics_http import serve_metrics
from tests.skypilot.test_policy_metrics import scrape

from .live_support import CONTROLLER_USER_AGENT, demo_aging, group_pod, live_sandbox

C = "sky_kueue_controller"
KUBECTL_TIMEOUT_SECONDS = 20


def test_controller_metrics_through_a_preemption_and_a_relaunch(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        metrics = ControllerMetrics(clock=live.now)
        api_client = live.sandbox.api_client()
        api_client.user_agent = CONTROLLER_USER_AGENT
        recorder = WorkloadEventRecorder(api_client, "replica-a", clock=live.now)
        controller = live.new_controller(demo_aging(), gate=False, observers=[metrics.observe, recorder])
        metrics.bind(controller)
        server = serve_metrics(metrics.registry)
        try:
            live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))
            live.step()  # admitted, borrowing
            live.apply(group_pod("train", "2", "team-a", "prod-priority", "7", gpus="2"))
            assert live.step(60).preempted == ["team-b/dev-1-fcd1e5cf"]
            live.step()  # the preemptor is admitted
            live.apply(group_pod("dev", "1", "team-b", "dev-priority", "5"))  # SkyPilot's relaunch
            live.step()
            assert live.history("1").current_boost == 100
            after = scrape(server.url)
            recorder.flush()
            events = live.sandbox.store.list("events", "team-b").items
            relaunch = live.workload("team-b", "dev-1-fcd1e5cf")
            assert relaunch is not None
            describe = _kubectl(live.sandbox.kubeconfig_path, tmp_path, "describe", "workload", "-n", "team-b")
            live.clock.advance(3_700)  # the relaunch keeps waiting: over an hour and 10x its 60 s run
            later = scrape(server.url)
        finally:
            server.stop()
            recorder.close()

    ours = sorted(
        (e["reason"], e["involvedObject"]["uid"], e["count"])
        for e in events
        if e["source"]["component"] == "sky-kueue-controller"
    )
    preempted_uid = next(e["involvedObject"]["uid"] for e in events if e["reason"] == "PreemptionRecorded")
    assert preempted_uid != relaunch["metadata"]["uid"]
    assert ours == sorted([("PreemptionRecorded", preempted_uid, 1), ("Aged", relaunch["metadata"]["uid"], 1)])
    aged = next(e for e in events if e["reason"] == "Aged")
    assert aged["involvedObject"]["kind"] == "Workload" and aged["involvedObject"]["name"] == "dev-1-fcd1e5cf"
    assert "sky-kueue set priority" in aged["message"] and "after 1 preemption(s)" in aged["message"]
    assert "Aged" in describe and "sky-kueue set priority" in describe, describe

    def value(name: str, **labels: str) -> float:
        return after.get((f"{C}_{name}", tuple(sorted(labels.items()))), 0.0)

    # The ClusterQueue from the mirrored LocalQueue (team-b-lq -> team-b-cq): the preempted
    # Workload has no admission left and the relaunch none yet.
    preempted = {"namespace": "team-b", "cluster_queue": "team-b-cq", "reason": "InCohortReclaimWhileBorrowing"}
    assert value("preemptions_total", **preempted) == 1
    assert sum(v for (n, _), v in after.items() if n == f"{C}_preemptions_total") == 1
    assert sum(v for (n, _), v in after.items() if n == f"{C}_evictions_total") == 0
    assert value("relaunches_total", namespace="team-b", cluster_queue="team-b-cq") == 1
    assert value("aging_steps_total", namespace="team-b", cluster_queue="team-b-cq", mechanism="spec-priority") == 1
    assert sum(v for (n, _), v in after.items() if n == f"{C}_aging_steps_total") == 1
    assert sum(v for (n, _), v in after.items() if n == f"{C}_bursts_total") == 0
    assert value("eviction_to_action_seconds_count", reason="InCohortReclaimWhileBorrowing") == 1
    assert value("leader") == 1 and value("leader_transitions_total") == 1
    assert value("work_queue_depth") == 0 and value("work_queue_oldest_item_age_seconds") == 0
    assert value("watch_relists_total") == 0 and value("watch_restarts_total") == 0
    assert value("store_writes_total") > 0 and value("store_conflicts_total") == 0
    assert value("starving_jobs") == 0
    assert later[(f"{C}_starving_jobs", ())] == 1


def _kubectl(kubeconfig: Path, tmp_path: Path, *args: str) -> str:
    binary = shutil.which("kubectl") or "/usr/bin/kubectl"
    result = subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "kubectl-cache"), *args],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
        check=False,
    )
    assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
    return result.stdout

"""The predicted-wait burst gate in the running controller, against the sandbox API server.

The cluster of ``test_live_hold.py``: team-a (prod, 6 CPU nominal) and team-b (dev, 4 CPU
nominal) share a cohort. team-b's ``own`` job (4 CPU, run time unknown) fills team-b's nominal
quota; its ``dev`` job (4 CPU) borrows team-a's idle quota until team-a's ``train`` job (6 CPU)
reclaims it. team-b bursts after one preemption, gated: start-up 600 s + margin 300 s.

dev's relaunch is admitted when train finishes (into team-a's quota again, borrowed: the gate
compares the wait for any admission). So train's expected run time, which its pods carry as the
admin policy writes it, is the predicted wait: 300 s keeps dev in Kueue; 3,600 s bursts it, once,
with the reason ``predicted-on-prem-wait`` and the wait in its detail, its Event, the metrics and
``controller status``; no run time at all is an unknown wait, which keeps it in Kueue too.
The same burst is decided when dev's Workload is already collected from the controller's mirror
by the time the controller judges its preemption (from the mirror's record of the deletion).
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.events import ControllerEvent
from sky_kueue.controller.kube_events import WorkloadEventRecorder
from sky_kueue.controller.metrics import ControllerMetrics
from sky_kueue.controller.predicted_burst import PredictedBurstSettings
from sky_kueue.metrics_http import serve_metrics
from sky_kueue.skypilot.labels import RUNTIME_SECONDS_ANNOTATION
from tests.skypilot.test_policy_metrics import scrape

from .live_support import CONTROLLER_USER_AGENT, demo_aging, group_pod, live_sandbox
from .test_live_hold import DEV, cli_output, dev_workload, hold_setup, preempt_dev

BURSTS = "sky_kueue_controller_bursts_total"
#: team-b's gate: a predicted wait above 600 + 300 s bursts.
GATE = PredictedBurstSettings(cloud_startup_seconds=600.0, margin_seconds=300.0)
SHORT_TRAIN_SECONDS = 300
#: The controller's re-age interval (manager.REAGE_INTERVAL_SECONDS): each pass judges waiting relaunches.
REAGE_SECONDS = 300
LONG_TRAIN_SECONDS = 3_600


def _train(expected_seconds: int | None, run_seconds: int) -> dict[str, Any]:
    pod = group_pod("train", "2", "team-a", "prod-priority", "6", run_seconds=run_seconds)
    if expected_seconds is not None:
        pod["metadata"]["annotations"][RUNTIME_SECONDS_ANNOTATION] = str(expected_seconds)
    return pod


def _burst_samples(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> dict[str, float]:
    return {dict(labels)["reason"]: value for (name, labels), value in samples.items() if name == BURSTS}


def _gated_run(tmp_path: Path, train: dict[str, Any], train_runs: int) -> dict[str, Any]:
    """Runs the scenario to train's end; returns what the test asserts on."""
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        metrics = ControllerMetrics(clock=live.now)
        api_client = live.sandbox.api_client()
        api_client.user_agent = CONTROLLER_USER_AGENT
        recorder = WorkloadEventRecorder(api_client, "replica-a", clock=live.now)
        controller = live.new_controller(
            demo_aging(burst_after_preemptions=1),
            gate=False,
            observers=[metrics.observe, recorder],
            burst_gates=BurstGates({"team-b": GATE}),
        )
        metrics.bind(controller)
        server = serve_metrics(metrics.registry)
        try:
            preempt_dev(live, own_runs=None, train=train)
            burst_after_relaunch = live.history("1").burst
            notes = [
                note
                for event in live.recorder.events
                if event.outcome is not None and event.outcome.job_key == "managed-job/1"
                for note in event.outcome.notes
                if note.startswith("burst gate:")
            ]
            for _ in range(3):  # the relaunch waits; the re-age pass judges it again each time
                live.step(REAGE_SECONDS)
                controller.step()
                live.settle()
            status_json = json.loads(cli_output("controller", "status", "--state", str(live.state_path), "-o", "json"))
            status_text = cli_output("controller", "status", "--state", str(live.state_path))
            live.step(max(0, train_runs - 3 * REAGE_SECONDS))
            live.step()
            samples = scrape(server.url)
            recorder.flush()
            events = live.sandbox.store.list("events", "team-b").items
            final = live.history("1")
            dev = dev_workload(live)
        finally:
            server.stop()
            recorder.close()
    ours = [e for e in events if e["source"]["component"] == "sky-kueue-controller" and e["reason"] == "BurstDecided"]
    return {
        "burst_after_relaunch": burst_after_relaunch,
        "history": final,
        "notes": notes,
        "status_json": status_json,
        "status_text": status_text,
        "bursts": _burst_samples(samples),
        "burst_events": ours,
        "dev": dev,
    }


def test_a_relaunch_the_predictor_admits_soon_stays_in_kueue(tmp_path: Path) -> None:
    seen = _gated_run(tmp_path, _train(SHORT_TRAIN_SECONDS, SHORT_TRAIN_SECONDS), SHORT_TRAIN_SECONDS)

    assert seen["burst_after_relaunch"] is None and seen["history"].burst is None
    assert seen["history"].preemption_count == 1  # due a burst by its count, kept by the gate
    stays = "predicted any on-prem wait 300s vs cloud start-up 600s + margin 300s: stays on-prem"
    assert any(stays in note for note in seen["notes"])
    assert seen["bursts"] == {} and seen["burst_events"] == []
    (job,) = [j for j in seen["status_json"]["jobs"] if j["job"] == "managed-job/1"]
    assert job["burst"] is None
    conditions = {c["type"]: c["status"] for c in seen["dev"]["status"]["conditions"]}
    assert conditions["QuotaReserved"] == "True"  # admitted on-prem once train finished


def test_a_relaunch_with_a_long_predicted_wait_bursts_once_with_the_wait_in_its_reason(tmp_path: Path) -> None:
    seen = _gated_run(tmp_path, _train(LONG_TRAIN_SECONDS, LONG_TRAIN_SECONDS), LONG_TRAIN_SECONDS)

    burst = seen["burst_after_relaunch"]
    # Decided at the preemption, before SkyPilot's relaunch: the relaunch strategy reads this mark.
    assert burst is not None and burst.reason == "predicted-on-prem-wait"
    assert burst.predicted_wait_seconds == LONG_TRAIN_SECONDS
    assert "predicted any on-prem wait 3600s vs cloud start-up 600s + margin 300s: burst" in burst.detail
    assert seen["history"].burst == burst  # once: later passes do not decide again
    assert seen["bursts"] == {"predicted-on-prem-wait": 1.0}
    (event,) = seen["burst_events"]
    assert event["count"] == 1 and "predicted any on-prem wait 3600s" in event["message"]
    (job,) = [j for j in seen["status_json"]["jobs"] if j["job"] == "managed-job/1"]
    assert job["burst"]["reason"] == "predicted-on-prem-wait" and "3600s" in job["burst"]["detail"]
    burst_column = "".join(
        "".join(line.split("│")[7].split()) for line in seen["status_text"].splitlines() if line.count("│") > 8
    )
    assert burst_column.startswith("predicted-on-prem-wait:preempted1x;predictedanyon-premwait3600s")


def test_without_expected_run_times_the_wait_is_unknown_and_the_relaunch_stays(tmp_path: Path) -> None:
    seen = _gated_run(tmp_path, _train(None, LONG_TRAIN_SECONDS), LONG_TRAIN_SECONDS)

    assert seen["history"].burst is None and seen["bursts"] == {} and seen["burst_events"] == []
    assert any("on-prem wait is unknown: stays in Kueue" in n for n in seen["notes"])


#: How long the live test waits for the controller's mirror (real seconds).
MIRROR_WAIT_SECONDS = 10.0


class _BlockOnTrain:
    """An observer that holds the controller's worker at train's first reconcile until released,
    so the changes behind it (dev's eviction and deletion) reach the mirror before the worker."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.release = threading.Event()

    def __call__(self, event: ControllerEvent) -> None:
        name = str(((event.workload or {}).get("metadata") or {}).get("name", ""))
        if name.startswith("train-2") and not self.reached.is_set():
            self.reached.set()
            assert self.release.wait(MIRROR_WAIT_SECONDS), "the test never released the worker"


def test_a_preempted_group_collected_before_the_controller_judges_it_still_bursts_on_its_predicted_wait(
    tmp_path: Path,
) -> None:
    # The sandbox, as Kueue does for an unretriable group, deletes dev's pods on its preemption;
    # with no grace period they stop at once and the Workload is collected the next step. The
    # controller's worker is held until dev's Workload is gone from its mirror: it judges the preemption from the
    # Workload's last state, and the relaunch is predicted to wait for train (3,600 s).
    block = _BlockOnTrain()
    dev_key = f"team-b/{DEV}"
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        controller = live.new_controller(
            demo_aging(burst_after_preemptions=1),
            gate=False,
            observers=[block],
            burst_gates=BurstGates({"team-b": GATE}),
        )
        live.apply(group_pod("own", "3", "team-b", "dev-priority", "4"))
        live.step()
        live.clock.advance(10)
        dev = group_pod("dev", "1", "team-b", "dev-priority", "4")
        dev["spec"]["terminationGracePeriodSeconds"] = 0
        live.apply(dev)
        live.step()
        assert dev_key in controller.versions()[0]

        live.sandbox.apply(_train(LONG_TRAIN_SECONDS, LONG_TRAIN_SECONDS))
        live.clock.advance(60)
        assert live.sandbox.step().preempted == [dev_key]
        live.sandbox.step()
        assert live.workload("team-b", DEV) is None  # pods deleted, Workload collected
        try:
            assert block.reached.wait(MIRROR_WAIT_SECONDS), "the worker never reconciled train"
            assert controller.wait_until(lambda: dev_key not in controller.versions()[0], MIRROR_WAIT_SECONDS)
            assert live.history("1").burst is None  # not judged yet
        finally:
            block.release.set()
        live.settle()

        burst = live.history("1").burst
        assert live.history("1").preemption_count == 1
        assert burst is not None and burst.reason == "predicted-on-prem-wait"
        assert burst.predicted_wait_seconds == LONG_TRAIN_SECONDS
        assert "predicted any on-prem wait 3600s vs cloud start-up 600s + margin 300s: burst" in burst.detail
        assert live.workload("team-b", DEV) is None  # decided before any relaunch

"""Safe relaunch against the sandbox API server: a relaunch after the team's k-th preemption
is held (``spec.active: false``) until Kueue would admit it within nominal quota, or until
``safe_max_hold_seconds``; the hold and the release are stored once (also across a restart),
shown by ``queue`` and ``controller status``, counted in ``/metrics`` and told as Events.

The cluster: team-a (prod, 6 CPU nominal) and team-b (dev, 4 CPU nominal) share a cohort.
team-b's ``own`` job (4 CPU) runs in its nominal quota; its ``dev`` job (4 CPU) borrows
team-a's idle quota until team-a's ``train`` job (6 CPU) reclaims it. The dev job's relaunch
then waits; it is held, and not released when team-a's quota frees again (it would borrow
again), but when team-b's own job finishes (it fits in team-b's nominal quota).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings
from sky_kueue.controller.hold import HOLD_ANNOTATION, HoldTeams, TeamHold
from sky_kueue.controller.kube_events import WorkloadEventRecorder
from sky_kueue.controller.metrics import ControllerMetrics
from sky_kueue.metrics_http import serve_metrics
from tests.skypilot.test_policy_metrics import scrape

from .live_support import CONTROLLER_USER_AGENT, Live, demo_aging, group_pod, live_sandbox

C = "sky_kueue_controller"
DEV = "dev-1-fcd1e5cf"
#: How long team-b's own job and team-a's train job run (seconds of the sandbox clock).
OWN_RUN_SECONDS = 900
TRAIN_RUN_SECONDS = 300


def _cq(name: str, cpu: str, reclaim: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "cohort": "team-ab",
            "namespaceSelector": {},
            "preemption": {"reclaimWithinCohort": reclaim, "withinClusterQueue": "Never"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": cpu}]}],
                }
            ],
        },
    }


def hold_setup() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "prod-priority"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "dev-priority"},
            "value": 100,
        },
        _cq("team-a-cq", "6", "Any"),
        _cq("team-b-cq", "4", "Never"),
    ]
    for team in ("team-a", "team-b"):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": team, "labels": {"kubernetes.io/metadata.name": team}},
            }
        )
        docs.append(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "LocalQueue",
                "metadata": {"name": f"{team}-lq", "namespace": team},
                "spec": {"clusterQueue": f"{team}-cq"},
            }
        )
    return docs


def team_b_holds(max_hold_seconds: float = 1_800.0) -> HoldTeams:
    # Held also while the wait is unknown: the sandbox's Workloads carry no expected run times.
    settings = SafeRelaunchSettings(
        safe_after_preemptions=1, safe_max_hold_seconds=max_hold_seconds, hold_only_when_predicted=False
    )
    return HoldTeams({"team-b": TeamHold("team-b", settings)})


def _conditions(obj: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}


def preempt_dev(
    live: Live,
    *,
    own_runs: int | None = OWN_RUN_SECONDS,
    train_runs: int | None = None,
    train: dict[str, Any] | None = None,
) -> None:
    """own and dev run (dev borrowing), train reclaims dev's quota, SkyPilot relaunches dev.

    ``train``: team-a's pod group as given (default: one running ``train_runs`` seconds)."""
    live.apply(group_pod("own", "3", "team-b", "dev-priority", "4", run_seconds=own_runs))
    live.step()
    live.clock.advance(10)  # dev is admitted last, so Kueue picks it when it reclaims
    live.apply(group_pod("dev", "1", "team-b", "dev-priority", "4"))
    live.step()
    live.apply(train or group_pod("train", "2", "team-a", "prod-priority", "6", run_seconds=train_runs))
    assert live.step(60).preempted == [f"team-b/{DEV}"]
    live.step()  # train is admitted
    live.apply(group_pod("dev", "1", "team-b", "dev-priority", "4"))  # SkyPilot's relaunch
    live.step()


def cli_output(*args: str) -> str:
    """A ``sky-kueue`` command's output (it must succeed)."""
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def dev_workload(live: Live) -> dict[str, Any]:
    found = live.workload("team-b", DEV)
    assert found is not None
    return found


def test_a_held_relaunch_waits_out_borrowed_quota_and_is_released_into_nominal_quota(tmp_path: Path) -> None:
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        metrics = ControllerMetrics(clock=live.now)
        api_client = live.sandbox.api_client()
        api_client.user_agent = CONTROLLER_USER_AGENT
        recorder = WorkloadEventRecorder(api_client, "replica-a", clock=live.now)
        controller = live.new_controller(
            demo_aging(), gate=False, observers=[metrics.observe, recorder], holds=team_b_holds()
        )
        metrics.bind(controller)
        server = serve_metrics(metrics.registry)
        try:
            preempt_dev(live, train_runs=TRAIN_RUN_SECONDS)
            held = dev_workload(live)
            assert held["spec"]["active"] is False
            assert held["metadata"]["annotations"][HOLD_ANNOTATION].startswith("held: waiting for nominal quota (")
            (hold,) = live.history("1").holds
            assert hold.workload_uid == held["metadata"]["uid"] and hold.preemptions == 1 and not hold.released
            while_held = scrape(server.url)
            queue_text = cli_output("queue", "--kubeconfig", str(live.sandbox.kubeconfig_path), "--no-predict")
            status_text = cli_output("controller", "status", "--state", str(live.state_path))
            status_json = json.loads(cli_output("controller", "status", "--state", str(live.state_path), "-o", "json"))

            live.step(TRAIN_RUN_SECONDS)  # train finishes: team-a's quota is idle again, dev would borrow it
            live.step()
            still = dev_workload(live)
            assert still["spec"]["active"] is False and _conditions(still).get("QuotaReserved") != "True"
            assert not live.history("1").holds[0].released

            live.step(OWN_RUN_SECONDS)  # own finishes: team-b's nominal quota is free
            released = dev_workload(live)
            assert released["spec"]["active"] is True
            assert HOLD_ANNOTATION not in (released["metadata"].get("annotations") or {})
            live.step()  # Kueue admits it, within team-b's nominal quota
            assert _conditions(dev_workload(live))["QuotaReserved"] == "True"
            after = scrape(server.url)
            recorder.flush()
            events = live.sandbox.store.list("events", "team-b").items
            (hold,) = live.history("1").holds
        finally:
            server.stop()
            recorder.close()

    dev_row = next(line for line in queue_text.splitlines() if DEV in line)
    assert " held " in dev_row and "held: waiting for nominal quota (" in dev_row, queue_text
    hold_column = " ".join(line.split("│")[-2] for line in status_text.splitlines() if line.count("│") > 8)
    assert "held: waiting for nominal quota (predicted wait unknown)" in " ".join(hold_column.split())
    (job,) = [j for j in status_json["jobs"] if j["job"] == "managed-job/1"]
    assert job["hold"]["workload_uid"] == hold.workload_uid and job["hold"]["released_at"] is None
    assert hold.release_kind == "safe" and hold.released_at is not None
    # held at 70 s (the preemption step), released at 70 + 300 + 900 s (the step own finished in)
    assert hold.released_at - hold.held_at == TRAIN_RUN_SECONDS + OWN_RUN_SECONDS
    assert (hold.release_reason or "").startswith("released: fits in nominal quota")
    assert while_held[(f"{C}_holds_total", (("reason", "no-nominal-quota"), ("team", "team-b")))] == 1
    assert while_held[(f"{C}_held_jobs", (("team", "team-b"),))] == 1
    assert after[(f"{C}_releases_total", (("reason", "safe"), ("team", "team-b")))] == 1
    assert after[(f"{C}_held_jobs", (("team", "team-b"),))] == 0
    assert sum(v for (n, _), v in after.items() if n == f"{C}_holds_total") == 1
    ours = [e for e in events if e["source"]["component"] == "sky-kueue-controller"]
    held_events = [e for e in ours if e["reason"] == "Held"]
    released_events = [e for e in ours if e["reason"] == "Released"]
    assert [e["count"] for e in held_events] == [1] and [e["count"] for e in released_events] == [1]
    assert held_events[0]["message"].startswith("held: waiting for nominal quota (")
    assert released_events[0]["message"].startswith("released: fits in nominal quota")
    assert held_events[0]["involvedObject"]["uid"] == hold.workload_uid


def test_a_held_relaunch_is_released_after_safe_max_hold_seconds(tmp_path: Path) -> None:
    with live_sandbox(tmp_path, setup=hold_setup()) as live:
        controller = live.new_controller(demo_aging(), gate=False, holds=team_b_holds(max_hold_seconds=600))
        preempt_dev(live, own_runs=None)  # own never finishes: no nominal quota frees
        assert dev_workload(live)["spec"]["active"] is False
        live.clock.advance(599)
        assert controller.step()  # the re-age pass judges held relaunches too
        live.settle()
        assert dev_workload(live)["spec"]["active"] is False
        live.clock.advance(301)
        assert controller.step()
        live.settle()
        assert dev_workload(live)["spec"]["active"] is True
        (hold,) = live.history("1").holds
    assert hold.release_kind == "timeout" and hold.released_at == hold.held_at + 900
    assert (hold.release_reason or "").startswith("released: held 15m >= safe_max_hold_seconds 10m")


@pytest.mark.parametrize("state_kind", ["sqlite", "kubernetes"])
def test_a_restarted_controller_neither_holds_again_nor_forgets_the_hold(tmp_path: Path, state_kind: str) -> None:
    with live_sandbox(tmp_path, setup=hold_setup(), state_kind=state_kind) as live:
        first = live.new_controller(demo_aging(), gate=False, holds=team_b_holds())
        preempt_dev(live)
        uid = dev_workload(live)["metadata"]["uid"]
        held_version = dev_workload(live)["metadata"]["resourceVersion"]
        first.stop()
        live.recorder.events.clear()
        second = live.new_controller(demo_aging(), identity="replica-b", gate=False, holds=team_b_holds())
        assert dev_workload(live)["metadata"]["resourceVersion"] == held_version  # no second hold patch
        assert [h.workload_uid for h in live.history("1").holds] == [uid]
        holds_after_restart = [
            e.outcome.hold.action.value
            for e in live.recorder.snapshot()
            if e.outcome is not None and e.outcome.hold is not None
        ]
        live.step(OWN_RUN_SECONDS, controller=second)  # own finishes: the second controller releases it
        assert second.idle()
        (hold,) = live.history("1").holds
        assert dev_workload(live)["spec"]["active"] is True
    assert "held" not in holds_after_restart and set(holds_after_restart) <= {"still-held"}
    assert hold.release_kind == "safe"

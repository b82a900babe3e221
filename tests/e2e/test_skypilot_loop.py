"""The real-SkyPilot loop (``tests/e2e/skypilot_loop.py``) as tests.

The loops are opt-in (``SKY_KUEUE_E2E=1``): they take minutes, most of them SkyPilot's own
backoff before it relaunches a preempted job, which is more than the suite's budget on two cores;
the containers loop also needs root. ``scripts/e2e-skypilot.sh [--containers]`` runs the same
stages and prints their evidence. The helpers the loop reads SkyPilot's state with are tested
here without SkyPilot running.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import sqlite3

import pytest

from tests.e2e import skypilot_loop
from tests.e2e.skypilot_loop import Evidence, LoopOptions, StageFailed, run

needs_e2e = pytest.mark.skipif(
    os.environ.get("SKY_KUEUE_E2E") != "1" or shutil.which("socat") is None,
    reason="set SKY_KUEUE_E2E=1 (takes minutes) and install socat/nc (scripts/host-tools.sh)",
)


@pytest.mark.slow
@needs_e2e
def test_launch_preempt_relaunch_and_age_with_the_real_skypilot(tmp_path: pathlib.Path) -> None:
    evidence = Evidence()
    run(tmp_path, evidence)
    stages = [stage for stage, _ in evidence.stages]
    assert stages[-1].startswith("STOP:")
    assert "the sky-kueue controller aged the relaunch" in stages


@pytest.mark.slow
@needs_e2e
@pytest.mark.skipif(os.geteuid() != 0, reason="containers need root")
def test_the_relaunched_job_succeeds_in_containers(tmp_path: pathlib.Path) -> None:
    evidence = Evidence()
    run(tmp_path, evidence, LoopOptions(containers=True))
    stages = [stage for stage, _ in evidence.stages]
    assert any("SUCCEEDED in sky jobs queue" in stage for stage in stages)
    assert stages[-1].startswith("the sky-kueue controller recorded the completion")


def _jobs_db(home: pathlib.Path, rows: list[tuple[int, int, str, int]]) -> None:
    path = home / skypilot_loop.JOBS_DB
    path.parent.mkdir(parents=True)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE spot (spot_job_id INTEGER, task_id INTEGER, task_name TEXT, status TEXT, "
            "recovery_count INTEGER, start_at FLOAT, end_at FLOAT, failure_reason TEXT)"
        )
        db.executemany(
            "INSERT INTO spot VALUES (?, ?, 'dev', ?, ?, 100.0, 142.0, NULL)",
            [(job, task, status, recoveries) for job, task, status, recoveries in rows],
        )


def test_managed_job_reads_skypilots_table(tmp_path: pathlib.Path) -> None:
    assert skypilot_loop.managed_job(tmp_path, 1) is None  # no table yet: the next poll
    _jobs_db(tmp_path, [(1, 0, "RECOVERING", 1), (2, 0, "RUNNING", 0)])
    job = skypilot_loop.managed_job(tmp_path, 1)
    assert job is not None and job["status"] == "RECOVERING" and job["recovery_count"] == 1
    assert skypilot_loop._ran(job) == "ran 42 s"
    assert skypilot_loop.managed_job(tmp_path, 3) is None


def test_job_probe_waits_for_state_and_recoveries_and_stops_on_failure(tmp_path: pathlib.Path) -> None:
    _jobs_db(tmp_path, [(1, 0, "SUCCEEDED", 0), (2, 0, "SUCCEEDED", 1), (3, 0, "FAILED_SETUP", 1)])
    wanted = frozenset({"SUCCEEDED"})
    assert skypilot_loop._job_reached(tmp_path, 1, wanted, min_recoveries=1)() is None
    found = skypilot_loop._job_reached(tmp_path, 2, wanted, min_recoveries=1)()
    assert found is not None and found["spot_job_id"] == 2
    with pytest.raises(StageFailed, match="managed job 3 ended FAILED_SETUP"):
        skypilot_loop._job_reached(tmp_path, 3, wanted)()


def test_managed_job_id_from_launch_output() -> None:
    assert skypilot_loop._managed_job_id("...\n⚙︎ Managed Job ID: 12\n...") == 12
    with pytest.raises(StageFailed, match="no managed job ID"):
        skypilot_loop._managed_job_id("Launching failed")


def test_options_pick_the_e2e_tasks_for_containers() -> None:
    assert LoopOptions().task("team-b-cpu-dev.yaml", "team-b-dev.yaml").parent.name == "task_templates"
    chosen = LoopOptions(containers=True).task("team-b-cpu-dev.yaml", "team-b-dev.yaml")
    assert chosen == skypilot_loop.E2E_TASKS / "team-b-dev.yaml" and chosen.is_file()


def test_unknown_arguments_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert skypilot_loop.main(["--bogus"]) == 2
    assert "bad argument(s) --bogus" in capsys.readouterr().err
    assert skypilot_loop.main(["--containers", "--real"]) == 2  # one mode at a time
    assert "usage: skypilot_loop [--containers | --real | --lane]" in capsys.readouterr().err


def test_real_options_pick_the_scaled_tasks_and_run_containers() -> None:
    options = LoopOptions(real=True)
    chosen = options.task("team-b-cpu-dev.yaml", "team-b-dev.yaml")
    assert options.runs_containers and chosen == skypilot_loop.E2E_TASKS / "real" / "team-b-dev.yaml"
    assert chosen.is_file()


def test_the_loop_says_which_aging_policy_it_runs(tmp_path: pathlib.Path) -> None:
    import yaml

    written = yaml.safe_load(skypilot_loop.plugin_config(tmp_path).read_text())
    policy = written["aging"]["parameters"]["policy"]
    banner = skypilot_loop.policy_banner()
    assert f"aging policy {policy} (preemptions_per_step: 1)" in banner
    assert "not the default none (records only)" in banner


def test_the_lane_loop_renders_team_bs_cohort_lane_from_the_setup_spec() -> None:
    from sky_kueue.sandbox import seed

    seed_objects = seed.seed_cluster()
    lane = skypilot_loop.lane_setup(seed_objects)
    assert lane.cluster_queue == "team-ab-relaunch-lane" and lane.local_queue == "relaunch"
    assert lane.team_lane["after_preemptions"] == 1
    queues = {o["metadata"]["name"]: o for o in lane.objects if o["kind"] == "ClusterQueue"}
    lane_cq = queues[lane.cluster_queue]
    assert lane_cq["spec"]["preemption"]["withinClusterQueue"] == "Never"
    assert lane_cq["spec"]["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-b"]
    cpu = {r["name"]: r for g in lane_cq["spec"]["resourceGroups"] for f in g["flavors"] for r in f["resources"]}["cpu"]
    assert (cpu["nominalQuota"], cpu["borrowingLimit"], cpu["lendingLimit"]) == ("5", "0", "5")
    # carved from shared-cq: the cohort's total is unchanged, and the seed itself is untouched
    shared = queues["shared-cq"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {r["name"]: r["nominalQuota"] for r in shared} == {"cpu": "5", "memory": "54Gi"}
    original = next(o for o in seed_objects if o["metadata"]["name"] == "shared-cq")
    assert original["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == "10"
    relaunch_lq = [o for o in lane.objects if o["kind"] == "LocalQueue" and o["metadata"]["name"] == "relaunch"]
    assert [(o["metadata"]["namespace"], o["spec"]["clusterQueue"]) for o in relaunch_lq] == [
        ("team-b", "team-ab-relaunch-lane")
    ]


def test_the_lane_loop_writes_a_plugin_config_the_policy_accepts(tmp_path: pathlib.Path) -> None:
    import yaml

    from sky_kueue.sandbox import seed
    from sky_kueue.skypilot.config import load_config

    lane = skypilot_loop.lane_setup(seed.seed_cluster())
    config = load_config(skypilot_loop.plugin_config(tmp_path, lane=lane))
    assert config.aging.strategy == "KUEUE_AGING"
    team_lane = config.teams["team-b"].lane
    assert team_lane is not None and team_lane.after_preemptions == 1
    assert (team_lane.local_queue, team_lane.cluster_queue) == ("relaunch", "team-ab-relaunch-lane")
    assert config.teams["team-a"].lane is None
    # the default loop keeps no lane and no strategy
    default = load_config(skypilot_loop.plugin_config(tmp_path))
    assert default.aging.strategy is None and default.teams["team-b"].lane is None
    # the server plugin, as configs/plugins.yaml names it, reads the loop's config and state
    (plugin,) = skypilot_loop.server_plugins(tmp_path)["plugins"]
    shipped = yaml.safe_load((skypilot_loop.REPO / "configs" / "plugins.yaml").read_text())["plugins"][0]
    assert plugin["class"] == shipped["class"] and set(plugin["parameters"]) == set(shipped["parameters"])
    assert plugin["parameters"]["state"] == str(tmp_path / "controller.db")


def test_the_lane_option_is_accepted_alone(capsys: pytest.CaptureFixture[str]) -> None:
    assert skypilot_loop.main(["--lane", "--containers"]) == 2
    assert "usage: skypilot_loop [--containers | --real | --lane]" in capsys.readouterr().err

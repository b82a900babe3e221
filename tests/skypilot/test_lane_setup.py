"""The relaunch lane on the SkyPilot side (issue 39): ``setup`` renders it from ``teams.yaml``'s
``lane`` key, the plugin config records it, ``check-config --cluster`` checks it, and the admin
policy never lets a task into it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from sky_kueue.cli.main import cli
from sky_kueue.cli.setup_cmd import model_problem
from sky_kueue.kueue import quantity
from sky_kueue.skypilot.cluster_check import ClusterFacts, config_problems
from sky_kueue.skypilot.config import ConfigError, validate_config
from sky_kueue.skypilot.decision import RejectionCode, decide
from sky_kueue.skypilot.setup_lane import LaneSetupError
from sky_kueue.skypilot.setup_render import render_objects, render_objects_and_lanes, render_plugin_config
from sky_kueue.skypilot.setup_spec import TeamsSpec
from tests.skypilot.builders import REPO, config, request, task
from tests.skypilot.test_decision import placed, rejected

TEAMS = REPO / "configs" / "teams.yaml"


def spec_data(**lane: Any) -> dict[str, Any]:
    """The shipped team spec with GPUs, CPUs and memory for both teams, and ``lane``."""
    data = yaml.safe_load(TEAMS.read_text())
    data["teams"]["team-a"]["quotas"] = {"nvidia.com/gpu": "8", "cpu": "32", "memory": "128Gi"}
    data["teams"]["team-b"]["quotas"] = {"nvidia.com/gpu": "4", "cpu": "16", "memory": "64Gi"}
    data["teams"]["team-b"].pop("borrowing_limits")
    data["lane"] = lane
    return data


def spec(**lane: Any) -> TeamsSpec:
    return TeamsSpec.model_validate(spec_data(**lane))


def by_name(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {
        f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}".lstrip("/"): o
        for o in objects
        if o["kind"] == kind
    }


def nominal(cq: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {
        (flavor["name"], entry["name"]): quantity.parse_amount(entry["name"], entry["nominalQuota"])
        for group in cq["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for entry in flavor["resources"]
    }


def cohort_total(objects: list[dict[str, Any]]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    for cq in by_name(objects, "ClusterQueue").values():
        for key, amount in nominal(cq).items():
            total[key] = total.get(key, 0) + amount
    return total


GPU, CPU, MEM = ("gpu-flavor", "nvidia.com/gpu"), ("default-flavor", "cpu"), ("default-flavor", "memory")


# --- setup renders the lane -------------------------------------------------------------------


def test_a_team_lane_is_carved_from_each_teams_quota_as_the_simulator_carves_it() -> None:
    plain = render_objects(TeamsSpec.model_validate({**spec_data(), "lane": None}))
    objects, lanes = render_objects_and_lanes(spec(gpus=2, after_preemptions=1))
    assert model_problem(objects) is None  # the Kueue model's validator accepts the result
    queues = by_name(objects, "ClusterQueue")
    # 2 of team-a's 8 GPUs, CPU and memory in proportion (a quarter): 8 CPUs, 32Gi
    assert nominal(queues["team-a-cq-relaunch"]) == {GPU: 2, CPU: 8000, MEM: 32 * 2**30}
    assert nominal(queues["team-a-cq"]) == {GPU: 6, CPU: 24000, MEM: 96 * 2**30}
    assert nominal(queues["team-b-cq-relaunch"]) == {GPU: 2, CPU: 8000, MEM: 32 * 2**30}
    assert cohort_total(objects) == cohort_total(plain)  # carved, not added
    lane = queues["team-b-cq-relaunch"]["spec"]
    entries = [e for g in lane["resourceGroups"] for f in g["flavors"] for e in f["resources"]]
    assert all(e["borrowingLimit"] == "0" and e["lendingLimit"] == e["nominalQuota"] for e in entries)
    assert lane["cohort"] == "team-ab"
    assert lane["preemption"] == {
        "reclaimWithinCohort": "Any",
        "borrowWithinCohort": {"policy": "Never"},
        "withinClusterQueue": "Never",
    }
    assert lane["queueingStrategy"] == "StrictFIFO"
    assert lane["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-b"]}]
    }
    assert queues["team-b-cq-relaunch"]["metadata"]["labels"] == {"sky-kueue.io/relaunch-lane": "team"}
    local = by_name(objects, "LocalQueue")
    assert local["team-b/relaunch"]["spec"] == {"clusterQueue": "team-b-cq-relaunch"}
    assert [lane.cluster_queue for lane in lanes] == ["team-a-cq-relaunch", "team-b-cq-relaunch"]
    kinds = [o["kind"] for o in objects]
    order = ["Namespace", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue"]
    assert kinds == sorted(kinds, key=order.index)


def test_a_lane_may_reclaim_only_from_lower_priority_borrowers() -> None:
    objects, _ = render_objects_and_lanes(spec(gpus=2, reclaim_within_cohort="LowerPriority"))
    assert model_problem(objects) is None
    lane = by_name(objects, "ClusterQueue")["team-b-cq-relaunch"]["spec"]
    assert lane["preemption"]["reclaimWithinCohort"] == "LowerPriority"
    assert lane["preemption"]["withinClusterQueue"] == "Never"


def test_a_cohort_lane_is_carved_from_the_largest_or_the_named_donor_and_shared() -> None:
    objects, (lane,) = render_objects_and_lanes(spec(scope="cohort", gpus=4))
    assert (lane.cluster_queue, lane.donor, lane.teams) == ("team-ab-relaunch-lane", "team-a-cq", ("team-a", "team-b"))
    queues = by_name(objects, "ClusterQueue")
    assert nominal(queues["team-a-cq"])[GPU] == 4 and nominal(queues["team-b-cq"])[GPU] == 4
    shared = queues["team-ab-relaunch-lane"]["spec"]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert shared == ["team-a", "team-b"]
    assert set(by_name(objects, "LocalQueue")) >= {"team-a/relaunch", "team-b/relaunch"}
    _, (named,) = render_objects_and_lanes(spec(scope="cohort", gpus=4, donor="team-b"))
    assert named.donor == "team-b-cq" and named.empties_donor


def test_explicit_lane_quotas_are_carved_per_resource() -> None:
    objects, (lane,) = render_objects_and_lanes(
        spec(quotas={"nvidia.com/gpu": "1", "cpu": "500m", "memory": "2Gi"}, teams=["team-b"])
    )
    assert lane.quotas == {GPU: 1, CPU: 500, MEM: 2 * 2**30}
    assert nominal(by_name(objects, "ClusterQueue")["team-b-cq"]) == {GPU: 3, CPU: 15500, MEM: 62 * 2**30}
    assert lane.quota_strings() == {
        "cpu": {"default-flavor": "500m"},
        "memory": {"default-flavor": "2Gi"},
        "nvidia.com/gpu": {"gpu-flavor": "1"},
    }


@pytest.mark.parametrize(
    ("lane", "message"),
    [
        ({"gpus": 5, "teams": ["team-b"]}, "lane.gpus: 5 exceeds the 4 nvidia.com/gpu of ClusterQueue team-b-cq"),
        ({"quotas": {"cpu": "17"}, "teams": ["team-b"]}, "lane.quotas.cpu: 17 in flavor default-flavor exceeds the 16"),
        ({"gpus": 1, "local_queue": "team-b-lq"}, "lane.local_queue 'team-b-lq' is team team-b's own LocalQueue"),
    ],
)
def test_a_lane_the_donor_cannot_give_is_one_line(lane: dict[str, Any], message: str) -> None:
    with pytest.raises(LaneSetupError, match=message.replace(".", r"\.")):
        render_objects_and_lanes(spec(**lane))


@pytest.mark.parametrize(
    ("lane", "aging", "message"),
    [
        ({"gpus": 0}, True, "lane: gpus must be at least 1, got 0"),
        ({"gpus": 2, "after_preemptions": 0}, True, "lane: after_preemptions must be at least 1, got 0"),
        ({"gpus": 2, "quotas": {"cpu": "1"}}, True, "not both"),
        ({}, True, "give the lane's size as gpus"),
        ({"gpus": 2, "donor": "team-a"}, True, "only a cohort lane has a donor"),
        ({"gpus": 2, "scope": "cohort", "donor": "nobody"}, True, "neither a team nor a lender"),
        ({"gpus": 2, "teams": ["team-x"]}, True, "lane.teams: unknown team 'team-x'"),
        ({"gpus": 2, "reclaim_within_cohort": "Never"}, True, "'Any' or 'LowerPriority'"),
        ({"gpus": 2}, False, "lane: needs aging with strategy KUEUE_AGING"),
    ],
)
def test_a_bad_lane_key_is_refused_with_its_reason(lane: dict[str, Any], aging: bool, message: str) -> None:
    data = spec_data(**lane)
    if not aging:
        data["aging"] = None
    with pytest.raises(ValidationError, match=message):
        TeamsSpec.model_validate(data)


def test_setup_writes_the_lane_and_a_plugin_config_that_records_it(tmp_path: Path) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text(yaml.safe_dump(spec_data(gpus=2, after_preemptions=2, teams=["team-b"])))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(teams), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    written = [o for o in yaml.safe_load_all((tmp_path / "out" / "kueue-setup.yaml").read_text()) if o]
    assert "team-b-cq-relaunch" in by_name(written, "ClusterQueue")
    plugin = validate_config(yaml.safe_load((tmp_path / "out" / "sky-kueue.yaml").read_text()))
    lane = plugin.teams["team-b"].lane
    assert lane is not None and plugin.teams["team-a"].lane is None
    assert (lane.local_queue, lane.after_preemptions, lane.cluster_queue) == ("relaunch", 2, "team-b-cq-relaunch")
    assert lane.capacity() == {"nvidia.com/gpu": 2, "cpu": 8000, "memory": 32 * 2**30}
    assert plugin.aging.strategy == "KUEUE_AGING" and plugin.aging.enabled


def test_setup_refuses_a_lane_larger_than_its_donor_in_one_line(tmp_path: Path) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text(yaml.safe_dump(spec_data(gpus=9)))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(teams), "--output", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {teams}: lane.gpus: 9 exceeds the 8 nvidia.com/gpu of ClusterQueue team-a-cq; "
        "lower lane.gpus or give the donor more quota"
    ]


def test_setup_warns_when_a_lane_takes_all_of_its_donors_gpus(tmp_path: Path) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text(yaml.safe_dump(spec_data(gpus=4, teams=["team-b"])))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(teams), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "warning: relaunch lane team-b-cq-relaunch takes all of some resource of ClusterQueue team-b-cq" in (
        result.output
    )


# --- the plugin config's lane ------------------------------------------------------------------


def lane_config(**team_b: Any) -> Any:
    lane = {"local_queue": "relaunch", "after_preemptions": 2, "cluster_queue": "team-b-cq-relaunch", **team_b}
    return config(aging={"strategy": "KUEUE_AGING"}, teams={"team-b": {"lane": lane}})


def test_a_lane_needs_the_strategy_that_moves_relaunches_into_it() -> None:
    with pytest.raises(ConfigError, match=r"teams\.team-b\.lane: a relaunch lane needs aging\.enabled: true"):
        config(teams={"team-b": {"lane": {"local_queue": "relaunch", "after_preemptions": 2}}})


def test_a_team_has_a_lane_or_the_safe_relaunch_hold_not_both() -> None:
    lane = {"local_queue": "relaunch", "after_preemptions": 2}
    with pytest.raises(ConfigError, match="a relaunch lane or safe_after_preemptions, not both"):
        config(aging={"strategy": "KUEUE_AGING"}, teams={"team-b": {"lane": lane, "safe_after_preemptions": 2}})


def test_a_lane_needs_a_queue_of_its_own() -> None:
    with pytest.raises(ConfigError, match="LocalQueue team-b/team-b-lq is the team's own queue"):
        lane_config(local_queue="team-b-lq")
    with pytest.raises(ConfigError, match="after_preemptions"):
        lane_config(after_preemptions=0)
    with pytest.raises(ConfigError, match="'lots' is not a Kubernetes quantity"):
        lane_config(quotas={"cpu": {"default-flavor": "lots"}})


# --- the policy never lets a task into a lane --------------------------------------------------

LANE = lane_config()


@pytest.mark.parametrize(
    "where",
    [
        {"overrides": {"kubernetes": {"kueue": {"local_queue_name": "relaunch"}}}},
        {"overrides": {"kubernetes": {"quota": {"queue": "relaunch"}}}},
        {
            "overrides": {
                "kubernetes": {"pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "relaunch"}}}}
            }
        },
        {"labels": {"kueue.x-k8s.io/queue-name": "relaunch"}},
    ],
)
@pytest.mark.parametrize("request_name", ["jobs.launch", "launch", "jobs.launch_cluster"])
def test_a_task_naming_its_teams_lane_is_rejected(where: dict[str, Any], request_name: str) -> None:
    # A fresh job, or a request claiming to be a managed job's relaunch (any client can send
    # jobs.launch_cluster and a managed-job id): none enters the lane through the policy.
    claimed = task(team="team-b", envs={"SKYPILOT_MANAGED_JOB_ID": "7"}, **copy.deepcopy(where))
    decision = rejected(decide(request(claimed, request_name=request_name), LANE), RejectionCode.LANE_QUEUE)
    assert "asks for queue 'relaunch', team 'team-b''s relaunch lane" in decision.message
    assert "preempted 2 times" in decision.message


def test_another_team_naming_a_lane_is_rejected_and_the_policy_still_places_its_own_queue() -> None:
    foreign = task(team="team-a", overrides={"kubernetes": {"kueue": {"local_queue_name": "relaunch"}}})
    decision = rejected(decide(request(foreign), LANE), RejectionCode.LANE_QUEUE)
    assert "the relaunch lane of team 'team-b'" in decision.message
    assert placed(decide(request(task(team="team-b")), LANE)).local_queue == "team-b-lq"


# --- check-config --cluster checks the lane ----------------------------------------------------


def _active(obj: dict[str, Any]) -> dict[str, Any]:
    return {**obj, "status": {"conditions": [{"type": "Active", "status": "True"}]}}


def facts_from(objects: list[dict[str, Any]]) -> ClusterFacts:
    return ClusterFacts(
        namespaces=frozenset(o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"),
        local_queues={
            (o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objects if o["kind"] == "LocalQueue"
        },
        cluster_queues={o["metadata"]["name"]: _active(o) for o in objects if o["kind"] == "ClusterQueue"},
        priority_classes={o["metadata"]["name"]: o["value"] for o in objects if o["kind"] == "WorkloadPriorityClass"},
    )


def rendered(lane: dict[str, Any]) -> tuple[Any, list[dict[str, Any]]]:
    teams = TeamsSpec.model_validate(spec_data(**lane))
    return validate_config(render_plugin_config(teams)), render_objects(teams)


def test_check_config_passes_the_rendered_lane_and_names_each_drift() -> None:
    plugin, objects = rendered({"gpus": 2, "teams": ["team-b"]})
    contexts = ("sky-kueue-sandbox",)
    assert config_problems(plugin, {"sky-kueue-sandbox": facts_from(objects)}, contexts) == []
    drifted = copy.deepcopy(objects)
    lane = by_name(drifted, "ClusterQueue")["team-b-cq-relaunch"]
    gpu = lane["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]
    gpu["nominalQuota"] = "3"
    del gpu["borrowingLimit"]
    lane["spec"]["preemption"]["withinClusterQueue"] = "LowerPriority"
    lane["spec"]["cohort"] = "elsewhere"
    problems = config_problems(plugin, {"sky-kueue-sandbox": facts_from(drifted)}, contexts)
    where = "team team-b on sky-kueue-sandbox: relaunch lane ClusterQueue team-b-cq-relaunch"
    assert problems == [
        f"{where} is in cohort elsewhere, not the team's (team-ab): "
        "it can neither lend its idle quota nor take it back",
        f"{where} has withinClusterQueue LowerPriority: a relaunch admitted there could be preempted",
        f"{where} may borrow nvidia.com/gpu in gpu-flavor (borrowingLimit unset, needs 0): a relaunch admitted on "
        "borrowed quota can be reclaimed",
        f"{where} has 3 nvidia.com/gpu in gpu-flavor, 2 in the config (as setup rendered it)",
    ]
    missing = [o for o in objects if not (o["kind"] == "LocalQueue" and o["metadata"]["name"] == "relaunch")]
    assert config_problems(plugin, {"sky-kueue-sandbox": facts_from(missing)}, contexts) == [
        "team team-b on sky-kueue-sandbox: relaunch lane LocalQueue team-b/relaunch does not exist "
        "(sky-kueue setup --apply creates it)"
    ]


def test_the_lane_key_commented_in_the_shipped_teams_yaml_renders_once_uncommented() -> None:
    text = TEAMS.read_text()
    block = text[text.index("# lane:") :]
    uncommented = "\n".join(line.removeprefix("#").removeprefix(" ") for line in block.splitlines())
    lane = yaml.safe_load(uncommented)["lane"]
    assert lane == {"gpus": 2, "after_preemptions": 2, "scope": "team"}
    objects, lanes = render_objects_and_lanes(spec(**lane))
    assert model_problem(objects) is None and [x.cluster_queue for x in lanes] == [
        "team-a-cq-relaunch",
        "team-b-cq-relaunch",
    ]


def test_the_lane_commented_in_the_shipped_plugin_config_is_valid_once_uncommented() -> None:
    text = (REPO / "configs" / "sky-kueue.yaml").read_text()
    block = text[text.index("    # lane:") :].splitlines()[:5]
    lane = yaml.safe_load("\n".join(line.replace("    # ", "", 1) for line in block))["lane"]
    checked = config(aging={"strategy": "KUEUE_AGING"}, teams={"team-b": {"lane": lane}}).teams["team-b"].lane
    assert checked is not None and checked.capacity() == {"cpu": 4000, "memory": 16 * 2**30}

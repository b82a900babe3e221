"""``sky-kueue setup``: the compact team spec renders the seed setup (plus the aging ladder)
and a plugin config that the policy accepts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from pydantic import ValidationError

from sky_kueue.cli.main import cli
from sky_kueue.skypilot.config import validate_config
from sky_kueue.skypilot.setup_render import render_controller_rbac, render_objects, render_plugin_config
from sky_kueue.skypilot.setup_spec import TeamsSpec
from tests.skypilot.builders import REPO, SEED_SETUP

TEAMS = REPO / "configs" / "teams.yaml"


def spec(**changes: Any) -> TeamsSpec:
    data = yaml.safe_load(TEAMS.read_text())
    data.update(changes)
    return TeamsSpec.model_validate(data)


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return (obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"])


def test_example_spec_renders_the_seed_setup_plus_the_ladder() -> None:
    rendered = {key(o): o for o in render_objects(spec())}
    seed = {key(o): o for o in yaml.safe_load_all(SEED_SETUP.read_text()) if o}
    ladder = {k for k in rendered if k[2] in ("dev-aged-1", "dev-aged-2")}
    assert set(rendered) - ladder == set(seed)
    for k, obj in seed.items():
        assert rendered[k] == obj, k
    assert {rendered[k]["value"] for k in ladder} == {300, 600}


def test_apply_order() -> None:
    kinds = [o["kind"] for o in render_objects(spec())]
    order = ["Namespace", "ResourceFlavor", "WorkloadPriorityClass", "ClusterQueue", "LocalQueue"]
    assert kinds == sorted(kinds, key=order.index)


def test_plugin_config_matches_the_setup_and_is_valid() -> None:
    config = validate_config(render_plugin_config(spec()))
    assert config.aging.ladder == ("dev-priority", "dev-aged-1", "dev-aged-2", "prod-priority")
    assert config.priority_classes["dev-aged-1"] == 300
    assert (config.teams["team-b"].namespace, config.teams["team-b"].local_queue) == ("team-b", "team-b-lq")
    assert config.teams["team-b"].priority_classes.default == "dev-priority"
    assert config.kubernetes.contexts == ("sky-kueue-sandbox",)


def test_own_namespace_selector_and_per_flavor_quotas() -> None:
    custom = spec(
        defaults={"namespace_selector": "own"},
        flavors={
            "on-demand": {"resources": ["cpu", "memory"]},
            "spot": {"resources": ["cpu", "memory"], "node_labels": {"spot": "true"}},
        },
        lenders={},
        aging=None,
        teams={"ml": {"quotas": {"cpu": {"on-demand": "4", "spot": "16"}, "memory": "32Gi"}}},
    )
    objects = {key(o): o for o in render_objects(custom)}
    cq = objects[("ClusterQueue", "", "ml-cq")]["spec"]
    assert cq["namespaceSelector"] == {"matchLabels": {"kubernetes.io/metadata.name": "ml"}}
    (group,) = cq["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory"]
    assert group["flavors"] == [
        {
            "name": "on-demand",
            "resources": [{"name": "cpu", "nominalQuota": "4"}, {"name": "memory", "nominalQuota": "32Gi"}],
        },
        {"name": "spot", "resources": [{"name": "cpu", "nominalQuota": "16"}, {"name": "memory", "nominalQuota": "0"}]},
    ]
    assert objects[("ResourceFlavor", "", "spot")]["spec"] == {"nodeLabels": {"spot": "true"}}
    assert objects[("LocalQueue", "ml", "ml-lq")]["spec"] == {"clusterQueue": "ml-cq"}


@pytest.mark.parametrize(
    ("changes", "text"),
    [
        ({"teams": {"x": {"quotas": {"example.com/fpga": "1"}}}}, "no flavor provides 'example.com/fpga'"),
        ({"teams": {"x": {"quotas": {"cpu": "lots"}}}}, "not a Kubernetes quantity"),
        ({"teams": {"x": {"priority_classes": ["gold"]}}}, "unknown priority class 'gold'"),
        ({"aging": {"ladder": ["prod-priority", "dev-priority"]}}, "values must strictly increase"),
        ({"flavors": {"a": {"resources": ["cpu"]}, "b": {"resources": ["cpu", "memory"]}}}, "overlap"),
    ],
)
def test_spec_errors(changes: dict[str, Any], text: str) -> None:
    with pytest.raises(ValidationError, match=None) as info:
        spec(**changes)
    assert text in str(info.value)


def test_cli_writes_both_files(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["setup", "--teams", str(TEAMS), "--output", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert "4 WorkloadPriorityClass, 3 ClusterQueue, 2 LocalQueue, 2 Role, 2 RoleBinding" in result.output
    text = (tmp_path / "out" / "kueue-setup.yaml").read_text()
    objects = list(yaml.safe_load_all(text))
    assert len(objects) == 17 and "&id" not in text  # no YAML anchors: each object stands alone
    assert (
        yaml.safe_load((tmp_path / "out" / "sky-kueue.yaml").read_text())["teams"]["team-a"]["local_queue"]
        == "team-a-lq"
    )


def test_cli_reports_spec_and_model_errors_in_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "teams.yaml"
    data = yaml.safe_load(TEAMS.read_text())
    data["teams"]["team-a"]["quotas"]["cpu"] = "lots"
    bad.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(bad), "--output", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "teams.team-a.quotas.cpu" in result.output and result.output.count("\n") == 1
    data["teams"]["team-a"]["quotas"]["cpu"] = "1"
    data["teams"]["team-a"]["preemption"] = {"withinClusterQueue": "Sometimes"}
    bad.write_text(yaml.safe_dump(data))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(bad), "--output", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert "the rendered objects are invalid" in result.output and "team-a-cq" in result.output
    assert not (tmp_path / "out").exists()


def _without_users(tmp_path: Path) -> Path:
    data = yaml.safe_load(TEAMS.read_text())
    for team in data["teams"].values():
        team.pop("users", None)
    path = tmp_path / "teams.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_team_without_users_is_refused_not_opened(tmp_path: Path) -> None:
    result = CliRunner(mix_stderr=False).invoke(
        cli, ["setup", "--teams", str(_without_users(tmp_path)), "--output", str(tmp_path / "out")]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert "teams team-a, team-b name no users" in result.stderr and "--users TEAM=NAME" in result.stderr
    assert not (tmp_path / "out").exists()


def test_users_come_from_the_spec_or_the_command_line(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner(mix_stderr=False).invoke(
        cli,
        [
            *("setup", "--teams", str(_without_users(tmp_path)), "--output", str(out)),
            *("--users", "team-a=carol, dave", "--users", "team-b=erin"),
        ],
    )
    assert result.exit_code == 0, result.output + result.stderr
    assert result.stderr == ""
    teams = validate_config(yaml.safe_load((out / "sky-kueue.yaml").read_text())).teams
    assert (teams["team-a"].users, teams["team-b"].users) == (("carol", "dave"), ("erin",))
    result = CliRunner().invoke(cli, ["setup", "--teams", str(TEAMS), "--output", str(out)])
    assert result.exit_code == 0, result.output
    teams = validate_config(yaml.safe_load((out / "sky-kueue.yaml").read_text())).teams
    assert (teams["team-a"].users, teams["team-b"].users) == (("alice",), ("bob",))


def test_open_teams_is_an_explicit_choice_with_a_warning(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner(mix_stderr=False).invoke(
        cli, ["setup", "--teams", str(_without_users(tmp_path)), "--output", str(out), "--open-teams"]
    )
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"warning: team {team!r} is open (users: ['*']): every SkyPilot user may submit to {team}/{team}-lq; "
        "list its users (or workspaces) instead on a shared cluster"
        for team in ("team-a", "team-b")
    ]
    assert validate_config(yaml.safe_load((out / "sky-kueue.yaml").read_text())).teams["team-b"].users == ("*",)


@pytest.mark.parametrize(
    ("users", "text"),
    [("team-a", "expected TEAM=NAME[,NAME...]"), ("team-c=x", "has no team 'team-c' (teams: team-a, team-b)")],
)
def test_bad_users_option_is_one_line(tmp_path: Path, users: str, text: str) -> None:
    result = CliRunner(mix_stderr=False).invoke(
        cli, ["setup", "--teams", str(TEAMS), "--output", str(tmp_path / "out"), "--users", users]
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and text in result.stderr


def test_the_controller_may_write_only_in_the_team_namespaces_setup_creates(tmp_path: Path) -> None:
    """One Role per team namespace (Workload patch and delete, Event create and patch, pod list
    and watch) bound to the controller's ServiceAccount, rendered after the Namespaces; a shared
    namespace gets one."""
    rendered = render_controller_rbac(spec())
    assert [key(o) for o in rendered] == [
        ("Role", "team-a", "sky-kueue-controller"),
        ("RoleBinding", "team-a", "sky-kueue-controller"),
        ("Role", "team-b", "sky-kueue-controller"),
        ("RoleBinding", "team-b", "sky-kueue-controller"),
    ]
    assert rendered[0]["rules"] == [
        {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads"], "verbs": ["patch", "delete"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
    ]
    assert rendered[1]["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "sky-kueue-controller",
    }
    assert rendered[1]["subjects"] == [
        {"kind": "ServiceAccount", "name": "sky-kueue-controller", "namespace": "sky-kueue-system"}
    ]
    data = yaml.safe_load(TEAMS.read_text())
    data["teams"]["team-b"]["namespace"] = "team-a"
    shared = render_controller_rbac(TeamsSpec.model_validate(data), ("ops", "ctl"))
    assert [key(o) for o in shared] == [
        ("Role", "team-a", "sky-kueue-controller"),
        ("RoleBinding", "team-a", "sky-kueue-controller"),
    ]
    assert shared[1]["subjects"] == [{"kind": "ServiceAccount", "name": "ctl", "namespace": "ops"}]

    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["setup", "--teams", str(TEAMS), "--output", str(out), "--controller-service-account", "ops/ctl"]
    )
    assert result.exit_code == 0, result.output
    written = list(yaml.safe_load_all((out / "kueue-setup.yaml").read_text()))
    kinds = [o["kind"] for o in written]
    assert kinds.index("RoleBinding") > kinds.index("Namespace")
    assert {s["namespace"] + "/" + s["name"] for o in written if o["kind"] == "RoleBinding" for s in o["subjects"]} == {
        "ops/ctl"
    }


@pytest.mark.parametrize("account", ["ctl", "/ctl", "ops/", "Ops/ctl", "ops/ctl/x"])
def test_bad_controller_service_account_is_one_line(tmp_path: Path, account: str) -> None:
    result = CliRunner(mix_stderr=False).invoke(
        cli,
        ["setup", "--teams", str(TEAMS), "--output", str(tmp_path / "out"), "--controller-service-account", account],
    )
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "expected NAMESPACE/NAME" in result.stderr
    assert not (tmp_path / "out").exists()

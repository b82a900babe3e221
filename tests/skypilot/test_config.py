"""The plugin config: the shipped file is valid and consistent with the seed setup; bad
configs are rejected with file, line, key path and reason in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from sky_kueue.cli.main import cli
from sky_kueue.skypilot.config import ConfigError, burst_context, load_config, parse_config
from tests.skypilot.builders import DEMO_CONFIG, PRODUCTION_CONFIG, SEED_SCENARIO, SEED_SETUP

BASE = """\
priority_classes: {prod: 1000, dev: 100}
teams:
  team-a:
    namespace: team-a
    local_queue: team-a-lq
    priority_classes: {allowed: [prod, dev], default: prod}
"""


def test_shipped_config_describes_the_seed_setup() -> None:
    config = load_config(DEMO_CONFIG)
    objects = [d for d in yaml.safe_load_all(SEED_SETUP.read_text()) if d]
    local_queues = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in objects if d["kind"] == "LocalQueue"}
    classes = {d["metadata"]["name"]: d["value"] for d in objects if d["kind"] == "WorkloadPriorityClass"}
    assert {(t.namespace, t.local_queue) for t in config.teams.values()} == local_queues
    assert config.priority_classes == classes
    assert config.teams["team-a"].burst is not None
    assert config.teams["team-b"].limits.max_gpus == 0
    assert config.aging.enabled and config.aging.strategy is None  # nothing to climb on two classes
    assert config.aging.ladder == ("dev-priority", "prod-priority")


def test_the_production_config_is_the_demo_with_closed_teams() -> None:
    """configs/sky-kueue.yaml maps teams from SkyPilot workspaces and users; only the demo is open."""
    production, demo = load_config(PRODUCTION_CONFIG), load_config(DEMO_CONFIG)
    assert all(team.users == ("*",) for team in demo.teams.values())
    for name, team in production.teams.items():
        assert "*" not in team.users
        assert team.workspaces == (name,)
        assert team.model_copy(update={"users": ("*",), "workspaces": ()}) == demo.teams[name]
    assert production.model_copy(update={"teams": demo.teams}) == demo


def test_seed_setup_is_the_scenario_without_its_workloads() -> None:
    scenario = [d for d in yaml.safe_load_all(SEED_SCENARIO.read_text()) if d and d["kind"] != "Workload"]
    setup = [d for d in yaml.safe_load_all(SEED_SETUP.read_text()) if d]
    assert setup == scenario


@pytest.mark.parametrize(
    ("extra", "key_path", "reason"),
    [
        (
            "    priority_classes: {allowed: [prod], default: dev}\n",
            "teams.team-a.priority_classes.default",
            "'dev' is not in the team's allowed classes",
        ),
        ("    namespce: team-a\n", "teams.team-a.namespce", "unknown key"),
        ("    limits: {max_gpus: -1}\n", "teams.team-a.limits.max_gpus", "greater than or equal to 0"),
        ("    namespace: Team_A\n", "teams.team-a.namespace", "not a valid Kubernetes name"),
        (
            "    burst: {max_queue_wait_seconds: 60, clouds: [k8s]}\n",
            "teams.team-a.burst.clouds.0",
            "names its context",
        ),
        (
            "    burst: {max_queue_wait_seconds: 60, clouds: [k8s/ctx]}\n",
            "teams.team-a.burst.clouds.0",
            "one of the team's Kueue clusters",
        ),
        ("    burst: {clouds: [aws]}\n", "teams.team-a.burst.max_queue_wait_seconds", "required key is missing"),
        ("    context: other\n", "teams.team-a.context", "not in kubernetes.contexts"),
        ("    admission_timeout_seconds: 0\n", "teams.team-a.admission_timeout_seconds", "positive number"),
    ],
)
def test_team_errors_name_the_key(extra: str, key_path: str, reason: str) -> None:
    # The extra line replaces a BASE line with the same key: duplicate YAML keys are refused.
    key = extra.split(":", 1)[0] + ":"
    base = "".join(line for line in BASE.splitlines(keepends=True) if not line.startswith(key))
    text = "kubernetes: {contexts: [ctx]}\n" + base + extra
    with pytest.raises(ConfigError) as info:
        parse_config(text, "plugin.yaml")
    error = info.value
    assert error.key_path == key_path
    assert reason in error.reason
    assert str(error).startswith("plugin.yaml:")
    assert "\n" not in str(error)


@pytest.mark.parametrize(
    ("text", "key_path", "reason", "line"),
    [
        (BASE + "aging: {enabled: true, ladder: [dev, gold]}\n", "aging.ladder.1", "'gold' is not declared", 7),
        (BASE + "aging: {enabled: true, ladder: [prod, dev]}\n", "aging.ladder", "strictly increasing", 7),
        (
            BASE + "aging: {enabled: true, strategy: kueue-aging, ladder: [dev, prod]}\n",
            "aging.strategy",
            "strategy",
            7,
        ),
        (BASE + "policy: {labeled_requests: [validate]}\n", "policy.labeled_requests.0", "cannot be labeled", 7),
        (
            BASE + "  team-b:\n    namespace: team-a\n    local_queue: team-a-lq\n"
            "    priority_classes: {allowed: [dev], default: dev}\n",
            "teams.team-b.local_queue",
            "already belongs to team 'team-a'",
            9,
        ),
        ("teams: {}\n", "teams", "at least 1", 1),
        ("version: 2\n" + BASE, "version", "1", 1),
    ],
)
def test_cross_reference_errors_have_path_and_line(text: str, key_path: str, reason: str, line: int) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(text, "plugin.yaml")
    assert info.value.key_path == key_path
    assert reason in info.value.reason
    assert info.value.line == line


def test_unreadable_and_non_yaml_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read the config file"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("teams: [\n")
    with pytest.raises(ConfigError) as info:
        load_config(bad)
    assert "not valid YAML" in info.value.reason
    assert info.value.line is not None
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(listed)


def test_manifest_paths_are_made_absolute(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "plugin.yaml"
    path.parent.mkdir()
    path.write_text(BASE + "cluster: {manifests: [kueue/setup.yaml]}\n")
    config = load_config(path)
    assert config.cluster.manifests == (str(tmp_path / "sub" / "kueue" / "setup.yaml"),)


def test_several_problems_are_counted_in_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(BASE + "    namespce: x\n    local_queu: y\n")
    assert "(and 1 more problem)" in str(info.value)


def test_cli_check_config_prints_one_line_error(tmp_path: Path) -> None:
    path = tmp_path / "plugin.yaml"
    path.write_text(BASE + "    limits: {max_cpus: lots}\n")
    result = CliRunner().invoke(cli, ["check-config", str(path)])
    assert result.exit_code == 2
    assert result.output.strip().count("\n") == 0
    assert f"{path}:7: teams.team-a.limits.max_cpus:" in result.output
    assert "Traceback" not in result.output


def test_cli_check_config_accepts_the_shipped_config() -> None:
    result = CliRunner().invoke(cli, ["check-config", "--no-skypilot", str(DEMO_CONFIG)])
    assert result.exit_code == 0, result.output
    assert "team-a: team-a/team-a-lq" in result.output
    assert "ok:" in result.output


def test_cli_check_config_warns_about_open_teams_and_still_succeeds() -> None:
    result = CliRunner(mix_stderr=False).invoke(cli, ["check-config", "--no-skypilot", str(DEMO_CONFIG)])
    assert result.exit_code == 0, result.stderr
    assert result.stderr.splitlines() == [
        f"warning: team {team!r} is open (users: ['*']): every SkyPilot user may submit to {team}/{team}-lq; "
        "list its users (or workspaces) instead on a shared cluster"
        for team in ("team-a", "team-b")
    ]
    closed = CliRunner(mix_stderr=False).invoke(cli, ["check-config", "--no-skypilot", str(PRODUCTION_CONFIG)])
    assert closed.exit_code == 0 and closed.stderr == ""


def test_aging_ladder_with_values_for_the_controller() -> None:
    assert load_config(DEMO_CONFIG).aging_ladder() == [("dev-priority", 100), ("prod-priority", 1000)]


def test_policy_server_and_setup_commands_do_not_import_skypilot() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "import sky_kueue.cli.policy_server_cmd, sky_kueue.cli.setup_cmd, sky_kueue.cli.config_cmd\n"
        "import sky_kueue.cli.launch_cmd\n"
        "assert 'sky' not in sys.modules, 'sky imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_a_kubernetes_context_outside_the_teams_clusters_is_a_burst_target() -> None:
    """``k8s/<context>`` names a cloud Kubernetes cluster or another Kueue cluster to relaunch on."""
    text = (
        "kubernetes: {contexts: [ctx]}\n"
        + BASE
        + "    burst: {max_queue_wait_seconds: 60, clouds: [k8s/burst-ctx, aws]}\n"
    )
    config = parse_config(text, "plugin.yaml")
    team = config.teams["team-a"]
    assert team.burst is not None and team.burst.clouds == ("k8s/burst-ctx", "aws")
    assert [burst_context(c) for c in team.burst.clouds] == ["burst-ctx", None]

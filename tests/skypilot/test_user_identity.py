"""Who a request is for (issue 36, item 5): ``id:<user id>`` entries in ``teams.<team>.users``
and ``policy.identify_users_by: id`` for a SkyPilot API server that authenticates users, where
the id SkyPilot passes is the authenticated user's and a name is only a display name."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot.config import ConfigError, PluginConfig
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.policy_server import PolicyServer, make_server, serve_in_thread
from sky_kueue.skypilot.request import PolicyRequest, UserIdentity
from sky_kueue.skypilot.wire import decode_request
from tests.skypilot.builders import DEMO_CONFIG, config, task
from tests.skypilot.conftest import SkyEnv

ALICE = UserIdentity(id="aaaa1111", name="alice")
#: Someone else who sends alice's name (what any client can do without authentication).
MALLORY_AS_ALICE = UserIdentity(id="bbbb2222", name="alice")


def by_id(team_b_users: tuple[str, ...] = ("id:cccc3333",)) -> PluginConfig:
    """The demo config with team-a closed to alice's id and identities taken by id."""
    return config(
        policy={"identify_users_by": "id"},
        teams={"team-a": {"users": ["id:aaaa1111"]}, "team-b": {"users": list(team_b_users)}},
    )


def ask(plugin_config: PluginConfig, user: UserIdentity | None, team: str | None = None) -> Placement | Rejection:
    request = PolicyRequest(task=task(team=team), skypilot_config={"active_workspace": "default"}, user=user)
    decision = decide(request, plugin_config)
    assert isinstance(decision, (Placement, Rejection)), decision
    return decision


def test_an_id_entry_maps_the_user_whatever_name_they_send() -> None:
    plugin_config = by_id()
    placed = ask(plugin_config, UserIdentity(id="aaaa1111", name="renamed"))
    assert isinstance(placed, Placement) and placed.team == "team-a"
    assert "team team-a (from user 'renamed' (id aaaa1111))" in placed.notes


@pytest.mark.parametrize("team", [None, "team-a"])
def test_by_id_a_claimed_name_gets_nothing(team: str | None) -> None:
    decision = ask(by_id(), MALLORY_AS_ALICE, team)
    assert isinstance(decision, Rejection)
    assert decision.code is (RejectionCode.NO_TEAM if team is None else RejectionCode.NOT_A_MEMBER)
    assert "user 'alice' (id bbbb2222)" in decision.message
    assert "an admin adds 'id:bbbb2222' to teams." in decision.message


def test_by_name_a_claimed_name_is_enough_as_documented() -> None:
    """The default, for an API server without authentication: the name is the client's word."""
    by_name = config(teams={"team-a": {"users": ["alice"]}, "team-b": {"users": ["bob"]}})
    decision = ask(by_name, MALLORY_AS_ALICE)
    assert isinstance(decision, Placement) and decision.team == "team-a"
    # an id entry still matches only the id
    by_name_ids = config(teams={"team-a": {"users": ["id:aaaa1111"]}, "team-b": {"users": ["bob"]}})
    assert isinstance(ask(by_name_ids, MALLORY_AS_ALICE), Rejection)
    assert isinstance(ask(by_name_ids, ALICE), Placement)


def test_open_teams_and_workspaces_still_admit_by_id() -> None:
    open_team = by_id(team_b_users=("*",))
    assert isinstance(ask(open_team, MALLORY_AS_ALICE, "team-b"), Placement)
    workspace = config(
        policy={"identify_users_by": "id"},
        teams={"team-a": {"users": [], "workspaces": ["vision"]}, "team-b": {"users": ["id:cccc3333"]}},
    )
    request = PolicyRequest(task=task(team=None), skypilot_config={"active_workspace": "vision"}, user=MALLORY_AS_ALICE)
    decision = decide(request, workspace)
    assert isinstance(decision, Placement) and decision.team == "team-a"


@pytest.mark.parametrize(
    ("changes", "key_path", "reason"),
    [
        (
            {"policy": {"identify_users_by": "id"}, "teams": {"team-a": {"users": ["id:aaaa1111", "alice"]}}},
            "teams.team-a.users.1",
            "'alice' is a user name, but policy.identify_users_by is 'id': name the user as 'id:<user id>'",
        ),
        ({"teams": {"team-a": {"users": ["id:AB12CD34"]}}}, "teams.team-a.users.0", "does not name a SkyPilot user id"),
        ({"teams": {"team-a": {"users": ["id:"]}}}, "teams.team-a.users.0", "does not name a SkyPilot user id"),
        ({"teams": {"team-a": {"users": [" alice"]}}}, "teams.team-a.users.0", "is not a user"),
        ({"policy": {"identify_users_by": "email"}}, "policy.identify_users_by", "'name' or 'id'"),
    ],
)
def test_identity_settings_are_checked_when_the_config_loads(
    changes: dict[str, Any], key_path: str, reason: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config(**changes)
    assert info.value.key_path == key_path
    assert reason in info.value.reason


def test_wire_user_ids_are_stored_as_skypilot_stores_them() -> None:
    body = {"task": "name: t\n", "request_name": "jobs.launch", "user": "id: ' AB12cd34'\nname: alice\n"}
    decoded = decode_request(json.dumps(body).encode())
    assert decoded.user == UserIdentity(id="ab12cd34", name="alice")


# --- through KueuePolicy and the policy server, with a config that identifies users by id -------


@pytest.fixture(scope="module")
def id_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = yaml.safe_load(DEMO_CONFIG.read_text())
    data["policy"] = {**(data.get("policy") or {}), "identify_users_by": "id"}
    data["teams"]["team-a"]["users"] = ["id:aaaa1111"]
    data["teams"]["team-b"]["users"] = ["id:cccc3333"]
    path = tmp_path_factory.mktemp("identity") / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="module")
def id_server(id_config: Path) -> Iterator[PolicyServer]:
    server = make_server(id_config, port=0)
    thread = serve_in_thread(server)
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def user_request(env: SkyEnv, user: UserIdentity) -> Any:
    from sky import admin_policy
    from sky.server.requests.request_names import AdminPolicyRequestName

    return admin_policy.UserRequest(
        task=env.sky.Task.from_yaml_config({"name": "t", "run": "echo", "resources": {"infra": "k8s", "cpus": 2}}),
        skypilot_config=env.sky.Config({"active_workspace": "default"}),
        request_name=AdminPolicyRequestName.JOBS_LAUNCH,
        user=env.sky.models.User(id=user.id, name=user.name),
    )


@pytest.mark.parametrize("way", ["in-process", "policy server"])
def test_both_adapters_map_by_the_id_skypilot_passes(
    sky_env: SkyEnv, id_config: Path, id_server: PolicyServer, monkeypatch: pytest.MonkeyPatch, way: str
) -> None:
    from sky import admin_policy, exceptions

    from sky_kueue.skypilot.policy import KueuePolicy

    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(id_config))

    def apply(user: UserIdentity) -> Any:
        if way == "in-process":
            return KueuePolicy.validate_and_mutate(user_request(sky_env, user))
        return admin_policy.RestfulAdminPolicy(id_server.url).apply(user_request(sky_env, user))

    placed = apply(ALICE).task.to_yaml_config()
    labels = placed["resources"]["_cluster_config_overrides"]["kubernetes"]["pod_config"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a-lq"
    with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
        apply(MALLORY_AS_ALICE)
    assert "no team for user 'alice' (id bbbb2222)" in str(info.value)

"""The in-process policy on SkyPilot's client: the same team rule as on the server.

SkyPilot's client applies the admin policy with no user (``admin_policy_utils.apply`` with
``at_client_side=True``); the policy uses the user the client sends with the request
(``client_identity``), so the shipped closed config (``users: [alice]``) admits the README's
user on the client and rejects anyone else there as the server would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot.request import UserIdentity
from tests.skypilot.builders import PRODUCTION_CONFIG, TEMPLATES
from tests.skypilot.conftest import SkyEnv

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Where SkyPilot's server keeps the request's user (``sky/utils/common_utils.py`` ``_USER_KEY``).
USER_CONTEXT_KEY = "user"


def closed_config(tmp_path: Path, users: list[str], identify_users_by: str = "name") -> Path:
    """The shipped closed config with team-a's users replaced (README step 3's ``sed``)."""
    data = yaml.safe_load(PRODUCTION_CONFIG.read_text())
    data["teams"]["team-a"]["users"] = users
    data["policy"]["identify_users_by"] = identify_users_by
    if identify_users_by == "id":
        data["teams"]["team-b"]["users"] = ["id:bbbb2222"]
    path = tmp_path / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def apply(env: SkyEnv, *, at_client_side: bool, user: UserIdentity | None = None) -> Any:
    """``KueuePolicy`` through SkyPilot's own ``apply`` on team-a's GPU template; the task back."""
    from sky import models
    from sky.server.requests.request_names import AdminPolicyRequestName
    from sky.utils import admin_policy_utils, context

    task = env.sky.Task.from_yaml(str(TEMPLATES / "team-a-gpu-train.yaml"))
    if user is not None:  # what the server's middleware sets for the request's user
        context.set_context_var(USER_CONTEXT_KEY, models.User(id=user.id, name=user.name))
    try:
        dag, _ = admin_policy_utils.apply(
            task, request_name=AdminPolicyRequestName.JOBS_LAUNCH, at_client_side=at_client_side
        )
    finally:
        context.set_context_var(USER_CONTEXT_KEY, None)
    return dag.tasks[0]


def queue_of(task: Any) -> str | None:
    """The LocalQueue label the policy wrote on the task's pods, if any."""
    resources = next(iter(task.resources))
    overrides = resources.cluster_config_overrides or {}
    labels = overrides.get("kubernetes", {}).get("pod_config", {}).get("metadata", {}).get("labels", {})
    value = labels.get(QUEUE_LABEL)
    return str(value) if value is not None else None


def test_the_readme_user_launches_on_the_client_with_the_closed_config(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SKYPILOT_USER", "carol")
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(closed_config(tmp_path, ["carol"])))
    assert queue_of(apply(sky_env, at_client_side=True)) == "team-a-lq"


def test_a_user_the_config_does_not_list_is_rejected_alike_on_both_sides(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sky import exceptions

    monkeypatch.setenv("SKYPILOT_USER", "mallory")
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(closed_config(tmp_path, ["carol"])))
    messages = []
    for at_client_side, user in ((True, None), (False, UserIdentity(id="aaaa1111", name="mallory"))):
        with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
            apply(sky_env, at_client_side=at_client_side, user=user)
        messages.append(str(info.value))
    assert all("user 'mallory' may not submit as team 'team-a'" in m for m in messages), messages


def test_by_id_the_client_leaves_the_team_to_the_authenticating_server(
    sky_env: SkyEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With authentication the server knows the user by an id the client cannot know."""
    from sky import exceptions

    monkeypatch.setenv("SKYPILOT_USER", "carol")
    monkeypatch.setenv("SKY_KUEUE_CONFIG", str(closed_config(tmp_path, ["id:cccc3333"], identify_users_by="id")))
    unchanged = apply(sky_env, at_client_side=True)
    assert queue_of(unchanged) is None
    assert queue_of(apply(sky_env, at_client_side=False, user=UserIdentity(id="cccc3333", name="sso-carol"))) == (
        "team-a-lq"
    )
    with pytest.raises(
        exceptions.UserRequestRejectedByPolicy, match="user 'carol' \\(id dddd4444\\) may not submit as team 'team-a'"
    ):
        apply(sky_env, at_client_side=False, user=UserIdentity(id="dddd4444", name="carol"))

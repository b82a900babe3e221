"""A hostile task's ``kubernetes.pod_config`` (issue 36, item 1), tried as a user would: through
the in-process ``KueuePolicy`` and through the policy server as SkyPilot's
``RestfulAdminPolicy`` calls it. Each field is one Kueue, SkyPilot or the cluster admin owns;
each must be refused with its name, never passed through or overwritten."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from sky_kueue.skypilot.policy_server import PolicyServer, make_server, serve_in_thread
from tests.skypilot.builders import DEMO_CONFIG, TEMPLATES
from tests.skypilot.conftest import SkyEnv

#: attack -> (the task's pod_config, the field the rejection must name)
ATTACKS: dict[str, tuple[dict[str, Any], str]] = {
    "forged managed-job annotation": (
        {"metadata": {"annotations": {"skypilot-managed-job-id": "7"}}},
        "kubernetes.pod_config.metadata.annotations.skypilot-managed-job-id",
    ),
    "Kueue pod-group label": (
        {"metadata": {"labels": {"kueue.x-k8s.io/pod-group-name": "someone-elses-job"}}},
        "kubernetes.pod_config.metadata.labels['kueue.x-k8s.io/pod-group-name']",
    ),
    "priorityClassName": (
        {"spec": {"priorityClassName": "system-cluster-critical"}},
        "kubernetes.pod_config.spec.priorityClassName",
    ),
    "hostNetwork": ({"spec": {"hostNetwork": True}}, "kubernetes.pod_config.spec.hostNetwork"),
    "privileged": (
        {"spec": {"containers": [{"securityContext": {"privileged": True}}]}},
        "kubernetes.pod_config.spec.containers[0].securityContext.privileged",
    ),
}


@pytest.fixture(scope="module")
def server() -> Iterator[PolicyServer]:
    policy_server = make_server(DEMO_CONFIG, port=0)
    thread = serve_in_thread(policy_server)
    try:
        yield policy_server
    finally:
        policy_server.shutdown()
        policy_server.server_close()
        thread.join()


def hostile_request(env: SkyEnv, pod_config: dict[str, Any]) -> Any:
    """team-b's CPU template (accepted as shipped) with ``pod_config`` in its ``config:``."""
    from sky import admin_policy
    from sky.server.requests.request_names import AdminPolicyRequestName

    task = yaml.safe_load((TEMPLATES / "team-b-cpu-dev.yaml").read_text())
    task["config"] = {"kubernetes": {"pod_config": pod_config}}
    return admin_policy.UserRequest(
        task=env.sky.Task.from_yaml_config(task),
        skypilot_config=env.sky.Config({"active_workspace": "default"}),
        request_name=AdminPolicyRequestName.JOBS_LAUNCH,
        user=env.sky.models.User(id="ab12cd34", name="bob"),
    )


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_in_process_policy_refuses_the_field(sky_env: SkyEnv, attack: str) -> None:
    from sky import exceptions

    from sky_kueue.skypilot.policy import KueuePolicy

    pod_config, field = ATTACKS[attack]
    with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
        KueuePolicy.validate_and_mutate(hostile_request(sky_env, pod_config))
    message = str(info.value)
    assert message.startswith("sky-kueue: the task's " + field + " is not a task's to set (")
    assert message.count("\n") == 0


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_policy_server_refuses_the_field(sky_env: SkyEnv, server: PolicyServer, attack: str) -> None:
    from sky import admin_policy, exceptions

    pod_config, field = ATTACKS[attack]
    with pytest.raises(exceptions.UserRequestRejectedByPolicy) as info:
        admin_policy.RestfulAdminPolicy(server.url).apply(hostile_request(sky_env, pod_config))
    assert "sky-kueue: the task's " + field + " is not a task's to set (" in str(info.value)


def test_fields_a_task_may_set_still_pass_both_ways(sky_env: SkyEnv, server: PolicyServer) -> None:
    from sky import admin_policy

    from sky_kueue.skypilot.policy import KueuePolicy

    own = {
        "metadata": {"labels": {"app.kubernetes.io/name": "dev"}, "annotations": {"example.com/owner": "bob"}},
        "spec": {"containers": [{"env": [{"name": "MODE", "value": "dev"}]}]},
    }
    in_process = KueuePolicy.validate_and_mutate(hostile_request(sky_env, own)).task.to_yaml_config()
    over_http = admin_policy.RestfulAdminPolicy(server.url).apply(hostile_request(sky_env, own)).task.to_yaml_config()
    assert in_process["resources"] == over_http["resources"]
    pod_config = in_process["resources"]["_cluster_config_overrides"]["kubernetes"]["pod_config"]
    assert pod_config["metadata"]["labels"]["app.kubernetes.io/name"] == "dev"
    assert pod_config["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-b-lq"
    assert pod_config["metadata"]["annotations"] == {"example.com/owner": "bob"}
    assert pod_config["spec"] == own["spec"]

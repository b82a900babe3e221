"""What a task's own pod fields may be (``pod_config_boundary``), as the decision applies it:
the scopes SkyPilot merges into pods, the team's allow-list, the policy's own output, and the
config that declares the list."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.skypilot import pod_config_boundary
from sky_kueue.skypilot.config import ConfigError
from sky_kueue.skypilot.decision import MESSAGE_PREFIX, Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.task_yaml import candidates
from tests.skypilot.builders import config, request, task

SEED = config()


def decided(overrides: dict[str, Any], plugin_config: Any = SEED) -> Placement | Rejection:
    decision = decide(request(task(team="team-b", overrides=overrides)), plugin_config)
    assert isinstance(decision, (Placement, Rejection)), decision
    return decision


def refused(overrides: dict[str, Any], code: RejectionCode, plugin_config: Any = SEED) -> str:
    decision = decided(overrides, plugin_config)
    assert isinstance(decision, Rejection), decision
    assert decision.code is code, decision
    assert decision.message.startswith(MESSAGE_PREFIX) and "\n" not in decision.message
    return decision.message


def pod(pod_config: dict[str, Any]) -> dict[str, Any]:
    return {"kubernetes": {"pod_config": pod_config}}


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        # custom_metadata lands on the pods too, merged after pod_config
        (
            {"kubernetes": {"custom_metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a-lq"}}}},
            "kubernetes.custom_metadata.labels['kueue.x-k8s.io/queue-name']",
        ),
        # a context scope is merged over the general pod_config, so even the policy's own keys
        # would override what the policy writes
        (
            {
                "kubernetes": {
                    "context_configs": {
                        "ctx": pod({"metadata": {"labels": {"sky-kueue.io/team": "team-b"}}})["kubernetes"]
                    }
                }
            },
            "kubernetes.context_configs.ctx.pod_config.metadata.labels['sky-kueue.io/team']",
        ),
        (
            {
                "kubernetes": {
                    "context_configs": {"ctx": {"custom_metadata": {"annotations": {"skypilot-user": "alice"}}}}
                }
            },
            "kubernetes.context_configs.ctx.custom_metadata.annotations.skypilot-user",
        ),
        (pod({"metadata": {"annotations": {"provreq.kueue.x-k8s.io/maxRunDurationSeconds": "1"}}}), None),
        (
            pod({"metadata": {"labels": {"ray-node-type": "head"}}}),
            "kubernetes.pod_config.metadata.labels.ray-node-type",
        ),
        (pod({"metadata": {"annotations": {"sky-kueue.io/aging-level": "9"}}}), None),
        (pod({"spec": {"schedulerName": "my-scheduler"}}), "kubernetes.pod_config.spec.schedulerName"),
        (pod({"spec": {"nodeName": "gpu-node-1"}}), "kubernetes.pod_config.spec.nodeName"),
        (pod({"spec": {"hostPID": True}}), "kubernetes.pod_config.spec.hostPID"),
        (pod({"spec": {"serviceAccountName": "cluster-admin"}}), "kubernetes.pod_config.spec.serviceAccountName"),
        (
            pod({"spec": {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}}),
            "kubernetes.pod_config.spec.volumes[0].hostPath",
        ),
        (
            pod({"spec": {"containers": [{"name": "x"}, {"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}),
            "kubernetes.pod_config.spec.containers[1].resources",
        ),
        (
            pod({"spec": {"initContainers": [{"securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}}),
            "kubernetes.pod_config.spec.initContainers[0].securityContext.capabilities",
        ),
    ],
)
def test_owned_fields_are_refused_in_every_scope_skypilot_merges(overrides: dict[str, Any], field: str | None) -> None:
    message = refused(overrides, RejectionCode.POD_FIELD_OWNED)
    assert "is not a task's to set (" in message
    if field is not None:
        assert f"the task's {field} is not" in message


def test_fields_outside_the_allow_list_name_the_list_and_the_way_out() -> None:
    message = refused(pod({"spec": {"tolerations": [{"key": "gpu"}]}}), RejectionCode.POD_FIELD_NOT_ALLOWED)
    assert "kubernetes.pod_config.spec.tolerations is not among the pod fields team 'team-b' may set" in message
    assert "teams.team-b.pod_config_allowed: metadata.labels, metadata.annotations" in message
    assert message.endswith("remove it, or ask an admin to allow it")


def test_a_team_allow_list_opens_exactly_what_it_names() -> None:
    tolerant = config(teams={"team-b": {"pod_config_allowed": ["spec.tolerations", "spec.containers.*"]}})
    assert isinstance(decided(pod({"spec": {"tolerations": [{"key": "gpu"}]}}), tolerant), Placement)
    assert isinstance(decided(pod({"spec": {"containers": [{"image": "x", "args": ["a"]}]}}), tolerant), Placement)
    # what the default allowed is now refused, and owned fields stay owned under a wildcard
    refused(pod({"metadata": {"labels": {"mine": "x"}}}), RejectionCode.POD_FIELD_NOT_ALLOWED, tolerant)
    refused(
        pod({"spec": {"containers": [{"securityContext": {"privileged": True}}]}}),
        RejectionCode.POD_FIELD_OWNED,
        tolerant,
    )


def test_allowing_all_metadata_still_refuses_owned_keys_and_fields() -> None:
    everything = config(teams={"team-b": {"pod_config_allowed": ["metadata", "spec.containers"]}})
    labels = {"metadata": {"labels": {"mine": "x", "kueue.x-k8s.io/pod-group-name": "g"}}}
    assert "pod-group-name" in refused(pod(labels), RejectionCode.POD_FIELD_OWNED, everything)
    assert ".metadata.name" in refused(pod({"metadata": {"name": "x"}}), RejectionCode.POD_FIELD_OWNED, everything)
    env = {"spec": {"containers": [{"env": [{"name": "A", "value": "1"}] * 50}]}}
    assert isinstance(decided(pod(env), everything), Placement)


def test_the_policys_own_output_passes_it_again() -> None:
    """Client-side and server-side policy both apply: the second sees the first's labels and
    run-time annotations, reads them as the task's request and checks them."""
    first = evaluate(request(task(team="team-b", labels={"sky-kueue.io/expected-runtime": "90m"})), SEED)
    assert isinstance(first.decision, Placement)
    again = evaluate(request(first.task), SEED)
    assert isinstance(again.decision, Placement)
    assert candidates(again.task) == candidates(first.task)
    # ... but the same keys still name someone else's queue as before
    stolen = pod({"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a-lq"}}})
    assert "belongs to team 'team-a'" in refused(stolen, RejectionCode.FOREIGN_QUEUE)


def test_a_task_without_pod_fields_and_free_keys_pass() -> None:
    assert isinstance(decided({}), Placement)
    free = pod(
        {
            "metadata": {"labels": {"app.kubernetes.io/name": "x"}, "annotations": {"example.com/k": "v"}},
            "spec": {
                "containers": [{"name": "ray-node", "env": [{"name": "A", "value": "1"}], "volumeMounts": []}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                "imagePullSecrets": [{"name": "registry"}],
            },
        }
    )
    assert isinstance(decided(free), Placement)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("spec.hostNetwork", "is never a task's to set (host namespaces"),
        ("spec.containers.securityContext.privileged", "is never a task's to set (privileged"),
        ("metadata.labels.team", "allow metadata.labels as a whole"),
        ("spec..tolerations", "is not a pod_config field path"),
        ("status.phase", "is not a pod_config field path"),
    ],
)
def test_the_allow_list_is_checked_when_the_config_loads(entry: str, reason: str) -> None:
    with pytest.raises(ConfigError) as info:
        config(teams={"team-b": {"pod_config_allowed": ["spec.tolerations", entry]}})
    assert info.value.key_path == "teams.team-b.pod_config_allowed.1"
    assert reason in info.value.reason


def test_reserved_keys() -> None:
    owner = pod_config_boundary.reserved_key_owner
    assert owner("kueue.x-k8s.io/pod-group-total-count") == "Kueue"
    assert owner("provreq.kueue.x-k8s.io/maxRunDurationSeconds") == "Kueue"
    assert owner("skypilot-managed-job-name") == "SkyPilot"
    assert owner("parent") == "SkyPilot"
    assert owner("sky-kueue.io/expected-runtime-seconds") == "sky-kueue"
    assert owner("notkueue.x-k8s.io.example.com/x") is None
    assert owner("app.kubernetes.io/name") is None

"""Pure parts of the mirror: transition rules, backoff, SkyPilot tasks as Workloads, quota views."""

from __future__ import annotations

import copy
import random
from datetime import datetime, timezone
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from sky_kueue.kueue.errors import ModelError
from sky_kueue.mirror import backoff, view
from sky_kueue.mirror.preemption_message import PreemptionMessage, parse_preemptor
from sky_kueue.mirror.server_state import went_back
from sky_kueue.mirror.transitions import TransitionKind, derive
from sky_kueue.skypilot import task_workload
from tests.mirror import builders

K = TransitionKind
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def _wl(*conditions: dict[str, Any], evictions: int = 0, rv: str = "1") -> dict[str, Any]:
    obj = builders.workload("w", "team-a")
    obj["metadata"]["resourceVersion"] = rv
    obj["status"] = {"conditions": list(conditions)}
    if evictions:
        obj["status"]["schedulingStats"] = {"evictions": [{"reason": "Preempted", "count": evictions}]}
    return obj


# --- transitions ---------------------------------------------------------------------------------


def test_an_old_kueue_deactivation_reason_is_an_eviction_not_a_preemption() -> None:
    before = _wl()
    after = _wl(builders.condition("Evicted", "True", "InactiveWorkload", "The workload is deactivated"), rv="2")

    assert [(c.kind, c.reason) for c in derive(before, after)] == [(K.EVICTED, "InactiveWorkload")]


def test_a_second_eviction_whose_reset_was_never_seen_still_counts() -> None:
    message = builders.preemption_message("u-1")
    evicted = builders.condition("Evicted", "True", "Preempted", message)
    before = _wl(evicted, evictions=1)
    after = _wl(evicted, evictions=2, rv="2")

    assert [c.kind for c in derive(before, after)] == [K.EVICTED, K.PREEMPTED]


def test_preemption_reason_and_preemptor_come_from_the_message_when_the_condition_is_missing() -> None:
    message = builders.preemption_message("u-9", "prioritization in the ClusterQueue") + (
        "; preemptor path: /root/team-a-cq; preemptee path: /root/team-b-cq"
    )
    after = _wl(builders.condition("Evicted", "True", "Preempted", message), rv="2")

    evicted, preempted = derive(_wl(), after)
    assert evicted.kind is K.EVICTED
    assert (preempted.kind, preempted.reason) == (K.PREEMPTED, "InClusterQueue")
    assert (preempted.preemptor_uid, preempted.preemptor_job_uid) == ("u-9", None)
    assert preempted.preemptor_cluster_queue == "team-a-cq"


def test_old_kueue_message_without_job_uid() -> None:
    assert parse_preemptor("Preempted to accommodate a workload (UID: abc-1) due to x") == PreemptionMessage(
        "abc-1", human_reason="x"
    )


def test_readmission_resets_are_not_transitions_but_updates() -> None:
    before = _wl(builders.condition("Evicted", "True", "Preempted", "m"))
    after = _wl(builders.condition("Evicted", "False", "QuotaReserved", "Previously: m"), rv="2")

    assert [c.kind for c in derive(before, after)] == [K.UPDATED]


def test_nothing_changed_nothing_reported() -> None:
    obj = _wl(builders.condition("Admitted", "True", "Admitted"))
    assert derive(obj, copy.deepcopy(obj)) == []


# --- backoff ------------------------------------------------------------------------------------


def _throttled(seconds: str) -> ApiException:
    exc = ApiException(status=429, reason="Too Many Requests")
    exc.headers = {"Retry-After": seconds}
    return exc


def test_backoff_grows_with_jitter_and_stays_bounded() -> None:
    policy = backoff.RetryPolicy(initial_delay_seconds=0.2, max_delay_seconds=5.0)
    rng = random.Random(7)
    delays = [backoff.delay_seconds(attempt, None, policy, rng) for attempt in range(1, 12)]

    assert 0.1 <= delays[0] <= 0.2
    assert all(d <= 5.0 for d in delays)
    assert delays[-1] >= 2.5  # the upper half of the capped step
    assert len({round(d, 6) for d in delays[-4:]}) == 4  # jittered, not lockstep


def test_retry_after_is_honoured_but_clamped() -> None:
    policy = backoff.RetryPolicy(max_retry_after_seconds=60)
    rng = random.Random(1)

    assert backoff.delay_seconds(1, _throttled("9"), policy, rng) >= 9
    assert backoff.delay_seconds(1, _throttled("86400"), policy, rng) == 60


def test_one_shot_retries_give_up_and_reraise() -> None:
    calls: list[float] = []

    def fail() -> None:
        raise ApiException(status=500, reason="boom")

    with pytest.raises(ApiException):
        for attempt in backoff.retrying(backoff.ONE_SHOT_POLICY, sleep=calls.append):
            with attempt:
                fail()
    assert len(calls) == backoff.ONE_SHOT_POLICY.max_attempts - 1  # type: ignore[operator]


def test_permanent_errors_are_not_retried() -> None:
    calls: list[float] = []
    with pytest.raises(ApiException):
        for attempt in backoff.retrying(backoff.BACKGROUND_POLICY, sleep=calls.append):
            with attempt:
                raise ApiException(status=403, reason="Forbidden")
    assert calls == []


# --- SkyPilot task -> Workload ---------------------------------------------------------------------


def _task(**overrides: Any) -> dict[str, Any]:
    task: dict[str, Any] = {
        "name": "Train_GPT",
        "num_nodes": 3,
        "resources": {"infra": "k8s", "accelerators": "A100:2"},
        "config": {"kubernetes": {"kueue": {"local_queue_name": "team-a-lq"}, "namespace": "team-a"}},
    }
    task.update(overrides)
    return task


def test_task_becomes_one_pod_set_of_num_nodes_pods_sized_like_skypilot() -> None:
    doc = task_workload.workload_from_task(_task(), created_at=NOW)

    assert doc["metadata"]["name"] == "train-gpt-what-if"
    assert doc["metadata"]["namespace"] == "team-a"
    assert doc["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    assert doc["spec"]["queueName"] == "team-a-lq"
    (pod_set,) = doc["spec"]["podSets"]
    assert pod_set["count"] == 3 and len(pod_set["name"]) == 8
    requests = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": "8", "memory": "32G", "nvidia.com/gpu": "2"}  # 4 CPU and 4 GB per CPU per GPU


def test_quota_queue_wins_over_kueue_local_queue_name() -> None:
    config = {"kubernetes": {"kueue": {"local_queue_name": "a"}, "quota": {"queue": "b"}}}
    doc = task_workload.workload_from_task(_task(config=config), created_at=NOW)
    assert doc["spec"]["queueName"] == "b"


def test_priority_class_comes_from_the_pod_label() -> None:
    config = {
        "kubernetes": {
            "kueue": {"local_queue_name": "q"},
            "pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "prod-priority"}}},
        }
    }
    doc = task_workload.workload_from_task(_task(config=config), created_at=NOW)
    assert doc["spec"]["priorityClassRef"] == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "prod-priority",
    }


def test_task_without_a_queue_or_kubernetes_candidate_is_explained() -> None:
    with pytest.raises(ModelError, match="names no Kueue LocalQueue"):
        task_workload.workload_from_task(_task(config={}), source="t.yaml")
    with pytest.raises(ModelError, match="no Kubernetes candidate"):
        task_workload.workload_from_task(_task(resources={"infra": "aws", "cpus": 2}), source="t.yaml")


def test_same_shape_same_role_hash() -> None:
    a = task_workload.workload_from_task(_task(name="a"), created_at=NOW)
    b = task_workload.workload_from_task(_task(name="b", num_nodes=1), created_at=NOW)
    assert a["spec"]["podSets"][0]["name"] == b["spec"]["podSets"][0]["name"]


# --- queue view ----------------------------------------------------------------------------------


def _cq(name: str, cpu: str, cohort: str = "pool", lending_limit: str | None = None) -> dict[str, Any]:
    cq = builders.cluster_queue(name, cohort=cohort, cpu=cpu)
    if lending_limit is not None:
        cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = lending_limit
    return cq


def _admitted(name: str, ns: str, cq: str, cpu: str) -> dict[str, Any]:
    wl = builders.workload(name, ns, cpu=cpu)
    wl["metadata"].update(uid=f"uid-{name}", creationTimestamp="2026-01-01T10:00:00Z")
    wl["status"] = {
        "admission": {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": "a1b2c3d4", "count": 1, "flavors": {"cpu": "default-flavor"}, "resourceUsage": {"cpu": cpu}}
            ],
        },
        "conditions": [builders.condition("QuotaReserved", "True", "QuotaReserved")],
    }
    return wl


def test_borrowing_is_attributed_to_lenders_by_unused_lendable_quota() -> None:
    docs = [
        builders.namespace("team-a"),
        builders.flavor(),
        _cq("borrower", "0"),
        _cq("big", "6"),
        _cq("small", "4", lending_limit="1"),
        builders.local_queue("lq", "team-a", "borrower"),
        _admitted("w", "team-a", "borrower", "3"),
    ]

    result = view.build_view(docs, now=NOW, predict=False)

    rows = {cq.name: cq.resources[0] for cq in result.cluster_queues}
    assert (rows["borrower"].usage, rows["borrower"].borrowed) == (3000, 3000)
    assert rows["big"].lent + rows["small"].lent == 3000
    assert rows["small"].lent <= 1000  # never more than its lendingLimit
    assert rows["big"].lent > rows["small"].lent  # in proportion to unused lendable quota (6 : 1)
    (borrower,) = (cq for cq in result.cluster_queues if cq.name == "borrower")
    assert [w.key for w in borrower.admitted] == ["team-a/w"]


def test_positions_from_the_visibility_api_are_used_when_given() -> None:
    docs = [
        builders.namespace("team-a"),
        builders.flavor(),
        _cq("cq", "1"),
        builders.local_queue("lq", "team-a", "cq"),
    ]
    for i, name in enumerate(("first", "second")):
        wl = builders.workload(name, "team-a")
        wl["metadata"].update(uid=f"uid-{name}", creationTimestamp=f"2026-01-01T10:0{i}:00Z")
        docs.append(wl)

    by_model = view.build_view(docs, now=NOW, predict=False)
    by_kueue = view.build_view(docs, now=NOW, predict=False, positions={"team-a/first": 1, "team-a/second": 0})

    assert [w.key for w in by_model.cluster_queues[0].pending] == ["team-a/first", "team-a/second"]
    assert [w.key for w in by_kueue.cluster_queues[0].pending] == ["team-a/second", "team-a/first"]
    assert (by_model.positions_from, by_kueue.positions_from) == ("model", "visibility")


def test_a_workload_the_model_cannot_read_is_left_out_with_a_note() -> None:
    docs = [builders.namespace("team-a"), builders.flavor(), _cq("cq", "1"), builders.local_queue("lq", "team-a", "cq")]
    broken = builders.workload("broken", "team-a")
    broken["metadata"]["creationTimestamp"] = "not a time"
    docs.append(broken)

    result = view.build_view(docs, now=NOW, predict=False)

    assert result.cluster_queues[0].pending == ()
    assert any("broken" in note for note in result.notes)


def test_resource_versions_are_compared_only_where_both_are_integers() -> None:
    assert went_back("1097", "1061")
    assert not went_back("1061", "1097") and not went_back("1061", "1061")
    # Opaque (not etcd) versions, or none seen yet: nothing can be concluded.
    assert not went_back("a1097", "1061") and not went_back("1097", "opaque") and not went_back(None, "1")

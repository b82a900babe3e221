"""Expected run times: the estimator (declared, history, none), the policy writing them on the
pods, the join back onto Workloads, and the ETA ranking a cluster with work queued ahead last."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

import pytest

from sky_kueue.controller.history import JobHistory, PreemptionRecord
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import JobIdentity
from sky_kueue.skypilot import labels
from sky_kueue.skypilot.cluster_view import view_from_documents
from sky_kueue.skypilot.decision import Placement, Rejection, RejectionCode, decide
from sky_kueue.skypilot.engine import evaluate
from sky_kueue.skypilot.runtime_annotations import with_pod_runtimes
from sky_kueue.skypilot.runtime_estimate import (
    PastRun,
    RuntimeDeclarationError,
    RuntimeSourceKind,
    describe_basis,
    estimate_runtime,
    parse_duration,
)
from sky_kueue.skypilot.runtime_history import past_run, past_runs
from sky_kueue.skypilot.view import ContextView
from tests.mirror.builders import admitted_status
from tests.skypilot.builders import config, fake_view, request, task

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=timezone.utc)


# --- the estimator ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90m", 5400), ("2h", 7200), ("1h30m", 5400), ("5400", 5400), ("45s", 45), ("1.5h", 5400), (" 2H ", 7200)],
)
def test_durations_are_read_as_users_write_them(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("soon", "'soon' is not a duration; write seconds (5400) or a number with s, m, h or d"),
        ("0", "'0' must be more than 0 seconds"),
        ("-5m", "'-5m' is not a duration"),
        ("2 hours", "'2 hours' is not a duration"),
        ("1000d", "'1000d' is more than 90 days; is the unit right?"),
    ],
)
def test_bad_declarations_are_refused_precisely(text: str, message: str) -> None:
    with pytest.raises(RuntimeDeclarationError) as caught:
        parse_duration(text)
    assert str(caught.value) == f"{labels.RUNTIME_LABEL}: {message}" or message in str(caught.value)
    assert str(caught.value).startswith(f"{labels.RUNTIME_LABEL}: ")


def run(name: str, seconds: float, at: float, namespace: str = "team-a") -> PastRun:
    return PastRun(namespace, name, seconds, at)


HISTORY = (
    run("train", 600, 1),
    run("train", 1200, 2),
    run("train", 900, 3),
    run("train", 99999, 4, namespace="team-b"),  # another team's job of the same name
    run("eval", 60, 5),
)


def test_a_declaration_beats_the_history() -> None:
    got = estimate_runtime(["90m"], "train", {"team-a"}, HISTORY)
    assert (got.seconds, got.kind, got.source) == (5400, RuntimeSourceKind.DECLARED, "declared")


def test_the_history_is_the_median_of_the_teams_runs_of_the_same_name() -> None:
    got = estimate_runtime([], "train", {"team-a"}, HISTORY)
    assert (got.seconds, got.source) == (900, "history(n=3)")
    assert describe_basis([got.source]) == "history of 3 runs"


def test_the_history_uses_the_newest_runs_only() -> None:
    many = tuple(run("train", 100, i) for i in range(30)) + tuple(run("train", 5000, 100 + i) for i in range(20))
    got = estimate_runtime([], "train", {"team-a"}, many)
    assert (got.seconds, got.runs) == (5000, 20)


def test_no_declaration_and_no_similar_run_is_no_estimate() -> None:
    assert estimate_runtime([], "new-job", {"team-a"}, HISTORY).source == "none"
    assert estimate_runtime([], None, {"team-a"}, HISTORY).seconds is None
    assert estimate_runtime([], "train", {"team-c"}, HISTORY).kind is RuntimeSourceKind.NONE


def test_candidates_that_declare_different_run_times_are_refused() -> None:
    with pytest.raises(RuntimeDeclarationError, match=r"declare different run times \(1h, 90m\)"):
        estimate_runtime(["90m", "1h"], "train", {"team-a"}, ())
    assert estimate_runtime(["90m", "5400"], "train", {"team-a"}, ()).seconds == 5400  # same time, two spellings


def test_the_basis_of_an_eta_names_each_source_once() -> None:
    assert describe_basis(["declared", "history(n=7)", "declared"]) == "declared and history of 7 runs"
    assert describe_basis(["history(n=1)"]) == "history of 1 run"
    assert describe_basis([]) == ""


# --- past runs from the controller's history ----------------------------------------------


def identity(name: str | None = "train", namespace: str = "team-a") -> JobIdentity:
    return JobIdentity(namespace=namespace, managed_job_id="17", managed_job_name=name)


def test_a_finished_job_ran_from_its_last_admission_to_its_finish() -> None:
    history = (
        JobHistory("managed-job/17", identity())
        .queued("w1", 100.0)
        .admitted("w1", 200.0)
        .with_preemption(PreemptionRecord(EpisodeKey("w1", 0), 500.0, "wl-1"))
        .queued("w2", 600.0)
        .admitted("w2", 1000.0)
        .finished("w2", 1900.0)
    )
    assert past_run(history) == PastRun("team-a", "train", 900.0, 1900.0)


def test_unfinished_unnamed_or_never_admitted_jobs_have_no_run() -> None:
    running = JobHistory("managed-job/17", identity()).admitted("w1", 10.0)
    unnamed = JobHistory("managed-job/17", identity(name=None)).admitted("w1", 10.0).finished("w1", 20.0)
    never_admitted = JobHistory("managed-job/17", identity()).queued("w1", 10.0).finished("w1", 20.0)
    done = JobHistory("managed-job/17", identity()).admitted("w1", 10.0).finished("w1", 70.0)
    assert past_runs([running, unnamed, never_admitted, done]) == (PastRun("team-a", "train", 60.0, 70.0),)


# --- the policy writes the estimate on the pods --------------------------------------------


def pod_annotations(candidate: Mapping[str, Any]) -> dict[str, str]:
    overrides = candidate.get("_cluster_config_overrides") or {}
    return dict(overrides.get("kubernetes", {}).get("pod_config", {}).get("metadata", {}).get("annotations", {}))


def test_a_declared_run_time_lands_on_the_rendered_pod_config_and_leaves_the_labels() -> None:
    declared = task(labels={labels.RUNTIME_LABEL: "90m", "owner": "ana"})
    result = evaluate(request(declared), config(), fake_view())
    assert isinstance(result.decision, Placement)
    resources = result.task["resources"]
    assert pod_annotations(resources) == {
        labels.RUNTIME_SECONDS_ANNOTATION: "5400",
        labels.RUNTIME_SOURCE_ANNOTATION: "declared",
    }
    assert resources["labels"] == {"owner": "ana"}  # GCP would refuse the '/' key on a burst
    assert "expected run time 5400s (declared)" in result.decision.notes
    again = evaluate(request(result.task), config(), fake_view())
    assert again.task == result.task  # applying twice changes nothing


def test_the_teams_history_lands_on_the_pods_when_nothing_is_declared() -> None:
    runs = (run("train", 600, 1), run("train", 1800, 2), run("train", 1200, 3))
    result = evaluate(request_with_runs(task(name="train"), runs), config(), fake_view())
    assert isinstance(result.decision, Placement)
    assert pod_annotations(result.task["resources"]) == {
        labels.RUNTIME_SECONDS_ANNOTATION: "1200",
        labels.RUNTIME_SOURCE_ANNOTATION: "history(n=3)",
    }


def test_without_a_source_nothing_is_written() -> None:
    result = evaluate(request(task(name="brand-new")), config(), fake_view())
    assert isinstance(result.decision, Placement)
    assert pod_annotations(result.task["resources"]) == {}
    assert result.decision.expected_runtime.source == "none"


def test_a_bad_declaration_rejects_the_task_with_the_label_and_the_fix() -> None:
    decision = decide(request(task(labels={labels.RUNTIME_LABEL: "a while"})), config(), fake_view())
    assert isinstance(decision, Rejection)
    assert decision.code is RejectionCode.BAD_LABEL
    assert "sky-kueue.io/expected-runtime: 'a while' is not a duration" in decision.message
    assert decision.message.endswith("fix the task's resources.labels")


def request_with_runs(task_dict: dict[str, Any], runs: tuple[PastRun, ...]) -> Any:
    import dataclasses

    return dataclasses.replace(request(task_dict), past_runs=runs)


# --- the join: pods' annotations onto their pod group's Workload ---------------------------


def pod(group: str, namespace: str, annotations: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-head",
            "namespace": namespace,
            "labels": {"parent": "skypilot", "kueue.x-k8s.io/pod-group-name": group},
            "annotations": dict(annotations),
        },
    }


def test_pod_annotations_reach_their_groups_workload_only() -> None:
    docs = [workload("job-1", "team-b", 4, admitted=False), workload("job-2", "team-b", 4, admitted=False)]
    pods = [pod("job-1", "team-b", {labels.RUNTIME_SECONDS_ANNOTATION: "60", "other": "x"})]
    pods.append(pod("job-2", "elsewhere", {labels.RUNTIME_SECONDS_ANNOTATION: "99"}))  # same name, other namespace
    joined = with_pod_runtimes(docs, pods)
    assert joined[0]["metadata"]["annotations"] == {labels.RUNTIME_SECONDS_ANNOTATION: "60"}
    assert "annotations" not in joined[1]["metadata"]
    assert "annotations" not in docs[0]["metadata"]  # the input is not modified


# --- the ETA ranks a cluster with work queued ahead after an empty queue ------------------


def workload(name: str, namespace: str, cpu: int, *, admitted: bool, created: str = "11:00:00") -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": f"2026-01-01T{created}Z",
        },
        "spec": {
            "queueName": "team-b-lq",
            "priorityClassName": "dev-priority",
            "priorityClassSource": "kueue.x-k8s.io/workloadpriorityclass",
            "priority": 100,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "resources": {"requests": {"cpu": str(cpu)}}}],
                        }
                    },
                }
            ],
        },
    }
    if admitted:
        doc["status"] = admitted_status("team-b-cq", str(cpu), f"2026-01-01T{created}Z")
    return doc


def cluster_documents(queued_ahead: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A 4-CPU ClusterQueue held by a 2 h job since 11:00, with ``queued_ahead`` 4-CPU jobs of
    1 h queued; the pods carry the run times the policy wrote when each was launched."""
    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-b", "labels": {"kubernetes.io/metadata.name": "team-b"}},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ResourceFlavor",
            "metadata": {"name": "default-flavor"},
            "spec": {},
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "dev-priority"},
            "value": 100,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": "prod-priority"},
            "value": 1000,
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-b-cq"},
            "spec": {
                "namespaceSelector": {},
                "queueingStrategy": "BestEffortFIFO",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "default-flavor",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "4"},
                                    {"name": "memory", "nominalQuota": "64Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "team-b-lq", "namespace": "team-b"},
            "spec": {"clusterQueue": "team-b-cq"},
        },
        workload("running", "team-b", 4, admitted=True),
    ]
    pods = [
        pod(
            "running",
            "team-b",
            {labels.RUNTIME_SECONDS_ANNOTATION: "7200", labels.RUNTIME_SOURCE_ANNOTATION: "declared"},
        )
    ]
    for index in range(queued_ahead):
        name = f"queued-{index}"
        docs.append(workload(name, "team-b", 4, admitted=False, created=f"11:0{index + 1}:00"))
        pods.append(
            pod(
                name,
                "team-b",
                {labels.RUNTIME_SECONDS_ANNOTATION: "3600", labels.RUNTIME_SOURCE_ANNOTATION: "declared"},
            )
        )
    return docs, pods


class ModelPerContext:
    """One model view per context, the pods' annotations joined as the live view joins them."""

    def __init__(self, queued_ahead: Mapping[str, int], join: bool = True) -> None:
        self.views = {}
        for context, count in queued_ahead.items():
            docs, pods = cluster_documents(count)
            view = view_from_documents(with_pod_runtimes(docs, pods) if join else docs, f"cluster {context}")
            view.state.now = NOW
            self.views[context] = view

    def lookup(self, context: str | None) -> ContextView:
        return ContextView(self.views[str(context)])

    def warm(self, contexts: object) -> None:
        return None


TWO_CLUSTERS = config(
    kubernetes={"contexts": ["busy", "quiet"]},
    teams={"team-b": {"clusters": [{"context": "busy"}, {"context": "quiet"}]}},
)


def test_two_queued_jobs_with_declared_run_times_rank_their_cluster_after_an_empty_queue() -> None:
    views = ModelPerContext({"busy": 2, "quiet": 0})
    decision = decide(request(task(team="team-b", cpus="2")), TWO_CLUSTERS, views)
    assert isinstance(decision, Placement)
    rows = [
        (r.cluster.context, r.verdict.expected_wait_seconds, r.verdict.expected_wait_basis)
        for r in decision.ranking.ranked
    ]
    # quiet: the 2 h job ends at 13:00; busy: then 1 h each for the two jobs queued ahead
    assert rows == [("quiet", 3600, "declared"), ("busy", 3 * 3600, "declared")]
    assert decision.ranking.ranked[0].reason.startswith("expected wait 3600s (declared): ")


def test_without_run_times_the_waits_are_unknown_and_the_admins_order_stands() -> None:
    views = ModelPerContext({"busy": 2, "quiet": 0}, join=False)
    decision = decide(request(task(team="team-b", cpus="2")), TWO_CLUSTERS, views)
    assert isinstance(decision, Placement)
    assert [(r.cluster.context, r.verdict.expected_wait_seconds) for r in decision.ranking.ranked] == [
        ("busy", None),
        ("quiet", None),
    ]


def test_the_dry_run_text_says_the_run_time_and_where_the_eta_comes_from() -> None:
    from sky_kueue.cli.launch_cmd import _text
    from sky_kueue.skypilot.launch import summary

    views = ModelPerContext({"busy": 2, "quiet": 0})
    declared = task(team="team-b", cpus="2", labels={labels.RUNTIME_LABEL: "90m"})
    text = _text(summary(evaluate(request(declared), TWO_CLUSTERS, views)))
    assert "run time:   1h30m (declared)" in text
    assert "prediction: wait (ETA 1h (declared))" in text
    assert "  1. quiet: wait ETA 1h (declared) (team-b/team-b-lq): expected wait 3600s (declared): " in text
    assert "  2. busy: wait ETA 3h (declared)" in text
    unknown = _text(summary(evaluate(request(task(team="team-b", cpus="2", name="new")), TWO_CLUSTERS, views)))
    assert "run time:   unknown: declare it with the label sky-kueue.io/expected-runtime (90m, 2h)" in unknown

"""Detection on Workloads shaped as Kueue writes them, in both served API versions."""

from __future__ import annotations

import pytest

from sky_kueue.controller.detection import (
    DetectionError,
    DetectionKind,
    EvictionKind,
    SignalSource,
    WorkloadPhase,
    classify,
    parse_time,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.preemption_message import PreemptionReason, parse_preemptor

from .builders import T0, WorkloadBuilder, preemption_message, rfc3339, skypilot_pod

VERSIONS = ("v1beta1", "v1beta2")
GROUP = "train-17-fcd1e5cf"


def running(version: str) -> WorkloadBuilder:
    return (
        WorkloadBuilder(GROUP, uid="wl-1", version=version)
        .pod_group()
        .priority(100)
        .created(T0)
        .evictions()
        .admitted(T0 + 60)
    )


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    "reason",
    ["InClusterQueue", "InCohortReclamation", "InCohortReclaimWhileBorrowing", "InCohortFairSharing"],
)
def test_a_preemption_is_recognized_with_its_reason_and_preemptor(version: str, reason: str) -> None:
    wl = running(version).preempted(T0 + 500, preemptor_uid="uid-prod-7", reason=reason).obj()
    detection = classify(wl)
    eviction = detection.eviction
    assert detection.kind is DetectionKind.PREEMPTED
    assert eviction is not None and eviction.kind is EvictionKind.PREEMPTED
    assert eviction.preemption_reason is PreemptionReason(reason)
    assert eviction.preemptor is not None
    assert (eviction.preemptor.workload_uid, eviction.preemptor.job_uid) == ("uid-prod-7", None)  # JobUID UNKNOWN
    assert eviction.preemptor.path == "/prod-cq"
    assert (eviction.at, eviction.ordinal, eviction.in_progress) == (T0 + 500, 1, True)  # pods still terminating
    assert detection.eviction_key == EpisodeKey("wl-1", 1)
    assert not detection.is_pending


@pytest.mark.parametrize("version", VERSIONS)
def test_finished_with_evicted_preempted_is_a_preemption_not_a_completion(version: str) -> None:
    wl = running(version).preempted(T0 + 500).finished(T0 + 510, message="Pods succeeded: 0/2.").obj()
    detection = classify(wl)
    assert detection.workload.phase is WorkloadPhase.FINISHED
    assert detection.kind is DetectionKind.PREEMPTED
    assert detection.eviction is not None and not detection.eviction.in_progress


@pytest.mark.parametrize("version", VERSIONS)
def test_a_real_completion_is_finished(version: str) -> None:
    detection = classify(running(version).finished(T0 + 900).obj())
    assert detection.kind is DetectionKind.FINISHED and detection.eviction is None
    assert detection.workload.finished_at == T0 + 900


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("reason", "kind", "cause"),
    [
        ("PodsReadyTimeout", EvictionKind.PODS_READY_TIMEOUT, "WaitForStart"),
        ("InactiveWorkload", EvictionKind.DEACTIVATED, None),
        ("Deactivated", EvictionKind.DEACTIVATED, None),
        ("DeactivatedDueToRequeuingLimitExceeded", EvictionKind.DEACTIVATED, "RequeuingLimitExceeded"),
        ("AdmissionCheck", EvictionKind.ADMISSION_CHECK, None),
        ("ClusterQueueStopped", EvictionKind.CLUSTER_QUEUE_STOPPED, None),
        ("LocalQueueStopped", EvictionKind.LOCAL_QUEUE_STOPPED, None),
        ("NodeFailures", EvictionKind.NODE_FAILURES, None),
        ("FlavorMigration", EvictionKind.FLAVOR_MIGRATION, None),
        ("EvictedOnManagerCluster", EvictionKind.EVICTED_ON_MANAGER_CLUSTER, None),
        ("SomethingNew", EvictionKind.OTHER, None),
    ],
)
def test_other_evictions_are_recognized_and_are_not_preemptions(
    version: str, reason: str, kind: EvictionKind, cause: str | None
) -> None:
    wl = running(version).evicted(reason, f"evicted: {reason}", T0 + 300, cause=cause or "").obj()
    detection = classify(wl)
    assert detection.kind is DetectionKind.EVICTED
    assert detection.eviction is not None
    assert (detection.eviction.kind, detection.eviction.reason) == (kind, reason)
    assert not detection.eviction.kind.is_preemption
    assert detection.eviction.preemptor is None and detection.eviction.preemption_reason is None
    assert detection.eviction.underlying_cause == cause
    assert detection.eviction_key == EpisodeKey("wl-1", 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_pending_workload_opens_episode_zero(version: str) -> None:
    wl = WorkloadBuilder(GROUP, uid="wl-2", version=version).pod_group().priority(100).pending(T0).obj()
    detection = classify(wl)
    assert detection.kind is DetectionKind.PENDING and detection.is_pending
    assert detection.workload.phase is WorkloadPhase.PENDING
    assert detection.episode_key == EpisodeKey("wl-2", 0)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_requeued_retriable_workload_is_pending_in_its_next_episode(version: str) -> None:
    builder = running(version).preempted(T0 + 500)
    wl = builder.released(T0 + 520, "Preempted to accommodate ...").obj()
    detection = classify(wl)
    assert detection.kind is DetectionKind.PREEMPTED  # Evicted stays True until readmission
    assert detection.is_pending
    assert detection.episode_key == detection.eviction_key == EpisodeKey("wl-1", 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_readmitted_workload_remembers_past_preemptions_only_in_its_counters(version: str) -> None:
    wl = running(version).evictions(Preempted=2).readmitted_after_preemption(T0 + 900).obj()
    detection = classify(wl)
    assert detection.kind is DetectionKind.RUNNING and detection.eviction is None
    assert detection.workload.preemptions_counted_by_kueue == 2
    assert detection.episode_key == EpisodeKey("wl-1", 2)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_deactivated_pending_workload_is_not_pending_for_aging(version: str) -> None:
    wl = WorkloadBuilder(GROUP, version=version).inactive().pending(T0).obj()
    assert not classify(wl).is_pending


@pytest.mark.parametrize(
    ("version", "class_key"),
    [("v1beta1", "priorityClassName"), ("v1beta2", "priorityClassRef")],
)
def test_priority_fields_are_read_in_both_versions(version: str, class_key: str) -> None:
    wl = WorkloadBuilder(GROUP, version=version).priority(250, "dev-aged-1").boost(30).obj()
    assert class_key in wl["spec"]
    facts = classify(wl).workload
    assert (facts.priority, facts.priority_class, facts.boost_annotation) == (250, "dev-aged-1", 30)
    assert facts.api_version == f"kueue.x-k8s.io/{version}"


@pytest.mark.parametrize("bad", ["lots", "2147483648", ""])
def test_an_invalid_boost_annotation_reads_as_zero(bad: str) -> None:
    assert classify(WorkloadBuilder(GROUP).boost(bad).obj()).workload.boost_annotation == 0


@pytest.mark.parametrize(
    ("version", "field"),
    [("v1beta1", "accumulatedPastExexcutionTimeSeconds"), ("v1beta2", "accumulatedPastExecutionTimeSeconds")],
)
def test_accumulated_execution_time_is_read_with_either_spelling(version: str, field: str) -> None:
    wl = WorkloadBuilder(GROUP, version=version).obj()
    wl["status"][field] = 1234
    assert classify(wl).workload.accumulated_execution_seconds == 1234


@pytest.mark.parametrize(
    ("message", "uid", "job_uid", "path", "priority"),
    [
        (
            "Preempted to accommodate a workload (UID: u-1) due to prioritization in the ClusterQueue",
            "u-1",
            None,
            None,
            None,
        ),
        (preemption_message("u-2", job_uid="job-9"), "u-2", "job-9", "/prod-cq", None),
        (
            preemption_message("u-3")
            + "; preemptor effective priority: 1010 (base: 1000, boost: 10); preemptee effective priority: 100 "
            "(base: 100, boost: 0)",
            "u-3",
            None,
            "/prod-cq",
            1000,
        ),
        ("Previously: " + preemption_message("u-4"), "u-4", None, "/prod-cq", None),
        ("Preempted to accommodate a workload (UID: UNKNOWN, JobUID: UNKNOWN) due to UNKNOWN", None, None, None, None),
    ],
)
def test_the_preemptor_is_parsed_from_every_message_format(
    message: str, uid: str | None, job_uid: str | None, path: str | None, priority: int | None
) -> None:
    preemptor = parse_preemptor(message)
    assert preemptor is not None
    assert (preemptor.workload_uid, preemptor.job_uid, preemptor.path, preemptor.class_priority) == (
        uid,
        job_uid,
        path,
        priority,
    )


def test_a_message_that_is_not_about_preemption_has_no_preemptor() -> None:
    assert parse_preemptor("Exceeded the PodsReady timeout default/job") is None


def test_pods_termination_target_corroborates_the_workload_condition() -> None:
    message = preemption_message("uid-prod-1")
    pods = [
        skypilot_pod(f"{GROUP}-head", GROUP, termination=("Preempted", message, T0 + 501)),
        skypilot_pod(f"{GROUP}-worker1", GROUP, termination=("Preempted", message, T0 + 501)),
    ]
    detection = classify(running("v1beta2").preempted(T0 + 500).obj(), pods)
    assert detection.eviction is not None
    assert detection.eviction.sources == {SignalSource.WORKLOAD_CONDITION, SignalSource.POD_TERMINATION_TARGET}
    assert len(detection.pod_signals) == 2


def test_pods_supply_the_preemptor_when_the_condition_message_was_truncated() -> None:
    wl = running("v1beta2").evicted("Preempted", "Preempted to accommodate a wor", T0 + 500).obj()
    pods = [skypilot_pod(f"{GROUP}-head", GROUP, termination=("Preempted", preemption_message("uid-p"), T0 + 501))]
    eviction = classify(wl, pods).eviction
    assert eviction is not None and eviction.preemptor is not None
    assert eviction.preemptor.workload_uid == "uid-p"
    assert eviction.preemption_reason is PreemptionReason.IN_CLUSTER_QUEUE  # recovered from the human text


def test_a_pods_only_signal_waits_for_the_workload_condition() -> None:
    pods = [skypilot_pod(f"{GROUP}-head", GROUP, termination=("Preempted", preemption_message("uid-p"), T0 + 501))]
    detection = classify(running("v1beta2").obj(), pods)
    assert detection.awaiting_workload_condition
    assert detection.eviction is not None and detection.eviction.sources == {SignalSource.POD_TERMINATION_TARGET}
    assert detection.eviction_key is None  # no stable idempotency key: never recorded on its own
    assert detection.kind is DetectionKind.RUNNING


def test_a_pod_evicted_for_pods_ready_timeout_is_not_a_preemption_signal() -> None:
    pods = [skypilot_pod(f"{GROUP}-head", GROUP, termination=("PodsReadyTimeout", "Exceeded", T0 + 9))]
    eviction = classify(running("v1beta2").obj(), pods).eviction
    assert eviction is not None and eviction.kind is EvictionKind.PODS_READY_TIMEOUT


def test_without_scheduling_stats_the_eviction_time_stands_in_for_the_count() -> None:
    wl = running("v1beta2").preempted(T0 + 500).obj()
    del wl["status"]["schedulingStats"]
    assert classify(wl).eviction_key == EpisodeKey("wl-1", None, f"{T0 + 500:.0f}")
    fresh = WorkloadBuilder(GROUP, uid="wl-9").pending(T0).obj()
    assert classify(fresh).episode_key == EpisodeKey("wl-9", 0)


# --- job identity ----------------------------------------------------------------------


def test_a_managed_job_is_keyed_by_its_job_id_from_the_pods() -> None:
    identity = classify(running("v1beta2").obj(), [skypilot_pod(f"{GROUP}-head", GROUP, job_id="17")]).identity
    assert identity is not None
    assert (identity.key, identity.pod_group_key) == ("managed-job/17", f"pod-group/team-b/{GROUP}")
    assert (identity.user, identity.cluster_name, identity.managed_job_name) == ("alice", GROUP, "train")
    assert identity.skypilot_owned


def test_a_pod_group_without_managed_job_id_is_keyed_by_namespace_and_group() -> None:
    pods = [skypilot_pod(f"{GROUP}-head", GROUP, job_id=None)]
    identity = classify(running("v1beta1").obj(), pods).identity
    assert identity is not None and identity.key == f"pod-group/team-b/{GROUP}"


def test_the_pod_group_annotation_takes_precedence_over_the_label() -> None:
    pod = skypilot_pod("p-head", "from-annotation", group_as_annotation=True)
    pod["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = "from-label"
    identity = classify(WorkloadBuilder("from-annotation").obj(), [pod]).identity
    assert identity is not None and identity.pod_group == "from-annotation"


def test_the_identity_does_not_depend_on_pod_order() -> None:
    a = skypilot_pod("a-head", GROUP, job_id="1")
    b = skypilot_pod("b-worker", GROUP, job_id="2")
    assert classify(running("v1beta2").obj(), [a, b]).identity == classify(running("v1beta2").obj(), [b, a]).identity


def test_a_group_workload_alone_is_keyed_by_its_name_but_not_known_to_be_skypilot() -> None:
    identity = classify(running("v1beta2").obj()).identity
    assert identity is not None and identity.key == f"pod-group/team-b/{GROUP}"
    assert not identity.skypilot_owned


def test_a_workload_that_is_neither_a_group_nor_a_managed_job_has_no_identity() -> None:
    assert classify(WorkloadBuilder("job-batch-abcde").obj()).identity is None


def test_non_workloads_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(DetectionError, match="expected kind Workload, got 'Pod'"):
        classify({"kind": "Pod", "metadata": {"name": "p", "uid": "u"}})
    with pytest.raises(DetectionError, match=r"has no metadata\.uid"):
        classify({"kind": "Workload", "metadata": {"name": "w"}})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (rfc3339(T0), T0),
        ("2026-01-01T00:00:00.5Z", T0 + 0.5),
        ("2026-01-01T01:00:00+01:00", T0),
        ("yesterday", None),
        (None, None),
    ],
)
def test_kubernetes_times_parse_to_posix_seconds(text: str | None, expected: float | None) -> None:
    assert parse_time(text) == expected

"""Patch builders: raise the waiting Workload, never a running one, never lower anything."""

from __future__ import annotations

import json

import pytest

from sky_kueue.controller.actuators import (
    BURST_ANNOTATION,
    burst_annotation_patch,
    choose_priority_class,
    feature_gate_enabled,
    feature_gate_from_deployment,
    plan_kueue_patch,
    priority_class_label_patch,
    resolve_mechanism,
    skypilot_config_overrides,
)
from sky_kueue.controller.aging import ActuatorKind, PriorityClassRung
from sky_kueue.controller.detection import WorkloadFacts, classify
from sky_kueue.controller.history import BurstRecord

from .builders import T0, WorkloadBuilder

ANNOTATION = ActuatorKind.BOOST_ANNOTATION
SPEC = ActuatorKind.SPEC_PRIORITY


def facts(builder: WorkloadBuilder) -> WorkloadFacts:
    return classify(builder.obj()).workload


def pending(priority: int = 100, boost: int | None = None, version: str = "v1beta2") -> WorkloadFacts:
    builder = WorkloadBuilder("g", uid="u-1", version=version).priority(priority).pending(T0)
    if boost is not None:
        builder.boost(boost)
    return facts(builder)


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_gate_on_sets_the_boost_annotation_with_a_uid_precondition(version: str) -> None:
    plan = plan_kueue_patch(pending(version=version), base_priority=100, boost=150, mechanism=ANNOTATION, step="u-1#0")
    assert plan.patch is not None
    assert plan.patch.body == {
        "metadata": {
            "uid": "u-1",
            "annotations": {"kueue.x-k8s.io/priority-boost": "150", "sky-kueue.io/aging-step": "u-1#0"},
        }
    }
    assert (plan.patch.target.version, plan.patch.effective_priority) == (version, 250)


def test_gate_off_merge_patches_spec_priority() -> None:
    plan = plan_kueue_patch(pending(), base_priority=100, boost=150, mechanism=SPEC)
    assert plan.patch is not None and plan.patch.body == {"metadata": {"uid": "u-1"}, "spec": {"priority": 250}}


@pytest.mark.parametrize(
    ("mechanism", "priority", "annotation", "boost", "expected"),
    [
        (SPEC, 250, None, 150, None),  # already there (e.g. our earlier patch): nothing to do
        (SPEC, 300, None, 150, None),  # higher already: never lowered
        (SPEC, 249, None, 150, 250),
        (ANNOTATION, 100, 150, 150, None),
        (ANNOTATION, 100, 200, 150, None),  # a larger boost is never reduced
        (ANNOTATION, 150, None, 150, "100"),  # relabelled relaunch: only the difference is needed
        (ANNOTATION, 300, None, 150, None),
    ],
)
def test_nothing_is_ever_lowered(
    mechanism: ActuatorKind, priority: int, annotation: int | None, boost: int, expected: object
) -> None:
    plan = plan_kueue_patch(pending(priority, annotation), base_priority=100, boost=boost, mechanism=mechanism)
    if expected is None:
        assert plan.patch is None and plan.satisfied
    else:
        assert plan.patch is not None
        body = plan.patch.body
        got = (
            body["spec"]["priority"]
            if mechanism is SPEC
            else body["metadata"]["annotations"]["kueue.x-k8s.io/priority-boost"]
        )
        assert got == expected


@pytest.mark.parametrize(
    "builder",
    [
        WorkloadBuilder("g").priority(100).admitted(T0),
        WorkloadBuilder("g").priority(100).quota_reserved(T0),
        WorkloadBuilder("g").priority(100).finished(T0),
        WorkloadBuilder("g").priority(100).inactive().pending(T0),
    ],
    ids=["admitted", "quota-reserved", "finished", "deactivated"],
)
@pytest.mark.parametrize("mechanism", [ANNOTATION, SPEC])
def test_only_waiting_workloads_are_patched(builder: WorkloadBuilder, mechanism: ActuatorKind) -> None:
    plan = plan_kueue_patch(facts(builder), base_priority=100, boost=500, mechanism=mechanism)
    assert plan.patch is None and not plan.satisfied


def test_priorities_are_clamped_to_int32() -> None:
    plan = plan_kueue_patch(pending(), base_priority=2**31 - 10, boost=100, mechanism=SPEC)
    assert plan.patch is not None and plan.patch.body["spec"]["priority"] == 2**31 - 1


def test_only_kueue_mechanisms_can_plan_a_workload_patch() -> None:
    with pytest.raises(ValueError, match="priority-class is not a Kueue-level mechanism"):
        plan_kueue_patch(pending(), base_priority=100, boost=1, mechanism=ActuatorKind.PRIORITY_CLASS)


@pytest.mark.parametrize(
    ("kind", "gate", "expected"),
    [
        (ActuatorKind.AUTO, True, ANNOTATION),
        (ActuatorKind.AUTO, False, SPEC),
        (ActuatorKind.AUTO, None, SPEC),
        (SPEC, True, SPEC),
        (ActuatorKind.PRIORITY_CLASS, None, ActuatorKind.PRIORITY_CLASS),
    ],
)
def test_auto_resolves_from_the_gate(kind: ActuatorKind, gate: bool | None, expected: ActuatorKind) -> None:
    assert resolve_mechanism(kind, gate) is expected


LADDER = (PriorityClassRung(100, "dev"), PriorityClassRung(200, "dev-aged-1"), PriorityClassRung(400, "dev-aged-2"))


@pytest.mark.parametrize(
    ("base", "boost", "expected"),
    [
        (100, 0, "dev"),
        (100, 99, "dev"),
        (100, 100, "dev-aged-1"),
        (100, 299, "dev-aged-1"),
        (100, 5_000, "dev-aged-2"),
        (150, 10, None),  # no rung between 150 and 160; never relabel below the job's own class
        (50, 10, None),
    ],
)
def test_the_ladder_picks_the_highest_class_within_base_plus_boost(base: int, boost: int, expected: str | None) -> None:
    rung = choose_priority_class(LADDER, base, boost)
    assert (rung.name if rung else None) == expected


def test_skypilot_relabel_goes_into_every_pods_metadata() -> None:
    rung = LADDER[1]
    assert skypilot_config_overrides(rung) == {
        "kubernetes": {"pod_config": {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "dev-aged-1"}}}}
    }
    assert priority_class_label_patch(rung) == {"metadata": {"labels": {"kueue.x-k8s.io/priority-class": "dev-aged-1"}}}


def test_a_burst_decision_is_surfaced_as_annotations() -> None:
    body = burst_annotation_patch("u-1", BurstRecord(5.0, "preemptions", "preempted 5 times", 5))
    annotations = body["metadata"]["annotations"]
    assert body["metadata"]["uid"] == "u-1" and annotations[BURST_ANNOTATION] == "preemptions"
    assert json.loads(annotations["sky-kueue.io/burst-detail"])["preemptions"] == 5


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--zap-log-level=2"], None),
        (["--feature-gates=PriorityBoost=true"], True),
        (["--feature-gates=TopologyAwareScheduling=true,PriorityBoost=false"], False),
        (["--feature-gates", "PriorityBoost=true"], True),
        (["--feature-gates=PriorityBoost=true", "--feature-gates=PriorityBoost=false"], False),  # last wins
        (["/manager --config=/c.yaml --feature-gates=PriorityBoost=true"], True),
        (["--feature-gates=PriorityBoosting=true"], None),
    ],
)
def test_the_priority_boost_gate_is_read_from_manager_arguments(args: list[str], expected: bool | None) -> None:
    assert feature_gate_enabled(args) is expected


def test_the_gate_is_read_from_the_kueue_manager_deployment() -> None:
    deployment = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "kube-rbac-proxy", "args": ["--secure-listen-address=0.0.0.0:8443"]},
                        {"name": "manager", "command": ["/manager"], "args": ["--feature-gates=PriorityBoost=true"]},
                    ]
                }
            }
        }
    }
    assert feature_gate_from_deployment(deployment) is True
    assert feature_gate_from_deployment({}) is None

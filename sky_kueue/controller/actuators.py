"""How a decided boost reaches the cluster: the Actuator port and pure patch builders.

Three mechanisms, chosen by the ``aging.actuator`` setting (KEP-7990 ``keps/7990-preemption-cost`` and Kueue's
``PriorityBoost`` gate in ``pkg/features``):

1. **Kueue level**, on the pending Workload of the job:

   * ``boost-annotation``: ``kueue.x-k8s.io/priority-boost: "<n>"`` (KEP-7990). Effective
     priority is ``spec.priority + n``, but only while the alpha ``PriorityBoost`` gate is
     on; with the gate off Kueue ignores the annotation, so ``auto`` uses it only when the
     gate is known to be on (:func:`feature_gate_enabled`).
   * ``spec-priority``: a merge patch of ``spec.priority``, always mutable and not
     overwritten while the priority-class label is unchanged.

   Either way the *waiting* Workload is raised (a pending Workload whose priority changes
   is re-queued at once); a running one is never touched, and nothing is ever lowered:
   lowering a running Workload does not wake parked ones (Kueue ``pkg/cache/queue`` ``PushOrUpdate``: only the
   changed Workload is requeued).
   Patches carry ``metadata.uid`` as a precondition, so a patch decided for one Workload
   can never land on a same-named replacement (the API server rejects a UID mismatch).

2. **SkyPilot level** (``priority-class``): the relaunch is relabelled with the
   ``kueue.x-k8s.io/priority-class`` of the highest WorkloadPriorityClass on the
   configured ladder that does not exceed base + boost. The recovery strategy applies
   :func:`skypilot_config_overrides` to the task before SkyPilot recreates the pods.

3. **Burst**: the decision is recorded and surfaced as annotations on the Workload.

Everything here is pure; :mod:`sky_kueue.controller.kube_actuator` applies a
:class:`WorkloadPatch` with the official client.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from sky_kueue.controller.aging.settings import ActuatorKind, PriorityClassRung
from sky_kueue.controller.detection import WorkloadFacts, WorkloadPhase
from sky_kueue.controller.history import BurstRecord
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import AGING_STEP_ANNOTATION, BAND_LEVEL_ANNOTATION

#: Annotations surfacing a burst decision on the job's Workload.
BURST_ANNOTATION = "sky-kueue.io/burst-decision"
BURST_DETAIL_ANNOTATION = "sky-kueue.io/burst-detail"

_KUEUE_MECHANISMS = (ActuatorKind.BOOST_ANNOTATION, ActuatorKind.SPEC_PRIORITY)


class ActuationOutcome(str, Enum):
    APPLIED = "applied"
    #: The Workload no longer exists (404): nothing to raise any more.
    TARGET_GONE = "target-gone"
    #: The name now belongs to another Workload (UID precondition failed).
    TARGET_REPLACED = "target-replaced"


class ActuationError(RuntimeError):
    """A transient failure (network, 5xx, 429); the step stays decided and is retried."""


@dataclass(frozen=True)
class WorkloadRef:
    namespace: str
    name: str
    uid: str
    version: str = kueue_api.WORKLOAD_VERSIONS[0]

    @classmethod
    def of(cls, facts: WorkloadFacts) -> WorkloadRef:
        _, _, version = facts.api_version.rpartition("/")
        return cls(facts.namespace, facts.name, facts.uid, version or kueue_api.WORKLOAD_VERSIONS[0])

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class WorkloadPatch:
    """A JSON merge patch (RFC 7386) for one Workload, with what it means."""

    target: WorkloadRef
    body: Mapping[str, Any]
    mechanism: ActuatorKind
    boost: int
    effective_priority: int
    summary: str


@dataclass(frozen=True)
class PatchPlan:
    """Either a patch to apply, or why none is needed (``satisfied``) or allowed."""

    patch: WorkloadPatch | None
    satisfied: bool
    reason: str


@dataclass(frozen=True)
class ActuationResult:
    outcome: ActuationOutcome
    detail: str = ""


class Actuator(Protocol):
    """Applies Workload patches; implementations must be idempotent (absolute values)."""

    @property
    def name(self) -> str: ...

    def apply(self, patch: WorkloadPatch) -> ActuationResult:
        """Applies ``patch``.

        Raises:
            ActuationError: a transient failure; the caller retries later.
        """
        ...


def resolve_mechanism(kind: ActuatorKind, priority_boost_gate: bool | None) -> ActuatorKind:
    """Turns ``auto`` into a concrete Kueue-level mechanism.

    An unknown gate state resolves to ``spec-priority``, which Kueue honours either way.
    """
    if kind is ActuatorKind.AUTO:
        return ActuatorKind.BOOST_ANNOTATION if priority_boost_gate is True else ActuatorKind.SPEC_PRIORITY
    return kind


def _clamp_int32(value: int) -> int:
    return max(kueue_api.INT32_MIN, min(kueue_api.INT32_MAX, value))


def boost_annotation_patch(uid: str, boost: int, step: str | None = None) -> dict[str, Any]:
    annotations: dict[str, str] = {kueue_api.PRIORITY_BOOST_ANNOTATION: str(_clamp_int32(boost))}
    if step is not None:
        annotations[AGING_STEP_ANNOTATION] = step
    return {"metadata": {"uid": uid, "annotations": annotations}}


def spec_priority_patch(
    uid: str,
    priority: int,
    step: str | None = None,
    *,
    band_level: str | None = None,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """Merge patch of ``spec.priority`` conditional on the UID (and ``resource_version``), noting
    the aging step or the band level that set it."""
    metadata: dict[str, Any] = {"uid": uid}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    annotations = {AGING_STEP_ANNOTATION: step, BAND_LEVEL_ANNOTATION: band_level}
    if any(value is not None for value in annotations.values()):
        metadata["annotations"] = {key: value for key, value in annotations.items() if value is not None}
    return {"metadata": metadata, "spec": {"priority": _clamp_int32(priority)}}


def plan_kueue_patch(
    facts: WorkloadFacts,
    *,
    base_priority: int,
    boost: int,
    mechanism: ActuatorKind,
    step: str | None = None,
    restore: bool = False,
) -> PatchPlan:
    """Plans raising a pending Workload to effective priority ``base_priority + boost``.

    Args:
        facts: the target Workload as last observed.
        base_priority: the job's own priority (from its first Workload).
        boost: the decided boost (>= 0).
        mechanism: ``boost-annotation`` or ``spec-priority`` (resolve ``auto`` first).
        step: the aging step's key, recorded on the Workload for traceability.
        restore: the step was on this Workload and Kueue took it off; put it back on an
            admitted Workload too (``AgingEngine._reassert``).

    Raises:
        ValueError: ``mechanism`` is not a Kueue-level mechanism.
    """
    if mechanism not in _KUEUE_MECHANISMS:
        raise ValueError(f"{mechanism.value} is not a Kueue-level mechanism")
    if facts.phase is not WorkloadPhase.PENDING and not (restore and facts.phase is WorkloadPhase.ADMITTED):
        return PatchPlan(None, False, f"Workload is {facts.phase.value}: aging raises waiting Workloads only")
    if not facts.active:
        return PatchPlan(None, False, "Workload is deactivated (spec.active=false)")
    target = _clamp_int32(base_priority + max(boost, 0))
    ref = WorkloadRef.of(facts)
    if mechanism is ActuatorKind.BOOST_ANNOTATION:
        needed = target - facts.priority
        if needed <= facts.boost_annotation:
            return PatchPlan(
                None,
                True,
                f"effective priority {facts.priority + facts.boost_annotation} >= {target} already",
            )
        body = boost_annotation_patch(facts.uid, needed, step)
        summary = f"{kueue_api.PRIORITY_BOOST_ANNOTATION}={needed} on {ref} (effective {target})"
    else:
        if facts.priority >= target:
            return PatchPlan(None, True, f"spec.priority {facts.priority} >= {target} already")
        body = spec_priority_patch(facts.uid, target, step)
        summary = f"spec.priority {facts.priority} -> {target} on {ref}"
    return PatchPlan(WorkloadPatch(ref, body, mechanism, boost, target, summary), False, summary)


def plan_band_patch(facts: WorkloadFacts, *, priority: int, level: str, record_level: bool = False) -> PatchPlan:
    """Plans setting ``spec.priority`` of a waiting or admitted Workload to its band level.

    A band level may be lower than the Workload's priority (a fresh arrival waits below its
    class value), so unlike :func:`plan_kueue_patch` this sets rather than raises, and it is
    only correct for the snapshot it was planned on: an admitted Workload patched with a
    *waiting* level would sit below a waiting relaunch, which could then preempt it. The patch
    therefore carries the snapshot's ``resourceVersion`` as a precondition (and its UID); if the
    Workload changed meanwhile the API server answers 409 and the next snapshot is planned anew.

    Args:
        facts: the target Workload as last observed (``resource_version`` set).
        priority: the band level's absolute priority.
        level: ``waiting`` or ``admitted``, recorded in :data:`BAND_LEVEL_ANNOTATION`.
        record_level: when the Workload is at ``priority`` already but its annotation does not
            say ``level``, write the annotation alone (``spec.priority`` unchanged). The engine
            asks for it when it grants the protected level to a Workload that Kueue admitted at
            its class value before any band level landed: the annotation is what makes that
            grant stick for the run (``protect_within_nominal``).
    """
    if facts.phase is WorkloadPhase.FINISHED:
        return PatchPlan(None, False, "Workload is finished")
    if not facts.active:
        return PatchPlan(None, False, "Workload is deactivated (spec.active=false)")
    if not facts.resource_version:
        return PatchPlan(None, False, "snapshot without resourceVersion: a band level needs it as a precondition")
    target = _clamp_int32(priority)
    if facts.priority == target and (not record_level or facts.band_level == level):
        return PatchPlan(None, True, f"spec.priority {target} is the {level} level already")
    ref = WorkloadRef.of(facts)
    body = spec_priority_patch(facts.uid, target, band_level=level, resource_version=facts.resource_version)
    if facts.priority == target:  # record_level: the annotation alone changes
        summary = f"spec.priority {target} kept, recorded as the {level} level on {ref}"
    else:
        summary = f"spec.priority {facts.priority} -> {target} ({level} level) on {ref}"
    return PatchPlan(
        WorkloadPatch(ref, body, ActuatorKind.SPEC_PRIORITY, target - facts.priority, target, summary), False, summary
    )


def choose_priority_class(
    ladder: Sequence[PriorityClassRung], base_priority: int, boost: int
) -> PriorityClassRung | None:
    """The highest rung whose value is <= base + boost and >= base; None if none fits.

    Never returns a class below the job's own priority: relabelling must not lower a job.
    """
    target = base_priority + max(boost, 0)
    fitting = [r for r in ladder if base_priority <= r.value <= target]
    return max(fitting) if fitting else None


def priority_class_label_patch(rung: PriorityClassRung) -> dict[str, Any]:
    """Merge patch setting the WorkloadPriorityClass label on a pod or job."""
    return {"metadata": {"labels": {kueue_api.PRIORITY_CLASS_LABEL: rung.name}}}


def skypilot_config_overrides(rung: PriorityClassRung) -> dict[str, Any]:
    """``Resources.copy(_cluster_config_overrides=...)`` value labelling every pod of a relaunch.

    Kueue reads the label from the first pod of a group, so it goes on all of them through
    ``kubernetes.pod_config`` (SkyPilot 0.14.1 ``sky/jobs/recovery_strategy.py``).
    """
    return {"kubernetes": {"pod_config": {"metadata": {"labels": {kueue_api.PRIORITY_CLASS_LABEL: rung.name}}}}}


def burst_annotation_patch(uid: str, record: BurstRecord) -> dict[str, Any]:
    detail = json.dumps(
        {
            "reason": record.reason,
            "detail": record.detail,
            "preemptions": record.preemptions,
            "decided_at": record.decided_at,
        },
        sort_keys=True,
    )
    return {
        "metadata": {
            "uid": uid,
            "annotations": {BURST_ANNOTATION: record.reason, BURST_DETAIL_ANNOTATION: detail},
        }
    }


def _gates_from_flag_value(value: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in value.split(","):
        name, sep, raw = item.strip().partition("=")
        if sep and raw.strip().lower() in ("true", "false"):
            gates[name.strip()] = raw.strip().lower() == "true"
    return gates


def feature_gate_enabled(args: Iterable[str], gate: str = kueue_api.PRIORITY_BOOST_FEATURE_GATE) -> bool | None:
    """Reads a Kueue feature gate from the controller-manager's command-line arguments.

    Accepts ``--feature-gates=A=true,B=false`` and ``--feature-gates A=true`` (also inside
    one shell-quoted string); the last mention wins, as with Go's flag parsing.

    Returns:
        True or False when the gate is set, None when it is not mentioned (Kueue's default
        then applies: PriorityBoost is alpha and off by default).
    """
    tokens: list[str] = []
    for arg in args:
        try:
            tokens.extend(shlex.split(arg))
        except ValueError:
            tokens.append(arg)
    result: bool | None = None
    for index, token in enumerate(tokens):
        value: str | None = None
        if token.startswith(("--feature-gates=", "-feature-gates=")):
            value = token.split("=", 1)[1]
        elif token in ("--feature-gates", "-feature-gates") and index + 1 < len(tokens):
            value = tokens[index + 1]
        if value is not None:
            gates = _gates_from_flag_value(value)
            if gate in gates:
                result = gates[gate]
    return result


def feature_gate_from_deployment(
    deployment: Mapping[str, Any], gate: str = kueue_api.PRIORITY_BOOST_FEATURE_GATE
) -> bool | None:
    """:func:`feature_gate_enabled` over every container of Kueue's manager Deployment."""
    pod_spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    args: list[str] = []
    for container in pod_spec.get("containers") or ():
        if isinstance(container, Mapping):
            args.extend(str(a) for a in (container.get("command") or ()))
            args.extend(str(a) for a in (container.get("args") or ()))
    return feature_gate_enabled(args, gate)

"""Declared schemas of the Kubernetes objects the model reads, checked before conversion.

Why a schema in front of :mod:`sky_kueue.kueue.parse`: the API server decodes every object
against its OpenAPI types before anything else sees it, so a ``containers`` that is a
string or a ``metadata.name`` that is a map never reaches Kueue. Without the same gate the
conversion code crashed on such input (``AttributeError``) or turned it into nonsense with
``str()`` (issue 17). The models declare only the fields the model reads, with Kubernetes'
types (strict: no string-to-number coercion) and the API server's value rules: quantities
bounded (:mod:`sky_kueue.kueue.quantity`), container requests, limits and pod overhead
non-negative (``ValidateNonnegativeQuantity``), fair-sharing weights finite and
non-negative, 32-bit priorities and counts. Every other field passes through untouched, as
``kubectl get -o yaml`` output carries many more.

The check runs once per document at the input boundary (:func:`check_document`), never in
the scheduling loop; :mod:`parse` then converts the checked mapping as before, so
scheduling decisions do not depend on this module.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, ValidationError

from sky_kueue.kueue import quantity, timestamps
from sky_kueue.kueue.api import INT32_MAX, INT32_MIN
from sky_kueue.kueue.errors import ModelError


def _quantity(value: object) -> Decimal:
    try:
        return quantity.parse_quantity(value)
    except quantity.QuantityError as exc:
        raise ValueError(str(exc)) from None


def _non_negative_quantity(value: object) -> Decimal:
    parsed = _quantity(value)
    if parsed < 0:
        raise ValueError(f"must be greater than or equal to 0, got {value!r}")
    return parsed


def _timestamp(value: object) -> object:
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected an RFC 3339 timestamp, got {type(value).__name__}")
    try:
        timestamps.parse(value)
    except ValueError:
        raise ValueError(f"invalid timestamp {value[:40]!r}") from None
    return value


Quantity = Annotated[Decimal, PlainValidator(_quantity)]
NonNegativeQuantity = Annotated[Decimal, PlainValidator(_non_negative_quantity)]
Timestamp = Annotated[object, PlainValidator(_timestamp)]
Int32 = Annotated[int, Field(ge=INT32_MIN, le=INT32_MAX)]
NonNegativeInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
StrMap = dict[str, str]


class StrictFields(BaseModel):
    """Strict types for the declared fields; undeclared fields are kept and not checked.

    The base of every declared input schema (also SkyPilot's task and config,
    :mod:`sky_kueue.skypilot.task_schema`): only what the code reads is declared.

    ``defer_build``: a model's validator is built on its first use, not when its class is
    defined. Only the top-level kinds are ever validated directly; the nested models are
    compiled into them, so building a validator of their own for each (about 40 of them)
    at import was start-up time of every ``sky-kueue predict`` spent on nothing. The checks
    are the same either way.
    """

    model_config = ConfigDict(extra="allow", strict=True, defer_build=True)


class ObjectMeta(StrictFields):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    labels: StrMap | None = None
    annotations: StrMap | None = None
    creationTimestamp: Timestamp | None = None


class _Object(StrictFields):
    metadata: ObjectMeta | None = None


class Toleration(StrictFields):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    tolerationSeconds: int | None = None


class Taint(StrictFields):
    key: str | None = None
    value: str | None = None
    effect: str | None = None


class ResourceFlavorSpec(StrictFields):
    nodeLabels: StrMap | None = None
    nodeTaints: list[Taint] | None = None
    tolerations: list[Toleration] | None = None


class ResourceFlavor(_Object):
    spec: ResourceFlavorSpec | None = None


class ResourceQuota(StrictFields):
    name: str | None = None
    nominalQuota: Quantity | None = None
    borrowingLimit: Quantity | None = None
    lendingLimit: Quantity | None = None


class FlavorQuotas(StrictFields):
    name: str | None = None
    resources: list[ResourceQuota] | None = None


class ResourceGroup(StrictFields):
    coveredResources: list[str] | None = None
    flavors: list[FlavorQuotas] | None = None


class FairSharing(StrictFields):
    weight: NonNegativeQuantity | None = None


class LabelSelectorRequirement(StrictFields):
    key: str | None = None
    operator: str | None = None
    values: list[str] | None = None


class LabelSelector(StrictFields):
    matchLabels: StrMap | None = None
    matchExpressions: list[LabelSelectorRequirement] | None = None


class BorrowWithinCohort(StrictFields):
    policy: str | None = None
    maxPriorityThreshold: Int32 | None = None


class ClusterQueuePreemption(StrictFields):
    withinClusterQueue: str | None = None
    reclaimWithinCohort: str | None = None
    borrowWithinCohort: BorrowWithinCohort | None = None


class FlavorFungibility(StrictFields):
    whenCanBorrow: str | None = None
    whenCanPreempt: str | None = None
    preference: str | None = None


class AdmissionScope(StrictFields):
    admissionMode: str | None = None


class AdmissionCheckRule(StrictFields):
    name: str | None = None


class AdmissionChecksStrategy(StrictFields):
    admissionChecks: list[AdmissionCheckRule] | None = None


class ClusterQueueSpec(StrictFields):
    cohort: str | None = None
    cohortName: str | None = None
    namespaceSelector: LabelSelector | None = None
    resourceGroups: list[ResourceGroup] | None = None
    queueingStrategy: str | None = None
    preemption: ClusterQueuePreemption | None = None
    flavorFungibility: FlavorFungibility | None = None
    fairSharing: FairSharing | None = None
    admissionScope: AdmissionScope | None = None
    admissionChecks: list[str] | None = None
    admissionChecksStrategy: AdmissionChecksStrategy | None = None
    stopPolicy: str | None = None


class ClusterQueue(_Object):
    spec: ClusterQueueSpec | None = None


class CohortSpec(StrictFields):
    parent: str | None = None
    parentName: str | None = None
    resourceGroups: list[ResourceGroup] | None = None
    fairSharing: FairSharing | None = None


class Cohort(_Object):
    spec: CohortSpec | None = None


class LocalQueueSpec(StrictFields):
    clusterQueue: str | None = None
    fairSharing: FairSharing | None = None


class AdmissionFairSharingStatus(StrictFields):
    consumedResources: dict[str, NonNegativeQuantity] | None = None


class LocalQueueFairSharingStatus(StrictFields):
    admissionFairSharingStatus: AdmissionFairSharingStatus | None = None


class LocalQueueStatus(StrictFields):
    fairSharing: LocalQueueFairSharingStatus | None = None


class LocalQueue(_Object):
    spec: LocalQueueSpec | None = None
    status: LocalQueueStatus | None = None


class WorkloadPriorityClass(_Object):
    value: Int32 | None = None
    description: str | None = None


class ResourceRequirements(StrictFields):
    requests: dict[str, NonNegativeQuantity] | None = None
    limits: dict[str, NonNegativeQuantity] | None = None


class Container(StrictFields):
    name: str | None = None
    resources: ResourceRequirements | None = None
    restartPolicy: str | None = None


class NodeSelectorTerm(StrictFields):
    matchExpressions: list[LabelSelectorRequirement] | None = None


class NodeSelector(StrictFields):
    nodeSelectorTerms: list[NodeSelectorTerm] | None = None


class NodeAffinity(StrictFields):
    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector | None = None


class Affinity(StrictFields):
    nodeAffinity: NodeAffinity | None = None


class PodSpec(StrictFields):
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    overhead: dict[str, NonNegativeQuantity] | None = None
    nodeSelector: StrMap | None = None
    affinity: Affinity | None = None
    tolerations: list[Toleration] | None = None


class PodTemplate(StrictFields):
    spec: PodSpec | None = None


class PodSet(StrictFields):
    name: str | None = None
    count: NonNegativeInt32 | None = None
    minCount: NonNegativeInt32 | None = None
    template: PodTemplate | None = None


class PriorityClassRef(StrictFields):
    name: str | None = None
    group: str | None = None
    kind: str | None = None


class WorkloadSpec(StrictFields):
    queueName: str | None = None
    podSets: list[PodSet] | None = None
    priority: Int32 | None = None
    priorityClassName: str | None = None
    priorityClassSource: str | None = None
    priorityClassRef: PriorityClassRef | None = None
    active: bool | None = None


class PodSetAssignment(StrictFields):
    name: str | None = None
    count: NonNegativeInt32 | None = None
    flavors: StrMap | None = None
    resourceUsage: dict[str, NonNegativeQuantity] | None = None


class Admission(StrictFields):
    clusterQueue: str | None = None
    podSetAssignments: list[PodSetAssignment] | None = None


class Condition(StrictFields):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: Timestamp | None = None


class WorkloadStatus(StrictFields):
    admission: Admission | None = None
    conditions: list[Condition] | None = None


class Workload(_Object):
    spec: WorkloadSpec | None = None
    status: WorkloadStatus | None = None


SCHEMAS: dict[str, type[_Object]] = {
    "Namespace": _Object,
    "ResourceFlavor": ResourceFlavor,
    "WorkloadPriorityClass": WorkloadPriorityClass,
    "Cohort": Cohort,
    "ClusterQueue": ClusterQueue,
    "LocalQueue": LocalQueue,
    "Workload": Workload,
    "AdmissionCheck": _Object,
}

#: pydantic's type errors as the words a user reads (``expected a list, got str``).
EXPECTED_TYPES = {
    "list_type": "expected a list",
    "dict_type": "expected a mapping",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "bool_type": "expected true or false",
}


def field_path(loc: tuple[int | str, ...]) -> str:
    """A pydantic location as Kubernetes writes field paths: ``spec.podSets[0].count``."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    return path


def reason(error: Mapping[str, Any]) -> str:
    """What one pydantic error says is wrong, without where (``expected a list, got str``)."""
    kind = str(error.get("type", ""))
    if kind in EXPECTED_TYPES:
        return f"{EXPECTED_TYPES[kind]}, got {type(error.get('input')).__name__}"
    message = str(error.get("msg", "invalid value")).removeprefix("Value error, ")
    return message[:1].lower() + message[1:]


def describe(error: Mapping[str, Any]) -> str:
    """One pydantic error as ``path: what is wrong``."""
    path = field_path(tuple(error.get("loc", ())))
    return f"{path}: {reason(error)}" if path else reason(error)


def check_document(kind: str, doc: Mapping[str, Any], where: str) -> None:
    """Check one object of ``kind`` against its schema.

    Raises:
        ModelError: ``<where>: <field path>: <what is wrong>`` for the first problem.
    """
    schema = SCHEMAS.get(kind)
    if schema is None:
        return
    try:
        schema.model_validate(doc)
    except ValidationError as exc:
        errors = exc.errors()
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ModelError(f"{where}: {describe(errors[0])}{more}") from None

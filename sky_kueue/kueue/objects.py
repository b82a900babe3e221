"""Typed Kueue objects, normalised to Kueue's internal (v1beta2) meaning.

These are the inputs of the scheduling model. They are plain, immutable-by-convention
dataclasses built by :mod:`sky_kueue.kueue.parse` from ``kubectl get -o yaml`` output in
either API version, so nothing downstream needs to know which version a cluster serves.

Quantities are integer *amounts* (millicores for CPU, base units otherwise; see
:mod:`sky_kueue.kueue.quantity`). A flavor/resource pair is written ``FR = (flavor, resource)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal

from sky_kueue.kueue import api as kueue_api

FR = tuple[str, str]
"""A (flavor name, resource name) pair: the unit of quota accounting."""


class QueueingStrategy(str, enum.Enum):
    BEST_EFFORT_FIFO = "BestEffortFIFO"
    STRICT_FIFO = "StrictFIFO"


class PreemptionPolicy(str, enum.Enum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
    ANY = "Any"


class BorrowWithinCohortPolicy(str, enum.Enum):
    NEVER = "Never"
    LOWER_PRIORITY = "LowerPriority"


class FungibilityPolicy(str, enum.Enum):
    MAY_STOP_SEARCH = "MayStopSearch"
    TRY_NEXT_FLAVOR = "TryNextFlavor"


class FungibilityPreference(str, enum.Enum):
    BORROWING_OVER_PREEMPTION = "BorrowingOverPreemption"
    PREEMPTION_OVER_BORROWING = "PreemptionOverBorrowing"


class StopPolicy(str, enum.Enum):
    NONE = "None"
    HOLD = "Hold"
    HOLD_AND_DRAIN = "HoldAndDrain"


#: ``priorityClassSource`` value for a WorkloadPriorityClass (v1beta1 spelling).
WORKLOAD_PRIORITY_CLASS_SOURCE = kueue_api.WORKLOAD_PRIORITY_CLASS_SOURCE
#: ``priorityClassSource`` value for a core PriorityClass (v1beta1 spelling).
POD_PRIORITY_CLASS_SOURCE = "scheduling.k8s.io/priorityclass"


@dataclass(frozen=True)
class Namespace:
    """A Namespace: its labels are what ClusterQueues' namespace selectors match."""

    name: str
    labels: dict[str, str]


@dataclass(frozen=True)
class Taint:
    """A node taint of a ResourceFlavor; a pod set without a matching toleration cannot use the flavor."""

    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Toleration:
    """A toleration of a pod set or a ResourceFlavor (``corev1.Toleration``)."""

    key: str
    operator: str
    value: str
    effect: str


@dataclass(frozen=True)
class ResourceFlavor:
    """A ResourceFlavor: the node labels, taints and tolerations a flavor assignment must respect."""

    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()


@dataclass(frozen=True)
class WorkloadPriorityClass:
    """A WorkloadPriorityClass: the priority a Workload naming it gets when it has none."""

    name: str
    value: int
    description: str = ""


@dataclass(frozen=True)
class ResourceQuota:
    """Quota of one resource in one flavor of a ClusterQueue or Cohort."""

    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    """The quotas of one flavor in a resource group, per resource name."""

    name: str
    resources: dict[str, ResourceQuota]


@dataclass(frozen=True)
class ResourceGroup:
    """Resources that share flavors: a pod set gets one flavor for all of them."""

    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]

    @property
    def flavor_names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.flavors)


@dataclass(frozen=True)
class Preemption:
    """A ClusterQueue's ``spec.preemption``: whom its pending workloads may evict."""

    within_cluster_queue: PreemptionPolicy = PreemptionPolicy.NEVER
    reclaim_within_cohort: PreemptionPolicy = PreemptionPolicy.NEVER
    borrow_within_cohort: BorrowWithinCohortPolicy = BorrowWithinCohortPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    """A ClusterQueue's ``spec.flavorFungibility``: when the flavor search moves on."""

    when_can_borrow: FungibilityPolicy = FungibilityPolicy.MAY_STOP_SEARCH
    when_can_preempt: FungibilityPolicy = FungibilityPolicy.TRY_NEXT_FLAVOR
    preference: FungibilityPreference | None = None


@dataclass(frozen=True)
class LabelSelectorRequirement:
    """One ``matchExpressions`` entry of a label selector."""

    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class LabelSelector:
    """A metav1.LabelSelector. ``None`` in a ClusterQueue means *nothing* is selected."""

    match_labels: dict[str, str] = field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        for key, value in self.match_labels.items():
            if labels.get(key) != value:
                return False
        for req in self.match_expressions:
            present = req.key in labels
            if req.operator == "In":
                if not present or labels[req.key] not in req.values:
                    return False
            elif req.operator == "NotIn":
                if present and labels[req.key] in req.values:
                    return False
            elif req.operator == "Exists":
                if not present:
                    return False
            elif req.operator == "DoesNotExist":
                if present:
                    return False
            else:  # validated at parse time
                return False
        return True


@dataclass(frozen=True)
class ClusterQueue:
    """A ClusterQueue: its quotas, cohort and the policies that shape its scheduling."""

    name: str
    cohort: str | None
    namespace_selector: LabelSelector | None
    resource_groups: tuple[ResourceGroup, ...]
    queueing_strategy: QueueingStrategy = QueueingStrategy.BEST_EFFORT_FIFO
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    fair_weight: Decimal = Decimal(1)
    admission_fair_sharing: bool = False
    stop_policy: StopPolicy = StopPolicy.NONE
    admission_checks: tuple[str, ...] = ()

    def group_for(self, resource: str) -> ResourceGroup | None:
        for group in self.resource_groups:
            if resource in group.covered_resources:
                return group
        return None


@dataclass(frozen=True)
class Cohort:
    """A Cohort: a node of the quota tree, with its own quotas and parent."""

    name: str
    parent: str | None
    resource_groups: tuple[ResourceGroup, ...] = ()
    fair_weight: Decimal = Decimal(1)


@dataclass(frozen=True)
class LocalQueue:
    """A LocalQueue: where a namespace's Workloads enter their ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str
    fair_weight: Decimal = Decimal(1)
    #: admission fair sharing: consumed resources from the LocalQueue's status (amounts).
    consumed_resources: dict[str, Decimal] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class NodeSelectorRequirement:
    """One requirement of a required node-affinity term."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodSet:
    """One pod set: ``count`` pods, each requesting ``requests`` (amounts per pod)."""

    name: str
    count: int
    requests: dict[str, int]
    min_count: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    #: required node-affinity terms (OR of ANDs)
    affinity_terms: tuple[tuple[NodeSelectorRequirement, ...], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    #: a stable text of the pod template's scheduling shape (for equivalence hashing)
    shape: str = ""


@dataclass(frozen=True)
class Condition:
    """One status condition of a Workload (QuotaReserved, Admitted, Evicted, ...)."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: datetime | None = None


@dataclass(frozen=True)
class PodSetAssignment:
    """One pod set's part of an admission: its flavors and the quota it holds."""

    name: str
    count: int
    flavors: dict[str, str]
    resource_usage: dict[str, int]


@dataclass(frozen=True)
class Admission:
    """A Workload's ``status.admission``: the ClusterQueue and the quota it was given."""

    cluster_queue: str
    pod_set_assignments: tuple[PodSetAssignment, ...]


@dataclass(frozen=True)
class Workload:
    """A Workload: what Kueue queues, admits and preempts."""

    namespace: str
    name: str
    uid: str
    creation_timestamp: datetime
    queue_name: str
    pod_sets: tuple[PodSet, ...]
    priority: int = 0
    priority_class_name: str | None = None
    priority_class_source: str | None = None
    active: bool = True
    admission: Admission | None = None
    conditions: tuple[Condition, ...] = ()
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def condition(self, ctype: str) -> Condition | None:
        for cond in self.conditions:
            if cond.type == ctype:
                return cond
        return None

    def condition_true(self, ctype: str) -> bool:
        cond = self.condition(ctype)
        return cond is not None and cond.status == "True"

    @property
    def has_quota_reservation(self) -> bool:
        return self.condition_true("QuotaReserved")

    @property
    def is_evicted(self) -> bool:
        return self.condition_true("Evicted")

    @property
    def is_finished(self) -> bool:
        return self.condition_true("Finished")


@dataclass(frozen=True)
class FairSharingConfig:
    """The ``fairSharing:`` block of Kueue's Configuration."""

    preemption_strategies: tuple[str, ...] = ("LessThanOrEqualToFinalShare", "LessThanInitialShare")


@dataclass(frozen=True)
class AdmissionFairSharingConfig:
    """The ``admissionFairSharing:`` block of Kueue's Configuration."""

    usage_half_life_seconds: Decimal
    usage_sampling_interval_seconds: Decimal
    resource_weights: dict[str, Decimal] = field(default_factory=dict)


#: Kueue records at most this many cycles unless the snapshot says otherwise.
DEFAULT_CYCLE_CAP_CYCLES = 6


@dataclass(frozen=True)
class KueueConfig:
    """The parts of Kueue's manager Configuration that change scheduling decisions."""

    fair_sharing: FairSharingConfig | None = None
    admission_fair_sharing: AdmissionFairSharingConfig | None = None
    cycle_cap: int = DEFAULT_CYCLE_CAP_CYCLES


@dataclass
class ClusterState:
    """Everything the model needs: the Kueue objects of one cluster, plus its config."""

    namespaces: dict[str, Namespace] = field(default_factory=dict)
    resource_flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    cohorts: dict[str, Cohort] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    workloads: dict[str, Workload] = field(default_factory=dict)
    config: KueueConfig = field(default_factory=KueueConfig)
    #: the fixed "now" of a prediction
    now: datetime | None = None

    def local_queue_for(self, wl: Workload) -> LocalQueue | None:
        return self.local_queues.get(f"{wl.namespace}/{wl.queue_name}")

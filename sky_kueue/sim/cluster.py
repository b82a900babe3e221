"""The simulated cluster: teams and their quotas as Kueue objects, and jobs as Workloads.

Why build Kueue objects at all: the simulator schedules with the project's exact Kueue
model (:mod:`sky_kueue.kueue`), so every trace must become what that model reads, a
:class:`~sky_kueue.kueue.objects.ClusterState` with one ClusterQueue and LocalQueue per
team, and every launch attempt of a job a pending
:class:`~sky_kueue.kueue.objects.Workload` shaped like the pod group SkyPilot creates
(SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``): one pod set of identical pods, each requesting CPU, memory
and GPUs. Quota and usage are GPUs first; CPU and memory quotas are sized with slack so
that GPUs are the binding resource, as on real GPU clusters.

A user's own cluster can be used instead (``sky-kueue simulate --cluster FILE.yaml``);
then a trace's team names a LocalQueue (``namespace/name``) or a namespace with exactly
one LocalQueue.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.validation import validate_state

#: The GPU resource name SkyPilot requests on Kubernetes.
GPU_RESOURCE = "nvidia.com/gpu"
CPU_RESOURCE = "cpu"
MEMORY_RESOURCE = "memory"
#: The single ResourceFlavor of generated clusters.
DEFAULT_FLAVOR = "gpu-nodes"
#: The cohort all generated teams share (borrowing and reclaim happen within it).
DEFAULT_COHORT = "org"
#: GPUs per node: a job asking for more spans several pods of at most this many GPUs.
GPUS_PER_NODE = 8
#: CPU (millicores) and memory (bytes) a job requests per GPU when a trace does not say.
DEFAULT_CPU_PER_GPU_MILLI = 8_000
DEFAULT_MEMORY_PER_GPU_BYTES = 64 * 2**30
#: CPU and memory quota per nominal GPU is this many times a job's per-GPU request, so
#: that GPUs (not CPU or memory) bind first.
CPU_MEMORY_QUOTA_SLACK = 2
#: Floor of a team's CPU and memory quota, for CPU-only teams.
MIN_TEAM_CPU_MILLI = 64_000
MIN_TEAM_MEMORY_BYTES = 512 * 2**30
#: The simulation's time zero (simulated seconds are offsets from it).
EPOCH = datetime(2026, 1, 1, tzinfo=timezone.utc)

_DNS_LABEL_INVALID = re.compile(r"[^a-z0-9-]+")


def at(seconds: float) -> datetime:
    """Simulated seconds as the timestamps Kueue objects carry."""
    return EPOCH + timedelta(seconds=seconds)


def fresh_state(state: o.ClusterState, cluster_queues: dict[str, o.ClusterQueue] | None = None) -> o.ClusterState:
    """The cluster's Kueue objects, without Workloads, in dicts of its own (a simulation's
    engine adds and removes Workloads; the trace's cluster must stay as it was).

    Args:
        cluster_queues: replaces the ClusterQueues (e.g. with a share of their quota).
    """
    return o.ClusterState(
        namespaces=dict(state.namespaces),
        resource_flavors=dict(state.resource_flavors),
        priority_classes=dict(state.priority_classes),
        cohorts=dict(state.cohorts),
        cluster_queues=dict(state.cluster_queues if cluster_queues is None else cluster_queues),
        local_queues=dict(state.local_queues),
        config=state.config,
    )


def dns_label(text: str) -> str:
    """``text`` as a valid Kubernetes name (lowercase, ``[a-z0-9-]``, at most 63 characters)."""
    label = _DNS_LABEL_INVALID.sub("-", text.lower()).strip("-")[:63].strip("-")
    return label or "x"


@dataclass(frozen=True)
class PriorityClassSpec:
    """A WorkloadPriorityClass: jobs name it, Kueue orders and preempts by its value."""

    name: str
    value: int


#: Three classes as in Kueue's scheduler performance test (small 50, medium 100, large 200).
DEFAULT_PRIORITY_CLASSES = (
    PriorityClassSpec("low", 50),
    PriorityClassSpec("medium", 100),
    PriorityClassSpec("high", 200),
)


@dataclass(frozen=True)
class TeamSpec:
    """One team: its ClusterQueue's nominal quota and its burst limit."""

    name: str
    gpus: int
    cohort: str | None = DEFAULT_COHORT
    #: How many GPUs beyond nominal the team may borrow from its cohort (None: unlimited).
    borrowing_limit_gpus: int | None = None
    cpu_milli: int | None = None
    memory_bytes: int | None = None
    #: Burst a launch attempt to the cloud after it waited this long in Kueue (None: never).
    wait_limit_seconds: float | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """A generated cluster: one ClusterQueue per team, all in cohorts, one flavor."""

    teams: tuple[TeamSpec, ...]
    priority_classes: tuple[PriorityClassSpec, ...] = DEFAULT_PRIORITY_CLASSES
    within_cluster_queue: o.PreemptionPolicy = o.PreemptionPolicy.LOWER_PRIORITY
    reclaim_within_cohort: o.PreemptionPolicy = o.PreemptionPolicy.ANY
    borrow_within_cohort: o.BorrowWithinCohortPolicy = o.BorrowWithinCohortPolicy.NEVER
    #: ``borrowWithinCohort.maxPriorityThreshold``: only victims at or below it (None: any).
    max_priority_threshold: int | None = None
    queueing_strategy: o.QueueingStrategy = o.QueueingStrategy.BEST_EFFORT_FIFO
    #: Whether the ClusterQueues cover CPU and memory besides GPUs.
    cpu_and_memory: bool = True


@dataclass(frozen=True)
class QueueRef:
    """Where a team's jobs go: the LocalQueue and the ClusterQueue behind it."""

    namespace: str
    local_queue: str
    cluster_queue: str


@dataclass
class SimCluster:
    """The Kueue objects (no workloads) plus how teams map onto them."""

    state: o.ClusterState
    queues: dict[str, QueueRef]
    #: GPUs of the whole cluster (sum of nominal quotas): the utilisation denominator.
    gpu_capacity: int
    #: Burst limit per team (seconds in Kueue per launch attempt), where one is set.
    wait_limits: dict[str, float] = field(default_factory=dict)
    #: Nominal GPUs per team (the denominator of a team's offered load).
    team_gpus: dict[str, int] = field(default_factory=dict)

    def priority_value(self, class_name: str) -> int:
        pc = self.state.priority_classes.get(class_name)
        if pc is None:
            known = ", ".join(sorted(self.state.priority_classes)) or "none"
            raise ModelError(f"unknown priority class {class_name!r}; known classes: {known}")
        return pc.value


def _quota(nominal: int, borrowing_limit: int | None = None) -> o.ResourceQuota:
    return o.ResourceQuota(nominal=nominal, borrowing_limit=borrowing_limit)


def build_cluster(spec: ClusterSpec) -> SimCluster:
    """The Kueue objects of a generated cluster.

    Raises:
        ModelError: the result is not something Kueue would accept (e.g. duplicate teams).
    """
    state = o.ClusterState()
    state.resource_flavors[DEFAULT_FLAVOR] = o.ResourceFlavor(name=DEFAULT_FLAVOR)
    for pc in spec.priority_classes:
        state.priority_classes[pc.name] = o.WorkloadPriorityClass(name=pc.name, value=pc.value)
    queues: dict[str, QueueRef] = {}
    wait_limits: dict[str, float] = {}
    for team in spec.teams:
        if team.name in queues:
            raise ModelError(f"team {team.name!r} is defined twice")
        label = dns_label(team.name)
        namespace, cq_name = f"team-{label}", f"{label}-cq"
        state.namespaces[namespace] = o.Namespace(name=namespace, labels={"team": label})
        resources: dict[str, o.ResourceQuota] = {GPU_RESOURCE: _quota(team.gpus, team.borrowing_limit_gpus)}
        covered: tuple[str, ...] = (GPU_RESOURCE,)
        if spec.cpu_and_memory:
            cpu = team.cpu_milli
            if cpu is None:
                cpu = max(team.gpus * DEFAULT_CPU_PER_GPU_MILLI * CPU_MEMORY_QUOTA_SLACK, MIN_TEAM_CPU_MILLI)
            memory = team.memory_bytes
            if memory is None:
                memory = max(team.gpus * DEFAULT_MEMORY_PER_GPU_BYTES * CPU_MEMORY_QUOTA_SLACK, MIN_TEAM_MEMORY_BYTES)
            covered = (CPU_RESOURCE, MEMORY_RESOURCE, GPU_RESOURCE)
            resources = {
                CPU_RESOURCE: _quota(cpu, None if team.borrowing_limit_gpus is None else 0),
                MEMORY_RESOURCE: _quota(memory, None if team.borrowing_limit_gpus is None else 0),
                **resources,
            }
            if team.borrowing_limit_gpus is not None:
                # Let CPU and memory borrow in proportion to the GPUs a team may borrow.
                share = team.borrowing_limit_gpus / max(team.gpus, 1)
                resources[CPU_RESOURCE] = _quota(cpu, math.ceil(cpu * share))
                resources[MEMORY_RESOURCE] = _quota(memory, math.ceil(memory * share))
        state.cluster_queues[cq_name] = o.ClusterQueue(
            name=cq_name,
            cohort=team.cohort,
            namespace_selector=o.LabelSelector(),
            resource_groups=(
                o.ResourceGroup(
                    covered_resources=covered,
                    flavors=(o.FlavorQuotas(name=DEFAULT_FLAVOR, resources=resources),),
                ),
            ),
            queueing_strategy=spec.queueing_strategy,
            preemption=o.Preemption(
                within_cluster_queue=spec.within_cluster_queue,
                reclaim_within_cohort=spec.reclaim_within_cohort,
                borrow_within_cohort=spec.borrow_within_cohort,
                max_priority_threshold=spec.max_priority_threshold,
            ),
        )
        state.local_queues[f"{namespace}/queue"] = o.LocalQueue(
            namespace=namespace, name="queue", cluster_queue=cq_name
        )
        queues[team.name] = QueueRef(namespace, "queue", cq_name)
        if team.wait_limit_seconds is not None:
            wait_limits[team.name] = team.wait_limit_seconds
    validate_state(state)
    return SimCluster(
        state=state,
        queues=queues,
        gpu_capacity=sum(t.gpus for t in spec.teams),
        wait_limits=wait_limits,
        team_gpus={t.name: t.gpus for t in spec.teams},
    )


def cluster_from_state(state: o.ClusterState, teams: list[str]) -> SimCluster:
    """Maps trace teams onto a user's Kueue objects.

    A team is a LocalQueue key (``namespace/name``), or a namespace that has exactly one
    LocalQueue.

    Raises:
        ModelError: a team matches no LocalQueue, or several; or the objects are invalid.
    """
    validate_state(state)
    queues: dict[str, QueueRef] = {}
    for team in teams:
        lq = state.local_queues.get(team)
        if lq is None:
            matches = [q for q in state.local_queues.values() if q.namespace == team]
            if len(matches) != 1:
                found = "no LocalQueue" if not matches else f"{len(matches)} LocalQueues"
                raise ModelError(f"team {team!r}: {found} in namespace {team!r}; name a LocalQueue as 'namespace/name'")
            lq = matches[0]
        if lq.cluster_queue not in state.cluster_queues:
            raise ModelError(f"LocalQueue {lq.key}: ClusterQueue {lq.cluster_queue!r} is not defined")
        queues[team] = QueueRef(lq.namespace, lq.name, lq.cluster_queue)
    capacity = 0
    for cq in state.cluster_queues.values():
        for group in cq.resource_groups:
            for flavor in group.flavors:
                quota = flavor.resources.get(GPU_RESOURCE)
                capacity += quota.nominal if quota is not None else 0
    for cohort in state.cohorts.values():
        for group in cohort.resource_groups:
            for flavor in group.flavors:
                quota = flavor.resources.get(GPU_RESOURCE)
                capacity += quota.nominal if quota is not None else 0
    team_gpus = {team: _nominal_gpus(state.cluster_queues[ref.cluster_queue]) for team, ref in queues.items()}
    return SimCluster(state=state, queues=queues, gpu_capacity=capacity, team_gpus=team_gpus)


def _nominal_gpus(cq: o.ClusterQueue) -> int:
    total = 0
    for group in cq.resource_groups:
        for flavor in group.flavors:
            quota = flavor.resources.get(GPU_RESOURCE)
            total += quota.nominal if quota is not None else 0
    return int(total)


def pod_layout(gpus: int) -> tuple[tuple[int, int], ...]:
    """The pods of a job as (pod count, GPUs per pod) groups, totalling exactly ``gpus``.

    Up to a node's GPUs a job is one pod; beyond, whole nodes plus one pod for the rest
    (SkyPilot would ask for identical nodes; for quota only the total counts).
    """
    if gpus <= GPUS_PER_NODE:
        return ((1, gpus),)
    full, rest = divmod(gpus, GPUS_PER_NODE)
    return ((full, GPUS_PER_NODE), (1, rest)) if rest else ((full, GPUS_PER_NODE),)


def make_workload(
    *,
    name: str,
    queue: QueueRef,
    created_at: float,
    priority: int,
    priority_class: str,
    gpus: int,
    cpu_milli: int,
    memory_bytes: int,
) -> o.Workload:
    """The pending Workload of one launch attempt (a SkyPilot pod group)."""
    layout = pod_layout(gpus)
    pods = sum(count for count, _ in layout)
    pod_sets = []
    for index, (count, gpus_per_pod) in enumerate(layout):
        requests: dict[str, int] = {}
        if cpu_milli:
            requests[CPU_RESOURCE] = math.ceil(cpu_milli / pods)
        if memory_bytes:
            requests[MEMORY_RESOURCE] = math.ceil(memory_bytes / pods)
        if gpus_per_pod:
            requests[GPU_RESOURCE] = gpus_per_pod
        pod_sets.append(
            o.PodSet(name="main" if index == 0 else "rest", count=count, requests=requests, shape="skypilot")
        )
    return o.Workload(
        namespace=queue.namespace,
        name=name,
        uid=name,
        creation_timestamp=at(created_at),
        queue_name=queue.local_queue,
        pod_sets=tuple(pod_sets),
        priority=priority,
        priority_class_name=priority_class,
        priority_class_source=o.WORKLOAD_PRIORITY_CLASS_SOURCE,
    )

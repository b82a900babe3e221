"""The relaunch lane: a ClusterQueue of nominal quota that only relaunches use.

Why a ClusterQueue and not a priority: Kueue never takes a Workload that a ClusterQueue
admitted within its nominal quota by a reclaim (candidates come only from ClusterQueues
whose usage exceeds their quota, ``IsWithinNominalInResources`` in Kueue
``pkg/scheduler/preemption/preemption.go``; under fair sharing only from ClusterQueues that
borrow, ``pkg/scheduler/preemption/fairsharing``), and ``withinClusterQueue: Never`` stops
every preemption inside it. A lane ClusterQueue with ``borrowingLimit: 0`` can never exceed
its nominal quota, so a Workload it admitted is out of every preemption's reach: after
``after_preemptions`` (k) preemptions a job's relaunch goes to the lane, and no job is
preempted more than k times, by construction (``tests/sim/test_relaunch_lane.py`` checks
it against the model on every shipped trace).

The lane, in Kueue's own objects (:func:`add_lanes`):

* nominal quota *carved* from an existing ClusterQueue of the same cohort, so the cohort's
  total is unchanged: with :attr:`LaneScope.TEAM` each team's lane from the team's own
  ClusterQueue (the team pays for its own guarantee); with :attr:`LaneScope.COHORT` one lane
  per cohort, shared by every team's relaunches, from the cohort's largest ClusterQueue by
  nominal GPUs (ties by name), or from the ClusterQueue :attr:`LaneSettings.donor` names (the
  admin knows which team lends most). A lane is at most its donor's GPUs. CPU and
  memory (the other resources of the GPU flavor) move in proportion, rounded down;
* ``borrowingLimit: 0`` and ``lendingLimit`` equal to the nominal quota: the lane lends what
  it does not use, and takes it back when a relaunch arrives (``reclaimWithinCohort: Any``, by
  default; :attr:`LaneSettings.reclaim_within_cohort`); ``borrowWithinCohort: Never``;
  ``withinClusterQueue: Never``;
* ``queueingStrategy: StrictFIFO`` by default: Kueue's queue orders by priority, then by the
  Workload's queue-order time, and StrictFIFO never lets a later Workload overtake a head
  that does not fit, so the lane is first come, first served within a priority, and the
  resubmission policy's aged priority (a ``rank`` level rises with the job's preemptions)
  orders it. BestEffortFIFO would let small relaunches overtake a large one indefinitely;
* a LocalQueue ``relaunch`` in every team's namespace pointing at its lane.

Where the bound does not hold, stated: a relaunch that asks for more than its lane's
nominal quota (CPU or memory included) could never be admitted there, so it stays in its
team's ClusterQueue (a *misfit*, counted) and may be preempted again; a team outside any
cohort gets no lane (a lane could neither lend nor reclaim). Outside the model: an admin
shrinking the lane below its usage, or an eviction that is not a preemption (node failure,
``waitForPodsReady``), can still end a lane run.

Pure: no I/O.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.validation import validate_state
from sky_kueue.sim.cluster import GPU_RESOURCE, QueueRef, dns_label, make_workload

if TYPE_CHECKING:
    from sky_kueue.sim.traces import JobSpec

#: GPUs per lane unless told otherwise (one node of the generated clusters).
DEFAULT_LANE_GPUS = 8
#: Preemptions after which a job's relaunch goes to the lane unless told otherwise.
DEFAULT_LANE_AFTER_PREEMPTIONS = 2
#: The LocalQueue name of the lane in each team's namespace.
LANE_LOCAL_QUEUE = "relaunch"
#: How the lane takes back the quota it lent, unless told otherwise: ``Any`` (issue 39's lane: a
#: relaunch reclaims its lane from whoever borrows it). ``LowerPriority`` takes it back only from
#: borrowers of lower priority than the relaunch (Kueue's ``reclaimWithinCohort`` semantics), so a
#: relaunch never preempts a same-class or higher-class borrower and waits for it instead:
#: measured in ``benchmarks/anti_starvation.py`` (the lane rows ``reclaim LowerPriority``).
DEFAULT_LANE_RECLAIM = o.PreemptionPolicy.ANY
#: The reclaim policies a lane may have (``Never`` would never take back what it lent).
LANE_RECLAIM_POLICIES = (o.PreemptionPolicy.ANY, o.PreemptionPolicy.LOWER_PRIORITY)


class LaneScope(enum.Enum):
    """Who shares a lane: one per team, or one per cohort for every team's relaunches."""

    TEAM = "team"
    COHORT = "cohort"


@dataclass(frozen=True)
class LaneSettings:
    """The lane's size and when a relaunch goes there."""

    gpus: int = DEFAULT_LANE_GPUS
    after_preemptions: int = DEFAULT_LANE_AFTER_PREEMPTIONS
    scope: LaneScope = LaneScope.TEAM
    queueing_strategy: o.QueueingStrategy = o.QueueingStrategy.STRICT_FIFO
    #: :attr:`LaneScope.COHORT`: the ClusterQueue its cohort's lane is carved from (None: the
    #: cohort's largest); other cohorts keep the default.
    donor: str | None = None
    #: ``reclaimWithinCohort`` of the lane ClusterQueue (:data:`DEFAULT_LANE_RECLAIM`).
    reclaim_within_cohort: o.PreemptionPolicy = DEFAULT_LANE_RECLAIM

    def __post_init__(self) -> None:
        if self.reclaim_within_cohort not in LANE_RECLAIM_POLICIES:
            allowed = " or ".join(p.value for p in LANE_RECLAIM_POLICIES)
            raise ValueError(
                f"lane: reclaim_within_cohort must be {allowed}, got {self.reclaim_within_cohort.value} "
                "(a lane that never reclaims could not take back what it lent)"
            )
        if self.gpus < 1:
            raise ValueError(f"lane: gpus must be at least 1, got {self.gpus}")
        if self.after_preemptions < 1:
            raise ValueError(f"lane: after_preemptions must be at least 1, got {self.after_preemptions}")


@dataclass(frozen=True)
class Lane:
    """One lane ClusterQueue: its name, the ClusterQueue it was carved from, and its GPUs."""

    cluster_queue: str
    donor: str
    gpus: int
    #: The donor's nominal GPUs before the lane was carved.
    donor_gpus: int

    @property
    def empties_donor(self) -> bool:
        """Whether the lane took all of its donor's GPUs (the donor keeps no guaranteed quota)."""
        return self.gpus >= self.donor_gpus


@dataclass(frozen=True)
class LanePlan:
    """The cluster with its lanes, and where each team's relaunches go."""

    state: o.ClusterState
    lanes: tuple[Lane, ...]
    #: team -> its lane's LocalQueue (teams without a lane are absent)
    queues: dict[str, QueueRef]
    #: team -> the lane's nominal quota per resource (what a relaunch must fit to enter)
    capacity: dict[str, dict[str, int]]

    @property
    def empties_a_donor(self) -> bool:
        return any(lane.empties_donor for lane in self.lanes)

    @property
    def carved_gpus(self) -> int:
        """The lanes' cost: nominal GPUs moved out of the teams' ClusterQueues."""
        return sum(lane.gpus for lane in self.lanes)

    def fits(self, team: str, requests: dict[str, int]) -> bool:
        """Whether a Workload asking for ``requests`` (totals) can ever be admitted in the team's lane."""
        capacity = self.capacity.get(team)
        if capacity is None:
            return False
        return all(value <= capacity.get(resource, 0) for resource, value in requests.items() if value)


def requests_of(spec: JobSpec) -> dict[str, int]:
    """The totals a job's Workload asks for, as :func:`~sky_kueue.sim.cluster.make_workload`
    splits them over pods (what :meth:`LanePlan.fits` compares with the lane's quota)."""
    probe = make_workload(
        name="probe",
        queue=QueueRef("probe", "probe", "probe"),
        created_at=0.0,
        priority=0,
        priority_class=spec.priority_class,
        gpus=spec.gpus,
        cpu_milli=spec.cpu_milli,
        memory_bytes=spec.memory_bytes,
    )
    totals: dict[str, int] = {}
    for pod_set in probe.pod_sets:
        for resource, value in pod_set.requests.items():
            totals[resource] = totals.get(resource, 0) + value * pod_set.count
    return totals


def _gpu_flavor(cq: o.ClusterQueue) -> tuple[int, int]:
    """(resource group index, flavor index) of the ClusterQueue's GPU quota."""
    found = [
        (g, f)
        for g, group in enumerate(cq.resource_groups)
        for f, flavor in enumerate(group.flavors)
        if GPU_RESOURCE in flavor.resources
    ]
    if len(found) != 1:
        raise ModelError(
            f"lane: ClusterQueue {cq.name!r} has GPU quota in {len(found)} flavors; the simulator carves a lane "
            "from exactly one"
        )
    return found[0]


def _carve(donor: o.ClusterQueue, gpus: int) -> tuple[o.ClusterQueue, o.ResourceGroup, int, int]:
    """``donor`` less a lane's quota, the lane's resource group, the GPUs carved and the donor's GPUs."""
    g, f = _gpu_flavor(donor)
    group = donor.resource_groups[g]
    flavor = group.flavors[f]
    donor_gpus = flavor.resources[GPU_RESOURCE].nominal
    carved = min(gpus, donor_gpus)
    lane_quotas: dict[str, o.ResourceQuota] = {}
    donor_quotas: dict[str, o.ResourceQuota] = {}
    for resource, quota in flavor.resources.items():
        share = carved if resource == GPU_RESOURCE else quota.nominal * carved // max(donor_gpus, 1)
        lane_quotas[resource] = o.ResourceQuota(nominal=share, borrowing_limit=0, lending_limit=share)
        left = quota.nominal - share
        lending = None if quota.lending_limit is None else min(quota.lending_limit, left)
        donor_quotas[resource] = replace(quota, nominal=left, lending_limit=lending)
    flavors = list(group.flavors)
    flavors[f] = replace(flavor, resources=donor_quotas)
    groups = list(donor.resource_groups)
    groups[g] = replace(group, flavors=tuple(flavors))
    lane_group = o.ResourceGroup(
        covered_resources=group.covered_resources,
        flavors=(o.FlavorQuotas(name=flavor.name, resources=lane_quotas),),
    )
    return replace(donor, resource_groups=tuple(groups)), lane_group, carved, donor_gpus


def _lane_queue(name: str, cohort: str, group: o.ResourceGroup, settings: LaneSettings) -> o.ClusterQueue:
    return o.ClusterQueue(
        name=name,
        cohort=cohort,
        namespace_selector=o.LabelSelector(),
        resource_groups=(group,),
        queueing_strategy=settings.queueing_strategy,
        preemption=o.Preemption(
            within_cluster_queue=o.PreemptionPolicy.NEVER,
            reclaim_within_cohort=settings.reclaim_within_cohort,
            borrow_within_cohort=o.BorrowWithinCohortPolicy.NEVER,
        ),
    )


def _gpus(cq: o.ClusterQueue) -> int:
    g, f = _gpu_flavor(cq)
    return cq.resource_groups[g].flavors[f].resources[GPU_RESOURCE].nominal


def add_lanes(state: o.ClusterState, teams: dict[str, QueueRef], settings: LaneSettings) -> LanePlan:
    """``state`` (not modified) with the lanes of ``settings`` for ``teams`` (module docstring).

    Raises:
        ModelError: a donor's GPUs are not in exactly one flavor, a lane name is taken, or
            the result is not something Kueue would accept.
    """
    cluster_queues = dict(state.cluster_queues)
    local_queues = dict(state.local_queues)
    lanes: list[Lane] = []
    lane_of: dict[str, str] = {}  # team -> lane ClusterQueue
    if settings.scope is LaneScope.TEAM:
        for team in sorted(teams):
            home = cluster_queues[teams[team].cluster_queue]
            if home.cohort is None or teams[team].cluster_queue in {lane.donor for lane in lanes}:
                continue  # no cohort to lend to; or a ClusterQueue shared by teams already has its lane
            name = f"{dns_label(home.name)[:50]}-relaunch"
            donor, group, carved, donor_gpus = _carve(home, settings.gpus)
            if carved == 0:
                continue
            cluster_queues[home.name] = donor
            _add(cluster_queues, _lane_queue(name, home.cohort, group, settings))
            lanes.append(Lane(name, home.name, carved, donor_gpus))
            for other, ref in teams.items():
                if ref.cluster_queue == home.name:
                    lane_of[other] = name
    else:
        named = state.cluster_queues.get(settings.donor) if settings.donor is not None else None
        if settings.donor is not None and (named is None or named.cohort is None):
            known = ", ".join(sorted(n for n, cq in state.cluster_queues.items() if cq.cohort is not None)) or "none"
            raise ModelError(
                f"lane: donor ClusterQueue {settings.donor!r} is not a ClusterQueue in a cohort; choose from {known}"
            )
        cohorts = sorted({cq.cohort for cq in state.cluster_queues.values() if cq.cohort is not None})
        for cohort in cohorts:
            members = [cq for cq in state.cluster_queues.values() if cq.cohort == cohort]
            if named is not None and named.cohort == cohort:
                lender = named
            else:
                lender = max(sorted(members, key=lambda cq: cq.name), key=_gpus)
            name = f"{dns_label(cohort)[:45]}-relaunch-lane"
            donor, group, carved, donor_gpus = _carve(lender, settings.gpus)
            if carved == 0:
                continue
            cluster_queues[lender.name] = donor
            _add(cluster_queues, _lane_queue(name, cohort, group, settings))
            lanes.append(Lane(name, lender.name, carved, donor_gpus))
            for team, ref in teams.items():
                if state.cluster_queues[ref.cluster_queue].cohort == cohort:
                    lane_of[team] = name
    queues: dict[str, QueueRef] = {}
    capacity: dict[str, dict[str, int]] = {}
    for team, lane_cq in lane_of.items():
        namespace = teams[team].namespace
        key = f"{namespace}/{LANE_LOCAL_QUEUE}"
        existing = local_queues.get(key)
        if existing is not None and existing.cluster_queue != lane_cq:
            raise ModelError(f"lane: LocalQueue {key} exists and points at {existing.cluster_queue!r}")
        local_queues[key] = o.LocalQueue(namespace=namespace, name=LANE_LOCAL_QUEUE, cluster_queue=lane_cq)
        queues[team] = QueueRef(namespace, LANE_LOCAL_QUEUE, lane_cq)
        flavor = cluster_queues[lane_cq].resource_groups[0].flavors[0]
        capacity[team] = {resource: quota.nominal for resource, quota in flavor.resources.items()}
    result = replace(state, cluster_queues=cluster_queues, local_queues=local_queues)
    validate_state(result)
    return LanePlan(state=result, lanes=tuple(lanes), queues=queues, capacity=capacity)


def _add(cluster_queues: dict[str, o.ClusterQueue], cq: o.ClusterQueue) -> None:
    if cq.name in cluster_queues:
        raise ModelError(f"lane: a ClusterQueue named {cq.name!r} exists already")
    cluster_queues[cq.name] = cq

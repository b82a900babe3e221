"""Kueue's admission rules for its objects (webhooks and CRD CEL rules), and cross-references.

A prediction built on an object Kueue would have rejected is meaningless, so the model
refuses such input with a message naming the object and the field, the way the API
server would: ``ClusterQueue team-a-cq: spec.resourceGroups[0].flavors[0].resources[1].name:
must match the name in coveredResources``. The rules follow
``pkg/webhooks/clusterqueue_webhook.go``, ``pkg/webhooks/cohort_webhook.go``,
``pkg/webhooks/common.go`` and the ``+kubebuilder:validation`` markers of the v1beta1 types.
"""

from __future__ import annotations

from decimal import Decimal

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError

#: ``fairSharing.weight`` must be 0 or above this (``pkg/webhooks/common.go``).
MIN_POSITIVE_FAIR_WEIGHT = Decimal("1e-9")
MAX_RESOURCE_GROUPS = 16
MAX_FLAVORS_PER_GROUP = 64
MAX_POD_SETS = 18


def _groups_errors(groups: tuple[o.ResourceGroup, ...], has_parent: bool, is_cohort: bool, where: str) -> list[str]:
    errors: list[str] = []
    if len(groups) > MAX_RESOURCE_GROUPS:
        errors.append(f"{where}: spec.resourceGroups: must have at most {MAX_RESOURCE_GROUPS} items")
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    limit_parent = "parent" if is_cohort else "cohort"
    for gi, group in enumerate(groups):
        gpath = f"spec.resourceGroups[{gi}]"
        if not group.covered_resources:
            errors.append(f"{where}: {gpath}.coveredResources: must have at least 1 item")
        if not group.flavors:
            errors.append(f"{where}: {gpath}.flavors: must have at least 1 item")
        if len(group.flavors) > MAX_FLAVORS_PER_GROUP:
            errors.append(f"{where}: {gpath}.flavors: must have at most {MAX_FLAVORS_PER_GROUP} items")
        for ri, res in enumerate(group.covered_resources):
            if res in seen_resources:
                errors.append(f"{where}: {gpath}.coveredResources[{ri}]: Duplicate value: {res!r}")
            seen_resources.add(res)
        for fi, flavor in enumerate(group.flavors):
            fpath = f"{gpath}.flavors[{fi}]"
            if flavor.name in seen_flavors:
                errors.append(f"{where}: {fpath}.name: Duplicate value: {flavor.name!r}")
            seen_flavors.add(flavor.name)
            if len(flavor.resources) != len(group.covered_resources):
                errors.append(
                    f"{where}: {fpath}: flavors must have the same number of resources as the coveredResources"
                )
            for ri, (name, quota) in enumerate(flavor.resources.items()):
                if ri >= len(group.covered_resources):
                    break
                rpath = f"{fpath}.resources[{ri}]"
                if name != group.covered_resources[ri]:
                    errors.append(f"{where}: {rpath}.name: must match the name in coveredResources ({name!r})")
                if quota.nominal < 0:
                    errors.append(f"{where}: {rpath}.nominalQuota: must be greater than or equal to 0")
                if quota.borrowing_limit is not None:
                    if not has_parent:
                        errors.append(f"{where}: {rpath}.borrowingLimit: must be nil when {limit_parent} is empty")
                    if quota.borrowing_limit < 0:
                        errors.append(f"{where}: {rpath}.borrowingLimit: must be greater than or equal to 0")
                if quota.lending_limit is not None:
                    if quota.lending_limit < 0:
                        errors.append(f"{where}: {rpath}.lendingLimit: must be greater than or equal to 0")
                    if not has_parent:
                        errors.append(f"{where}: {rpath}.lendingLimit: must be nil when {limit_parent} is empty")
                    if not is_cohort and quota.lending_limit > quota.nominal:
                        errors.append(f"{where}: {rpath}.lendingLimit: must be less than or equal to the nominalQuota")
    return errors


def _weight_errors(weight: Decimal, where: str) -> list[str]:
    if weight != 0 and weight < MIN_POSITIVE_FAIR_WEIGHT:
        return [f"{where}: spec.fairSharing.weight: must be 0 or greater than 0.000000001"]
    return []


def cluster_queue_errors(cq: o.ClusterQueue) -> list[str]:
    where = f"ClusterQueue {cq.name}"
    errors = _groups_errors(cq.resource_groups, cq.cohort is not None, False, where)
    p = cq.preemption
    if (
        p.reclaim_within_cohort is o.PreemptionPolicy.NEVER
        and p.borrow_within_cohort is not o.BorrowWithinCohortPolicy.NEVER
    ):
        errors.append(f"{where}: spec.preemption: reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    if p.reclaim_within_cohort is o.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        errors.append(f"{where}: spec.preemption.reclaimWithinCohort: unsupported value LowerOrNewerEqualPriority")
    f = cq.flavor_fungibility
    if f.preference is not None and (
        f.when_can_borrow is not o.FungibilityPolicy.TRY_NEXT_FLAVOR
        or f.when_can_preempt is not o.FungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        errors.append(
            f"{where}: spec.flavorFungibility.preference: preference {f.preference.value!r} requires both "
            "whenCanBorrow and whenCanPreempt to be TryNextFlavor"
        )
    errors.extend(_weight_errors(cq.fair_weight, where))
    return errors


def cohort_errors(cohort: o.Cohort) -> list[str]:
    where = f"Cohort {cohort.name}"
    errors = _groups_errors(cohort.resource_groups, cohort.parent is not None, True, where)
    errors.extend(_weight_errors(cohort.fair_weight, where))
    return errors


def workload_errors(wl: o.Workload, state: o.ClusterState) -> list[str]:
    where = f"Workload {wl.key}"
    errors: list[str] = []
    if not wl.pod_sets:
        errors.append(f"{where}: spec.podSets: must have at least 1 item")
    if len(wl.pod_sets) > MAX_POD_SETS:
        errors.append(f"{where}: spec.podSets: must have at most {MAX_POD_SETS} items")
    names: set[str] = set()
    for i, ps in enumerate(wl.pod_sets):
        if ps.name in names:
            errors.append(f"{where}: spec.podSets[{i}].name: Duplicate value: {ps.name!r}")
        names.add(ps.name)
        if ps.min_count is not None and (ps.min_count < 1 or ps.min_count > ps.count):
            errors.append(
                f"{where}: spec.podSets[{i}].minCount: minCount should be positive and less or equal to count"
            )
    if (
        wl.priority_class_name
        and wl.priority_class_source == o.WORKLOAD_PRIORITY_CLASS_SOURCE
        and wl.priority_class_name not in state.priority_classes
    ):
        errors.append(f"{where}: spec.priorityClassName: WorkloadPriorityClass {wl.priority_class_name!r} not found")
    if wl.admission is not None and wl.has_quota_reservation:
        if wl.admission.cluster_queue not in state.cluster_queues:
            errors.append(
                f"{where}: status.admission.clusterQueue: ClusterQueue {wl.admission.cluster_queue!r} not found"
            )
        if len(wl.admission.pod_set_assignments) != len(wl.pod_sets):
            errors.append(
                f"{where}: status.admission: podSetAssignments must have the same number of podSets as the spec"
            )
    else:
        if not wl.queue_name:
            errors.append(f"{where}: spec.queueName: a pending workload must name a LocalQueue")
        elif state.local_queue_for(wl) is None:
            errors.append(f"{where}: spec.queueName: LocalQueue {wl.namespace}/{wl.queue_name} not found")
    return errors


#: Deepest cohort hierarchy accepted (levels from a Cohort up to its root). Kueue sets no
#: limit, but real hierarchies are a few levels deep, and the quota-tree walks of
#: :mod:`sky_kueue.kueue.tree` go once per level (recursively, in the scheduling loop).
MAX_COHORT_DEPTH = 100
#: Cohort names a cycle message lists before it abbreviates (the message stays one line).
MAX_CYCLE_NAMES_SHOWN = 8
_IN_CYCLE = -1


def _cohort_depths(state: o.ClusterState) -> tuple[list[str], dict[str, int]]:
    """Cycle errors, and each cohort's depth (1 for a root), in one pass linear in the cohorts.

    Each cohort's chain is followed until it reaches a root or a cohort already measured, so
    every parent link is followed once (a 3,000-deep chain once took 35 s here, issue 17).
    """
    errors: list[str] = []
    depths: dict[str, int] = {}
    for name in sorted(state.cohorts):
        path: list[str] = []
        position: dict[str, int] = {}
        node: str | None = name
        while node is not None and node not in depths:
            if node in position:
                cycle = [*path[position[node] :], node]
                if len(cycle) > MAX_CYCLE_NAMES_SHOWN:
                    cycle = [*cycle[: MAX_CYCLE_NAMES_SHOWN - 1], f"... ({len(cycle) - 1} cohorts)", node]
                errors.append(f"Cohort {node}: spec.parentName: cycle in the cohort tree ({' -> '.join(cycle)})")
                break
            position[node] = len(path)
            path.append(node)
            spec = state.cohorts.get(node)
            node = spec.parent if spec is not None else None
        base = depths[node] if node is not None and node in depths else (0 if node is None else _IN_CYCLE)
        for member in reversed(path):
            base = _IN_CYCLE if base == _IN_CYCLE else base + 1
            depths[member] = base
    return errors, depths


def cohort_depth_errors(state: o.ClusterState) -> list[str]:
    """At most one error: the first Cohort (by name) deeper than :data:`MAX_COHORT_DEPTH`."""
    _, depths = _cohort_depths(state)
    return _depth_errors(depths)


def _depth_errors(depths: dict[str, int]) -> list[str]:
    for name in sorted(depths):
        if depths[name] > MAX_COHORT_DEPTH:
            return [
                f"Cohort {name}: spec.parentName: {depths[name]} levels up to the root of its cohort tree; "
                f"at most {MAX_COHORT_DEPTH} are supported"
            ]
    return []


def cohort_cycle_errors(state: o.ClusterState) -> list[str]:
    """Cycles in the cohort tree, and a hierarchy deeper than :data:`MAX_COHORT_DEPTH`."""
    errors, depths = _cohort_depths(state)
    return errors + _depth_errors(depths)


def reference_errors(state: o.ClusterState) -> list[str]:
    """Cross-object references Kueue needs to schedule: LocalQueue -> ClusterQueue."""
    errors = []
    for key, lq in sorted(state.local_queues.items()):
        if lq.cluster_queue not in state.cluster_queues:
            errors.append(f"LocalQueue {key}: spec.clusterQueue: ClusterQueue {lq.cluster_queue!r} not found")
    return errors


def state_errors(state: o.ClusterState) -> list[str]:
    errors: list[str] = []
    for cq in state.cluster_queues.values():
        errors.extend(cluster_queue_errors(cq))
    for cohort in state.cohorts.values():
        errors.extend(cohort_errors(cohort))
    errors.extend(cohort_cycle_errors(state))
    errors.extend(reference_errors(state))
    for wl in state.workloads.values():
        errors.extend(workload_errors(wl, state))
    return errors


def validate_state(state: o.ClusterState) -> None:
    """Raise :class:`ModelError` for the first problem (and say how many more there are)."""
    errors = state_errors(state)
    if errors:
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        raise ModelError(errors[0] + more)

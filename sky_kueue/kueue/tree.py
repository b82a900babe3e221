"""Quota arithmetic over the cohort tree (Kueue's ``pkg/cache/scheduler/resource_node.go``).

Every ClusterQueue (a leaf) and Cohort (an inner node) is a :class:`QuotaNode` holding, per
flavor/resource pair (FR):

* ``subtree_quota``: for a CQ its nominal quota; for a Cohort its own nominal quota plus
  what each child lends up (the child's subtree quota minus its ``local_quota``);
* ``usage``: for a CQ the usage of its quota holders; for a Cohort the part of each
  child's usage that exceeds the child's ``local_quota``.

``local_quota`` is what a node keeps for itself when it has a ``lendingLimit``; without
one, all of a node's quota is "stored in the parent", so a lone flat cohort behaves as one
shared pool. From these two numbers follow what a CQ can take now (:func:`available`),
what it could ever take (:func:`potential_available`), whether it borrows, and how far up
the tree a request must reach (:func:`lowest_subtree_that_fits`), which Kueue uses to rank
flavors and heads.

The :class:`Snapshot` is the per-cycle copy the scheduler mutates while it simulates
admissions and preemptions; usage changes propagate up the tree exactly as Kueue's
``addUsage``/``removeUsage`` do.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.objects import FR


@dataclass
class QuotaNode:
    """A ClusterQueue or a Cohort in a snapshot."""

    name: str
    quotas: dict[FR, o.ResourceQuota]
    subtree_quota: dict[FR, int] = field(default_factory=dict)
    usage: dict[FR, int] = field(default_factory=dict)
    parent: CohortNode | None = None

    def local_quota(self, fr: FR) -> int:
        quota = self.quotas.get(fr)
        if quota is not None and quota.lending_limit is not None:
            return max(0, self.subtree_quota.get(fr, 0) - quota.lending_limit)
        return 0

    def local_available(self, fr: FR) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def borrowing_with(self, fr: FR, value: int) -> bool:
        """Whether usage plus ``value`` exceeds this node's subtree quota."""
        return self.subtree_quota.get(fr, 0) < self.usage.get(fr, 0) + value

    def borrowing(self, fr: FR) -> bool:
        return self.borrowing_with(fr, 0)

    def within_quota(self, frs: Iterator[FR] | set[FR] | frozenset[FR]) -> bool:
        """Kueue's ``IsWithinNominalInResources``: usage <= subtree quota for every fr.

        A loop, not ``all()`` over a generator, which costs a frame per call: the preemption
        search asks it for every queue it walks."""
        quota = self.subtree_quota
        usage = self.usage
        for fr in frs:  # noqa: SIM110
            if quota.get(fr, 0) < usage.get(fr, 0):
                return False
        return True

    def path_to_root(self) -> Iterator[CohortNode]:
        node = self.parent
        while node is not None:
            yield node
            node = node.parent


@dataclass
class CohortNode(QuotaNode):
    """A Cohort in a snapshot: the usage its children store beyond their own quota."""

    child_cohorts: list[CohortNode] = field(default_factory=list)
    child_cqs: list[ClusterQueueNode] = field(default_factory=list)
    fair_weight: float = 1.0
    _height: int | None = None

    def root(self) -> CohortNode:
        node = self
        while node.parent is not None:
            node = node.parent
        return node

    def height(self) -> int:
        """Distance to the deepest leaf below (Kueue's ``getNodeHeight``)."""
        if self._height is None:
            height = min(len(self.child_cohorts) + len(self.child_cqs), 1)
            for child in self.child_cohorts:
                height = max(height, child.height() + 1)
            self._height = height
        return self._height

    def subtree_cluster_queues(self) -> list[ClusterQueueNode]:
        result = list(self.child_cqs)
        for child in self.child_cohorts:
            result.extend(child.subtree_cluster_queues())
        return result


@dataclass
class ClusterQueueNode(QuotaNode):
    """A ClusterQueue in a snapshot: a leaf of the quota tree."""

    spec: o.ClusterQueue | None = None
    active: bool = True

    def nominal(self, fr: FR) -> int:
        quota = self.quotas.get(fr)
        return quota.nominal if quota is not None else 0


def available(node: QuotaNode, fr: FR) -> int:
    """What ``node`` can still take for ``fr``, borrowing included (may be negative)."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        lq = node.local_quota(fr)
        stored_in_parent = node.subtree_quota.get(fr, 0) - lq
        used_in_parent = max(0, node.usage.get(fr, 0) - lq)
        parent_available = min(stored_in_parent - used_in_parent + quota.borrowing_limit, parent_available)
    return node.local_available(fr) + parent_available


def cq_available(node: ClusterQueueNode, fr: FR) -> int:
    """Kueue's ``ClusterQueueSnapshot.Available``: never negative."""
    return max(0, available(node, fr))


def potential_available(node: QuotaNode, fr: FR) -> int:
    """The most ``node`` could ever hold for ``fr`` with nothing else running."""
    if node.parent is None:
        return node.subtree_quota.get(fr, 0)
    result = node.local_quota(fr) + potential_available(node.parent, fr)
    quota = node.quotas.get(fr)
    if quota is not None and quota.borrowing_limit is not None:
        result = min(node.subtree_quota.get(fr, 0) + quota.borrowing_limit, result)
    return result


def add_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Add ``value`` to ``node``'s usage; what exceeds its local quota goes up to the parent.

    A loop rather than a recursion, with :meth:`QuotaNode.local_available` inlined: the
    preemption search adds and removes usage tens of thousands of times per prediction.
    """
    current: QuotaNode | None = node
    while current is not None:
        usage = current.usage
        used = usage.get(fr, 0)
        quota = current.quotas.get(fr)
        if quota is not None and quota.lending_limit is not None:
            local_available = max(0, max(0, current.subtree_quota.get(fr, 0) - quota.lending_limit) - used)
        else:
            local_available = 0
        usage[fr] = used + value
        if value <= local_available:
            return
        value -= local_available
        current = current.parent


def remove_usage(node: QuotaNode, fr: FR, value: int) -> None:
    """Remove ``value`` from ``node``'s usage, and from its ancestors the part stored there."""
    current: QuotaNode | None = node
    while current is not None:
        usage = current.usage
        used = usage.get(fr, 0)
        quota = current.quotas.get(fr)
        if quota is not None and quota.lending_limit is not None:
            stored_in_parent = used - max(0, current.subtree_quota.get(fr, 0) - quota.lending_limit)
        else:
            stored_in_parent = used
        usage[fr] = used - value
        if stored_in_parent <= 0:
            return
        value = min(value, stored_in_parent)
        current = current.parent


def quantities_fit_in_quota(node: QuotaNode, requests: Mapping[FR, int]) -> tuple[bool, dict[FR, int]]:
    """Whether ``requests`` fit in ``node``'s subtree quota, and what remains for the parent."""
    fits = True
    remaining: dict[FR, int] = {}
    for fr, value in requests.items():
        if node.subtree_quota.get(fr, 0) < node.usage.get(fr, 0) + value:
            fits = False
        remaining[fr] = max(0, value - node.local_available(fr))
    return fits, remaining


def lowest_subtree_that_fits(cq: ClusterQueueNode, fr: FR, value: int) -> tuple[int, bool]:
    """Height of the lowest Cohort on ``cq``'s path whose subtree can hold ``value``.

    Returns ``(height, may_reclaim_in_hierarchy)``; height 0 means no borrowing is needed
    (Kueue's ``FindHeightOfLowestSubtreeThatFits``).
    """
    if cq.parent is None or not cq.borrowing_with(fr, value):
        return 0, cq.parent is not None
    remaining = value - cq.local_available(fr)
    for node in cq.path_to_root():
        if not node.borrowing_with(fr, remaining):
            return node.height(), node.parent is not None
        remaining -= node.local_available(fr)
    return cq.parent.root().height(), False


def _accumulate(parent: CohortNode, child: QuotaNode) -> None:
    for fr, quota in child.subtree_quota.items():
        parent.subtree_quota[fr] = parent.subtree_quota.get(fr, 0) + quota - child.local_quota(fr)


def quotas_by_fr(groups: tuple[o.ResourceGroup, ...]) -> dict[FR, o.ResourceQuota]:
    """The quotas of a ClusterQueue's or Cohort's resource groups, per flavor/resource."""
    result: dict[FR, o.ResourceQuota] = {}
    for group in groups:
        for flavor in group.flavors:
            for resource, quota in flavor.resources.items():
                result[(flavor.name, resource)] = quota
    return result


@dataclass
class TreeShape:
    """The static part of the quota tree: nodes and their subtree quotas, no usage."""

    cqs: dict[str, ClusterQueueNode]
    cohorts: dict[str, CohortNode]


def build_tree(state: o.ClusterState, inactive: set[str]) -> TreeShape:
    """Build the quota tree of ``state`` with zero usage.

    ``inactive`` names ClusterQueues Kueue would not schedule (stopped, missing flavors);
    they still contribute their quota to their cohort, as in Kueue's cache.
    """
    cohorts: dict[str, CohortNode] = {}

    def cohort(name: str) -> CohortNode:
        node = cohorts.get(name)
        if node is None:
            spec = state.cohorts.get(name)
            quotas = quotas_by_fr(spec.resource_groups) if spec else {}
            node = CohortNode(
                name=name,
                quotas=quotas,
                fair_weight=float(spec.fair_weight) if spec else 1.0,
            )
            cohorts[name] = node
            if spec is not None and spec.parent:
                parent = cohort(spec.parent)
                node.parent = parent
                parent.child_cohorts.append(node)
        return node

    for name in sorted(state.cohorts):
        cohort(name)
    cqs: dict[str, ClusterQueueNode] = {}
    for name in sorted(state.cluster_queues):
        spec = state.cluster_queues[name]
        node = ClusterQueueNode(
            name=name, quotas=quotas_by_fr(spec.resource_groups), spec=spec, active=name not in inactive
        )
        node.subtree_quota = {fr: q.nominal for fr, q in node.quotas.items()}
        if spec.cohort:
            parent = cohort(spec.cohort)
            node.parent = parent
            parent.child_cqs.append(node)
        cqs[name] = node

    def fill(node: CohortNode) -> None:
        node.subtree_quota = {fr: q.nominal for fr, q in node.quotas.items()}
        for child in node.child_cohorts:
            fill(child)
            _accumulate(node, child)
        for cq in node.child_cqs:
            _accumulate(node, cq)

    for cohort_node in cohorts.values():
        if cohort_node.parent is None:
            fill(cohort_node)
    return TreeShape(cqs=cqs, cohorts=cohorts)

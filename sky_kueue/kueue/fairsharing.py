"""Fair sharing: dominant resource shares, the admission tournament and fair preemption.

Enabled by a ``fairSharing:`` block in Kueue's Configuration (``# kueue-config: fairSharing``
in a snapshot). Three things change (``pkg/cache/scheduler/fair_sharing.go``,
``pkg/scheduler/fair_sharing_iterator.go``, ``pkg/scheduler/preemption/fairsharing``):

* **Share.** A node that uses more than its subtree quota has a dominant resource share:
  the largest, over resources, of (borrowed amount x 1000 / what its parent could lend),
  divided by its ``fairSharing.weight``. A zero-weight node that borrows has an infinite
  share and loses to everyone but another zero-weight borrower.
* **Order of heads.** Instead of one global sort, each cohort runs a tournament among its
  children: a head whose subtree does not borrow on its requested flavors wins; then the
  lower share (counting the head's own usage); then priority; then time. The winner at the
  root is processed, and the tournament is run again on the mutated snapshot.
* **Preemption.** Candidates come from the preemptor's own queue and from every queue of
  the tree that borrows a contested flavor/resource. The queue with the highest share is
  chosen top-down; a candidate is taken if the preemptor stays within its nominal quota
  (``InCohortReclamation``), or if the preemptor's share after admission would not exceed the
  target's share after losing the candidate (``LessThanOrEqualToFinalShare``), or, as a
  second strategy, is below the target's current share (``LessThanInitialShare``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import preemption, tree
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.snapshot import Snapshot
from sky_kueue.kueue.workload import WorkloadInfo

if TYPE_CHECKING:
    from sky_kueue.kueue.scheduler import Engine, Entry

STRATEGY_LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "LessThanOrEqualToFinalShare"
STRATEGY_LESS_THAN_INITIAL_SHARE = "LessThanInitialShare"


@dataclass(frozen=True)
class DRS:
    """A dominant resource share (``schdcache.DRS``)."""

    weight: float
    ratio: float
    borrowing: bool = False
    borrowed_frs: tuple[FR, ...] = ()
    dominant_resource: str = ""

    @property
    def is_zero(self) -> bool:
        return self.ratio == 0

    @property
    def zero_weight_borrows(self) -> bool:
        return self.weight == 0 and not self.is_zero

    def weighted_share(self) -> float:
        if self.is_zero:
            return 0.0
        if self.weight == 0:
            return math.inf
        return self.ratio / self.weight

    def borrowing_on(self, requested: Mapping[FR, int]) -> bool:
        return any(requested.get(fr, 0) > 0 for fr in self.borrowed_frs)


NEGATIVE_DRS = DRS(weight=1.0, ratio=-1.0)


def _cmp(a: float, b: float) -> int:
    return (a > b) - (a < b)


def compare_drs(a: DRS, b: DRS) -> int:
    """Order shares; zero-weight borrowers sort after everything else (``CompareDRS``)."""
    if a.zero_weight_borrows and b.zero_weight_borrows:
        return _cmp(a.ratio, b.ratio)
    if a.zero_weight_borrows:
        return 1
    if b.zero_weight_borrows:
        return -1
    return _cmp(a.weighted_share(), b.weighted_share())


def node_weight(node: tree.QuotaNode) -> float:
    if isinstance(node, tree.ClusterQueueNode):
        assert node.spec is not None
        return float(node.spec.fair_weight)
    if isinstance(node, tree.CohortNode):
        return node.fair_weight
    return 1.0


def _lendable(parent: tree.CohortNode) -> dict[str, int]:
    root = parent.root()
    lendable: dict[str, int] = {}
    for fr in root.subtree_quota:
        lendable[fr[1]] = lendable.get(fr[1], 0) + tree.potential_available(parent, fr)
    return lendable


def dominant_resource_share(node: tree.QuotaNode, request: Mapping[FR, int] | None = None) -> DRS:
    """The share of ``node`` (optionally with an extra request), as Kueue computes it."""
    weight = node_weight(node)
    if node.parent is None:
        return DRS(weight=weight, ratio=0.0)
    borrowed: dict[str, int] = {}
    borrowed_frs: list[FR] = []
    extra = request or {}
    for fr, quota in node.subtree_quota.items():
        amount = extra.get(fr, 0) + node.usage.get(fr, 0) - quota
        if amount > 0:
            borrowed[fr[1]] = borrowed.get(fr[1], 0) + amount
            borrowed_frs.append(fr)
    if not borrowed:
        return DRS(weight=weight, ratio=0.0)
    lendable = _lendable(node.parent)
    ratio = 0.0
    dominant = ""
    for resource, amount in borrowed.items():
        lend = lendable.get(resource, 0)
        if lend > 0:
            value = float(amount) * 1000.0 / float(lend)
            if value > ratio or (value == ratio and resource < dominant):
                ratio, dominant = value, resource
    return DRS(weight=weight, ratio=ratio, borrowing=True, borrowed_frs=tuple(borrowed_frs), dominant_resource=dominant)


# --- admission order: the tournament ----------------------------------------------------


def tournament_order(engine: Engine, entries: list[Entry]) -> Iterator[Entry]:
    """Yield entries in fair-sharing order, recomputing shares after each processed one."""
    remaining: dict[str, Entry] = {e.cq: e for e in entries}
    while remaining:
        cq_name = next(iter(sorted(remaining)))
        node = engine.snapshot.cq(cq_name)
        if node.parent is None:
            yield remaining.pop(cq_name)
            continue
        root = node.parent.root()
        drs_values, requested = _compute_drs(engine.snapshot, root, remaining)
        winner = _run_tournament(root, remaining, drs_values, requested)
        assert winner is not None
        del remaining[winner.cq]
        yield winner


def _compute_drs(
    snapshot: Snapshot, root: tree.CohortNode, remaining: Mapping[str, Entry]
) -> tuple[dict[tuple[str, str], DRS], dict[str, dict[FR, int]]]:
    values: dict[tuple[str, str], DRS] = {}
    requested: dict[str, dict[FR, int]] = {}
    for cq in root.subtree_cluster_queues():
        entry = remaining.get(cq.name)
        if entry is None or entry.assignment is None:
            continue
        usage = entry.assignment.usage
        snapshot.add_usage(cq.name, usage)
        key = entry.info.key
        requested[key] = dict(usage)
        share = dominant_resource_share(cq)
        for ancestor in cq.path_to_root():
            values[(ancestor.name, key)] = share
            share = dominant_resource_share(ancestor)
        snapshot.remove_usage(cq.name, usage)
    return values, requested


def _run_tournament(
    cohort: tree.CohortNode,
    remaining: Mapping[str, Entry],
    drs_values: Mapping[tuple[str, str], DRS],
    requested: Mapping[str, Mapping[FR, int]],
) -> Entry | None:
    candidates: list[Entry] = []
    for child in cohort.child_cohorts:
        winner = _run_tournament(child, remaining, drs_values, requested)
        if winner is not None:
            candidates.append(winner)
    for cq in cohort.child_cqs:
        if cq.name in remaining:
            candidates.append(remaining[cq.name])
    if not candidates:
        return None
    best = candidates[0]
    for current in candidates[1:]:
        if _less(current, best, cohort.name, drs_values, requested):
            best = current
    return best


def _less(
    a: Entry,
    b: Entry,
    parent: str,
    drs_values: Mapping[tuple[str, str], DRS],
    requested: Mapping[str, Mapping[FR, int]],
) -> bool:
    a_drs = drs_values.get((parent, a.info.key), DRS(1.0, 0.0))
    b_drs = drs_values.get((parent, b.info.key), DRS(1.0, 0.0))
    a_borrowing = a_drs.borrowing_on(requested.get(a.info.key, {}))
    b_borrowing = b_drs.borrowing_on(requested.get(b.info.key, {}))
    if a_borrowing != b_borrowing:
        return not a_borrowing
    c = compare_drs(a_drs, b_drs)
    if c != 0:
        return c == -1
    if a.info.priority != b.info.priority:
        return a.info.priority > b.info.priority
    return a.info.qts < b.info.qts


# --- fair preemption --------------------------------------------------------------------


@dataclass
class _Ordering:
    """Chooses the ClusterQueue to take the next candidate from (``TargetClusterQueueOrdering``)."""

    snapshot: Snapshot
    preemptor_cq: tree.ClusterQueueNode
    candidates: dict[str, list[WorkloadInfo]]
    compare: functools.partial[int]
    ancestors: set[str] = field(default_factory=set)
    pruned_cqs: set[str] = field(default_factory=set)
    pruned_cohorts: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.ancestors = {a.name for a in self.preemptor_cq.path_to_root()}

    def has_workload(self, cq_name: str) -> bool:
        return bool(self.candidates.get(cq_name))

    def __iter__(self) -> Iterator[tree.ClusterQueueNode]:
        cq = self.preemptor_cq
        if cq.parent is None:
            while cq.name not in self.pruned_cqs and self.has_workload(cq.name):
                yield cq
            return
        root = cq.parent.root()
        while root.name not in self.pruned_cohorts:
            target = self._next(root)
            if target is not None:
                yield target

    def _next(self, cohort: tree.CohortNode) -> tree.ClusterQueueNode | None:
        highest_cq: tree.ClusterQueueNode | None = None
        highest_cq_drs = NEGATIVE_DRS
        for cq in cohort.child_cqs:
            if cq.name in self.pruned_cqs:
                continue
            drs = dominant_resource_share(cq)
            if (not drs.borrowing and cq is not self.preemptor_cq) or not self.has_workload(cq.name):
                self.pruned_cqs.add(cq.name)
                continue
            c = compare_drs(drs, highest_cq_drs)
            if c == 0 and highest_cq is not None:
                if self.compare(self.candidates[cq.name][0], self.candidates[highest_cq.name][0]) < 0:
                    highest_cq = cq
            elif c == 1:
                highest_cq_drs, highest_cq = drs, cq
        highest_cohort: tree.CohortNode | None = None
        highest_cohort_drs = NEGATIVE_DRS
        for child in cohort.child_cohorts:
            if child.name in self.pruned_cohorts:
                continue
            drs = dominant_resource_share(child)
            if not drs.borrowing and child.name not in self.ancestors:
                self.pruned_cohorts.add(child.name)
            elif compare_drs(drs, highest_cohort_drs) >= 0:
                highest_cohort_drs, highest_cohort = drs, child
        if highest_cohort is None and highest_cq is None:
            self.pruned_cohorts.add(cohort.name)
            return None
        if highest_cohort is not None and compare_drs(highest_cohort_drs, highest_cq_drs) >= 0:
            return self._next(highest_cohort)
        return highest_cq

    def pop(self, cq_name: str) -> WorkloadInfo:
        return self.candidates[cq_name].pop(0)

    def almost_lcas(self, target: tree.ClusterQueueNode) -> tuple[tree.QuotaNode, tree.QuotaNode]:
        lca = next(a for a in target.path_to_root() if a.name in self.ancestors)
        return _almost_lca(self.preemptor_cq, lca), _almost_lca(target, lca)


def _almost_lca(cq: tree.ClusterQueueNode, lca: tree.CohortNode) -> tree.QuotaNode:
    node: tree.QuotaNode = cq
    for ancestor in cq.path_to_root():
        if ancestor is lca:
            return node
        node = ancestor
    raise AssertionError("no lowest common ancestor")  # pragma: no cover - trees are validated


class FairPreemptor:
    """Fair-sharing target selection (``Preemptor.fairPreemptions``)."""

    def __init__(
        self,
        strategies: tuple[str, ...],
        candidate_cmp: preemption.CandidateCmp | None = None,
    ) -> None:
        self.strategies = strategies or (
            STRATEGY_LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
            STRATEGY_LESS_THAN_INITIAL_SHARE,
        )
        self.candidate_cmp = candidate_cmp

    def __call__(
        self,
        snapshot: Snapshot,
        preemptor: WorkloadInfo,
        cq_name: str,
        frs: frozenset[FR],
        requests: Mapping[FR, int],
        now: datetime,
    ) -> list[preemption.Target]:
        cq = snapshot.cq(cq_name)
        assert cq.spec is not None
        candidates = self._find_candidates(snapshot, preemptor, cq, frs)
        if not candidates:
            return []
        compare = functools.partial(
            self.candidate_cmp or preemption.default_candidate_cmp, preemptor_cq=cq_name, now=now
        )
        preemption.sort_candidates(candidates, _identity, cq_name, now, self.candidate_cmp)
        snapshot.add_usage(cq_name, requests)
        fits, targets, retry = self._first(snapshot, cq, candidates, compare, frs, requests, self.strategies[0])
        if not fits and len(self.strategies) > 1:
            fits, targets = self._second(snapshot, cq, retry, compare, requests, targets)
        snapshot.remove_usage(cq_name, requests)
        if not fits:
            for t in targets:
                snapshot.add_workload(t.info)
            return []
        search = preemption.FitCheck(snapshot, cq, requests)
        targets = search.fill_back(targets, True)
        for t in targets:
            snapshot.add_workload(t.info)
        return targets

    @staticmethod
    def _find_candidates(
        snapshot: Snapshot, preemptor: WorkloadInfo, cq: tree.ClusterQueueNode, frs: frozenset[FR]
    ) -> list[WorkloadInfo]:
        assert cq.spec is not None
        policy = cq.spec.preemption
        result: list[WorkloadInfo] = []
        if policy.within_cluster_queue is not o.PreemptionPolicy.NEVER:
            for info in snapshot.workloads.get(cq.name, {}).values():
                if preemption.satisfies_policy(preemptor, info, policy.within_cluster_queue) and info.uses_any(frs):
                    result.append(info)
        if cq.parent is not None and policy.reclaim_within_cohort is not o.PreemptionPolicy.NEVER:
            for other in cq.parent.root().subtree_cluster_queues():
                if other is cq or not other.active or other.parent is None:
                    continue
                if not any(other.borrowing(fr) for fr in frs):
                    continue
                for info in snapshot.workloads.get(other.name, {}).values():
                    if preemption.satisfies_policy(preemptor, info, policy.reclaim_within_cohort) and info.uses_any(
                        frs
                    ):
                        result.append(info)
        return result

    @staticmethod
    def _fits(snapshot: Snapshot, cq: tree.ClusterQueueNode, requests: Mapping[FR, int]) -> bool:
        snapshot.remove_usage(cq.name, requests)
        try:
            return preemption.FitCheck(snapshot, cq, requests).fits(True)
        finally:
            snapshot.add_usage(cq.name, requests)

    def _first(
        self,
        snapshot: Snapshot,
        cq: tree.ClusterQueueNode,
        candidates: list[WorkloadInfo],
        compare: functools.partial[int],
        frs: frozenset[FR],
        requests: Mapping[FR, int],
        strategy: str,
    ) -> tuple[bool, list[preemption.Target], list[WorkloadInfo]]:
        ordering = _Ordering(snapshot, cq, _by_cq(candidates), compare)
        targets: list[preemption.Target] = []
        retry: list[WorkloadInfo] = []
        within_nominal = all(not cq.borrowing(fr) for fr in frs)
        for target_cq in ordering:
            if target_cq is cq:
                info = ordering.pop(cq.name)
                snapshot.remove_workload(info)
                targets.append(preemption.Target(info, preemption.IN_CLUSTER_QUEUE))
                if self._fits(snapshot, cq, requests):
                    return True, targets, []
                continue
            if within_nominal:
                info = ordering.pop(target_cq.name)
                snapshot.remove_workload(info)
                targets.append(preemption.Target(info, preemption.IN_COHORT_RECLAMATION))
                if self._fits(snapshot, cq, requests):
                    return True, targets, []
                continue
            preemptor_alca, target_alca = ordering.almost_lcas(target_cq)
            preemptor_new = dominant_resource_share(preemptor_alca)
            target_old = dominant_resource_share(target_alca)
            if math.isinf(preemptor_new.weighted_share()) and not math.isinf(target_old.weighted_share()):
                while ordering.has_workload(target_cq.name):
                    retry.append(ordering.pop(target_cq.name))
                continue
            while ordering.has_workload(target_cq.name):
                info = ordering.pop(target_cq.name)
                snapshot.remove_usage(target_cq.name, info.usage)
                _, target_alca_after = ordering.almost_lcas(target_cq)
                target_new = dominant_resource_share(target_alca_after)
                snapshot.add_usage(target_cq.name, info.usage)
                if _passes(strategy, preemptor_new, target_old, target_new):
                    snapshot.remove_workload(info)
                    detail = (
                        f"{strategy}: preemptor share {_fmt(preemptor_new)} vs target share "
                        f"{_fmt(target_new)} after preemption"
                    )
                    targets.append(preemption.Target(info, preemption.IN_COHORT_FAIR_SHARING, detail))
                    if self._fits(snapshot, cq, requests):
                        return True, targets, []
                    break
                retry.append(info)
        return False, targets, retry

    def _second(
        self,
        snapshot: Snapshot,
        cq: tree.ClusterQueueNode,
        retry: list[WorkloadInfo],
        compare: functools.partial[int],
        requests: Mapping[FR, int],
        targets: list[preemption.Target],
    ) -> tuple[bool, list[preemption.Target]]:
        ordering = _Ordering(snapshot, cq, _by_cq(retry), compare)
        for target_cq in ordering:
            preemptor_alca, target_alca = ordering.almost_lcas(target_cq)
            preemptor_new = dominant_resource_share(preemptor_alca)
            target_old = dominant_resource_share(target_alca)
            passed = compare_drs(preemptor_new, target_old) < 0
            info = ordering.pop(target_cq.name)
            if passed:
                snapshot.remove_workload(info)
                detail = (
                    f"{STRATEGY_LESS_THAN_INITIAL_SHARE}: preemptor share {_fmt(preemptor_new)} vs target share "
                    f"{_fmt(target_old)}"
                )
                targets.append(preemption.Target(info, preemption.IN_COHORT_FAIR_SHARING, detail))
                if self._fits(snapshot, cq, requests):
                    return True, targets
            ordering.pruned_cqs.add(target_cq.name)
        return False, targets


def _fmt(drs: DRS) -> str:
    share = drs.weighted_share()
    return "inf" if math.isinf(share) else f"{share:.1f}"


def _passes(strategy: str, preemptor_new: DRS, target_old: DRS, target_new: DRS) -> bool:
    if strategy == STRATEGY_LESS_THAN_INITIAL_SHARE:
        return compare_drs(preemptor_new, target_old) < 0
    return compare_drs(preemptor_new, target_new) <= 0


def _identity(info: WorkloadInfo) -> WorkloadInfo:
    return info


def _by_cq(infos: Iterable[WorkloadInfo]) -> dict[str, list[WorkloadInfo]]:
    result: dict[str, list[WorkloadInfo]] = {}
    for info in infos:
        result.setdefault(info.cluster_queue, []).append(info)
    return result

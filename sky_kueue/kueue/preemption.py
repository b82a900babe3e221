"""Classical preemption: who is evicted to make room (``pkg/scheduler/preemption``).

Given a preemptor W in ClusterQueue C, the frs that need preemption (F) and W's full
usage (U), Kueue collects candidates:

* from C itself, under ``withinClusterQueue`` (reason ``InClusterQueue``);
* from the cohort tree, walking C's ancestors upward, only from subtrees and queues that
  are over their quota on F, under ``reclaimWithinCohort``. Once W's request fits in the
  quota of some subtree on its path, candidates that use that subtree's quota are
  "hierarchy" candidates (``InCohortReclamation``); before that they are "priority"
  candidates, governed by ``borrowWithinCohort`` (``InCohortReclaimWhileBorrowing``, only for
  strictly lower priority at or below ``maxPriorityThreshold``).

Candidates are ordered (evicted first, other queues before C, lower priority, most recently
admitted, UID) and removed greedily until W fits, in one or two passes (with and without
borrowing); then the set is minimised by putting back all but the last one where possible.
The same search, restricted to one fr, is the "oracle" that tells the flavor assigner
whether a flavor is reachable by preemption (:func:`simulate_preemption`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import IntEnum
from typing import TypeVar

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import tree
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.snapshot import Snapshot
from sky_kueue.kueue.workload import WorkloadInfo

IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"
IN_COHORT_FAIR_SHARING = "InCohortFairSharing"

#: Human-readable reasons used in the Preempted condition message.
HUMAN_READABLE_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    IN_COHORT_FAIR_SHARING: "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
}


class Variant(IntEnum):
    NEVER = 0
    WITHIN_CQ = 1
    HIERARCHICAL_RECLAIM = 2
    RECLAIM_WITHOUT_BORROWING = 3
    RECLAIM_WHILE_BORROWING = 4

    @property
    def reason(self) -> str:
        if self is Variant.WITHIN_CQ:
            return IN_CLUSTER_QUEUE
        if self is Variant.RECLAIM_WHILE_BORROWING:
            return IN_COHORT_RECLAIM_WHILE_BORROWING
        return IN_COHORT_RECLAMATION


class Possibility(IntEnum):
    """What the oracle found for one flavor/resource."""

    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3


@dataclass
class Target:
    """A workload a preemptor would evict, and the reason Kueue records."""

    info: WorkloadInfo
    reason: str
    #: why, in words (fair sharing: the shares that were compared)
    detail: str = ""


@dataclass
class _Candidate:
    """An admitted workload the preemptor may evict, with its lowest common cohort and pass."""

    info: WorkloadInfo
    lca: tree.CohortNode | None
    variant: Variant


def satisfies_policy(preemptor: WorkloadInfo, candidate: WorkloadInfo, policy: o.PreemptionPolicy) -> bool:
    """``SatisfiesPreemptionPolicy``: may ``preemptor`` evict ``candidate`` under ``policy``?"""
    lower = preemptor.priority > candidate.priority
    if policy is o.PreemptionPolicy.LOWER_PRIORITY:
        return lower
    if policy is o.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return lower or (preemptor.priority == candidate.priority and preemptor.qts < candidate.qts)
    return policy is o.PreemptionPolicy.ANY


CandidateCmp = Callable[..., int]
_T = TypeVar("_T")


def _cmp(a: object, b: object) -> int:
    return (a > b) - (a < b)  # type: ignore[operator]


def default_candidate_cmp(
    a: WorkloadInfo,
    b: WorkloadInfo,
    preemptor_cq: str,
    now: datetime,
    lq_usage: Callable[[WorkloadInfo], float | None] | None = None,
) -> int:
    """Kueue's ``CandidatesOrdering``: negative when ``a`` should be preempted first.

    Evicted workloads first (they are leaving anyway), then workloads of other queues, then
    (admission fair sharing, same queue, different LocalQueues) the heavier LocalQueue, then
    lower priority, then the most recently admitted, then UID.
    """
    if a.evicted != b.evicted:
        return -1 if a.evicted else 1
    a_own, b_own = a.cluster_queue == preemptor_cq, b.cluster_queue == preemptor_cq
    if a_own != b_own:
        return 1 if a_own else -1
    if lq_usage is not None and a.cluster_queue == b.cluster_queue and a.obj.queue_name != b.obj.queue_name:
        ua, ub = lq_usage(a), lq_usage(b)
        if ua is not None and ub is not None and ua != ub:
            return _cmp(ub, ua)
    if a.priority != b.priority:
        return _cmp(a.priority, b.priority)
    ra, rb = a.reserved_at or now, b.reserved_at or now
    if ra != rb:
        return _cmp(rb, ra)
    return _cmp(a.uid, b.uid)


def candidate_sort_key(info: WorkloadInfo, preemptor_cq: str, now: datetime) -> tuple[object, ...]:
    """:func:`default_candidate_cmp` without LocalQueue usage, as a sort key (much faster)."""
    reserved = info.reserved_at or now
    return (
        0 if info.evicted else 1,
        1 if info.cluster_queue == preemptor_cq else 0,
        info.priority,
        -reserved.timestamp(),
        info.uid,
    )


def sort_candidates(
    items: list[_T],
    info_of: Callable[[_T], WorkloadInfo],
    preemptor_cq: str,
    now: datetime,
    candidate_cmp: CandidateCmp | None,
) -> None:
    """Sort preemption candidates in Kueue's order (in place)."""
    if candidate_cmp is None:

        def key(item: _T) -> tuple[object, ...]:
            return candidate_sort_key(info_of(item), preemptor_cq, now)

        items.sort(key=key)
        return
    compare = functools.partial(candidate_cmp, preemptor_cq=preemptor_cq, now=now)

    def by_info(x: _T, y: _T) -> int:
        return int(compare(info_of(x), info_of(y)))

    items.sort(key=functools.cmp_to_key(by_info))


def _borrowing_forbidden(cq: o.ClusterQueue) -> bool:
    return cq.preemption.borrow_within_cohort is o.BorrowWithinCohortPolicy.NEVER


def _info_of(candidate: _Candidate) -> WorkloadInfo:
    return candidate.info


class _Sums:
    """Candidates of some queues summed (:meth:`_Search._add_sums`): how many, their usage of the
    requested flavor/resources, the part of it not of variant ``RECLAIM_WITHOUT_BORROWING``, and
    whether any was found where the preemptor's request fits (``hierarchy``) or by priority."""

    __slots__ = ("count", "every", "hierarchy", "kept", "priority")

    def __init__(self, every: dict[FR, int], kept: dict[FR, int]) -> None:
        self.count = 0
        self.every = every
        self.kept = kept
        self.hierarchy = False
        self.priority = False


class FitCheck:
    """Does the preemptor fit in its ClusterQueue once some candidates are gone?"""

    def __init__(self, snapshot: Snapshot, cq: tree.ClusterQueueNode, requests: Mapping[FR, int]) -> None:
        self.snapshot = snapshot
        self.cq = cq
        self.requests = requests

    def fits(self, allow_borrowing: bool) -> bool:
        for fr, value in self.requests.items():
            if not allow_borrowing and self.cq.borrowing_with(fr, value):
                return False
            if value > tree.cq_available(self.cq, fr):
                return False
        return True

    def take(self, info: WorkloadInfo) -> None:
        """Remove a candidate from the snapshot while the search tries it."""
        self.snapshot.remove_workload(info)

    def put(self, info: WorkloadInfo) -> None:
        """Undo :meth:`take`."""
        self.snapshot.add_workload(info)

    def fill_back(self, targets: list[Target], allow_borrowing: bool) -> list[Target]:
        for i in range(len(targets) - 2, -1, -1):
            self.put(targets[i].info)
            if self.fits(allow_borrowing):
                targets[i] = targets[-1]
                targets.pop()
            else:
                self.take(targets[i].info)
        return targets


class _Search(FitCheck):
    """One run of the classical target search for one preemptor."""

    def __init__(
        self,
        snapshot: Snapshot,
        preemptor: WorkloadInfo,
        cq: tree.ClusterQueueNode,
        frs: frozenset[FR],
        requests: Mapping[FR, int],
        now: datetime,
        candidate_cmp: CandidateCmp | None = None,
    ) -> None:
        assert cq.spec is not None
        super().__init__(snapshot, cq, requests)
        self.candidate_cmp = candidate_cmp
        self.preemptor = preemptor
        self.spec = cq.spec
        self.frs = frs
        self.now = now

    def take(self, info: WorkloadInfo) -> None:
        """Only the candidate's usage: what the search asks while it tries candidates (whether
        the preemptor fits, whether a queue is within its quota) reads usage alone, and every
        candidate taken is put back before :meth:`run` returns. So the holders stay as they are
        (and in their order), and the snapshot's sums need no update for each try."""
        self.snapshot.remove_usage(info.cluster_queue, info.usage)

    def put(self, info: WorkloadInfo) -> None:
        self.snapshot.add_usage(info.cluster_queue, info.usage)

    # --- classification -------------------------------------------------------------

    def _from_cq(self, cq: tree.ClusterQueueNode, lca: tree.CohortNode | None, advantage: bool) -> list[_Candidate]:
        """The admitted workloads of ``cq`` the preemptor may evict, with their variant.

        One tight loop over the queue's workloads: the policy decides eligibility, and the
        variant (which pass and reason a candidate belongs to) is the same for the whole
        queue except for the priority threshold of reclaim-while-borrowing.
        """
        workloads = self.snapshot.workloads.get(cq.name)
        if not workloads:
            return []
        preemption = self.spec.preemption
        same_cq = cq is self.cq
        policy = preemption.within_cluster_queue if same_cq else preemption.reclaim_within_cohort
        if policy is o.PreemptionPolicy.NEVER:
            return []
        frs = self.frs
        preemptor = self.preemptor
        mine = preemptor.priority
        lower_only = policy is o.PreemptionPolicy.LOWER_PRIORITY
        newer_equal = policy is o.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
        if same_cq:
            fixed: Variant | None = Variant.WITHIN_CQ
        elif advantage:
            fixed = Variant.HIERARCHICAL_RECLAIM
        elif _borrowing_forbidden(self.spec):
            fixed = Variant.RECLAIM_WITHOUT_BORROWING
        else:
            fixed = None
        threshold = preemption.max_priority_threshold
        result = []
        for info in workloads.values():
            priority = info.priority
            if lower_only:
                if priority >= mine:
                    continue
            elif newer_equal and not (priority < mine or (priority == mine and preemptor.qts < info.qts)):
                continue
            if info.assigned_frs().isdisjoint(frs):
                continue
            if fixed is not None:
                variant = fixed
            elif priority >= mine or (threshold is not None and priority > threshold):
                variant = Variant.RECLAIM_WITHOUT_BORROWING
            else:
                variant = Variant.RECLAIM_WHILE_BORROWING
            result.append(_Candidate(info, lca, variant))
        return result

    def _in_subtree(
        self,
        cohort: tree.CohortNode,
        subtree_root: tree.CohortNode,
        skip: tree.CohortNode | None,
        advantage: bool,
        out: list[_Candidate],
    ) -> None:
        for child in cohort.child_cohorts:
            if child is skip or child.within_quota(self.frs):
                continue
            self._in_subtree(child, subtree_root, skip, advantage, out)
        for child_cq in cohort.child_cqs:
            if child_cq is self.cq or not child_cq.active:
                continue
            if not child_cq.within_quota(self.frs):
                out.extend(self._from_cq(child_cq, subtree_root, advantage))

    def collect(self) -> tuple[list[_Candidate], list[_Candidate], list[_Candidate]]:
        """Unordered candidates: this queue's, hierarchical reclaims, priority-based reclaims."""
        same: list[_Candidate] = []
        if self.spec.preemption.within_cluster_queue is not o.PreemptionPolicy.NEVER:
            same = self._from_cq(self.cq, None, False)
        hierarchy: list[_Candidate] = []
        priority: list[_Candidate] = []
        if self.cq.parent is not None and self.spec.preemption.reclaim_within_cohort is not o.PreemptionPolicy.NEVER:
            advantage, remaining = tree.quantities_fit_in_quota(self.cq, self.requests)
            previous: tree.CohortNode | None = None
            for ancestor in self.cq.path_to_root():
                target = hierarchy if advantage else priority
                self._in_subtree(ancestor, ancestor, previous, advantage, target)
                fits, remaining = tree.quantities_fit_in_quota(ancestor, remaining)
                advantage = advantage or fits
                previous = ancestor
        return same, hierarchy, priority

    def order(
        self, same: list[_Candidate], hierarchy: list[_Candidate], priority: list[_Candidate]
    ) -> list[_Candidate]:
        """Kueue's candidate order: evicted first, then hierarchy, priority, own queue.

        Without a custom comparison each list is sorted by :meth:`WorkloadInfo.candidate_order`:
        :func:`candidate_sort_key` less its own-queue term, the same for every candidate of one
        list (``same`` holds the preemptor's queue only, the others never hold it).
        """
        now = self.now
        for lst in (same, hierarchy, priority):
            if self.candidate_cmp is None:
                lst.sort(key=lambda candidate: candidate.info.candidate_order(now))
            else:
                sort_candidates(lst, _info_of, self.cq.name, now, self.candidate_cmp)
        return (
            [c for c in hierarchy if c.info.evicted]
            + [c for c in priority if c.info.evicted]
            + [c for c in same if c.info.evicted]
            + [c for c in hierarchy if not c.info.evicted]
            + [c for c in priority if not c.info.evicted]
            + [c for c in same if not c.info.evicted]
        )

    # --- search ---------------------------------------------------------------------

    def _valid(self, candidate: _Candidate, allow_borrowing: bool) -> bool:
        if candidate.info.cluster_queue == self.cq.name:
            return True
        if allow_borrowing and candidate.variant is Variant.RECLAIM_WITHOUT_BORROWING:
            return False
        return self._valid_group(self.snapshot.cq(candidate.info.cluster_queue), candidate.lca)

    def _cannot_fit(self, candidates: list[_Candidate], allow_borrowing: bool) -> bool:
        """Whether a pass must fail even if it removed every candidate valid now.

        An exact shortcut, not a heuristic: a pass removes only candidates that are valid
        when reached, and validity only ever turns off as usage falls, so it removes a
        subset of those valid now. Removing one unit of usage anywhere in the tree raises
        the ClusterQueue's available quota by at most one unit, and only removals from the
        ClusterQueue itself lower its own usage. So if the preemptor does not fit with
        ``available + (usage of every valid candidate)``, or would still borrow after its
        own queue's valid candidates left (when borrowing is not allowed), no pass order
        can make it fit, and the search that removes and restores each candidate in turn
        (most of the cost of a failed preemption) is skipped.
        """
        requested = tuple(self.requests)  # only these frs are compared below
        freed: dict[FR, int] = dict.fromkeys(requested, 0)
        own: dict[FR, int] = dict.fromkeys(requested, 0)
        borrowing_queue: dict[tuple[str, int], bool] = {}  # the tree does not change here
        for cand in candidates:
            same = cand.info.cluster_queue == self.cq.name
            if not same:
                if allow_borrowing and cand.variant is Variant.RECLAIM_WITHOUT_BORROWING:
                    continue
                key = (cand.info.cluster_queue, id(cand.lca))
                valid = borrowing_queue.get(key)
                if valid is None:
                    valid = borrowing_queue[key] = self._valid(cand, allow_borrowing=False)
                if not valid:
                    continue
            usage = cand.info.usage
            for fr in requested:
                value = usage.get(fr)
                if value:
                    freed[fr] += value
                    if same:
                        own[fr] += value
        for fr, value in self.requests.items():
            if value > tree.cq_available(self.cq, fr) + freed[fr]:
                return True
            if not allow_borrowing and self.cq.borrowing_with(fr, value - own[fr]):
                return True
        return False

    def _under_nominal(self) -> bool:
        return all(self.cq.nominal(fr) > self.cq.usage.get(fr, 0) for fr in self.frs)

    # --- the same verdict from the holders' sums ------------------------------------

    def _add_sums(self, cq: tree.ClusterQueueNode, same_cq: bool, advantage: bool, into: _Sums) -> bool:
        """Adds what :meth:`_from_cq` would return for ``cq``, summed, to ``into``: the number of
        candidates and their usage of the requested flavor/resources (``every``), and the part not
        of variant ``RECLAIM_WITHOUT_BORROWING`` (``kept``). False when a candidate's eligibility
        depends on more than its priority (``LowerOrNewerEqualPriority`` compares creation times)."""
        preemption = self.spec.preemption
        policy = preemption.within_cluster_queue if same_cq else preemption.reclaim_within_cohort
        if policy is o.PreemptionPolicy.NEVER:
            return True
        if policy is o.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY:
            return False
        buckets = self.snapshot.buckets.get(cq.name)
        if not buckets:
            return True
        lower_only = policy is o.PreemptionPolicy.LOWER_PRIORITY
        mine = self.preemptor.priority
        fixed: bool | None  # whether every candidate is RECLAIM_WITHOUT_BORROWING (None: by priority)
        if same_cq or advantage:
            fixed = False
        elif _borrowing_forbidden(self.spec):
            fixed = True
        else:
            fixed = None
        threshold = preemption.max_priority_threshold
        frs = self.frs
        every = into.every
        kept = into.kept
        for assigned, by_priority in buckets.items():
            if assigned.isdisjoint(frs):
                continue
            for priority, bucket in by_priority.items():
                if lower_only and priority >= mine:
                    continue
                into.count += bucket.count
                if fixed is None:
                    without_borrowing = priority >= mine or (threshold is not None and priority > threshold)
                else:
                    without_borrowing = fixed
                usage = bucket.usage
                for fr in every:
                    value = usage.get(fr, 0)
                    every[fr] += value
                    if not without_borrowing:
                        kept[fr] += value
        return True

    def _subtree_sums(
        self,
        cohort: tree.CohortNode,
        lca: tree.CohortNode,
        skip: tree.CohortNode | None,
        advantage: bool,
        valid: _Sums,
        invalid: _Sums,
    ) -> bool:
        """:meth:`_in_subtree` summed into ``valid`` or ``invalid`` by each queue's validity
        (:meth:`_valid_group`). False: a queue needs the candidates one by one."""
        frs = self.frs
        for child in cohort.child_cohorts:
            if child is skip or child.within_quota(frs):
                continue
            if not self._subtree_sums(child, lca, skip, advantage, valid, invalid):
                return False
        for child_cq in cohort.child_cqs:
            if child_cq is self.cq or not child_cq.active or child_cq.within_quota(frs):
                continue
            into = valid if self._valid_group(child_cq, lca) else invalid
            before = into.count
            if not self._add_sums(child_cq, False, advantage, into):
                return False
            if into.count != before:
                if advantage:
                    into.hierarchy = True
                else:
                    into.priority = True
        return True

    def viable_passes(self) -> tuple[bool, ...] | None:
        """The passes of :meth:`run` that may fit (each whether it allows borrowing, in order),
        decided from the holders' sums (the snapshot's buckets) without listing the candidates:
        empty when there are no candidates or no pass can fit (:meth:`_cannot_fit`); None when a
        queue's policy needs the candidates one by one (``LowerOrNewerEqualPriority`` compares
        creation times).

        The same decision, not a bound: the candidates :meth:`collect` would list are exactly
        the holders counted here (same policy, priority and flavor/resource tests, per queue of
        the same walk), each pass's sums are the ones :meth:`_cannot_fit` adds up one candidate
        at a time (validity is per queue and lowest common cohort), and the passes are chosen by
        the same rule (:meth:`passes`). Most searches of a busy cluster end here with nothing
        (95 % on the throughput benchmark's trace, issue 38), each of which listed and summed
        every holder of the cohort tree.
        """
        requested = self.requests
        spec = self.spec
        same = _Sums(dict.fromkeys(requested, 0), dict.fromkeys(requested, 0))
        within = spec.preemption.within_cluster_queue
        if within is not o.PreemptionPolicy.NEVER and not self._add_sums(self.cq, True, False, same):
            return None
        valid = _Sums(dict.fromkeys(requested, 0), dict.fromkeys(requested, 0))
        invalid = _Sums(dict.fromkeys(requested, 0), dict.fromkeys(requested, 0))
        if self.cq.parent is not None and spec.preemption.reclaim_within_cohort is not o.PreemptionPolicy.NEVER:
            advantage, remaining = tree.quantities_fit_in_quota(self.cq, requested)
            previous: tree.CohortNode | None = None
            for ancestor in self.cq.path_to_root():
                if not self._subtree_sums(ancestor, ancestor, previous, advantage, valid, invalid):
                    return None
                fits, remaining = tree.quantities_fit_in_quota(ancestor, remaining)
                advantage = advantage or fits
                previous = ancestor
        if not same.count and not valid.count and not invalid.count:
            return ()
        cq = self.cq
        own = same.every
        viable: list[bool] = []
        for allow_borrowing in self.passes(valid.hierarchy or invalid.hierarchy, valid.priority or invalid.priority):
            others = valid.kept if allow_borrowing else valid.every
            for fr, value in requested.items():
                if value > tree.cq_available(cq, fr) + own[fr] + others[fr]:
                    break
                if not allow_borrowing and cq.borrowing_with(fr, value - own[fr]):
                    break
            else:
                viable.append(allow_borrowing)
        return tuple(viable)

    def _valid_group(self, cq: tree.ClusterQueueNode, lca: tree.CohortNode | None) -> bool:
        """:meth:`_valid` without borrowing for any candidate of ``cq`` under ``lca``."""
        frs = self.frs
        if cq.within_quota(frs):
            return False
        for ancestor in cq.path_to_root():
            if ancestor is lca:
                break
            if ancestor.within_quota(frs):
                return False
        return True

    def passes(self, hierarchy: bool, priority: bool) -> tuple[bool, ...]:
        """The passes of the search, each whether it allows borrowing, in order, given whether
        there are hierarchy candidates and priority candidates."""
        forbidden = _borrowing_forbidden(self.spec)
        if (not hierarchy and not priority) or (forbidden and not self._under_nominal()):
            return (True,)
        if forbidden and not hierarchy:
            return (False, True)
        return (True, False)

    def run(self) -> list[Target]:
        passes = self.viable_passes()
        if passes == ():
            return []
        same, hierarchy, priority = self.collect()
        if passes is None:
            if not same and not hierarchy and not priority:
                return []
            unordered = same + hierarchy + priority
            candidate_passes = self.passes(bool(hierarchy), bool(priority))
            passes = tuple(allow for allow in candidate_passes if not self._cannot_fit(unordered, allow))
            if not passes:
                return []
        candidates = self.order(same, hierarchy, priority)
        for allow_borrowing in passes:
            targets: list[Target] = []
            for cand in candidates:
                if not self._valid(cand, allow_borrowing):
                    continue
                self.take(cand.info)
                targets.append(Target(cand.info, cand.variant.reason))
                if self.fits(allow_borrowing):
                    targets = self.fill_back(targets, allow_borrowing)
                    for t in targets:
                        self.put(t.info)
                    return targets
            for t in targets:
                self.put(t.info)
        return []


def get_targets(
    snapshot: Snapshot,
    preemptor: WorkloadInfo,
    cq_name: str,
    frs: frozenset[FR],
    requests: Mapping[FR, int],
    now: datetime,
    candidate_cmp: CandidateCmp | None = None,
) -> list[Target]:
    """Classical target selection for ``preemptor`` (``Preemptor.GetTargets``)."""
    cq = snapshot.cq(cq_name)
    return _Search(snapshot, preemptor, cq, frs, requests, now, candidate_cmp).run()


def simulate_preemption(
    snapshot: Snapshot,
    preemptor: WorkloadInfo,
    cq_name: str,
    fr: FR,
    value: int,
    now: datetime,
    targets_fn: object = None,
) -> tuple[Possibility, int]:
    """The preemption oracle the flavor assigner consults for one fr (``SimulatePreemption``).

    Returns whether preemption finds candidates (and whether all are in other queues), and
    how far up the tree W would borrow after the found targets are gone.
    """
    cq = snapshot.cq(cq_name)
    finder = targets_fn if callable(targets_fn) else get_targets
    found: list[Target] = finder(snapshot, preemptor, cq_name, frozenset({fr}), {fr: value}, now)
    if not found:
        borrow, _ = tree.lowest_subtree_that_fits(cq, fr, value)
        return Possibility.NO_CANDIDATES, borrow
    revert = snapshot.simulate_usage_removal([t.info for t in found])
    borrow, _ = tree.lowest_subtree_that_fits(cq, fr, value)
    revert()
    if any(t.info.cluster_queue == cq_name for t in found):
        return Possibility.PREEMPT, borrow
    return Possibility.RECLAIM, borrow

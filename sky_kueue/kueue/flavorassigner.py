"""Flavor assignment for one head (``pkg/scheduler/flavorassigner``).

For each pod set, for each resource group it requests, Kueue scans the group's flavors in
order and rates each flavor by the *worst* of its resources: does the request fit now,
fit only by borrowing (and from how high up the cohort tree), fit only by preempting (in
the own queue, or reclaiming from others), or not at all. ``flavorFungibility`` decides
whether a good-enough flavor stops the scan or the next one is tried; ``preference``
decides whether less borrowing or less preemption wins between the flavors tried.

The scan position is remembered between cycles (FlavorFungibilityPreserveScanProgress),
so a workload that stopped at flavor 0 by preemption resumes at flavor 1 next time.

Every reason a flavor was rejected is kept; the pending message Kueue writes into the
``QuotaReserved=False`` condition is built from them, sorted, exactly as Kueue does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import quantity, resources, tree
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.preemption import Possibility
from sky_kueue.kueue.workload import PodSetRequests, ScanState, WorkloadInfo

UNBOUNDED_BORROW = 1 << 62


class Mode(IntEnum):
    """Assignment mode of a resource, pod set or workload (``FlavorAssignmentMode``)."""

    NO_FIT = 0
    PREEMPT = 1
    DEFERRED_FIT = 2
    FIT = 3


class PMode(IntEnum):
    """Granular preemption mode used to rank flavors (``preemptionMode``)."""

    NO_FIT = 0
    NO_CANDIDATES = 1
    PREEMPT = 2
    RECLAIM = 3
    FIT = 4

    @property
    def assignment_mode(self) -> Mode:
        if self is PMode.NO_FIT:
            return Mode.NO_FIT
        if self is PMode.FIT:
            return Mode.FIT
        return Mode.PREEMPT


# QuotaReserved=False reasons for a NoFit assignment.
REASON_NO_MATCHING_FLAVOR = "NoMatchingFlavor"
REASON_EXCEEDS_MAX_QUOTA = "ExceedsMaxQuota"
REASON_WAITING_FOR_QUOTA = "WaitingForQuota"
_SEVERITY = {"": 0, REASON_WAITING_FOR_QUOTA: 2, REASON_EXCEEDS_MAX_QUOTA: 3, REASON_NO_MATCHING_FLAVOR: 4}


def _most_severe(a: str, b: str) -> str:
    return a if _SEVERITY.get(a, 0) >= _SEVERITY.get(b, 0) else b


@dataclass(frozen=True)
class Granular:
    """A preemption mode and borrowing distance, compared together when flavors are ranked."""

    mode: PMode
    borrow: int


WORST = Granular(PMode.NO_FIT, UNBOUNDED_BORROW)
BEST = Granular(PMode.FIT, 0)


def is_preferred(a: Granular, b: Granular, preference: o.FungibilityPreference | None) -> bool:
    """Whether flavor rating ``a`` is better than ``b`` (``isPreferred``)."""
    if a.mode is PMode.NO_FIT:
        return False
    if b.mode is PMode.NO_FIT:
        return True
    a_none = a.mode is PMode.NO_CANDIDATES
    b_none = b.mode is PMode.NO_CANDIDATES
    if a_none != b_none:
        return not a_none
    if preference is o.FungibilityPreference.PREEMPTION_OVER_BORROWING:
        if a.borrow != b.borrow:
            return a.borrow < b.borrow
        return a.mode > b.mode
    if a.mode != b.mode:
        return a.mode > b.mode
    return a.borrow < b.borrow


def should_try_next(rep: Granular, fungibility: o.FlavorFungibility) -> bool:
    if rep.mode in (PMode.NO_FIT, PMode.NO_CANDIDATES):
        return True
    if (
        rep.mode in (PMode.PREEMPT, PMode.RECLAIM)
        and fungibility.when_can_preempt is o.FungibilityPolicy.TRY_NEXT_FLAVOR
    ):
        return True
    return rep.borrow != 0 and fungibility.when_can_borrow is o.FungibilityPolicy.TRY_NEXT_FLAVOR


@dataclass
class FlavorAssignment:
    """The flavor chosen for one resource, with how it fits (mode) and how far it borrows."""

    name: str
    mode: Mode
    borrow: int
    tried_index: int = 0


@dataclass
class PodSetAssignment:
    """The flavors of one pod set, or why none fits."""

    name: str
    count: int
    requests: dict[str, int]
    flavors: dict[str, FlavorAssignment] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    #: (flavor, mode, no-fit reason) of every flavor tried, for the NoFit status reason
    attempts: list[tuple[str, Mode, str]] = field(default_factory=list)

    @property
    def is_fit(self) -> bool:
        return not self.reasons

    def representative_mode(self) -> Mode:
        if self.is_fit:
            return Mode.FIT
        if not self.flavors:
            return Mode.NO_FIT
        return min(f.mode for f in self.flavors.values())

    def message(self) -> str:
        return ", ".join(sorted(self.reasons))


@dataclass
class Assignment:
    """The flavor assignment of a whole workload: what a nomination carries into admission."""

    pod_sets: list[PodSetAssignment]
    borrowing: int
    usage: dict[FR, int]
    last_state: ScanState
    mode_override: Mode | None = None
    no_fit_reason: str = ""

    def representative_mode(self) -> Mode:
        if not self.pod_sets:
            return Mode.NO_FIT
        if self.mode_override is not None:
            return self.mode_override
        return min(ps.representative_mode() for ps in self.pod_sets)

    def message(self) -> str:
        parts = []
        for ps in self.pod_sets:
            if ps.is_fit:
                continue
            parts.append(f"couldn't assign flavors to pod set {ps.name}: {ps.message()}")
        return "; ".join(parts)

    def needs_preemption(self) -> frozenset[FR]:
        return frozenset(
            (fa.name, res) for ps in self.pod_sets for res, fa in ps.flavors.items() if fa.mode is Mode.PREEMPT
        )

    def flavor_mapping(self) -> dict[str, dict[str, str]]:
        return {ps.name: {res: fa.name for res, fa in ps.flavors.items()} for ps in self.pod_sets}

    def admitted_pod_sets(self) -> list[PodSetRequests]:
        return [
            PodSetRequests(
                name=ps.name,
                count=ps.count,
                requests={r: v for r, v in ps.requests.items() if r in ps.flavors},
                flavors={r: fa.name for r, fa in ps.flavors.items()},
            )
            for ps in self.pod_sets
        ]


OracleFn = Callable[[FR, int], tuple[Possibility, int]]


def _taint_text(taint: o.Taint) -> str:
    if taint.value:
        return f"{taint.key}={taint.value}:{taint.effect}"
    return f"{taint.key}:{taint.effect}"


def _tolerates(tol: o.Toleration, taint: o.Taint) -> bool:
    if tol.effect and tol.effect != taint.effect:
        return False
    if tol.key and tol.key != taint.key:
        return False
    if not tol.key and tol.operator != "Exists":
        return False
    if tol.operator == "Exists":
        return True
    return tol.value == taint.value


def _requirement_matches(req: o.NodeSelectorRequirement, labels: Mapping[str, str]) -> bool:
    present = req.key in labels
    value = labels.get(req.key, "")
    if req.operator == "In":
        return present and value in req.values
    if req.operator == "NotIn":
        return not present or value not in req.values
    if req.operator == "Exists":
        return present
    if req.operator == "DoesNotExist":
        return not present
    if req.operator in ("Gt", "Lt") and present and req.values:
        try:
            left, right = int(value), int(req.values[0])
        except ValueError:
            return False
        return left > right if req.operator == "Gt" else left < right
    return False


def check_flavor(flavor: o.ResourceFlavor | None, name: str, pod_set: o.PodSet) -> str | None:
    """Why ``pod_set`` cannot use ``flavor`` (taints, node selector/affinity), or None."""
    if flavor is None:
        return f"flavor {name} not found"
    tolerations = pod_set.tolerations + flavor.tolerations
    for taint in flavor.node_taints:
        if taint.effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return f"untolerated taint {_taint_text(taint)} in flavor {name}"
    keys = set(flavor.node_labels)
    for key, value in pod_set.node_selector.items():
        if key in keys and flavor.node_labels[key] != value:
            return f"flavor {name} doesn't match node affinity"
    terms: list[tuple[o.NodeSelectorRequirement, ...]] = []
    for term in pod_set.affinity_terms:
        kept = tuple(r for r in term if r.key in keys)
        if not kept:
            terms = []
            break
        terms.append(kept)
    if terms and not any(all(_requirement_matches(r, flavor.node_labels) for r in term) for term in terms):
        return f"flavor {name} doesn't match node affinity"
    return None


class FlavorAssigner:
    """Assigns flavors to one workload against a snapshot of one ClusterQueue."""

    def __init__(
        self,
        info: WorkloadInfo,
        cq: tree.ClusterQueueNode,
        flavors: Mapping[str, o.ResourceFlavor],
        oracle: OracleFn,
        scheduling_cycle: int,
        cq_generation: int,
        fair_sharing: bool = False,
    ) -> None:
        assert cq.spec is not None
        self.info = info
        self.cq = cq
        self.spec = cq.spec
        self.flavors = flavors
        self.oracle = oracle
        self.scheduling_cycle = scheduling_cycle
        self.cq_generation = cq_generation
        self.fair_sharing = fair_sharing

    def _can_preempt_while_borrowing(self) -> bool:
        preemption = self.spec.preemption
        return preemption.borrow_within_cohort is not o.BorrowWithinCohortPolicy.NEVER or (
            self.fair_sharing and preemption.reclaim_within_cohort is not o.PreemptionPolicy.NEVER
        )

    def _fits_quota(self, fr: FR, assumed: int, request: int, nominal: int) -> tuple[PMode, int, list[str], str]:
        resource = fr[1]
        available = tree.cq_available(self.cq, fr)
        max_capacity = tree.potential_available(self.cq, fr)
        value = assumed + request
        if value > max_capacity:
            msg = (
                f"insufficient quota for {resource} in flavor {fr[0]}, previously considered podsets requests "
                f"({quantity.format_amount(resource, assumed)}) + current podset request "
                f"({quantity.format_amount(resource, request)}) > maximum capacity "
                f"({quantity.format_amount(resource, max_capacity)})"
            )
            return PMode.NO_FIT, 0, [msg], REASON_EXCEEDS_MAX_QUOTA
        borrow, may_reclaim = tree.lowest_subtree_that_fits(self.cq, fr, value)
        if value <= available:
            return PMode.FIT, borrow, [], ""
        msg = (
            f"insufficient unused quota for {resource} in flavor {fr[0]}, "
            f"{quantity.format_amount(resource, value - available)} more needed"
        )
        if nominal >= value or may_reclaim or self._can_preempt_while_borrowing():
            possibility, borrow_after = self.oracle(fr, value)
            return PMode(int(possibility)), borrow_after, [msg], ""
        return PMode.NO_FIT, borrow, [msg], REASON_WAITING_FOR_QUOTA

    def _find_flavor(
        self,
        ps_index: int,
        pod_set: o.PodSet,
        requests: Mapping[str, int],
        resource: str,
        usage: Mapping[FR, int],
        attempts: list[tuple[str, Mode, str]],
    ) -> tuple[dict[str, FlavorAssignment] | None, list[str]]:
        group = self.spec.group_for(resource)
        if group is None:
            return None, [f"resource {resource} unavailable in ClusterQueue"]
        reasons: list[str] = []
        group_requests = [
            (r, requests[r]) for r in resources.ordered_resources(requests) if r in group.covered_resources
        ]
        best: dict[str, FlavorAssignment] | None = None
        best_mode = WORST
        attempted = -1
        names = group.flavor_names
        last = self.info.last_assignment
        start = last.next_flavor(ps_index, resource) if last is not None else 0
        mapping = self.info.nomination_mapping
        preference = self.spec.flavor_fungibility.preference
        for idx in range(start, len(names)):
            attempted = idx
            fname = names[idx]
            if mapping and mapping.get(pod_set.name, {}).get(resource) != fname:
                reasons.append(
                    f"skipping flavor {fname} as it is not found in the nomination mapping for resource {resource}"
                )
                continue
            mismatch = check_flavor(self.flavors.get(fname), fname, pod_set)
            if mismatch is not None:
                reasons.append(mismatch)
                attempts.append((fname, Mode.NO_FIT, REASON_NO_MATCHING_FLAVOR))
                continue
            assignments: dict[str, FlavorAssignment] = {}
            rep = BEST
            flavor_no_fit = ""
            for rname, value in group_requests:
                fr = (fname, rname)
                quota = self.cq.quotas.get(fr)
                pmode, borrow, msgs, no_fit = self._fits_quota(
                    fr, usage.get(fr, 0), value, quota.nominal if quota else 0
                )
                reasons.extend(msgs)
                flavor_no_fit = _most_severe(flavor_no_fit, no_fit)
                granular = Granular(pmode, borrow)
                if is_preferred(rep, granular, preference):
                    rep = granular
                if rep.mode is PMode.NO_FIT:
                    continue
                assignments[rname] = FlavorAssignment(fname, pmode.assignment_mode, borrow)
            attempts.append((fname, rep.mode.assignment_mode, flavor_no_fit))
            if not should_try_next(rep, self.spec.flavor_fungibility):
                best, best_mode = assignments, rep
                break
            if is_preferred(rep, best_mode, preference):
                best, best_mode = assignments, rep
        if best is not None:
            for fa in best.values():
                fa.tried_index = -1 if attempted == len(names) - 1 else attempted
        if best_mode.mode is PMode.FIT:
            return best, []
        return best, reasons

    def assign(self, counts: list[int] | None = None) -> Assignment:
        """Compute an assignment for the workload (optionally with reduced pod counts)."""
        assignment = Assignment(
            pod_sets=[],
            borrowing=0,
            usage={},
            last_state=ScanState(
                last_tried=[],
                cq_generation=self.cq_generation,
                scheduling_cycle=self.scheduling_cycle,
                scheduling_hash=self.info.hash,
            ),
        )
        covers_pods = self.spec.group_for(quantity.PODS) is not None
        for i, pod_set in enumerate(self.info.obj.pod_sets):
            count = pod_set.count if counts is None else counts[i]
            requests = {r: v * count for r, v in pod_set.requests.items()}
            if covers_pods:
                requests[quantity.PODS] = count
            psa = PodSetAssignment(name=pod_set.name, count=count, requests=requests)
            group_flavors: dict[str, FlavorAssignment] | None = {}
            failed = False
            for resource in resources.ordered_resources(requests):
                amount = requests[resource]
                if self.spec.group_for(resource) is None and amount == 0:
                    continue
                assert group_flavors is not None
                if resource in group_flavors:
                    continue
                flavors, reasons = self._find_flavor(i, pod_set, requests, resource, assignment.usage, psa.attempts)
                if not flavors and requests:
                    group_flavors = None
                    psa.reasons = list(reasons)
                    failed = True
                    break
                group_flavors.update(flavors or {})
                psa.reasons.extend(reasons)
            if group_flavors:
                psa.flavors = {r: fa for r, fa in group_flavors.items() if r in requests}
            self._append(assignment, psa)
            if failed:
                self._resolve_no_fit(assignment)
                return assignment
        self._resolve_no_fit(assignment)
        return assignment

    @staticmethod
    def _append(assignment: Assignment, psa: PodSetAssignment) -> None:
        assignment.pod_sets.append(psa)
        tried: dict[str, int] = {}
        for res, fa in psa.flavors.items():
            assignment.borrowing = max(assignment.borrowing, fa.borrow)
            fr = (fa.name, res)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + psa.requests.get(res, 0)
            tried[res] = fa.tried_index
        assignment.last_state.last_tried.append(tried)

    def _resolve_no_fit(self, assignment: Assignment) -> None:
        if assignment.representative_mode() is not Mode.NO_FIT:
            return
        overall = ""
        for ps in assignment.pod_sets:
            if ps.representative_mode() is not Mode.NO_FIT:
                continue
            if not ps.attempts:
                overall = _most_severe(overall, REASON_NO_MATCHING_FLAVOR)
                continue
            per_group: dict[int, str] = {}
            for i, (flavor, mode, reason) in enumerate(ps.attempts):
                if mode is not Mode.NO_FIT:
                    continue
                groups = [gi for gi, g in enumerate(self.spec.resource_groups) if flavor in g.flavor_names] or [-1 - i]
                for gi in groups:
                    if gi not in per_group or _SEVERITY.get(reason, 0) < _SEVERITY.get(per_group[gi], 0):
                        per_group[gi] = reason
            ps_reason = ""
            for reason in per_group.values():
                ps_reason = _most_severe(ps_reason, reason)
            overall = _most_severe(overall, ps_reason)
        assignment.no_fit_reason = overall

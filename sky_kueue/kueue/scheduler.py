"""One Kueue scheduling cycle, and the cluster state it runs against (``pkg/scheduler``).

A cycle pops one head from every active ClusterQueue, nominates each head against the
same snapshot (flavor assignment and, if needed, preemption targets), orders the heads
(non-borrowing first, then priority, then queue-order time), and processes them in that
order, charging each admission or reservation to the snapshot so later heads see it.
Heads that are not admitted are requeued according to their queue's strategy.

:class:`Engine` keeps what Kueue keeps between cycles: the quota holders (the cache),
the pending queues, each workload's last pending message and saved flavor-scan position,
and each ClusterQueue's allocatable generation. Between cycles it applies what Kueue's
workload controller does with the events a cycle produced; see :meth:`Engine.settle_events`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import preemption, tree
from sky_kueue.kueue import queue as q
from sky_kueue.kueue.flavorassigner import Assignment, FlavorAssigner, Mode
from sky_kueue.kueue.objects import FR
from sky_kueue.kueue.snapshot import Snapshot
from sky_kueue.kueue.workload import WorkloadInfo, admit_info, new_info

if TYPE_CHECKING:
    from sky_kueue.kueue.admission_fair_sharing import UsageLedger

MSG_NO_LONGER_FITS = "Workload no longer fits after processing another workload"
MSG_OVERLAPPING_TARGETS = "Workload has overlapping preemption targets with another workload"
MSG_DEFERRED_FIT = (
    "Workload has overlapping preemption targets with another workload, but will fit after these preemptions complete"
)
MSG_NAMESPACE_MISMATCH = "workload namespace doesn't match ClusterQueue selector"

STATUS_NOT_NOMINATED = ""
STATUS_SKIPPED = "skipped"
STATUS_ASSUMED = "assumed"

TargetsFn = Callable[..., list[preemption.Target]]
IteratorFn = Callable[["Engine", list["Entry"]], Iterable["Entry"]]


@dataclass
class Entry:
    """A head being scheduled in this cycle (Kueue's ``entry``)."""

    info: WorkloadInfo
    cq: str
    assignment: Assignment | None = None
    targets: list[preemption.Target] = field(default_factory=list)
    status: str = STATUS_NOT_NOMINATED
    message: str = ""
    requeue_reason: str = q.REQUEUE_GENERIC
    reason: str = ""  # QuotaReserved=False reason


@dataclass
class Preemption:
    """One eviction a cycle issued: the victim, for whom, and why."""

    victim: WorkloadInfo
    preemptor: WorkloadInfo
    reason: str
    detail: str = ""


@dataclass
class CycleResult:
    """What one cycle did."""

    number: int
    admitted: list[Entry] = field(default_factory=list)
    preempted: list[Preemption] = field(default_factory=list)
    entries: list[Entry] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.admitted or self.preempted)


def inactive_cluster_queues(state: o.ClusterState) -> set[str]:
    """ClusterQueues Kueue would mark inactive: stopped, or referring to a missing flavor."""
    inactive = set()
    for name, cq in state.cluster_queues.items():
        if cq.stop_policy is not o.StopPolicy.NONE:
            inactive.add(name)
            continue
        for group in cq.resource_groups:
            if any(f.name not in state.resource_flavors for f in group.flavors):
                inactive.add(name)
    return inactive


class Engine:
    """Kueue's scheduler, cache and queue manager for one cluster state."""

    def __init__(
        self,
        state: o.ClusterState,
        now: datetime,
        targets_fn: TargetsFn | None = None,
        iterator_fn: IteratorFn | None = None,
    ) -> None:
        self.state = state
        self.now = now
        self.inactive = inactive_cluster_queues(state)
        self.shape = tree.build_tree(state, self.inactive)
        self.snapshot = Snapshot(self.shape, {}, state.resource_flavors, state.namespaces)
        self.queues: dict[str, q.PendingQueue] = {
            name: q.PendingQueue(spec=cq) for name, cq in sorted(state.cluster_queues.items())
        }
        self.generation: dict[str, int] = {name: 1 for name in state.cluster_queues}
        self.scheduling_cycle = 0
        self.pending: dict[str, WorkloadInfo] = {}
        self.holders: dict[str, WorkloadInfo] = {}
        self.finished: set[str] = set()
        self.fair_sharing = state.config.fair_sharing is not None
        self.afs: UsageLedger | None = None
        self._lq_usage_at_snapshot: dict[str, float] = {}
        candidate_cmp: preemption.CandidateCmp | None = None
        afs_config = state.config.admission_fair_sharing
        if afs_config is not None:
            # Imported here, as fairsharing below: only clusters in these modes need them,
            # and a classical snapshot's `sky-kueue predict` does not pay their import.
            from sky_kueue.kueue.admission_fair_sharing import UsageLedger

            self.afs = UsageLedger(afs_config, state.local_queues)
            for queue in self.queues.values():
                if queue.spec.admission_fair_sharing:
                    queue.usage_key = self.afs.usage_of
            candidate_cmp = functools.partial(preemption.default_candidate_cmp, lq_usage=self._snapshot_lq_usage)
        if self.fair_sharing:
            from sky_kueue.kueue import fairsharing
        if targets_fn is None:
            if state.config.fair_sharing is not None:
                targets_fn = fairsharing.FairPreemptor(state.config.fair_sharing.preemption_strategies, candidate_cmp)
            else:
                targets_fn = functools.partial(preemption.get_targets, candidate_cmp=candidate_cmp)
        if iterator_fn is None and self.fair_sharing:
            iterator_fn = fairsharing.tournament_order
        self._targets_fn: TargetsFn = targets_fn
        self._iterator_fn = iterator_fn
        for wl in sorted(state.workloads.values(), key=lambda w: w.key):
            self.add_workload(wl)

    # --- cluster events -------------------------------------------------------------

    def cq_for(self, wl: o.Workload) -> str | None:
        lq = self.state.local_queue_for(wl)
        return lq.cluster_queue if lq is not None else None

    def add_workload(self, wl: o.Workload) -> WorkloadInfo | None:
        """A workload appears (listing, or a what-if addition)."""
        if wl.is_finished:
            self.finished.add(wl.key)
            return None
        cq_name = self.cq_for(wl) or ""
        info = new_info(wl, cq_name)
        if wl.admission is not None and wl.has_quota_reservation:
            self.holders[wl.key] = info
            if info.cluster_queue in self.shape.cqs:
                self.snapshot.add_workload(info)
            return info
        self.pending[wl.key] = info
        if wl.active and cq_name in self.queues:
            self.queues[cq_name].push(info)
        return info

    def update_pending_workload(self, wl: o.Workload) -> WorkloadInfo | None:
        """A pending workload's spec changed (e.g. its priority was raised by aging).

        As in Kueue's ``PushOrUpdate``, a changed spec takes the workload out of the parked
        set back into the active queue, re-ordered by its new priority; the pending message
        and the flavor-scan position (when the shape is unchanged) are kept.
        """
        old = self.pending.get(wl.key)
        if old is None:
            return self.add_workload(wl)
        cq_name = self.cq_for(wl) or old.cluster_queue
        info = new_info(wl, cq_name)
        info.message = old.message
        if old.last_assignment is not None and old.last_assignment.scheduling_hash == info.hash:
            info.last_assignment = old.last_assignment
        self.pending[wl.key] = info
        queue = self.queues.get(old.cluster_queue)
        if queue is not None:
            queue.active.pop(wl.key, None)
            queue.inadmissible.pop(wl.key, None)
        if wl.active and cq_name in self.queues:
            self.queues[cq_name].active[wl.key] = info
        return info

    def update_admitted_priority(self, key: str, priority: int) -> bool:
        """An admitted workload's ``spec.priority`` was patched (False: not a quota holder).

        Kueue's workload controller treats a priority change of an admitted Workload like a
        change of its reclaimable pods: it updates the cache entry and moves the cohort's
        parked Workloads back to their queues (``pkg/controller/core/workload_controller.go``
        ``Update``, the ``workload.PriorityChanged`` case calling
        ``QueueAssociatedInadmissibleWorkloadsAfter``), since a lower holder may now be a
        preemption candidate. The cache re-adds the entry, which counts as a usage change for
        the ClusterQueue's allocatable generation.
        """
        info = self.holders.get(key)
        if info is None:
            return False
        if info.priority == priority:
            return True
        info.obj = replace(info.obj, priority=priority)
        self.snapshot.reprioritize(info, priority)
        if info.cluster_queue in self.shape.cqs:
            self.generation[info.cluster_queue] = self.generation.get(info.cluster_queue, 0) + 1
        self.requeue_tree(info.cluster_queue)
        return True

    def delete_workload(self, key: str) -> None:
        """A workload is deleted: its quota is freed and its cohort tree's parked workloads return."""
        info = self.holders.pop(key, None)
        if info is not None:
            if info.cluster_queue in self.shape.cqs:
                self.snapshot.remove_workload(info)
                self.generation[info.cluster_queue] = self.generation.get(info.cluster_queue, 0) + 1
            self.requeue_tree(info.cluster_queue)
            return
        pending = self.pending.pop(key, None)
        if pending is not None and pending.cluster_queue in self.queues:
            self.queues[pending.cluster_queue].delete(key)

    def requeue_tree(self, cq_name: str) -> None:
        """Move the parked workloads of ``cq_name``'s whole cohort tree back to their queues."""
        node = self.shape.cqs.get(cq_name)
        if node is None:
            return
        cqs = node.parent.root().subtree_cluster_queues() if node.parent is not None else [node]
        for cq in cqs:
            queue = self.queues[cq.name]
            queue.flush_inadmissible(functools.partial(self._namespace_ok, queue.spec))

    def _uses_afs(self, cq_name: str) -> bool:
        spec = self.state.cluster_queues.get(cq_name)
        return self.afs is not None and spec is not None and spec.admission_fair_sharing

    def _snapshot_lq_usage(self, info: WorkloadInfo) -> float | None:
        """A quota holder's LocalQueue usage as of this cycle's snapshot (AFS queues only)."""
        if not self._uses_afs(info.cluster_queue):
            return None
        return self._lq_usage_at_snapshot.get(f"{info.obj.namespace}/{info.obj.queue_name}")

    def _namespace_ok(self, spec: o.ClusterQueue, info: WorkloadInfo) -> bool:
        return q.namespace_selected(spec, self.state.namespaces.get(info.obj.namespace))

    # --- one cycle ------------------------------------------------------------------

    def has_active_heads(self) -> bool:
        return any(queue.active for name, queue in self.queues.items() if name not in self.inactive)

    def cycle(self) -> CycleResult:
        self.scheduling_cycle += 1
        result = CycleResult(number=self.scheduling_cycle)
        heads: list[Entry] = []
        for name, queue in self.queues.items():
            if name in self.inactive:
                continue
            info = queue.pop()
            if info is not None:
                heads.append(Entry(info=info, cq=name))
        if not heads:
            return result
        saved = self.snapshot.checkpoint()
        if self.afs is not None:
            self._lq_usage_at_snapshot = {key: self.afs.usage(key) for key in self.state.local_queues}
        entries: list[Entry] = []
        inadmissible: list[Entry] = []
        for entry in heads:
            if self._nominate(entry):
                entries.append(entry)
            else:
                inadmissible.append(entry)
        preempted: dict[str, WorkloadInfo] = {}
        ordered = self._iterator_fn(self, entries) if self._iterator_fn else self._classical_order(entries)
        for entry in ordered:
            self._process(entry, preempted, result)
        self.snapshot.restore(saved)
        for entry in entries + inadmissible:
            if entry.status == STATUS_ASSUMED:
                continue
            self._requeue(entry)
        result.entries = entries + inadmissible
        return result

    def settle_events(self, result: CycleResult) -> None:
        """Apply what Kueue's controllers do with a cycle's events before the next cycle.

        Admitted workloads become quota holders; every preempted workload is deleted (as
        SkyPilot's unretriable pod groups are), which frees its quota and returns the parked
        workloads of its cohort tree to their queues.
        """
        for entry in result.admitted:
            info = entry.info
            if self.afs is not None:
                self.afs.settle(info)
            self.pending.pop(info.key, None)
            self.holders[info.key] = info
            self.snapshot.add_workload(info)
            self.generation[entry.cq] = self.generation.get(entry.cq, 0) + 1
            self.queues[entry.cq].delete(info.key)
        for p in result.preempted:
            if self.afs is not None:
                self.afs.drop(p.victim)
            self.generation[p.victim.cluster_queue] = self.generation.get(p.victim.cluster_queue, 0) + 1
            self.delete_workload(p.victim.key)

    # --- nomination -----------------------------------------------------------------

    def _nominate(self, entry: Entry) -> bool:
        info = entry.info
        spec = self.state.cluster_queues[entry.cq]
        if entry.cq in self.inactive:
            entry.message = f"ClusterQueue {entry.cq} is inactive"
            entry.reason = "Suspended"
            return False
        namespace = self.state.namespaces.get(info.obj.namespace)
        if namespace is None:
            ns = info.obj.namespace
            entry.message = f'workload namespace "{ns}" does not exist: namespaces "{ns}" not found'
            entry.reason = "Misconfigured"
            return False
        if not q.namespace_selected(spec, namespace):
            entry.message = MSG_NAMESPACE_MISMATCH
            entry.reason = "Misconfigured"
            entry.requeue_reason = q.REQUEUE_NAMESPACE_MISMATCH
            return False
        assignment, targets = self.get_assignments(info, entry.cq)
        self._record(entry, assignment, targets)
        return True

    def _record(self, entry: Entry, assignment: Assignment, targets: list[preemption.Target]) -> None:
        entry.assignment = assignment
        entry.targets = targets
        entry.message = assignment.message()
        entry.info.last_assignment = assignment.last_state

    def _last_assignment_outdated(self, info: WorkloadInfo, cq_name: str) -> bool:
        last = info.last_assignment
        assert last is not None
        if last.scheduling_hash != info.hash:
            return True
        if self.scheduling_cycle - last.scheduling_cycle <= 1:
            return False
        return self.generation.get(cq_name, 0) > last.cq_generation

    def get_assignments(self, info: WorkloadInfo, cq_name: str) -> tuple[Assignment, list[preemption.Target]]:
        """Flavor assignment plus preemption targets for one workload (``getAssignments``)."""
        if info.last_assignment is not None and self._last_assignment_outdated(info, cq_name):
            info.last_assignment = None
        cq = self.snapshot.cq(cq_name)

        def oracle(fr: FR, value: int) -> tuple[preemption.Possibility, int]:
            return preemption.simulate_preemption(
                self.snapshot, info, cq_name, fr, value, self.now, targets_fn=self._targets_fn
            )

        assigner = FlavorAssigner(
            info,
            cq,
            self.state.resource_flavors,
            oracle,
            self.scheduling_cycle,
            self.generation.get(cq_name, 0),
            fair_sharing=self.fair_sharing,
        )
        full = assigner.assign()
        mode = full.representative_mode()
        if mode is Mode.FIT:
            return full, []
        if mode is Mode.PREEMPT:
            targets = self._targets_fn(
                self.snapshot, info, cq_name, full.needs_preemption(), _nonzero(full.usage), self.now
            )
            if targets:
                return full, targets
        if any(ps.min_count is not None and ps.min_count < ps.count for ps in info.obj.pod_sets):
            partial = self._partial_admission(info, cq_name, assigner)
            if partial is not None:
                return partial
        return full, []

    def _partial_admission(
        self, info: WorkloadInfo, cq_name: str, assigner: FlavorAssigner
    ) -> tuple[Assignment, list[preemption.Target]] | None:
        """Binary search over reduced pod counts (``podset_reducer.go``)."""
        pod_sets = info.obj.pod_sets
        deltas = [ps.count - (ps.min_count if ps.min_count is not None else ps.count) for ps in pod_sets]
        total = sum(deltas)
        if total == 0:
            return None

        def counts_for(step: int) -> list[int]:
            # ``step`` pods removed in total, spread proportionally over reducible pod sets.
            return [ps.count - (d * step) // total for ps, d in zip(pod_sets, deltas, strict=True)]

        def attempt(step: int) -> tuple[Assignment, list[preemption.Target]] | None:
            assignment = assigner.assign(counts_for(step))
            mode = assignment.representative_mode()
            if mode is Mode.FIT:
                return assignment, []
            if mode is Mode.PREEMPT:
                targets = self._targets_fn(
                    self.snapshot, info, cq_name, assignment.needs_preemption(), _nonzero(assignment.usage), self.now
                )
                if targets:
                    return assignment, targets
            return None

        low, high = 1, total
        found: tuple[Assignment, list[preemption.Target]] | None = None
        while low <= high:
            mid = (low + high) // 2
            result = attempt(mid)
            if result is not None:
                found = result
                high = mid - 1
            else:
                low = mid + 1
        return found

    # --- ordering and processing ----------------------------------------------------

    @staticmethod
    def _classical_order(entries: list[Entry]) -> list[Entry]:
        def key(e: Entry) -> tuple[object, ...]:
            assert e.assignment is not None
            return (e.assignment.borrowing, -e.info.priority, e.info.qts)

        return sorted(entries, key=key)

    def _fits(
        self, cq_name: str, usage: dict[FR, int], preempted: dict[str, WorkloadInfo], targets: list[preemption.Target]
    ) -> bool:
        merged = dict(preempted)
        for t in targets:
            merged[t.info.key] = t.info
        revert = self.snapshot.simulate_usage_removal(merged.values())
        try:
            cq = self.snapshot.cq(cq_name)
            return all(tree.cq_available(cq, fr) >= v for fr, v in usage.items())
        finally:
            revert()

    def _process(self, entry: Entry, preempted: dict[str, WorkloadInfo], result: CycleResult) -> None:
        assert entry.assignment is not None
        info = entry.info
        cq_name = entry.cq
        usage = entry.assignment.usage
        fits = self._fits(cq_name, usage, preempted, entry.targets)
        if any(t.info.key in preempted for t in entry.targets):
            revert = self.snapshot.simulate_workload_removal(list(preempted.values()))
            info.last_assignment = None
            info.nomination_mapping = entry.assignment.flavor_mapping()
            try:
                assignment, targets = self.get_assignments(info, cq_name)
            finally:
                revert()
                info.nomination_mapping = None
            self._record(entry, assignment, targets)
            if assignment.representative_mode() is Mode.FIT:
                assignment.mode_override = Mode.DEFERRED_FIT
            usage = assignment.usage
            fits = self._fits(cq_name, usage, preempted, targets)
        assignment = entry.assignment
        mode = assignment.representative_mode()
        if mode is Mode.NO_FIT:
            entry.requeue_reason = q.REQUEUE_NO_FIT
            entry.reason = assignment.no_fit_reason
            return
        if mode is Mode.PREEMPT and not entry.targets:
            entry.requeue_reason = q.REQUEUE_PREEMPTION_NO_CANDIDATES
            entry.reason = "WaitingForQuota"
            spec = self.state.cluster_queues[cq_name]
            if spec.preemption.reclaim_within_cohort is not o.PreemptionPolicy.ANY:
                self.snapshot.add_usage(cq_name, self._to_reserve(cq_name, assignment))
            return
        if mode is Mode.DEFERRED_FIT:
            entry.message = MSG_DEFERRED_FIT
            entry.reason = "WaitingForPreemptedWorkloads"
            entry.requeue_reason = q.REQUEUE_PENDING_PREEMPTION
            info.last_assignment = None
            self.snapshot.add_usage(cq_name, usage)
            return
        if any(t.info.key in preempted for t in entry.targets):
            entry.status = STATUS_SKIPPED
            entry.message = MSG_OVERLAPPING_TARGETS
            entry.reason = "WaitingForQuota"
            return
        if not fits:
            entry.status = STATUS_SKIPPED
            entry.message = MSG_NO_LONGER_FITS
            entry.reason = "WaitingForQuota"
            return
        for t in entry.targets:
            preempted[t.info.key] = t.info
        self.snapshot.add_usage(cq_name, usage)
        if mode is Mode.PREEMPT:
            entry.reason = "WaitingForPreemptedWorkloads"
            issued = 0
            for t in entry.targets:
                issued += 1
                if not t.info.evicted:
                    result.preempted.append(Preemption(victim=t.info, preemptor=info, reason=t.reason, detail=t.detail))
            info.last_assignment = None
            if issued:
                entry.message += f". Pending the preemption of {issued} workload(s)"
                entry.requeue_reason = q.REQUEUE_PENDING_PREEMPTION
            return
        entry.status = STATUS_ASSUMED
        admit_info(info, cq_name, assignment.admitted_pod_sets(), self.now)
        if self.afs is not None and self._uses_afs(cq_name):
            self.afs.push_penalty(info)
        result.admitted.append(entry)

    def _to_reserve(self, cq_name: str, assignment: Assignment) -> dict[FR, int]:
        """Capacity a preemptor without candidates holds back (``quotaResourcesToReserve``)."""
        cq = self.snapshot.cq(cq_name)
        reserved: dict[FR, int] = {}
        for fr, value in assignment.usage.items():
            quota = cq.quotas.get(fr)
            nominal = quota.nominal if quota else 0
            used = cq.usage.get(fr, 0)
            if assignment.borrowing > 0:
                if quota is None or quota.borrowing_limit is None:
                    reserved[fr] = value
                else:
                    reserved[fr] = min(value, nominal + quota.borrowing_limit - used)
            else:
                reserved[fr] = max(0, min(value, nominal - used))
        return reserved

    def _requeue(self, entry: Entry) -> None:
        info = entry.info
        reason = entry.requeue_reason
        if entry.status != STATUS_NOT_NOMINATED and reason == q.REQUEUE_GENERIC:
            reason = q.REQUEUE_FAILED_AFTER_NOMINATION
        info.message = entry.message
        info.reason = entry.reason or "Pending"
        if info.key not in self.pending:
            return
        self.queues[entry.cq].requeue(info, reason)

    # --- settle-rule state ----------------------------------------------------------

    def queue_state(self) -> tuple[object, ...]:
        evaluated = tuple(sorted(k for k, v in self.pending.items() if v.message is not None))
        return (tuple((name, queue.state_key()) for name, queue in self.queues.items()), evaluated)


def _nonzero(usage: dict[FR, int]) -> dict[FR, int]:
    return {fr: v for fr, v in usage.items() if v != 0}

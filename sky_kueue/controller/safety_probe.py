"""The predictor's answer for a held relaunch, on the controller's own mirror of the cluster.

Why the mirror: the controller already keeps a watch-based copy of the cluster for its
reconciler (:mod:`sky_kueue.controller.session`); with safe relaunch on, that mirror also
lists the queue kinds (ClusterQueues, LocalQueues, ResourceFlavors, Cohorts, Namespaces),
and this adapter hands the same documents the policy server predicts on
(:func:`sky_kueue.mirror.export.documents`) to the Kueue model. No API request per question.

Two answers per Workload, both with the Workload made active (a held one is inactive, and
Kueue's scheduler skips inactive Workloads):

* **now**: :func:`sky_kueue.kueue.whatif.quick_verdict` nominates it as Kueue's next cycle
  would (flavor assignment, preemption targets) and reports whether the assignment borrows
  (:func:`~sky_kueue.controller.aging.safe_relaunch.placement_from_verdict`). It evaluates
  the Workload as its queue's head: Workloads ahead of it that fit are not admitted first.
* **the wait for a safe place**: :func:`sky_kueue.kueue.eta.estimate` on a copy of the state
  whose ClusterQueue may not borrow (every ``borrowingLimit`` of it 0), so the admission it
  predicts is within nominal quota by construction. Run times come from the
  ``sky-kueue.io/expected-runtime-seconds`` annotation; without them the wait is unknown.
* **later**: for a Workload Kueue would not admit now, whether its admission, when its turn
  comes, borrows: it does unless the estimate with borrowing allowed is no sooner than the
  one without (both unknown: assumed to borrow, so that it may be held).

With the band policies' ``protect_within_nominal`` (the probe is given the relaunch's protected
level), "borrows" means instead: admitted now with the flavors Kueue would assign, it would not
fit its ClusterQueue's nominal quota together with every admitted Workload at its protected
level or above (:func:`~sky_kueue.controller.aging.protected_slot.fits_protected`), so it would
be admitted at the plain level, the next reclaim's first victim. A relaunch Kueue would not
admit now is then simply not safe now (no wait predicted).

:class:`MirrorProtectedSlot` answers the engine's same question for an admitted Workload.

The model is pure and the mirror's store is in memory: nothing here does I/O. A state the
model cannot read gives no answer (None) and a warning, never an exception in the reconciler.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import logging
import math
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from typing import Any

from sky_kueue.controller.aging.protected_slot import AdmittedWorkload, ProtectedFit, Quantities, overflow
from sky_kueue.controller.aging.safe_relaunch import Placement, placement_from_verdict
from sky_kueue.controller.detection import WorkloadFacts, WorkloadPhase
from sky_kueue.controller.mirror_model import MirrorModelCache, export_key, pod_workload_key
from sky_kueue.controller.predicted_burst import PredictedWaitKind
from sky_kueue.kueue import eta
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import documents_of_trees
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.parse import parse_cluster_queue, parse_priority_class, parse_workload
from sky_kueue.kueue.quantity import format_amount
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.tree import quotas_by_fr
from sky_kueue.kueue.whatif import QuickVerdict, quick_verdict
from sky_kueue.kueue.workload import admitted_requests, pending_requests, usage_from
from sky_kueue.mirror import export
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.skypilot.runtime_annotations import with_pod_runtimes

log = logging.getLogger(__name__)

#: How far ahead the safe-wait estimate looks (beyond it: unknown). The longest hold is far
#: shorter; a day keeps the estimate's simulated completions bounded on a busy cluster.
SAFE_WAIT_HORIZON_SECONDS = 24 * 3600.0
#: How far ahead the burst gate's relaunch-wait estimate looks; beyond it the wait counts as
#: beyond the horizon (the gate bursts). Any threshold a team sets in practice (start-up plus
#: margin, minutes) is far shorter; a day keeps the wait in the burst's reason readable.
RELAUNCH_WAIT_HORIZON_SECONDS = 24 * 3600.0
#: What the relaunch-wait estimate needs from the mirror before it answers.
RELAUNCH_WAIT_KINDS = (
    KindName.NAMESPACE,
    KindName.RESOURCE_FLAVOR,
    KindName.COHORT,
    KindName.CLUSTER_QUEUE,
    KindName.LOCAL_QUEUE,
    KindName.WORKLOAD,
    KindName.POD,
)


def _model_of(store: MirrorStore, cached: bool | MirrorModelCache) -> MirrorModelCache | None:
    """``cached``: False, none; True, a cache of its own; a cache (of ``store``), that one, shared
    (the controller's relaunch wait and hold probe share one, which holds the tree's parses once)."""
    if isinstance(cached, MirrorModelCache):
        return cached
    return MirrorModelCache(store) if cached else None


def _active(doc: Mapping[str, Any]) -> dict[str, Any]:
    spec = dict(doc.get("spec") or {})
    spec["active"] = True
    return {**doc, "spec": spec}


def without_borrowing(state: o.ClusterState, cluster_queue: str) -> o.ClusterState:
    """A copy of ``state`` where ``cluster_queue`` may use its nominal quota only.

    A ClusterQueue without a cohort cannot borrow anyway, and Kueue's validation rejects a
    ``borrowingLimit`` there, so ``state`` is returned as it is.
    """
    cq = state.cluster_queues[cluster_queue]
    if not cq.cohort:
        return state
    groups = tuple(
        dataclasses.replace(
            group,
            flavors=tuple(
                dataclasses.replace(
                    flavor,
                    resources={
                        name: dataclasses.replace(quota, borrowing_limit=0) for name, quota in flavor.resources.items()
                    },
                )
                for flavor in group.flavors
            ),
        )
        for group in cq.resource_groups
    )
    changed = copy.copy(state)
    changed.cluster_queues = {**state.cluster_queues, cluster_queue: dataclasses.replace(cq, resource_groups=groups)}
    return changed


class MirrorSafetyProbe:
    """:class:`~sky_kueue.controller.hold.SafetyProbe` over a session's mirror store.

    A held relaunch is judged on its cohort tree (Kueue never lends, borrows or preempts across
    trees, so the verdict, the nominal-quota fit and the ETA are the tree's), read as the burst
    gate reads it (:func:`relaunch_tree_state`): with ``cached`` (the controller's), from
    :class:`~sky_kueue.controller.mirror_model.MirrorModelCache` between questions; without it,
    from the whole store each time.
    """

    def __init__(
        self,
        cache: MirrorStore,
        clock: Callable[[], float],
        *,
        runtime: eta.RuntimeFn | None = None,
        horizon_seconds: float = SAFE_WAIT_HORIZON_SECONDS,
        cached: bool | MirrorModelCache = False,
    ) -> None:
        self._cache = cache
        self._clock = clock
        self._runtime = runtime or eta.runtime_from_annotation()
        self._horizon = horizon_seconds
        self._model = _model_of(cache, cached)

    def placement(self, facts: WorkloadFacts, cluster: str, protected_level: int | None = None) -> Placement | None:
        """``protected_level``: with ``protect_within_nominal``, the level the relaunch would be
        protected at once admitted (:meth:`~sky_kueue.controller.engine.AgingEngine.protected_level`;
        None: judged by Kueue's borrowing, as without the setting)."""
        key = f"{facts.namespace}/{facts.name}"
        now = datetime.datetime.fromtimestamp(self._clock(), tz=datetime.timezone.utc)
        try:
            # Kueue never lends, borrows or preempts across cohort trees: the held relaunch's
            # tree decides the verdict, the nominal-quota fit and the wait.
            state = relaunch_tree_state(
                self._cache, self._model, key, lambda current: None if current is None else _active(current), now
            )
            workload = state.workloads.get(key)
            if workload is None or workload.uid != facts.uid:
                return None
            verdict = quick_verdict(Engine(state, now), workload)
            placement = placement_from_verdict(cluster, verdict)
            if verdict.never_fits:
                return placement
            if protected_level is not None:
                return _protected_placement(state, workload, verdict, placement, protected_level)
            if placement.safe_now:
                return placement
            safe = self._eta(without_borrowing(state, verdict.cluster_queue), key, now)
            if not placement.admits_now:
                # Would its admission, when its turn comes, borrow? Yes unless Kueue admits it no
                # sooner with borrowing allowed than without (unknown either way: assume it borrows).
                anyway = self._eta(state, key, now)
                borrows = safe is None or anyway is None or anyway < safe
                placement = dataclasses.replace(placement, borrows=borrows)
        except ModelError as err:
            log.warning("the Kueue model cannot judge Workload %s for safe relaunch: %s", key, err)
            return None
        return dataclasses.replace(placement, predicted_safe_wait_seconds=safe)

    def _eta(self, state: o.ClusterState, key: str, now: datetime.datetime) -> float | None:
        """Seconds until Kueue admits ``key`` in ``state`` (None: not within the horizon or unknown).

        Raises:
            ModelError: the state fails Kueue's validation.
        """
        return eta.estimate(state, [key], self._runtime, now, self._horizon)[key].seconds


def _protected_placement(
    state: o.ClusterState, workload: o.Workload, verdict: QuickVerdict, placement: Placement, level: int
) -> Placement:
    """``placement`` judged for ``protect_within_nominal``: safe now only when Kueue admits the
    relaunch now and, with the flavors it assigns and the verdict's victims gone, it fits
    nominal quota at its protected ``level`` (it would then keep that level for its run)."""
    if not placement.admits_now:
        return dataclasses.replace(
            placement, borrows=True, predicted_safe_wait_seconds=None, why="Kueue would not admit it now"
        )
    request = _decimal(
        usage_from(
            dataclasses.replace(pod_set, flavors=verdict.flavors.get(pod_set.name, {}))
            for pod_set in pending_requests(workload)
        )
    )
    victims = {key for key, _ in verdict.victims}
    fit = protected_fit_in(
        state.cluster_queues[verdict.cluster_queue],
        [wl for wl in state.workloads.values() if wl.key not in victims],
        workload.uid,
        level,
        request,
    )
    why = "" if fit.fits else f"Kueue would admit it, but at protected level {level}: {fit.detail}"
    return dataclasses.replace(placement, borrows=not fit.fits, predicted_safe_wait_seconds=None, why=why)


def _decimal(usage: Mapping[tuple[str, str], int]) -> dict[tuple[str, str], Decimal]:
    return {key: Decimal(amount) for key, amount in usage.items()}


def _holds_quota_in(wl: o.Workload, cluster_queue: str) -> bool:
    return (
        wl.admission is not None
        and wl.has_quota_reservation
        and not wl.is_finished
        and wl.admission.cluster_queue == cluster_queue
    )


def protected_fit_in(
    cluster_queue: o.ClusterQueue, workloads: Iterable[o.Workload], own_uid: str, level: int, request: Quantities
) -> ProtectedFit:
    """:func:`fits_protected` for a Workload of ``cluster_queue`` (UID ``own_uid``, asking
    ``request``) at ``level``, against the Workloads of ``workloads`` holding quota there."""
    admitted = [
        AdmittedWorkload(wl.priority, _decimal(usage_from(admitted_requests(wl))))
        for wl in workloads
        if wl.uid != own_uid and _holds_quota_in(wl, cluster_queue.name)
    ]
    nominal = {key: Decimal(quota.nominal) for key, quota in quotas_by_fr(cluster_queue.resource_groups).items()}
    where = f"ClusterQueue {cluster_queue.name}"
    over = overflow(nominal, admitted, level, request)
    if over is None:
        return ProtectedFit(True, where)
    (flavor, resource) = over.key
    asked, held, quota = (format_amount(resource, int(q)) for q in (over.asked, over.held, over.nominal))
    return ProtectedFit(
        False,
        f"{where} ({resource} in flavor {flavor}: {asked} asked + {held} held at priority "
        f"{level} or above > {quota} nominal)",
    )


class MirrorProtectedSlot:
    """:class:`~sky_kueue.controller.engine.ProtectedSlot` over a session's mirror store.

    Reads the admitted Workload's own document (its admission: ClusterQueue, flavors, usage),
    its ClusterQueue's nominal quota and the other Workloads holding quota there (their
    ``spec.priority``, else their class's value, as Kueue fills it). Quantities are Kueue's
    integer amounts (CPU in millicores), compared as :class:`~decimal.Decimal`. Pure over the
    in-memory store; an object the model cannot read gives no answer (None) and a warning.
    """

    def __init__(self, cache: MirrorStore) -> None:
        self._cache = cache

    def protected_fit(self, facts: WorkloadFacts, level: int) -> ProtectedFit | None:
        key = f"{facts.namespace}/{facts.name}"
        unsynced = [
            kind.value
            for kind in (KindName.CLUSTER_QUEUE, KindName.WORKLOAD, KindName.WORKLOAD_PRIORITY_CLASS)
            if not self._cache.is_synced(kind)
        ]
        if unsynced:
            log.info("no nominal-quota check for %s: the mirror has not listed %s", key, ", ".join(unsynced))
            return None
        doc = self._cache.get(KindName.WORKLOAD, key)
        if doc is None:
            return None
        try:
            classes = {
                c.name: c
                for c in (parse_priority_class(d) for d in self._cache.items(KindName.WORKLOAD_PRIORITY_CLASS))
            }
            own = parse_workload(doc, classes)
            if own.uid != facts.uid or own.admission is None:
                return None
            name = own.admission.cluster_queue
            if not _holds_quota_in(own, name):
                return None
            cq_doc = self._cache.get(KindName.CLUSTER_QUEUE, name)
            if cq_doc is None:
                return None
            others = [parse_workload(d, classes) for d in self._cache.workloads(cluster_queue=name)]
            return protected_fit_in(
                parse_cluster_queue(cq_doc), others, own.uid, level, _decimal(usage_from(admitted_requests(own)))
            )
        except ModelError as err:
            log.warning("the Kueue model cannot check nominal quota for Workload %s: %s", key, err)
            return None


def _stamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def as_relaunch(doc: Mapping[str, Any], priority: int, now: datetime.datetime, *, pending: bool) -> dict[str, Any]:
    """The Workload ``doc`` as its relaunch enters Kueue: active, at ``priority``; a Workload
    that is not pending any more (the preempted one, SkyPilot has not relaunched it yet) as a
    new one created ``now`` (no status: no admission, no conditions), at the back of its line."""
    spec = dict(doc.get("spec") or {})
    spec["active"] = True
    spec["priority"] = priority
    relaunch: dict[str, Any] = {**doc, "spec": spec}
    if not pending:
        relaunch["metadata"] = {**(doc.get("metadata") or {}), "creationTimestamp": _stamp(now)}
        relaunch.pop("status", None)
    return relaunch


class MirrorRelaunchWait:
    """:class:`~sky_kueue.controller.burst_gate.RelaunchWait` over a session's mirror store.

    The same documents the safety probe judges, with the run-time annotations of each pod
    group's pods joined onto its Workload (:func:`with_pod_runtimes`: Kueue copies no pod
    annotation onto a pod group's Workload, so without the join every SkyPilot job's run time
    would be unknown). Pure over the in-memory store, as :class:`MirrorSafetyProbe`.

    Why a deleted Workload still gets an answer: the controller's queue runs behind its mirror,
    and a preempted pod group whose pods go without a grace period is finished and collected
    within a second, so the Workload is often gone from the mirror when the controller records
    the preemption (later still after a backlog or a restart). Only the Workload's own document
    is missing: the relaunch enters Kueue as a new Workload with the same pod sets and queue, so
    it is projected from the store's record of the deleted one
    (:meth:`~sky_kueue.mirror.store.MirrorStore.deleted_workload`, by the same UID; kept for at
    most :data:`~sky_kueue.mirror.store.DELETED_WORKLOAD_TTL_SECONDS` and the last
    :data:`~sky_kueue.mirror.store.DELETED_WORKLOADS_KEPT` deletions), on the live rest of the
    cluster. Beyond that bound the wait is unknown (None), as it is when another Workload of the
    same name (the relaunch itself, whose own reconcile asks again) has taken its place.

    With ``cached`` (the controller's), the cut to the relaunch's cohort tree, the pods' run
    times and the parsed objects are kept between questions and only what the mirror wrote
    since is read again (:class:`~sky_kueue.controller.mirror_model.MirrorModelCache`); the
    state simulated is the same. Without it every question reads the whole store (the
    reference the cache is tested against).
    """

    def __init__(
        self,
        cache: MirrorStore,
        clock: Callable[[], float],
        *,
        runtime: eta.RuntimeFn | None = None,
        horizon_seconds: float = RELAUNCH_WAIT_HORIZON_SECONDS,
        cached: bool | MirrorModelCache = False,
    ) -> None:
        self._cache = cache
        self._clock = clock
        self._runtime = runtime or eta.runtime_from_annotation()
        self._horizon = horizon_seconds
        self._model = _model_of(cache, cached)

    def relaunch_wait(self, facts: WorkloadFacts, priority: int, kind: PredictedWaitKind) -> float | None:
        key = f"{facts.namespace}/{facts.name}"
        unsynced = [k.value for k in RELAUNCH_WAIT_KINDS if not self._cache.is_synced(k)]
        if unsynced:
            log.info("no relaunch wait for %s: the mirror has not listed %s yet", key, ", ".join(unsynced))
            return None
        now = datetime.datetime.fromtimestamp(self._clock(), tz=datetime.timezone.utc)
        pending = facts.phase is WorkloadPhase.PENDING

        def relaunch(current: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
            """The relaunch as it enters Kueue, from the mirrored Workload ``current``, else
            from the store's record of its deletion (None: neither)."""
            if current is not None:
                return as_relaunch(current, priority, now, pending=pending)
            # Read after the documents: the store records a deletion with the removal, so a
            # Workload missing from them is in the record (unless beyond its bound).
            deleted = self._cache.deleted_workload(facts.uid)
            # Whatever it was when deleted, its job comes back, if at all, as a new Workload.
            return None if deleted is None else as_relaunch(deleted, priority, now, pending=False)

        try:
            state = relaunch_tree_state(self._cache, self._model, key, relaunch, now)
            workload = state.workloads.get(key)
            if workload is None or workload.uid != facts.uid:
                return None
            if kind is PredictedWaitKind.SAFE:
                queue = state.local_queue_for(workload)
                if queue is not None and queue.cluster_queue in state.cluster_queues:
                    state = without_borrowing(state, queue.cluster_queue)
            projected = eta.estimate(state, [key], self._runtime, now, self._horizon)[key]
        except ModelError as err:
            log.warning("the Kueue model cannot predict the relaunch wait of Workload %s: %s", key, err)
            return None
        if projected.seconds is not None:
            return projected.seconds
        return _wait_without_seconds(projected)


#: What enters Kueue in place of the mirrored Workload asked about (the argument; None when it is
#: not mirrored), or after every other document when it is not mirrored; None: nothing.
Relaunch = Callable[[Mapping[str, Any] | None], Mapping[str, Any] | None]


def whole_store_state(store: MirrorStore, key: str, relaunch: Relaunch, now: datetime.datetime) -> o.ClusterState:
    """The cohort tree of the Workload ``key``, with ``relaunch`` in its place, read from the
    whole store (every document, every call): the reference :class:`MirrorModelCache` is
    tested against, and its fallback.

    Raises:
        ModelError: a document of the tree the model cannot read.
    """
    docs: list[Mapping[str, Any]] = []
    found = False
    for doc in export.documents(store):
        if doc.get("kind") == "Workload" and export_key(doc) == key:
            found = True
            projected = relaunch(doc)
            if projected is not None:
                docs.append(projected)
            continue
        docs.append(doc)
    if not found:
        missing = relaunch(None)
        if missing is not None:
            docs.append(missing)
    # Only the relaunch's cohort tree decides its wait: cut the rest before parsing it and
    # before joining the pods' run times (on a large cluster both cost far more than the ETA).
    cut = documents_of_trees(docs, [key])
    pods = [pod for pod in store.items(KindName.POD) if pod_workload_key(pod) in cut.workload_keys]
    kept = [dict(doc) for doc in with_pod_runtimes(cut.documents, pods)]
    return export.cluster_state(kept, now=now)


def relaunch_tree_state(
    store: MirrorStore, model: MirrorModelCache | None, key: str, relaunch: Relaunch, now: datetime.datetime
) -> o.ClusterState:
    """:func:`whole_store_state`, from ``model`` when it has it (it may decline).

    Raises:
        ModelError: a document of the tree the model cannot read.
    """
    state = None if model is None else model.relaunch_state(key, relaunch, now)
    return state if state is not None else whole_store_state(store, key, relaunch, now)


def _wait_without_seconds(projected: eta.Eta) -> float | None:
    """The gate's wait for an estimate without ``seconds``: ``math.inf`` when nothing in the
    relaunch's cohort tree frees room for it within the horizon (its tree's next known
    completion is past the horizon, or every quota holder there finishes and it still does
    not fit), None when it waits on a quota holder whose run time is unknown (or is not a
    pending Workload of the cluster).

    The estimate simulates only the relaunch's own cohort tree, so "no quota holder with a
    known run time frees room" covers both of the last cases; :attr:`Eta.waits_on_unknown_runtime`
    tells them apart.
    """
    if projected.reason.startswith(eta.BEYOND_HORIZON_REASON):
        return math.inf
    if projected.reason.startswith(eta.NO_KNOWN_RUNTIME_REASON) and not projected.waits_on_unknown_runtime:
        return math.inf
    return None

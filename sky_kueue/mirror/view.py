"""The picture ``sky-kueue queue`` shows: per ClusterQueue, quota and who holds or waits for it.

Why computed here, from the model's objects, and not read from ClusterQueue status: Kueue's
status fields (``flavorsReservation``, pending counts) lag, depend on the version and say
nothing about *what will happen next*. From the same documents the predictor reads, this
module derives, per ClusterQueue and flavor/resource: nominal quota, usage, what it borrows
(usage above nominal) and what it lends (see :func:`_lent`); per workload: state, priority,
age, queue position, Kueue's own reason, the predicted outcome
(:func:`sky_kueue.kueue.predictor.predict`), the SkyPilot job and how often it was preempted;
and for each relaunch lane (:mod:`sky_kueue.mirror.lanes`) its occupancy and the relaunches
waiting for it.

Positions come from Kueue's visibility API when the caller has them
(:mod:`sky_kueue.mirror.visibility`), else from the model's queue order (priority, then
queue-order timestamp, then UID; Kueue ``pkg/cache/queue/cluster_queue.go`` ordering and ``pkg/workload``
``GetQueueOrderTimestamp``).

A Workload the model cannot read is left out of the picture and named in
:attr:`QueueView.notes`, rather than hiding the whole cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import parse, predictor, quantity
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.tree import quotas_by_fr
from sky_kueue.kueue.workload import priority_of, queue_order_timestamp
from sky_kueue.mirror import transitions as tr
from sky_kueue.mirror.identity import HOLD_ANNOTATION, SkyPilotIdentity, identity_from_workload
from sky_kueue.mirror.lanes import LaneView, lane_views

FR = tuple[str, str]

#: Where positions came from.
POSITIONS_VISIBILITY = "visibility"
POSITIONS_MODEL = "model"
#: Sorts workloads without a known position after those with one.
_UNKNOWN_POSITION = 1 << 30


@dataclass(frozen=True)
class ResourceRow:
    """One flavor/resource of a ClusterQueue (integer amounts: CPU in millicores)."""

    flavor: str
    resource: str
    nominal: int
    usage: int
    borrowed: int
    lent: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None

    def to_json(self) -> dict[str, Any]:
        fmt = quantity.format_amount
        return {
            "flavor": self.flavor,
            "resource": self.resource,
            "nominal": fmt(self.resource, self.nominal),
            "usage": fmt(self.resource, self.usage),
            "borrowed": fmt(self.resource, self.borrowed),
            "lent": fmt(self.resource, self.lent),
            "borrowingLimit": None if self.borrowing_limit is None else fmt(self.resource, self.borrowing_limit),
            "lendingLimit": None if self.lending_limit is None else fmt(self.resource, self.lending_limit),
        }


@dataclass(frozen=True)
class WorkloadRow:
    """One workload as the queue view shows it."""

    key: str
    local_queue: str
    state: str
    priority: int
    created: datetime
    age_seconds: float
    position: int | None
    predicted: str
    reason: str
    message: str
    preemptions: int
    skypilot: SkyPilotIdentity | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "workload": self.key,
            "localQueue": self.local_queue,
            "state": self.state,
            "priority": self.priority,
            "created": self.created.isoformat(),
            "ageSeconds": round(self.age_seconds, 1),
            "position": self.position,
            "predicted": self.predicted,
            "reason": self.reason,
            "message": self.message,
            "preemptions": self.preemptions,
            "skypilot": self.skypilot.to_json() if self.skypilot else None,
        }


@dataclass(frozen=True)
class ClusterQueueView:
    name: str
    cohort: str | None
    resources: tuple[ResourceRow, ...]
    admitted: tuple[WorkloadRow, ...]
    pending: tuple[WorkloadRow, ...]
    #: preemptions recorded on the workloads currently present (Kueue keeps no per-queue history)
    preemptions: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "cohort": self.cohort,
            "resources": [r.to_json() for r in self.resources],
            "admitted": [w.to_json() for w in self.admitted],
            "pending": [w.to_json() for w in self.pending],
            "preemptions": self.preemptions,
        }


@dataclass(frozen=True)
class QueueView:
    taken_at: datetime
    cluster_queues: tuple[ClusterQueueView, ...]
    positions_from: str
    predicted: bool
    notes: tuple[str, ...] = field(default_factory=tuple)
    #: The relaunch lanes among the ClusterQueues shown.
    lanes: tuple[LaneView, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "takenAt": self.taken_at.isoformat(),
            "positionsFrom": self.positions_from,
            "predicted": self.predicted,
            "notes": list(self.notes),
            "clusterQueues": [cq.to_json() for cq in self.cluster_queues],
            "lanes": [lane.to_json() for lane in self.lanes],
        }


# --- state ---------------------------------------------------------------------------------


def model_state(
    docs: Sequence[Mapping[str, Any]], config: o.KueueConfig | None, now: datetime
) -> tuple[o.ClusterState, dict[str, Mapping[str, Any]], list[str]]:
    """Parse documents, skipping (and noting) Workloads the model cannot read.

    Returns the state, the raw Workload documents by key, and notes.

    Raises:
        ModelError: a queue, flavor, cohort or priority class the model cannot read.
    """
    workload_docs = [d for d in docs if d.get("kind") == "Workload"]
    state = parse.parse_documents([d for d in docs if d.get("kind") != "Workload"], config)
    state.now = now
    raw: dict[str, Mapping[str, Any]] = {}
    notes: list[str] = []
    for doc in workload_docs:
        try:
            wl = parse.parse_workload(doc, state.priority_classes)
        except ModelError as exc:
            notes.append(f"left out: {exc}")
            continue
        state.workloads[wl.key] = wl
        raw[wl.key] = doc
    return state, raw, notes


def _usage(state: o.ClusterState) -> dict[str, dict[FR, int]]:
    """Quota held per ClusterQueue: reserving, unfinished, active workloads (Kueue ``pkg/workload``
    ``HasQuotaReservation``/``IsFinished``)."""
    usage: dict[str, dict[FR, int]] = {}
    for wl in state.workloads.values():
        if wl.admission is None or not wl.has_quota_reservation or wl.is_finished or not wl.active:
            continue
        held = usage.setdefault(wl.admission.cluster_queue, {})
        for psa in wl.admission.pod_set_assignments:
            for resource, amount in psa.resource_usage.items():
                flavor = psa.flavors.get(resource)
                if flavor is not None:
                    held[(flavor, resource)] = held.get((flavor, resource), 0) + amount
    return usage


def _root_cohort(state: o.ClusterState, name: str | None) -> str | None:
    seen: set[str] = set()
    while name is not None and name not in seen:
        seen.add(name)
        parent = state.cohorts[name].parent if name in state.cohorts else None
        if parent is None:
            return name
        name = parent
    return name


def _lent(state: o.ClusterState, usage: Mapping[str, Mapping[FR, int]]) -> dict[str, dict[FR, int]]:
    """What each ClusterQueue lends: the borrowing of its cohort tree, attributed to lenders.

    Kueue does not record who lends to whom. Within a cohort tree, the total borrowed for a
    flavor/resource is attributed to ClusterQueues in proportion to their unused lendable
    quota (nominal capped by ``lendingLimit``), largest remainders first; what exceeds their
    unused quota came from the cohorts' own quota.
    """
    trees: dict[str, list[str]] = {}
    for name, cq in state.cluster_queues.items():
        root = _root_cohort(state, cq.cohort)
        if root is not None:
            trees.setdefault(root, []).append(name)
    lent: dict[str, dict[FR, int]] = {name: {} for name in state.cluster_queues}
    for members in trees.values():
        frs = {fr for name in members for fr in quotas_by_fr(state.cluster_queues[name].resource_groups)}
        for fr in frs:
            borrowed = 0
            unused: dict[str, int] = {}
            for name in members:
                quota = quotas_by_fr(state.cluster_queues[name].resource_groups).get(fr)
                used = usage.get(name, {}).get(fr, 0)
                nominal = quota.nominal if quota else 0
                borrowed += max(0, used - nominal)
                lendable = (
                    nominal if quota is None or quota.lending_limit is None else min(nominal, quota.lending_limit)
                )
                unused[name] = max(0, min(lendable, nominal - used))
            total_unused = sum(unused.values())
            if borrowed <= 0 or total_unused <= 0:
                continue
            share = min(borrowed, total_unused)
            parts = {n: share * u // total_unused for n, u in unused.items()}
            rest = share - sum(parts.values())
            for n in sorted(unused, key=lambda n: (-(share * unused[n] % total_unused), n)):
                if rest <= 0:
                    break
                if parts[n] < unused[n]:
                    parts[n] += 1
                    rest -= 1
            for n, amount in parts.items():
                if amount:
                    lent[n][fr] = amount
    return lent


def _resource_rows(cq: o.ClusterQueue, usage: Mapping[FR, int], lent: Mapping[FR, int]) -> tuple[ResourceRow, ...]:
    rows = []
    for (flavor, resource), quota in quotas_by_fr(cq.resource_groups).items():
        used = usage.get((flavor, resource), 0)
        rows.append(
            ResourceRow(
                flavor=flavor,
                resource=resource,
                nominal=quota.nominal,
                usage=used,
                borrowed=max(0, used - quota.nominal),
                lent=lent.get((flavor, resource), 0),
                borrowing_limit=quota.borrowing_limit,
                lending_limit=quota.lending_limit,
            )
        )
    return tuple(rows)


# --- workloads -----------------------------------------------------------------------------


def _state_and_reason(wl: o.Workload) -> tuple[str, str, str]:
    """(state word, Kueue's reason, Kueue's message) of a workload."""
    evicted = wl.condition(tr.EVICTED)
    qr = wl.condition(tr.QUOTA_RESERVED)
    if wl.is_finished:
        fin = wl.condition(tr.FINISHED)
        state = (
            "preempted"
            if evicted is not None and evicted.status == "True" and evicted.reason == "Preempted"
            else "finished"
        )
        return state, fin.reason if fin else "", fin.message if fin else ""
    if wl.has_quota_reservation:
        if evicted is not None and evicted.status == "True":
            return f"evicting ({evicted.reason})", evicted.reason, evicted.message
        if wl.condition_true(tr.ADMITTED):
            return "admitted", "", ""
        admitted = wl.condition(tr.ADMITTED)
        return "reserved", admitted.reason if admitted else "", admitted.message if admitted else ""
    if not wl.active:
        held = wl.annotations.get(HOLD_ANNOTATION)
        if held is not None:
            return "held", "", held
        return "inactive", evicted.reason if evicted else "", evicted.message if evicted else ""
    if evicted is not None and evicted.status == "True":
        return "pending", evicted.reason, evicted.message
    if qr is not None and qr.status == "False":
        return "pending", qr.reason, qr.message
    return "pending", "", ""


def _describe(verdict: predictor.Verdict | None) -> str:
    if verdict is None:
        return ""
    kind = verdict.kind
    if kind is predictor.VerdictKind.RUNNING:
        return "keeps running"
    if kind is predictor.VerdictKind.PREEMPTED:
        return f"preempted by {verdict.preempted_by} ({verdict.reason})"
    if kind is predictor.VerdictKind.ADMITTED:
        return f"admitted (cycle {verdict.cycle})"
    if kind is predictor.VerdictKind.ADMITTED_AFTER_PREEMPTION:
        victims = ", ".join(v for v, _ in verdict.victims)
        return f"admitted after preempting {victims} (cycle {verdict.cycle})"
    return "stays pending"


def _model_positions(state: o.ClusterState, now: datetime) -> dict[str, int]:
    """Position of each pending workload in its ClusterQueue, in the model's heap order."""
    engine = Engine(state, now)
    out: dict[str, int] = {}
    for queue in engine.queues.values():
        members = [*queue.active.values(), *queue.inadmissible.values()]
        for index, info in enumerate(sorted(members, key=queue.order_key)):
            out[info.key] = index
    return out


def _row(
    wl: o.Workload,
    raw: Mapping[str, Any],
    *,
    now: datetime,
    position: int | None,
    verdict: predictor.Verdict | None,
    identity: SkyPilotIdentity | None,
) -> WorkloadRow:
    state, reason, message = _state_and_reason(wl)
    return WorkloadRow(
        key=wl.key,
        local_queue=wl.queue_name,
        state=state,
        priority=priority_of(wl),
        created=queue_order_timestamp(wl),
        age_seconds=max(0.0, (now - wl.creation_timestamp).total_seconds()),
        position=position,
        predicted=_describe(verdict),
        reason=reason,
        message=message,
        preemptions=tr.preemption_count(raw),
        skypilot=identity or identity_from_workload(raw),
    )


def build_view(
    docs: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    identities: Mapping[str, SkyPilotIdentity] | None = None,
    positions: Mapping[str, int] | None = None,
    predict: bool = True,
    config: o.KueueConfig | None = None,
    cluster_queues: Iterable[str] | None = None,
    namespace: str | None = None,
) -> QueueView:
    """Build the queue view.

    Args:
        docs: the model's documents (:func:`sky_kueue.mirror.export.documents`).
        now: the time ages are measured against and predictions run at.
        identities: SkyPilot identity by Workload key (from the mirror's pods).
        positions: Kueue's positions by Workload key (visibility API), or None for the model's.
        predict: run the predictor for predicted outcomes.
        config: Kueue's scheduling mode for the predictor.
        cluster_queues: show only these ClusterQueues.
        namespace: show only workloads of this namespace (and the queues they use).

    Raises:
        ModelError: a queue-level object the model cannot read.
    """
    state, raw, notes = model_state(docs, config, now)
    identities = identities or {}
    usage = _usage(state)
    lent = _lent(state, usage)
    positions_from = POSITIONS_VISIBILITY if positions is not None else POSITIONS_MODEL
    if positions is None:
        try:
            positions = _model_positions(state, now)
        except ModelError as exc:
            notes.append(f"positions unavailable: {exc}")
            positions = {}
    verdicts: dict[str, predictor.Verdict] = {}
    if predict:
        try:
            verdicts = predictor.predict(state, now=now).verdicts
        except ModelError as exc:
            notes.append(f"prediction unavailable: {exc}")
            predict = False
    wanted = set(cluster_queues) if cluster_queues is not None else None
    by_cq: dict[str, list[o.Workload]] = {}
    for wl in state.workloads.values():
        if wl.is_finished:
            continue
        target = wl.admission.cluster_queue if wl.admission and wl.has_quota_reservation else None
        if target is None:
            lq = state.local_queue_for(wl)
            target = lq.cluster_queue if lq else None
        if target is None:
            notes.append(f"{wl.key}: LocalQueue {wl.namespace}/{wl.queue_name} not found")
            continue
        by_cq.setdefault(target, []).append(wl)
    views = []
    for name in sorted(state.cluster_queues):
        if wanted is not None and name not in wanted:
            continue
        members = by_cq.get(name, [])
        if namespace is not None:
            members = [wl for wl in members if wl.namespace == namespace]
            lq_here = any(lq.cluster_queue == name and lq.namespace == namespace for lq in state.local_queues.values())
            if not members and not lq_here:
                continue

        def row(wl: o.Workload) -> WorkloadRow:
            return _row(
                wl,
                raw[wl.key],
                now=now,
                position=None if wl.has_quota_reservation else positions.get(wl.key),
                verdict=verdicts.get(wl.key),
                identity=identities.get(wl.key),
            )

        admitted = sorted(
            (row(wl) for wl in members if wl.has_quota_reservation), key=lambda r: (-r.priority, r.created, r.key)
        )
        pending = sorted(
            (row(wl) for wl in members if not wl.has_quota_reservation),
            key=lambda r: (r.position if r.position is not None else _UNKNOWN_POSITION, -r.priority, r.created, r.key),
        )
        rows = [*admitted, *pending]
        spec = state.cluster_queues[name]
        views.append(
            ClusterQueueView(
                name=name,
                cohort=spec.cohort,
                resources=_resource_rows(spec, usage.get(name, {}), lent.get(name, {})),
                admitted=tuple(admitted),
                pending=tuple(pending),
                preemptions=sum(r.preemptions for r in rows),
            )
        )
    shown = {cq.name for cq in views}
    lanes = lane_views(
        (d for d in docs if d.get("kind") == "ClusterQueue"),
        (d for d in docs if d.get("kind") == "LocalQueue"),
        raw.values(),
        now=now,
        identities=identities,
    )
    return QueueView(
        taken_at=now,
        cluster_queues=tuple(views),
        positions_from=positions_from,
        predicted=predict,
        notes=tuple(notes),
        lanes=tuple(lane for lane in lanes if lane.cluster_queue in shown),
    )

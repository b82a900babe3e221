"""A job's history as one Kubernetes object: the declared schema, naming and compaction.

This module is pure (no client, no I/O): it turns a :class:`~sky_kueue.controller.history.JobHistory`
into the ``spec``/``status`` of a ``JobHistory`` custom resource and back, names the object,
and folds old episodes into totals when the object grows. The I/O lives in
:mod:`sky_kueue.controller.kube_store`.

Why camelCase fields: the Kubernetes API conventions
(``kubernetes/community contributors/devel/sig-architecture/api-conventions.md``, "Naming
conventions") ask for camelCase JSON field names, so ``kubectl get -o yaml`` reads like
every other object.

Why times are JSON numbers (POSIX seconds) and not RFC 3339 strings, against the same
conventions' advice for user-facing APIs: aging is a pure function of the history, and a
restarted or failed-over controller must recompute *bit-identical* boosts from it. A float
round-trips exactly through JSON; a microsecond RFC 3339 string does not.

Why compaction, and how exactly-once survives it: etcd refuses a value larger than
``--max-request-bytes`` (1.5 MiB by default; etcd ``embed/config.go``, ``DefaultMaxRequestBytes``),
and the API server rejects the write. A job preempted thousands of times would get there, so
before an object reaches :data:`COMPACT_AT_BYTES` (a third of the limit: every write sends the
whole object, so a smaller one is also a faster one) the oldest finished episodes (their
preemptions, evictions, transitions and actuated or skipped steps) are folded into
:class:`~sky_kueue.controller.history.FoldedTotals`. Steps still ``decided`` are never folded
(they await actuation), nor is the most recently actuated step (it carries the current
boost). The fold records the time of the newest folded fact (``through``); a replayed fact at
or before it is reported "already recorded", so the idempotency of the watch replay holds for
folded episodes as well. Only the most recent :data:`RETAINED_FRACTION` of the records is
kept in full, so ``through`` lies hundreds of episodes in the past, far beyond any watch
replay window (the API server's watch cache keeps minutes of events, ``--watch-cache-sizes``).

What a fold loses: the aging policies are folds over the *retained* records, so after a
compaction they see the job's recent past only (the folded counts feed ``status``, the
printer columns and ``controller status``, not the policy), and the waiting and running time
of folded intervals is dropped. One preemption cycle costs about 1.1 KiB (the preemption
with Kueue's message, three transitions, an aging step with its explanation), so at
:data:`COMPACT_AT_BYTES` the first fold comes after roughly 450 preemptions of one job.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from sky_kueue.controller.history import (
    AgingStep,
    BurstRecord,
    EvictionRecord,
    FoldedTotals,
    HoldRecord,
    JobHistory,
    PreemptionRecord,
    StepState,
    StoreError,
    Transition,
    TransitionCause,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.mirror.identity import JobIdentity

#: The custom resource (manifest: ``configs/controller/jobhistory-crd.yaml``).
GROUP = "sky-kueue.io"
VERSION = "v1alpha1"
KIND = "JobHistory"
PLURAL = "jobhistories"
API_VERSION = f"{GROUP}/{VERSION}"
#: Label telling job records, alias records and the controller's runtime record apart.
RECORD_LABEL = "sky-kueue.io/record"
#: Label set while a job has steps decided but not yet actuated (``pending_steps`` lists by it).
PENDING_LABEL = "sky-kueue.io/pending-steps"


class RecordKind:
    JOB = "job"
    ALIAS = "alias"
    RUNTIME = "runtime"


#: etcd's default request limit is 1.5 MiB; compact well before it (bytes of the JSON body).
ETCD_MAX_REQUEST_BYTES = 1_572_864
COMPACT_AT_BYTES = 524_288
#: Room left for what the API server adds to a stored object (uid, resourceVersion,
#: creationTimestamp, generation, managedFields on a real server).
SERVER_METADATA_ALLOWANCE_BYTES = 4_096
#: A compaction keeps this fraction of the foldable records (the newest ones).
RETAINED_FRACTION = 0.5
#: Object names are DNS-1123 subdomains of at most this many characters (Kubernetes
#: ``apimachinery/pkg/util/validation``, ``DNS1123SubdomainMaxLength``).
MAX_NAME_LENGTH = 253
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
#: Hex digits of the SHA-256 used when a job key cannot be spelled as a name.
NAME_HASH_DIGITS = 16


def object_name(job_key: str) -> str:
    """The object name of a job key: readable when possible, hashed otherwise.

    ``managed-job/17`` -> ``managed-job.17``; ``pod-group/ns/name`` -> ``pod-group.ns.name``.
    Namespaces are DNS labels (no dots) so the spelling is unambiguous; a key whose spelling
    is not a valid subdomain or too long gets ``<kind>.<sha256 prefix>``.
    """
    spelled = job_key.replace("/", ".")
    if len(spelled) <= MAX_NAME_LENGTH and _DNS1123_SUBDOMAIN.match(spelled):
        return spelled
    kind = job_key.partition("/")[0] or "job"
    digest = hashlib.sha256(job_key.encode("utf-8")).hexdigest()[:NAME_HASH_DIGITS]
    return f"{kind}.{digest}" if _DNS1123_SUBDOMAIN.match(kind) else f"job.{digest}"


class _Schema(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class TransitionDoc(_Schema):
    key: str
    cause: TransitionCause
    at: float
    workload_uid: str
    cluster: str | None = None


class PreemptionDoc(_Schema):
    key: str
    at: float
    workload_name: str
    reason: str = "Unknown"
    preemptor_uid: str | None = None
    preemptor_job_uid: str | None = None
    preemptor_priority: int | None = None
    message: str = ""


class EvictionDoc(_Schema):
    key: str
    at: float
    workload_name: str
    reason: str
    kind: str
    message: str = ""
    underlying_cause: str | None = None


class StepDoc(_Schema):
    key: str
    workload_namespace: str
    workload_name: str
    policy: str
    boost: int
    revision: int
    decided_at: float
    state: StepState
    revised_at: float | None = None
    actuated_boost: int | None = None
    actuated_at: float | None = None
    actuator: str | None = None
    detail: str | None = None
    explanation: tuple[str, ...] = ()
    cluster: str | None = None


class BurstDoc(_Schema):
    decided_at: float
    reason: str
    detail: str
    preemptions: int
    predicted_wait_seconds: float | None = None


class HoldDoc(_Schema):
    workload_uid: str
    workload_namespace: str
    workload_name: str
    held_at: float
    reason: str
    preemptions: int
    predicted_wait_seconds: float | None = None
    released_at: float | None = None
    release_kind: str | None = None
    release_reason: str | None = None
    release_cluster: str | None = None


class FoldedDoc(_Schema):
    through: float
    preemptions: int = 0
    evictions: int = 0
    transitions: int = 0
    steps: int = 0


class JobHistorySpec(_Schema):
    """``spec`` of a JobHistory object (one job record, an alias, or the runtime record)."""

    job: str
    namespace: str = ""
    pod_group: str | None = None
    managed_job_id: str | None = None
    managed_job_name: str | None = None
    user: str | None = None
    cluster_name: str | None = None
    #: The owner's team (``sky-kueue.io/team``); absent on objects written before it was recorded.
    team: str | None = None
    base_priority: int | None = None
    first_seen: float | None = None
    #: Other job keys (pod groups) whose history was merged into this one.
    aliases: tuple[str, ...] = ()
    #: On an alias record: the job key this one was merged into.
    alias_of: str | None = None
    #: A merge into this job key began; any writer completes it before using this record.
    merging_into: str | None = None
    transitions: tuple[TransitionDoc, ...] = ()
    preemptions: tuple[PreemptionDoc, ...] = ()
    evictions: tuple[EvictionDoc, ...] = ()
    steps: tuple[StepDoc, ...] = ()
    burst: BurstDoc | None = None
    holds: tuple[HoldDoc, ...] = ()
    folded: FoldedDoc | None = None
    #: On the runtime record only: watch cursors and the last heartbeat.
    cursors: dict[str, str] = {}
    heartbeat: dict[str, Any] | None = None


@dataclass(frozen=True)
class JobRecord:
    """A decoded job object: the history plus what only the store needs."""

    history: JobHistory
    namespace: str
    aliases: tuple[str, ...] = ()
    alias_of: str | None = None
    merging_into: str | None = None


_DocT = TypeVar("_DocT", bound=BaseModel)
#: Encoded history records kept for reuse (a few KB each); more than a compacted job holds.
ENCODED_RECORDS_CACHED = 4096
_RecordT = TypeVar("_RecordT")


def _to_doc(model: type[_DocT], record: Any, *, drop: tuple[str, ...] = (), **overrides: Any) -> _DocT:
    """A history dataclass as its document (the same field names; ``overrides`` re-encode keys,
    ``drop`` leaves out what the document holds once for the whole job)."""
    try:
        return _cached_doc(model, record, drop, tuple(sorted(overrides.items())))
    except TypeError:  # a record holding something unhashable: encode it afresh
        return _build_doc(model, record, drop, overrides)


@functools.lru_cache(maxsize=ENCODED_RECORDS_CACHED)
def _cached_doc(
    model: type[_DocT], record: Any, drop: tuple[str, ...], overrides: tuple[tuple[str, Any], ...]
) -> _DocT:
    """One document per (frozen, hashable) record: every write of a job re-encodes its whole
    history, and all but the newest records are the ones the previous write encoded. The
    documents are frozen, so sharing them is safe."""
    return _build_doc(model, record, drop, dict(overrides))


def _build_doc(model: type[_DocT], record: Any, drop: tuple[str, ...], overrides: Mapping[str, Any]) -> _DocT:
    values = {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.name not in drop}
    values.update(overrides)
    return model(**values)


def _from_doc(cls: type[_RecordT], document: BaseModel, **overrides: Any) -> _RecordT:
    """A document back as its history dataclass (``overrides`` decode keys)."""
    values = dict(document)
    values.update(overrides)
    return cls(**values)


def _step_to_doc(step: AgingStep) -> StepDoc:
    return _to_doc(StepDoc, step, key=step.key.token, drop=("job_key",))


def step_from_doc(doc: StepDoc, job_key: str) -> AgingStep:
    return _from_doc(AgingStep, doc, key=EpisodeKey.parse(doc.key), job_key=job_key, explanation=tuple(doc.explanation))


def encode_spec(record: JobRecord) -> JobHistorySpec:
    h = record.history
    ident = h.identity
    return JobHistorySpec(
        job=h.key,
        namespace=record.namespace,
        pod_group=ident.pod_group if ident else None,
        managed_job_id=ident.managed_job_id if ident else None,
        managed_job_name=ident.managed_job_name if ident else None,
        user=ident.user if ident else None,
        cluster_name=ident.cluster_name if ident else None,
        team=ident.team if ident else None,
        base_priority=h.base_priority,
        first_seen=h.first_seen,
        aliases=record.aliases,
        alias_of=record.alias_of,
        merging_into=record.merging_into,
        transitions=tuple(_to_doc(TransitionDoc, t) for t in h.transitions),
        preemptions=tuple(_to_doc(PreemptionDoc, p, key=p.key.token) for p in h.preemptions),
        evictions=tuple(_to_doc(EvictionDoc, e, key=e.key.token) for e in h.evictions),
        steps=tuple(_step_to_doc(s) for s in h.steps),
        burst=None if h.burst is None else _to_doc(BurstDoc, h.burst),
        holds=tuple(_to_doc(HoldDoc, hold) for hold in h.holds),
        folded=None if h.folded is None else _to_doc(FoldedDoc, h.folded),
    )


def decode_spec(spec: JobHistorySpec) -> JobRecord:
    identity = None
    if spec.managed_job_id or spec.pod_group:
        identity = JobIdentity(
            namespace=spec.namespace,
            pod_group=spec.pod_group,
            managed_job_id=spec.managed_job_id,
            managed_job_name=spec.managed_job_name,
            user=spec.user,
            cluster_name=spec.cluster_name,
            team=spec.team,
            skypilot_owned=True,
        )
    history = JobHistory(
        key=spec.job,
        identity=identity,
        base_priority=spec.base_priority,
        first_seen=spec.first_seen,
        transitions=tuple(_from_doc(Transition, t) for t in spec.transitions),
        preemptions=tuple(_from_doc(PreemptionRecord, p, key=EpisodeKey.parse(p.key)) for p in spec.preemptions),
        evictions=tuple(_from_doc(EvictionRecord, e, key=EpisodeKey.parse(e.key)) for e in spec.evictions),
        steps=tuple(step_from_doc(s, spec.job) for s in spec.steps),
        burst=None if spec.burst is None else _from_doc(BurstRecord, spec.burst),
        holds=tuple(_from_doc(HoldRecord, hold) for hold in spec.holds),
        folded=None if spec.folded is None else _from_doc(FoldedTotals, spec.folded),
    )
    return JobRecord(history, spec.namespace, spec.aliases, spec.alias_of, spec.merging_into)


def parse_spec(obj: Mapping[str, Any]) -> JobHistorySpec:
    """The declared ``spec`` of a stored object.

    Raises:
        StoreError: the object does not match the schema (one line, naming the object).
    """
    name = (obj.get("metadata") or {}).get("name", "?")
    try:
        return JobHistorySpec.model_validate(obj.get("spec") or {})
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise StoreError(f"{KIND} {name}: spec.{where}: {first['msg']}") from None


def summary_status(history: JobHistory) -> dict[str, Any]:
    """The ``status`` shown by ``kubectl get jobhistories`` (printer columns)."""
    phase = history.phase
    return {
        "preemptions": history.preemption_count,
        "boost": history.current_boost,
        "phase": phase.value if phase else "",
    }


def manifest(
    name: str, namespace: str, spec: JobHistorySpec, kind: str, status: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The full object body for a create or an update (``resourceVersion`` added by the caller)."""
    labels = {RECORD_LABEL: kind}
    if kind == RecordKind.JOB and any(s.state is StepState.DECIDED for s in spec.steps):
        labels[PENDING_LABEL] = "true"
    body: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec.model_dump(mode="json", by_alias=True, exclude_defaults=True),
    }
    if status is not None:
        body["status"] = dict(status)
    return body


def body_bytes(body: Mapping[str, Any]) -> int:
    return len(json.dumps(body, separators=(",", ":")).encode("utf-8"))


def compact(history: JobHistory) -> JobHistory:
    """Folds the oldest half of the finished records into :class:`FoldedTotals`.

    Kept in full: the newest records, every step still ``decided``, and the step carrying the
    current boost. Returns ``history`` unchanged when nothing can be folded.
    """
    current = history.current_boost_step
    foldable_steps = [s for s in history.steps if s.state is not StepState.DECIDED and s is not current]

    def oldest(records: list[Any], at: Any) -> list[Any]:
        keep = int(len(records) * RETAINED_FRACTION)
        ordered = sorted(records, key=at)
        return ordered[: len(records) - keep]

    gone_preemptions = oldest(list(history.preemptions), lambda p: p.at)
    gone_evictions = oldest(list(history.evictions), lambda e: e.at)
    gone_transitions = oldest(list(history.transitions), lambda t: t.at)
    gone_steps = oldest(foldable_steps, lambda s: s.decided_at)
    if not (gone_preemptions or gone_evictions or gone_transitions or gone_steps):
        return history
    # Facts are folded up to one instant: anything at or before ``through`` that is not kept
    # is gone, so every record of the four kinds at or before it must be folded.
    through = max(
        [p.at for p in gone_preemptions]
        + [e.at for e in gone_evictions]
        + [t.at for t in gone_transitions]
        + [s.decided_at for s in gone_steps]
    )
    before = history.folded
    if before is not None:
        through = max(through, before.through)

    def fold(records: tuple[Any, ...], at: Any, keep: Any = lambda r: False) -> tuple[tuple[Any, ...], int]:
        kept = tuple(r for r in records if at(r) > through or keep(r))
        return kept, len(records) - len(kept)

    preemptions, n_p = fold(history.preemptions, lambda p: p.at)
    evictions, n_e = fold(history.evictions, lambda e: e.at)
    transitions, n_t = fold(history.transitions, lambda t: t.at)
    steps, n_s = fold(history.steps, lambda s: s.decided_at, lambda s: s.state is StepState.DECIDED or s is current)
    folded = FoldedTotals(
        through=through,
        preemptions=n_p + (before.preemptions if before else 0),
        evictions=n_e + (before.evictions if before else 0),
        transitions=n_t + (before.transitions if before else 0),
        steps=n_s + (before.steps if before else 0),
    )
    released = [h for h in history.holds if h.released]
    gone_holds = {id(h) for h in released[: len(released) - int(len(released) * RETAINED_FRACTION)]}
    holds = tuple(h for h in history.holds if id(h) not in gone_holds)  # a held relaunch is never folded
    return replace(
        history,
        preemptions=preemptions,
        evictions=evictions,
        transitions=transitions,
        steps=steps,
        holds=holds,
        folded=folded,
    )


def fit(
    record: JobRecord, name: str, namespace: str, compact_at_bytes: int = COMPACT_AT_BYTES
) -> tuple[dict[str, Any], JobRecord] | None:
    """The object body for ``record`` and the record it holds, compacted until the body
    (plus what the API server adds) stays under ``compact_at_bytes``; None if it cannot."""
    while True:
        spec = encode_spec(record)
        body = manifest(name, namespace, spec, RecordKind.JOB, summary_status(record.history))
        if body_bytes(body) + SERVER_METADATA_ALLOWANCE_BYTES < compact_at_bytes:
            return body, record
        compacted = compact(record.history)
        if compacted is record.history:
            return None
        record = replace(record, history=compacted)


def folded_away(history: JobHistory, at: float) -> bool:
    """True when a fact at time ``at`` would have been folded (so it counts as recorded)."""
    return history.folded is not None and at <= history.folded.through


def _coalesce(first: Any, second: Any) -> Any:
    return first if first is not None else second


def register(
    record: JobRecord | None,
    job_key: str,
    identity: JobIdentity,
    seen_at: float,
    base_priority: int | None = None,
) -> JobRecord:
    """The job record with what ``identity`` adds (fields only ever go from unknown to known).

    Mirrors the SQLite store's registration: the first base priority wins, ``first_seen`` is
    the earliest sighting, identity fields are filled in, never overwritten.
    """
    if record is None:
        record = JobRecord(JobHistory(key=job_key, first_seen=seen_at), identity.namespace)
    h = record.history
    old = h.identity
    ident = JobIdentity(
        namespace=old.namespace if old else record.namespace or identity.namespace,
        pod_group=_coalesce(old.pod_group if old else None, identity.pod_group),
        managed_job_id=_coalesce(old.managed_job_id if old else None, identity.managed_job_id),
        managed_job_name=_coalesce(old.managed_job_name if old else None, identity.managed_job_name),
        user=_coalesce(old.user if old else None, identity.user),
        cluster_name=_coalesce(old.cluster_name if old else None, identity.cluster_name),
        team=_coalesce(old.team if old else None, identity.team),
        skypilot_owned=True,
    )
    first_seen = seen_at if h.first_seen is None else min(h.first_seen, seen_at)
    history = replace(h, identity=ident, base_priority=_coalesce(h.base_priority, base_priority), first_seen=first_seen)
    return replace(record, history=history, namespace=record.namespace or identity.namespace)


def identity_unchanged(a: JobIdentity | None, b: JobIdentity | None) -> bool:
    """Equality over every field (JobIdentity's own ``==`` compares only the key fields)."""
    if a is None or b is None:
        return a is b
    fields = ("namespace", "pod_group", "managed_job_id", "managed_job_name", "user", "cluster_name", "team")
    return all(getattr(a, f) == getattr(b, f) for f in fields)


def same_record(a: JobRecord | None, b: JobRecord | None) -> bool:
    """True when writing ``b`` over ``a`` would change nothing stored."""
    if a is None or b is None:
        return a is b
    return a == b and identity_unchanged(a.history.identity, b.history.identity)


def merge(target: JobRecord | None, source: JobRecord, target_key: str) -> JobRecord:
    """``source`` (a pod-group record) folded into ``target`` (its managed job); idempotent.

    Facts are united by idempotency key, the earlier sighting gives ``first_seen`` and the base
    priority (as the SQLite store's merge does), ``source``'s key becomes an alias.
    """
    src = source.history
    if target is None:
        history = replace(src, key=target_key, steps=tuple(replace(s, job_key=target_key) for s in src.steps))
        return JobRecord(history, source.namespace, (src.key,))
    h = target.history

    def union(mine: tuple[Any, ...], theirs: tuple[Any, ...], key: Any) -> tuple[Any, ...]:
        known = {key(r) for r in mine}
        return (*mine, *(r for r in theirs if key(r) not in known))

    earlier, later = (src, h) if (src.first_seen or 0.0) <= (h.first_seen or 0.0) else (h, src)
    sightings = [x for x in (src.first_seen, h.first_seen) if x is not None]
    first_seen = min(sightings) if sightings else None
    ident = h.identity
    if ident is not None and src.identity is not None and ident.pod_group is None:
        ident = replace(ident, pod_group=src.identity.pod_group)
    folded = h.folded
    if src.folded is not None:
        folded = (
            src.folded
            if folded is None
            else FoldedTotals(
                through=max(folded.through, src.folded.through),
                preemptions=folded.preemptions + src.folded.preemptions,
                evictions=folded.evictions + src.folded.evictions,
                transitions=folded.transitions + src.folded.transitions,
                steps=folded.steps + src.folded.steps,
            )
        )
    history = replace(
        h,
        identity=ident,
        base_priority=_coalesce(earlier.base_priority, later.base_priority),
        first_seen=first_seen,
        transitions=union(h.transitions, src.transitions, lambda t: t.key),
        preemptions=union(h.preemptions, src.preemptions, lambda p: p.key),
        evictions=union(h.evictions, src.evictions, lambda e: e.key),
        steps=union(h.steps, tuple(replace(s, job_key=target_key) for s in src.steps), lambda s: s.key),
        burst=_coalesce(h.burst, src.burst),
        holds=union(h.holds, src.holds, lambda hold: hold.workload_uid),
        folded=folded,
    )
    aliases = target.aliases if src.key in target.aliases else (*target.aliases, src.key)
    return replace(target, history=history, aliases=aliases)

"""The in-cluster history store: one ``JobHistory`` object per job, in the controller's namespace.

Why in the API server: the controller's history then lives where the cluster keeps
everything (etcd). Any replica can take over after a node failure (no ReadWriteOnce volume
to re-attach), backups and RBAC come with the cluster, and ``kubectl get jobhistories``
inspects it. SQLite (:mod:`sky_kueue.controller.sqlite_store`) stays the embedded default.

Why a small CRD and not a ConfigMap per job: a ConfigMap holds only string values, so the
history would be one opaque JSON blob that ``kubectl`` cannot show; a CRD declares its schema
(``configs/controller/jobhistory-crd.yaml``), prints job, preemptions, boost and phase as
columns (``additionalPrinterColumns``), and lets RBAC grant the controller its own resource
without giving it every ConfigMap of the namespace (which may hold other applications'
configuration). The cost is one manifest to install. The summary lives in ``status`` but the
CRD declares no status subresource, so record and summary change in one atomic write
(Kubernetes API conventions, "Spec and Status": a status subresource would split them into
two requests, and a crash between them would leave the columns stale).

Why every write is a compare-and-swap: two replicas (a deposed leader still finishing a
request, the new leader) may write the same job, and so may the controllers of two clusters
that keep one history in a home cluster (:mod:`.state_spec`; a job relaunched on another
cluster of its team). Each write is a PUT carrying the
``metadata.resourceVersion`` it read; the API server answers 409 Conflict when the object
changed since (optimistic concurrency, Kubernetes API conventions "Concurrency Control and
Consistency"; client-go ``util/retry.RetryOnConflict`` is the same loop). On 409 the store
re-reads the object and re-applies the *intent* (record this fact, decide this step) to the
fresh copy; as every intent is idempotent by key, nothing is lost and nothing is applied
twice. A create answers 409 AlreadyExists when another writer created first, and is retried
the same way. Throttling (429) and server errors (5xx) are retried with exponential backoff,
honouring ``Retry-After`` (client-go ``rest/request.go`` does the same for 429 and 5xx).

A job's idempotency keys and its aliases are in its one object, so exactly-once holds as it
does in SQLite, where a fact and its transition commit in one transaction: here they land in
one PUT. Merging a pod-group record into its managed job spans two objects; it is made
crash-safe by a marker (``mergingInto``) written on the pod-group record first: any writer
that meets the marker completes the merge (a union by key, idempotent) before using the
record, and the pod-group record becomes an alias only after the managed-job record holds
everything.

Cached reads: writers keep the last object they wrote or read, so a write is usually one PUT
(a stale cache costs one 409 and a re-read, never a lost update). ``load``, ``jobs``,
``resolve`` and ``pending_steps`` always read the API server, as another replica may have
written.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import tenacity
import urllib3.exceptions
from kubernetes import client
from kubernetes.client.rest import ApiException

from sky_kueue.controller import history_document as doc
from sky_kueue.controller.history import (
    AgingStep,
    BurstRecord,
    EvictionRecord,
    HistoryStore,
    HoldRecord,
    HoldRelease,
    JobHistory,
    JobSummary,
    PreemptionRecord,
    StepDecision,
    StepState,
    StoreClusterError,
    StoreError,
    StoreWriteStats,
    Transition,
    identity_mismatch_message,
    one_job,
    reference_candidates,
)
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.runtime_state import Heartbeat
from sky_kueue.controller.state_spec import DEFAULT_KUBERNETES_NAMESPACE
from sky_kueue.mirror import backoff
from sky_kueue.mirror.errors import TRANSIENT_STATUSES, explain
from sky_kueue.mirror.identity import JobIdentity, JobOwner

T = TypeVar("T")
log = logging.getLogger(__name__)

#: The namespace of ``--state kubernetes`` when none is given and the pod's is unknown.
DEFAULT_NAMESPACE = DEFAULT_KUBERNETES_NAMESPACE
#: Name of the object holding the watch cursors and the heartbeat.
RUNTIME_OBJECT_NAME = "sky-kueue-controller-runtime"
#: HTTP statuses worth retrying: conflicts (re-read and re-apply), throttling, server errors.
HTTP_CONFLICT = 409
HTTP_NOT_FOUND = 404
RETRIABLE_STATUSES = TRANSIENT_STATUSES | {HTTP_CONFLICT}
#: Backoff between retries of throttled or failed requests (a conflict is retried at once).
RETRY_INITIAL_SECONDS = 0.05
RETRY_MAX_SECONDS = 5.0
#: Give up after this many attempts or this long, whichever comes first.
RETRY_MAX_ATTEMPTS = 30
RETRY_DEADLINE_SECONDS = 60.0
#: Attempts to merge a pod-group record that keeps being written meanwhile.
MERGE_PASSES = 5
#: Decoded objects remembered by (name, resourceVersion); cleared when full.
DECODED_MEMO_ENTRIES = 4096
#: Jitter of the retry backoff (spreads replicas that failed together).
_JITTER = random.Random()
#: Per-request timeout (connect, read) in whole seconds (the client ignores float timeouts).
REQUEST_TIMEOUT_SECONDS = (5, 30)


class _Moved(Exception):
    """The record became an alias (merged into a managed job) after the key was resolved."""


class _Taken(Exception):
    """Another owner's history holds the managed-job key (created since the key was bound)."""


class _Conflict(Exception):
    """A compare-and-swap lost the race (or a create met an existing object): re-read."""


def _retriable(err: BaseException) -> bool:
    if isinstance(err, _Conflict):
        return True
    if isinstance(err, ApiException):
        return err.status in RETRIABLE_STATUSES
    return isinstance(err, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


@dataclass(frozen=True)
class RetryPolicy:
    """How store requests are retried (injectable so tests need not sleep)."""

    max_attempts: int = RETRY_MAX_ATTEMPTS
    deadline_seconds: float = RETRY_DEADLINE_SECONDS
    initial_seconds: float = RETRY_INITIAL_SECONDS
    max_seconds: float = RETRY_MAX_SECONDS
    sleep: Callable[[float], None] = time.sleep

    def wait(self, state: tenacity.RetryCallState) -> float:
        """No wait after a conflict (re-read at once); else the mirror's jittered backoff, which
        honours the server's ``Retry-After`` up to ``max_seconds``."""
        err = state.outcome.exception() if state.outcome is not None else None
        if isinstance(err, _Conflict):
            return 0.0
        policy = backoff.RetryPolicy(
            initial_delay_seconds=self.initial_seconds,
            max_delay_seconds=self.max_seconds,
            max_retry_after_seconds=self.max_seconds,
        )
        return backoff.delay_seconds(state.attempt_number, err, policy, _JITTER)

    def run(self, what: str, attempt: Callable[[], T], host: str = "") -> T:
        """Runs ``attempt`` until it succeeds or a non-retriable error or the limits stop it.

        Args:
            what: the request in words, for the message.
            attempt: one try.
            host: the API server's URL, named when it cannot be reached.

        Raises:
            StoreClusterError: the API server cannot be reached or answered an error.
            StoreError: the write kept conflicting (one line naming ``what``).
        """
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retriable),
            wait=self.wait,
            stop=tenacity.stop_after_attempt(self.max_attempts) | tenacity.stop_after_delay(self.deadline_seconds),
            sleep=self.sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _Conflict:
            raise StoreError(f"{what}: still conflicting after {self.max_attempts} attempts") from None
        except ApiException as err:
            raise StoreClusterError(f"{what}: HTTP {err.status} {err.reason}: {_api_message(err)}") from None
        except (urllib3.exceptions.HTTPError, OSError) as err:
            message = f"{what}: {explain(err, host=host or 'its URL', what=what)}"
            raise StoreClusterError(message, unreachable=True) from None


def _api_message(err: ApiException) -> str:
    import json

    try:
        body = json.loads(err.body or "{}")
    except ValueError:
        return " ".join(str(err.body or "").split())[:200]
    return " ".join(str(body.get("message", "")).split())[:200]


class _Objects:
    """Thin access to the JobHistory objects of one namespace, with retries and a write cache."""

    def __init__(self, api_client: client.ApiClient, namespace: str, retry: RetryPolicy) -> None:
        self.api = client.CustomObjectsApi(api_client)
        self.host = str(api_client.configuration.host)
        self.namespace = namespace
        self.retry = retry
        self.cache: dict[str, dict[str, Any]] = {}
        self.lock = threading.RLock()
        #: Creates and replaces sent, and the ones answered 409 (for metrics).
        self.writes = 0
        self.conflicts = 0

    def where(self, name: str | None = None) -> str:
        place = f"{doc.PLURAL}.{doc.GROUP} in namespace {self.namespace}"
        return f"{doc.KIND} {self.namespace}/{name}" if name else place

    def _get_once(self, name: str) -> dict[str, Any] | None:
        try:
            obj: dict[str, Any] = self.api.get_namespaced_custom_object(
                doc.GROUP, doc.VERSION, self.namespace, doc.PLURAL, name, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as err:
            if err.status == HTTP_NOT_FOUND:
                return None
            raise
        return obj

    def get(self, name: str) -> dict[str, Any] | None:
        """The object as the API server has it now (None: absent)."""
        obj = self.retry.run(f"cannot read {self.where(name)}", lambda: self._get_once(name), self.host)
        with self.lock:
            if obj is None:
                self.cache.pop(name, None)
            else:
                self.cache[name] = obj
        return obj

    def list(self, selector: str) -> list[dict[str, Any]]:
        def once() -> list[dict[str, Any]]:
            found = self.api.list_namespaced_custom_object(
                doc.GROUP,
                doc.VERSION,
                self.namespace,
                doc.PLURAL,
                label_selector=selector,
                _request_timeout=REQUEST_TIMEOUT_SECONDS,
            )
            return list(found.get("items") or [])

        return self.retry.run(f"cannot list {self.where()}", once, self.host)

    def update(
        self,
        name: str,
        change: Callable[[dict[str, Any] | None], tuple[dict[str, Any] | None, T]],
        *,
        fresh: bool = False,
    ) -> T:
        """Compare-and-swap: ``change`` maps the current object to the new body and a result.

        ``change`` must be a pure function of its argument: on a conflict it runs again on the
        re-read object. A body of None means "nothing to write".
        """
        state = {"fresh": fresh}

        def attempt() -> T:
            with self.lock:
                current = None if state["fresh"] else self.cache.get(name)
            if current is None or state["fresh"]:
                current = self._get_once(name)
            body, result = change(current)
            if body is None:
                with self.lock:
                    if current is not None:
                        self.cache[name] = current
                return result
            with self.lock:
                self.writes += 1
            try:
                if current is None:
                    written = self.api.create_namespaced_custom_object(
                        doc.GROUP,
                        doc.VERSION,
                        self.namespace,
                        doc.PLURAL,
                        body,
                        _request_timeout=REQUEST_TIMEOUT_SECONDS,
                    )
                else:
                    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                    written = self.api.replace_namespaced_custom_object(
                        doc.GROUP,
                        doc.VERSION,
                        self.namespace,
                        doc.PLURAL,
                        name,
                        body,
                        _request_timeout=REQUEST_TIMEOUT_SECONDS,
                    )
            except ApiException as err:
                if err.status == HTTP_CONFLICT:
                    state["fresh"] = True
                    with self.lock:
                        self.conflicts += 1
                        self.cache.pop(name, None)
                    raise _Conflict() from err
                if err.status == HTTP_NOT_FOUND and current is not None:  # deleted under us: create it again
                    state["fresh"] = True
                    raise _Conflict() from err
                raise
            with self.lock:
                self.cache[name] = written
            return result

        return self.retry.run(f"cannot write {self.where(name)}", attempt, self.host)


def _check_served(objects: _Objects) -> None:
    """Lists the runtime record (one small list): fails when JobHistory objects cannot be read.

    Raises:
        StoreClusterError: one line saying what is missing (CRD, RBAC) or unreachable.
    """
    try:
        objects.list(f"{doc.RECORD_LABEL}={doc.RecordKind.RUNTIME}")
    except StoreClusterError as err:
        if err.unreachable:
            raise
        raise StoreClusterError(
            f"{err} (is the CRD configs/controller/jobhistory-crd.yaml installed, "
            "and may this service account list it?)"
        ) from None


class KubernetesHistoryStore:
    """:class:`~sky_kueue.controller.history.HistoryStore` on ``JobHistory`` objects."""

    def __init__(
        self,
        api_client: client.ApiClient,
        namespace: str = DEFAULT_NAMESPACE,
        *,
        compact_at_bytes: int = doc.COMPACT_AT_BYTES,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.namespace = namespace
        self.compact_at_bytes = compact_at_bytes
        self._objects = _Objects(api_client, namespace, retry or RetryPolicy())
        self._aliases: dict[str, str] = {}  # pod-group key -> managed-job key, once linked
        self._step_jobs: dict[str, str] = {}  # step token -> job key
        self._decoded: dict[tuple[str, str], doc.JobRecord] = {}
        self._bound: dict[tuple[str, JobOwner], str] = {}  # (managed-job key, owner) -> its history's key
        self._mismatched: set[str] = set()  # owned keys of claimants of another owner's history

    def write_stats(self) -> StoreWriteStats:
        """Writes sent to the API server since the store was opened, and the 409s among them."""
        with self._objects.lock:
            return StoreWriteStats(self._objects.writes, self._objects.conflicts, len(self._mismatched))

    def check(self) -> None:
        """Fails fast when the resource is not served or not readable (CRD missing, RBAC).

        Raises:
            StoreError: one line saying what is missing.
        """
        _check_served(self._objects)

    # --- encoding -----------------------------------------------------------------------

    def _decode(self, obj: dict[str, Any] | None) -> doc.JobRecord | None:
        """The record in ``obj``; memoized by name and resourceVersion (objects are immutable
        once written, so a version decodes to the same record every time)."""
        if obj is None:
            return None
        metadata = obj.get("metadata") or {}
        memo_key = (str(metadata.get("name")), str(metadata.get("resourceVersion")))
        found = self._decoded.get(memo_key)
        if found is None:
            found = doc.decode_spec(doc.parse_spec(obj))
            if len(self._decoded) >= DECODED_MEMO_ENTRIES:
                self._decoded.clear()
            self._decoded[memo_key] = found
        return found

    def _body(self, record: doc.JobRecord) -> tuple[dict[str, Any], doc.JobRecord]:
        """The object for ``record``, compacted until it fits, and the record it holds.

        Raises:
            StoreError: nothing is left to fold and the record is still too large.
        """
        name = doc.object_name(record.history.key)
        fitted = doc.fit(record, name, self.namespace, self.compact_at_bytes)
        if fitted is None:
            raise StoreError(
                f"{self._objects.where(name)} would exceed {self.compact_at_bytes} bytes and nothing is left to compact"
            )
        return fitted

    # --- job keys -----------------------------------------------------------------------

    def _update_job(
        self,
        job_key: str,
        change: Callable[[doc.JobRecord | None], tuple[doc.JobRecord | None, T]],
    ) -> T:
        name = doc.object_name(job_key)
        written: list[doc.JobRecord] = []

        def on_object(obj: dict[str, Any] | None) -> tuple[dict[str, Any] | None, T]:
            written.clear()
            before = self._decode(obj)
            if before is not None and (before.alias_of or before.merging_into):
                raise _Moved()  # merged into a managed job under us: resolve again
            after, result = change(before)
            if after is None or doc.same_record(before, after):
                return None, result
            body, stored = self._body(after)
            written.append(stored)
            return body, result

        result = self._objects.update(name, on_object)
        current = self._objects.cache.get(name)
        if written and current is not None:  # the next write starts from this record, undecoded
            self._decoded[(name, str(current["metadata"]["resourceVersion"]))] = written[0]
        return result

    def _canonical_for_group(self, group_key: str) -> str:
        """The job key pod-group observations go to (following an alias, finishing a merge)."""
        known = self._aliases.get(group_key)
        if known is not None:
            return known
        record = self._decode(self._objects.get(doc.object_name(group_key)))
        if record is None:
            return group_key
        if record.alias_of:
            self._aliases[group_key] = record.alias_of
            return record.alias_of
        if record.merging_into:
            self._finish_merge(group_key, record.merging_into)
            return record.merging_into
        return group_key

    def _link(self, group_key: str, key: str, seen_at: float) -> None:
        """Makes ``group_key`` an alias of ``key``, merging its history first (crash-safe)."""
        group_name = doc.object_name(group_key)

        def mark(obj: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
            record = self._decode(obj)
            if record is None or record.alias_of == key:
                return None, record is None
            if record.alias_of:  # linked to another job before: repoint (SQLite replaces the alias)
                return self._alias_body(group_key, key), False
            if record.merging_into == key:
                return None, False
            marked = replace(record, merging_into=key)
            spec = doc.encode_spec(marked)
            return doc.manifest(
                group_name, self.namespace, spec, doc.RecordKind.JOB, doc.summary_status(record.history)
            ), False

        def create_alias(obj: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
            if obj is None:
                return self._alias_body(group_key, key), True
            record = self._decode(obj)
            return None, record is not None and record.alias_of == key  # False: a full record appeared

        for _ in range(MERGE_PASSES):
            if not self._objects.update(group_name, mark):
                self._finish_merge(group_key, key)
                break
            # No pod-group history: the managed job lists the alias, then the alias object appears.
            self._update_job(key, lambda r: (self._with_alias(r, group_key, key, seen_at), None))
            if self._objects.update(group_name, create_alias):
                break
        else:
            raise StoreError(f"{self._objects.where(group_name)}: still changing after {MERGE_PASSES} link passes")
        self._aliases[group_key] = key

    def _with_alias(self, record: doc.JobRecord | None, group_key: str, key: str, seen_at: float) -> doc.JobRecord:
        if record is None:
            record = doc.JobRecord(JobHistory(key=key, first_seen=seen_at), "")
        if group_key in record.aliases:
            return record
        return replace(record, aliases=(*record.aliases, group_key))

    def _alias_body(self, group_key: str, key: str) -> dict[str, Any]:
        spec = doc.JobHistorySpec(job=group_key, alias_of=key)
        return doc.manifest(doc.object_name(group_key), self.namespace, spec, doc.RecordKind.ALIAS, None)

    def _finish_merge(self, group_key: str, key: str) -> None:
        """Unites the marked pod-group record into ``key``'s, then turns it into an alias.

        Each pass is idempotent; a pass fails only when the pod-group record was written
        between the union and the alias switch, and the next pass unites that write too.
        """
        group_name = doc.object_name(group_key)
        for _ in range(MERGE_PASSES):
            source = self._decode(self._objects.get(group_name))
            if source is None or source.alias_of:
                return
            unmarked = replace(source, merging_into=None)

            def unite(record: doc.JobRecord | None, merged: doc.JobRecord = unmarked) -> tuple[doc.JobRecord, None]:
                return doc.merge(record, merged, key), None

            self._update_job(key, unite)

            def to_alias(
                obj: dict[str, Any] | None, merged: doc.JobRecord = source
            ) -> tuple[dict[str, Any] | None, bool]:
                current = self._decode(obj)
                if current is None or current.alias_of == key:
                    return None, True
                if current != merged:  # written since we merged it: merge again first
                    return None, False
                return self._alias_body(group_key, key), True

            if self._objects.update(group_name, to_alias, fresh=True):
                return
        raise StoreError(f"{self._objects.where(group_name)}: still changing after {MERGE_PASSES} merge passes")

    def _bound_key(self, identity: JobIdentity) -> str:
        """The key of ``identity``'s managed-job history (as the SQLite store decides it):
        ``managed-job/<id>`` unless another owner's history holds it, then the claimant's own
        :attr:`~JobIdentity.owned_key`. Decided once per owner and process (one GET); a record
        created meanwhile by another owner is caught at the write (:class:`_Taken`)."""
        token = (identity.key, identity.owner)
        known = self._bound.get(token)
        if known is not None:
            return known
        record = self._decode(self._objects.get(doc.object_name(identity.key)))
        key = identity.key
        if record is not None and record.history.key == identity.key:
            conflict = self._owner_conflict(record, identity)
            if conflict is not None:
                key = self._rebind(identity, conflict)
        self._bound[token] = key
        return key

    @staticmethod
    def _owner_conflict(record: doc.JobRecord, identity: JobIdentity) -> str | None:
        held = record.history.identity
        owner = JobOwner(record.namespace, None, None) if held is None else held.owner
        return owner.conflict(identity.owner)

    def _rebind(self, identity: JobIdentity, conflict: str) -> str:
        """Counts and logs (once per claimant) a claim on another owner's history."""
        if identity.owned_key not in self._mismatched:
            self._mismatched.add(identity.owned_key)
            log.warning(identity_mismatch_message(identity, identity.key, conflict))
        self._bound[(identity.key, identity.owner)] = identity.owned_key
        return identity.owned_key

    def _key_for(self, identity: JobIdentity, seen_at: float) -> str:
        group_key = identity.pod_group_key
        if identity.managed_job_id:
            key = self._bound_key(identity)
            if group_key is not None and self._aliases.get(group_key) != key:
                self._link(group_key, key, seen_at)
            return key
        assert group_key is not None
        return self._canonical_for_group(group_key)

    def _write(
        self,
        identity: JobIdentity,
        seen_at: float,
        change: Callable[[doc.JobRecord], tuple[doc.JobRecord, T]],
        base_priority: int | None = None,
    ) -> T:
        for _ in range(MERGE_PASSES):
            key = self._key_for(identity, seen_at)

            def registered(record: doc.JobRecord | None, key: str = key) -> tuple[doc.JobRecord | None, T]:
                if record is not None and identity.managed_job_id and key == identity.key:
                    conflict = self._owner_conflict(record, identity)
                    if conflict is not None:
                        raise _Taken(conflict)
                return change(doc.register(record, key, identity, seen_at, base_priority))

            try:
                return self._update_job(key, registered)
            except _Taken as taken:
                self._rebind(identity, str(taken))
            except _Moved:
                if identity.pod_group_key is not None:
                    self._aliases.pop(identity.pod_group_key, None)
        raise StoreError(f"{self._objects.where()}: job {identity.key} kept moving while being written")

    # --- HistoryStore writes --------------------------------------------------------------

    def ensure_job(self, identity: JobIdentity, base_priority: int | None, seen_at: float) -> str:
        return self._write(identity, seen_at, lambda r: (r, r.history.key), base_priority)

    def record_transition(self, identity: JobIdentity, transition: Transition) -> bool:
        return self._record(identity, transition.at, lambda h: h.with_transition(transition))

    def record_preemption(self, identity: JobIdentity, record: PreemptionRecord) -> bool:
        return self._record(identity, record.at, lambda h: h.with_preemption(record))

    def record_eviction(self, identity: JobIdentity, record: EvictionRecord) -> bool:
        return self._record(identity, record.at, lambda h: h.with_eviction(record))

    def _record(self, identity: JobIdentity, at: float, add: Callable[[JobHistory], JobHistory]) -> bool:
        """Adds one fact at time ``at``; False when it was recorded already (``add`` returns the
        history it got, as :class:`JobHistory` does for a known key) or folded away."""

        def change(record: doc.JobRecord) -> tuple[doc.JobRecord, bool]:
            h = record.history
            added = add(h)
            if added is h or doc.folded_away(h, at):
                return record, False
            return replace(record, history=added), True

        return self._write(identity, at, change)

    def decide_step(self, identity: JobIdentity, decision: StepDecision) -> AgingStep:
        def change(record: doc.JobRecord) -> tuple[doc.JobRecord, AgingStep]:
            h = record.history
            existing = h.step(decision.key)
            if existing is None:
                step = AgingStep(
                    key=decision.key,
                    job_key=h.key,
                    workload_namespace=decision.workload_namespace,
                    workload_name=decision.workload_name,
                    policy=decision.policy,
                    boost=decision.boost,
                    revision=0,
                    decided_at=decision.decided_at,
                    state=StepState.DECIDED,
                    explanation=tuple(decision.explanation),
                    cluster=decision.cluster,
                )
            elif decision.boost > existing.boost and existing.state is not StepState.SKIPPED:
                step = replace(
                    existing,
                    boost=decision.boost,
                    revision=existing.revision + 1,
                    revised_at=decision.decided_at,
                    state=StepState.DECIDED,
                    policy=decision.policy,
                    explanation=tuple(decision.explanation),
                )
            else:
                return record, existing
            return replace(record, history=h.with_step(step)), step

        step = self._write(identity, decision.decided_at, change)
        self._step_jobs[step.key.token] = step.job_key
        return step

    def _update_step(self, key: EpisodeKey, change: Callable[[AgingStep], AgingStep]) -> AgingStep:
        job_key = self._step_jobs.get(key.token) or self._find_step_job(key)

        def on_record(record: doc.JobRecord | None) -> tuple[doc.JobRecord | None, AgingStep]:
            step = record.history.step(key) if record is not None else None
            if record is None or step is None:
                raise StoreError(f"{self._objects.where(doc.object_name(job_key))}: no aging step {key.token}")
            changed = change(step)
            if changed == step:
                return record, step
            return replace(record, history=record.history.with_step(changed)), changed

        return self._update_job(job_key, on_record)

    def _find_step_job(self, key: EpisodeKey) -> str:
        for selector in (f"{doc.PENDING_LABEL}=true", f"{doc.RECORD_LABEL}={doc.RecordKind.JOB}"):
            for obj in self._objects.list(selector):
                record = self._decode(obj)
                if record is not None and record.history.step(key) is not None:
                    self._step_jobs[key.token] = record.history.key
                    return record.history.key
        raise StoreError(f"{self._objects.where()}: no aging step {key.token}")

    def mark_actuated(self, key: EpisodeKey, boost: int, revision: int, at: float, actuator: str) -> AgingStep:
        def change(step: AgingStep) -> AgingStep:
            if step.revision != revision or step.state is not StepState.DECIDED:
                return step
            return replace(step, state=StepState.ACTUATED, actuated_boost=boost, actuated_at=at, actuator=actuator)

        return self._update_step(key, change)

    def mark_skipped(self, key: EpisodeKey, at: float, detail: str) -> AgingStep:
        def change(step: AgingStep) -> AgingStep:
            if step.state is not StepState.DECIDED:
                return step
            return replace(step, state=StepState.SKIPPED, detail=detail, actuated_at=None)

        return self._update_step(key, change)

    def record_burst(self, identity: JobIdentity, record: BurstRecord) -> BurstRecord:
        def change(job: doc.JobRecord) -> tuple[doc.JobRecord, BurstRecord]:
            if job.history.burst is not None:
                return job, job.history.burst
            return replace(job, history=replace(job.history, burst=record)), record

        return self._write(identity, record.decided_at, change)

    def record_hold(self, identity: JobIdentity, record: HoldRecord) -> HoldRecord:
        def change(job: doc.JobRecord) -> tuple[doc.JobRecord, HoldRecord]:
            stored = job.history.hold(record.workload_uid)
            if stored is not None:
                return job, stored
            return replace(job, history=job.history.with_hold(record)), record

        return self._write(identity, record.held_at, change)

    def release_hold(self, identity: JobIdentity, release: HoldRelease) -> HoldRecord | None:
        def change(job: doc.JobRecord) -> tuple[doc.JobRecord, HoldRecord | None]:
            stored = job.history.hold(release.workload_uid)
            if stored is None or stored.released:
                return job, stored
            history = job.history.with_release(release)
            return replace(job, history=history), history.hold(release.workload_uid)

        return self._write(identity, release.at, change)

    # --- reads ----------------------------------------------------------------------------

    def _records(self, selector: str = f"{doc.RECORD_LABEL}={doc.RecordKind.JOB}") -> list[doc.JobRecord]:
        records = []
        for obj in self._objects.list(selector):
            record = self._decode(obj)
            if record is not None and not record.alias_of:
                records.append(record)
        return records

    def pending_steps(self) -> Sequence[AgingStep]:
        steps = [
            s
            for record in self._records(f"{doc.PENDING_LABEL}=true")
            for s in record.history.steps
            if s.state is StepState.DECIDED
        ]
        for step in steps:
            self._step_jobs[step.key.token] = step.job_key
        return tuple(sorted(steps, key=lambda s: (s.revised_at or s.decided_at, s.key.token)))

    def _canonical(self, job_key: str) -> str | None:
        record = self._decode(self._objects.get(doc.object_name(job_key)))
        if record is None or record.history.key != job_key:
            return None
        if record.alias_of:
            return record.alias_of
        if record.merging_into:
            return record.merging_into
        return job_key

    def load(self, job_key: str) -> JobHistory | None:
        key = self._canonical(job_key)
        if key is None:
            return None
        if key != job_key:
            record = self._decode(self._objects.get(doc.object_name(key)))
            if record is None:  # a merge was marked but never written: the group record still has it
                source = self._decode(self._objects.get(doc.object_name(job_key)))
                return None if source is None else source.history
            if not record.alias_of and job_key not in record.aliases:  # merge in progress
                source = self._decode(self._objects.get(doc.object_name(job_key)))
                if source is not None and not source.alias_of:
                    record = doc.merge(record, replace(source, merging_into=None), key)
            return record.history
        record = self._decode(self._objects.get(doc.object_name(key)))
        return None if record is None else record.history

    def resolve(self, text: str) -> str | None:
        """The job key a user means by ``text`` (same rules as the SQLite store).

        Raises:
            StoreError: ``text`` matches several jobs (the message lists them).
        """
        text = text.strip()
        if not text:
            return None
        for candidate in reference_candidates(text):
            found = self._canonical(candidate)
            if found is not None:
                return found
        keys = sorted(
            r.history.key
            for r in self._records()
            if r.history.identity is not None
            and text
            in (r.history.identity.pod_group, r.history.identity.cluster_name, r.history.identity.managed_job_name)
        )
        return one_job(text, keys)

    def jobs(self) -> Sequence[JobSummary]:
        summaries = []
        for record in self._records():
            h = record.history
            if record.merging_into:
                continue  # shown under the job it is being merged into
            summaries.append(
                JobSummary(
                    key=h.key,
                    namespace=record.namespace,
                    pod_group=h.identity.pod_group if h.identity else None,
                    managed_job_id=h.identity.managed_job_id if h.identity else None,
                    preemptions=h.preemption_count,
                    evictions=h.eviction_count,
                    current_boost=h.current_boost,
                    phase=h.phase,
                    burst=h.burst is not None,
                    held=h.current_hold is not None,
                )
            )
        return tuple(sorted(summaries, key=lambda s: s.key))

    def import_history(self, history: JobHistory, namespace: str) -> bool:
        """Writes a whole history (``controller migrate``); united by key with what is there.

        Idempotent: importing the same history twice changes nothing the second time. A
        managed job's pod group becomes its alias, as if the controller had seen both.

        Returns:
            True when something was written.
        """
        incoming = doc.JobRecord(history, namespace)

        def change(record: doc.JobRecord | None) -> tuple[doc.JobRecord | None, bool]:
            if record is None:
                return incoming, True
            merged = doc.merge(record, replace(incoming, history=replace(history, key="")), history.key)
            merged = replace(merged, aliases=tuple(a for a in merged.aliases if a))
            return merged, not doc.same_record(record, merged)

        written = self._update_job(history.key, change)
        identity = history.identity
        if identity is not None and identity.managed_job_id and identity.pod_group_key:
            self._link(identity.pod_group_key, history.key, history.first_seen or 0.0)
        for step in history.steps:
            self._step_jobs[step.key.token] = history.key
        return written

    def histories(self) -> Iterable[JobHistory]:
        """Every job's full history (for ``controller migrate`` and ``status``)."""
        return tuple(r.history for r in self._records() if not r.merging_into)

    def close(self) -> None:
        """Nothing to release: the API client belongs to the caller."""


class KubernetesRuntimeState:
    """Watch cursors and the heartbeat in one ``JobHistory`` object of record kind ``runtime``.

    The same resource as the histories, so the controller needs no further RBAC; the object
    is labelled apart and never listed as a job. Both replicas write the heartbeat (last
    writer wins, through the same compare-and-swap); only the leader writes cursors.
    """

    def __init__(
        self, api_client: client.ApiClient, namespace: str = DEFAULT_NAMESPACE, *, retry: RetryPolicy | None = None
    ) -> None:
        self._objects = _Objects(api_client, namespace, retry or RetryPolicy())
        self.namespace = namespace

    def check(self) -> None:
        """Fails fast when the resource is not served or not readable here (as the store's check).

        Raises:
            StoreError: one line saying what is missing.
        """
        _check_served(self._objects)

    def _spec(self, obj: dict[str, Any] | None) -> doc.JobHistorySpec:
        return doc.JobHistorySpec(job="") if obj is None else doc.parse_spec(obj)

    def _change(self, edit: Callable[[doc.JobHistorySpec], doc.JobHistorySpec]) -> None:
        def on_object(obj: dict[str, Any] | None) -> tuple[dict[str, Any] | None, None]:
            before = self._spec(obj)
            after = edit(before)
            if obj is not None and after == before:
                return None, None
            return doc.manifest(RUNTIME_OBJECT_NAME, self.namespace, after, doc.RecordKind.RUNTIME, None), None

        self._objects.update(RUNTIME_OBJECT_NAME, on_object)

    def _read(self) -> doc.JobHistorySpec:
        return self._spec(self._objects.get(RUNTIME_OBJECT_NAME))

    def cursor(self, resource: str) -> str | None:
        return self._read().cursors.get(resource)

    def save_cursor(self, resource: str, resource_version: str, at: float) -> None:
        self._change(lambda s: s.model_copy(update={"cursors": {**s.cursors, resource: resource_version}}))

    def clear_cursor(self, resource: str) -> None:
        self._change(lambda s: s.model_copy(update={"cursors": {k: v for k, v in s.cursors.items() if k != resource}}))

    def beat(self, identity: str, leader: bool, at: float, details: dict[str, Any]) -> None:
        heartbeat = {"identity": identity, "leader": leader, "at": at, "details": details}
        self._change(lambda s: s.model_copy(update={"heartbeat": heartbeat}))

    def heartbeat(self) -> Heartbeat | None:
        beat = self._read().heartbeat
        if not beat:
            return None
        return Heartbeat(
            str(beat["identity"]), bool(beat["leader"]), float(beat["at"]), dict(beat.get("details") or {})
        )

    def cursors(self) -> dict[str, str]:
        return dict(self._read().cursors)

    def close(self) -> None:
        """Nothing to release: the API client belongs to the caller."""


if TYPE_CHECKING:

    def _conforms(store: KubernetesHistoryStore) -> HistoryStore:
        return store  # mypy checks that the class implements the Protocol

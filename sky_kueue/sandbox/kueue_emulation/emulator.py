"""The reconcile loop that behaves like Kueue toward the sandbox's clients.

Each :meth:`KueueEmulator.step` does what Kueue's controllers and scheduler do between
two observations of the cluster:

0. reset ``spec.priority`` of every Workload of a WorkloadPriorityClass that Kueue sees
   created (at its start, :meth:`KueueEmulator.restart`) or changed, to the class value, as
   Kueue >= v0.16's WorkloadPriorityClass controller does
   (``pkg/controller/core/workloadpriorityclass_controller.go``);
1. play the kubelet for deleted pods (Running until their grace period, recorded in
   ``deletionGracePeriodSeconds``, is over, then Failed with exit code 137, as a container
   that traps SIGTERM ends), and finish pods (and Jobs) whose simulated run time is over;
   a pod group whose pods all stopped gets ``WaitingForReplacementPods`` then ``Finished``
   (``pkg/controller/jobs/pod/pod_controller.go``), which releases its quota;
2. create the Workloads of new pod groups, single pods and Jobs that name a LocalQueue;
3. bring the scheduling model (a persistent :class:`~sky_kueue.kueue.scheduler.Engine`, so
   queue state carries over between cycles as in Kueue) in line with the stored objects;
4. run one scheduling cycle and write its outcome as Kueue writes it: admissions (gates
   removed, Jobs unsuspended), pending messages, and preemptions (victims marked, a pod
   group's pods given ``TerminationTarget`` and deleted; the victim keeps its quota, and the
   preemptor waits, until those pods have run out their grace period, as in Kueue, whose
   pod integration releases the quota only once no pod is active; a Job suspended and
   requeued). A deactivated (``spec.active: false``) waiting Workload is marked
   ``Evicted=True/Deactivated`` with its eviction counted, as Kueue's workload controller
   does (``pkg/controller/core/workload_controller.go``).

:meth:`start` runs steps on a background thread at an interval; tests call :meth:`step`
directly with a manual clock, so nothing depends on real time.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import threading
from collections.abc import Mapping
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import objects as o
from sky_kueue.kueue import parse, quantity, validation
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.scheduler import CycleResult, Engine
from sky_kueue.sandbox.apiserver import AdmissionRequest, ApiError, ObjectStore, Operation
from sky_kueue.sandbox.apiserver.clock import Clock, format_timestamp, parse_timestamp
from sky_kueue.sandbox.kueue_emulation import binding
from sky_kueue.sandbox.kueue_emulation import status as st
from sky_kueue.sandbox.kueue_emulation import workloads as wls

LOG = logging.getLogger(__name__)

#: Pod/Job annotation: how many (simulated) seconds the workload runs once admitted.
RUN_SECONDS_ANNOTATION = "sandbox.sky-kueue.io/run-seconds"
#: Real seconds between two steps of the background loop.
DEFAULT_STEP_INTERVAL_SECONDS = 0.05

#: The reason of every ``QuotaReserved=False`` the scheduler writes in Kueue v0.17.0 (the real
#: cluster's pin; ``pkg/scheduler/scheduler.go`` ``requeueAndUpdate``), measured on it by
#: ``tests/real_kueue/test_sandbox_differential.py``. The model keeps its finer reasons
#: (``WaitingForQuota``, ...) for its own explanations; Kueue v0.17.0 does not write them.
PENDING_REASON = "Pending"
WORKLOADS = f"workloads.{kueue_api.KUEUE_GROUP}"
CONFIG_RESOURCES = (
    "namespaces",
    f"resourceflavors.{kueue_api.KUEUE_GROUP}",
    f"workloadpriorityclasses.{kueue_api.KUEUE_GROUP}",
    f"cohorts.{kueue_api.KUEUE_GROUP}",
    f"clusterqueues.{kueue_api.KUEUE_GROUP}",
    f"localqueues.{kueue_api.KUEUE_GROUP}",
)
Obj = dict[str, Any]


@dataclasses.dataclass
class StepReport:
    """What one step did (keys are ``namespace/name`` of Workloads)."""

    created: list[str] = dataclasses.field(default_factory=list)
    admitted: list[str] = dataclasses.field(default_factory=list)
    preempted: list[str] = dataclasses.field(default_factory=list)
    finished: list[str] = dataclasses.field(default_factory=list)
    cycled: bool = False


@dataclasses.dataclass
class _Running:
    owner_kind: str  # "PodGroup", "Pod" or "Job"
    owners: list[tuple[str, str]]  # (namespace, name) of pods or the Job
    deadline: datetime.datetime | None


@dataclasses.dataclass
class _Stopping:
    """A preempted pod group (or pod) whose pods are running out their grace period."""

    owner_kind: str  # "PodGroup" or "Pod"
    owners: list[tuple[str, str]]
    retriable: bool


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class KueueEmulator:
    """Kueue's controllers and scheduler, emulated on a sandbox object store."""

    def __init__(
        self,
        store: ObjectStore,
        clock: Clock,
        config: o.KueueConfig | None = None,
        priority_boost: bool = False,
        pod_grace_periods: bool = False,
    ) -> None:
        """``pod_grace_periods``: a deleted pod runs out its grace period on the clock, as on a
        cluster (a preempted group keeps its quota that long); off, it stops at the next step
        (what the suite written before this emulation expects; see docs/sandbox-vs-kueue.md)."""
        self.store = store
        self.pod_grace_periods = pod_grace_periods
        self.clock = clock
        self.config = config or o.KueueConfig()
        self.priority_boost = priority_boost
        self.engine: Engine | None = None
        self._fingerprint: tuple[Any, ...] = ()
        self._state: o.ClusterState | None = None
        self._running: dict[str, _Running] = {}
        self._stopping: dict[str, _Stopping] = {}
        #: WorkloadPriorityClass values as Kueue last saw them (empty: Kueue just started).
        self._class_values: dict[str, int] = {}
        self._pod_ips = binding.PodIpAllocator()
        #: Runs bound pods as containers and reports their status (containers mode), else None.
        self.pod_starter: binding.PodStarter | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._unhooks = [
            store.add_admission_hook(self._default_pod, "pods"),
            store.add_admission_hook(self._default_job, "jobs.batch"),
        ]

    # --- webhooks -------------------------------------------------------------------

    @staticmethod
    def _default_pod(request: AdmissionRequest) -> None:
        """Kueue's pod webhook: gate, finalizer and managed label for pods naming a queue."""
        if request.operation is not Operation.CREATE or request.subresource is not None:
            return
        pod = request.obj
        if not wls.queue_name(pod):
            return
        meta = pod.setdefault("metadata", {})
        meta.setdefault("labels", {})[wls.MANAGED_LABEL] = "true"
        finalizers = meta.setdefault("finalizers", [])
        if wls.MANAGED_FINALIZER not in finalizers:
            finalizers.append(wls.MANAGED_FINALIZER)
        gates = pod.setdefault("spec", {}).setdefault("schedulingGates", [])
        if not any(g.get("name") == wls.ADMISSION_GATE for g in gates):
            gates.append({"name": wls.ADMISSION_GATE})

    @staticmethod
    def _default_job(request: AdmissionRequest) -> None:
        """Kueue's Job webhook: a Job naming a queue is created suspended."""
        if request.operation is Operation.CREATE and request.subresource is None and wls.queue_name(request.obj):
            request.obj.setdefault("spec", {})["suspend"] = True

    # --- loop -----------------------------------------------------------------------

    def start(self, interval_seconds: float = DEFAULT_STEP_INTERVAL_SECONDS) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(interval_seconds,), name="kueue-emulator", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
        for unhook in self._unhooks:
            unhook()
        self._unhooks = []

    def _loop(self, interval_seconds: float) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except ApiError as exc:  # a write raced with a client; the next step retries
                LOG.debug("emulator step conflicted: %s", exc)
            self._stop.wait(interval_seconds)

    def restart(self) -> None:
        """Kueue's manager restarts: every WorkloadPriorityClass is seen created again, so the
        next step resets ``spec.priority`` of every Workload of a class to the class value."""
        with self._lock:
            self._class_values = {}

    def step(self) -> StepReport:
        """One reconcile pass and at most one scheduling cycle."""
        with self._lock:
            report = StepReport()
            now = self.clock.now()
            self._reset_priorities()
            self._run_out_grace_periods(now)
            self._finish_runs(now, report)
            self._finish_stopped_victims(now)
            self._start_unqueued_pods()
            self._create_workloads(report)
            if not self._sync_engine(now):
                return report
            engine = self.engine
            assert engine is not None
            if engine.has_active_heads():
                engine.now = now
                result = engine.cycle()
                report.cycled = True
                self._write_cycle(result, now, report)
            return report

    # --- 1. finishing runs ----------------------------------------------------------

    def _pods_gone(self, run: _Running | _Stopping) -> bool:
        """Every pod of the group stopped: deleted (e.g. ``sky down``) and past its grace period.

        A deleted pod that has not yet run out its grace period is still active, and its
        Workload keeps its quota, as in Kueue's pod integration (``Pod.IsActive``).
        """
        if run.owner_kind == "Job":
            return False
        for ns, name in run.owners:
            pod = self.store.try_get("pods", name, ns)
            if pod is not None and (pod.get("status") or {}).get("phase") != "Failed":
                return False
        return True

    def _run_out_grace_periods(self, now: datetime.datetime) -> None:
        """The kubelet's part: a deleted, started pod runs until its grace period is over, then
        fails with exit code 137 (SkyPilot's container traps SIGTERM, so it is killed)."""
        for pod in self.store.list("pods").items:
            meta, status = pod["metadata"], pod.get("status") or {}
            deleted = meta.get("deletionTimestamp")
            if not deleted or not wls.queue_name(pod) or status.get("phase") in ("Failed", "Succeeded"):
                continue
            grace = datetime.timedelta(seconds=float(meta.get("deletionGracePeriodSeconds") or 0))
            running = status.get("phase") == "Running" and self.pod_grace_periods
            if running and parse_timestamp(deleted) + grace > now:
                continue
            self._mutate_status("pods", meta["name"], meta.get("namespace", ""), _killed(format_timestamp(now)))

    def _write_pods_stopped(self, key: str, owners: list[tuple[str, str]], stamp: str) -> None:
        """Kueue's pod-group conditions once its pods stopped: ``WaitingForReplacementPods``
        (reason: the eviction's, else ``PodsFailed``), then ``Finished`` (unretriable)."""
        ns, name = key.split("/", 1)
        doc = self.store.try_get(WORKLOADS, name, ns)
        if doc is None or wls.annotations_of(doc).get(wls.IS_GROUP_WORKLOAD_ANNOTATION) != "true":
            return
        evicted = st.condition(doc.get("status") or {}, st.EVICTED)
        if evicted is not None and evicted.get("status") == "True":
            reason, message = str(evicted.get("reason")), str(evicted.get("message", ""))
        else:
            reason, message = "PodsFailed", "Some Failed pods need replacement"
        self._mutate_status(
            WORKLOADS,
            name,
            ns,
            lambda s: st.set_condition(s, st.WAITING_FOR_REPLACEMENT_PODS, "True", reason, message, stamp),
        )

    def _finish_stopped_victims(self, now: datetime.datetime) -> None:
        """A preempted group whose pods all stopped releases its quota: unretriable, it is
        Finished (and collected with its pods); retriable, it waits for replacement pods."""
        stamp = format_timestamp(now)
        for key, stopping in list(self._stopping.items()):
            if not self._pods_gone(stopping):
                continue
            del self._stopping[key]
            ns, name = key.split("/", 1)
            if stopping.owner_kind == "PodGroup" and stopping.retriable:
                self._mutate_status(WORKLOADS, name, ns, lambda s: _wait_for_replacements(s, stamp))
            else:
                self._write_pods_stopped(key, stopping.owners, stamp)
                self._mutate_status(WORKLOADS, name, ns, _finished_with(0, len(stopping.owners), stamp))
            self._release_pods(stopping.owners)
            if self.store.try_get(WORKLOADS, name, ns) is not None and not self._live_owners(ns, stopping.owners):
                try:
                    self.store.delete(WORKLOADS, name, ns)  # garbage collection: every owner is gone
                except ApiError as exc:
                    LOG.debug("workload %s already collected: %s", key, exc)
            if self.engine is not None:
                self.engine.delete_workload(key)

    def _reset_priorities(self) -> None:
        """Kueue's WorkloadPriorityClass controller: a class seen created (every Kueue start)
        or changed sets ``spec.priority`` of each Workload of the class to its value."""
        values = self._priority_values()
        changed = {name: value for name, value in values.items() if self._class_values.get(name) != value}
        self._class_values = values
        if not changed:
            return
        for doc in self.store.list(WORKLOADS).items:
            ref = (doc.get("spec") or {}).get("priorityClassRef") or {}
            value = changed.get(str(ref.get("name")))
            if ref.get("kind") != "WorkloadPriorityClass" or value is None or doc["spec"].get("priority") == value:
                continue

            def reset(obj: Obj, value: int = value) -> None:
                obj["spec"]["priority"] = value

            try:
                self.store.mutate(WORKLOADS, doc["metadata"]["name"], reset, doc["metadata"]["namespace"])
            except ApiError as exc:
                LOG.debug("could not reset the priority of %s: %s", _key(doc), exc)

    def _finish_runs(self, now: datetime.datetime, report: StepReport) -> None:
        for key, run in list(self._running.items()):
            if self._pods_gone(run):
                ns, name = key.split("/", 1)
                stamp = format_timestamp(now)
                self._write_pods_stopped(key, run.owners, stamp)
                self._mutate_status(
                    WORKLOADS,
                    name,
                    ns,
                    _finished_with(0, len(run.owners), stamp),
                )
                del self._running[key]
                self._release_pods(run.owners)
                if self.engine is not None:
                    self.engine.delete_workload(key)
                report.finished.append(key)
                continue
            if run.deadline is None or run.deadline > now:
                continue
            ns, name = key.split("/", 1)
            stamp = format_timestamp(now)
            if run.owner_kind == "Job":
                self._mutate_status("jobs.batch", run.owners[0][1], ns, _job_succeeded(stamp))
            else:
                for pod_ns, pod_name in run.owners:
                    self._mutate_status("pods", pod_name, pod_ns, _pod_phase("Succeeded", stamp))
            total = len(run.owners) if run.owner_kind != "Job" else 1
            self._mutate_status(
                WORKLOADS,
                name,
                ns,
                lambda s, total=total, stamp=stamp: st.finish(
                    s, "Succeeded", f"Pods succeeded: {total}/{total}.", stamp
                ),
            )
            del self._running[key]
            if run.owner_kind != "Job":
                self._release_pods(run.owners)
            if self.engine is not None:
                self.engine.delete_workload(key)
            report.finished.append(key)

    # --- 2. workload creation -------------------------------------------------------

    def _priority_values(self) -> dict[str, int]:
        values: dict[str, int] = {}
        for obj in self.store.list(f"workloadpriorityclasses.{kueue_api.KUEUE_GROUP}").items:
            try:
                values[obj["metadata"]["name"]] = int(obj.get("value", 0))
            except (KeyError, TypeError, ValueError):
                continue
        return values

    def _create_workloads(self, report: StepReport) -> None:
        classes = self._priority_values()
        groups: dict[tuple[str, str], list[Obj]] = {}
        for pod in self.store.list("pods").items:
            if not wls.queue_name(pod) or (pod.get("metadata") or {}).get("deletionTimestamp"):
                continue
            group = wls.group_name(pod)
            ns = str(pod["metadata"].get("namespace"))
            if group:
                groups.setdefault((ns, group), []).append(pod)
            else:
                self._ensure_workload(wls.for_single_pod(pod, classes), report)
        for (ns, group), pods in groups.items():
            total = wls.group_total_count(pods[0]) or len(pods)
            existing = self.store.try_get(WORKLOADS, group, ns)
            if existing is not None:
                self._adopt_group_pods(existing, pods, total)
                continue
            if len(pods) >= total:
                self._ensure_workload(wls.for_pod_group(pods[:total], classes), report)
        for job in self.store.list("jobs.batch").items:
            if wls.queue_name(job):
                self._ensure_workload(wls.for_job(job, classes), report)

    def _ensure_workload(self, manifest: Obj, report: StepReport) -> None:
        meta = manifest["metadata"]
        if self.store.try_get(WORKLOADS, meta["name"], meta["namespace"]) is not None:
            return
        try:
            self.store.create(WORKLOADS, manifest, meta["namespace"])
            report.created.append(_key(manifest))
        except ApiError as exc:
            LOG.debug("could not create workload %s: %s", _key(manifest), exc)

    def _adopt_group_pods(self, workload: Obj, pods: list[Obj], total: int) -> None:
        """New pods of an existing group: owners of the Workload (Kueue's ``FindMatchingWorkloads``).

        A finished Workload keeps them gated forever, as in Kueue (the relaunch race); a
        Workload waiting for replacement pods is queued again once the group is complete.
        """
        owners = {ref.get("uid") for ref in workload["metadata"].get("ownerReferences") or []}
        new_refs = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": p["metadata"]["name"],
                "uid": p["metadata"]["uid"],
                "controller": False,
                "blockOwnerDeletion": True,
            }
            for p in pods
            if p["metadata"].get("uid") not in owners
        ]
        if new_refs:

            def add_owners(obj: Obj) -> None:
                obj["metadata"].setdefault("ownerReferences", []).extend(new_refs)

            self.store.mutate(WORKLOADS, workload["metadata"]["name"], add_owners, workload["metadata"]["namespace"])
        status = workload.get("status") or {}
        if st.is_true(status, st.WAITING_FOR_REPLACEMENT_PODS) and len(pods) >= total:
            stamp = format_timestamp(self.clock.now())
            self._mutate_status(
                WORKLOADS,
                workload["metadata"]["name"],
                workload["metadata"]["namespace"],
                lambda s: st.set_condition(
                    s, st.WAITING_FOR_REPLACEMENT_PODS, "False", "PodsReady", "No pods need replacement", stamp
                ),
            )

    # --- 3. model sync --------------------------------------------------------------

    def _config_docs(self) -> tuple[list[Obj], tuple[Any, ...]]:
        docs: list[Obj] = []
        fingerprint: list[tuple[str, str]] = []
        for resource in CONFIG_RESOURCES:
            rtype = self.store.resource(resource)
            for obj in self.store.list(resource).items:
                doc = dict(obj)
                doc["apiVersion"] = rtype.api_version()
                doc["kind"] = rtype.kind
                docs.append(doc)
                fingerprint.append((_key(obj), str(obj["metadata"].get("resourceVersion"))))
        return docs, tuple(fingerprint)

    def _model_workload(self, doc: Obj, classes: Mapping[str, o.WorkloadPriorityClass]) -> o.Workload | None:
        doc = dict(doc)
        doc["apiVersion"] = wls.KUEUE_API_VERSION
        doc["kind"] = "Workload"
        try:
            wl = parse.parse_workload(doc, classes)
        except ModelError as exc:
            LOG.debug("ignoring workload %s: %s", _key(doc), exc)
            return None
        if self.priority_boost:
            boost = wls.annotations_of(doc).get(wls.PRIORITY_BOOST_ANNOTATION)
            try:
                wl = dataclasses.replace(wl, priority=wl.priority + int(boost or 0))
            except ValueError:
                LOG.debug("ignoring invalid priority boost %r on %s", boost, _key(doc))
        return wl

    def _sync_engine(self, now: datetime.datetime) -> bool:
        """Align the model with the store; returns False when the Kueue setup is invalid."""
        docs, fingerprint = self._config_docs()
        if self.engine is None or fingerprint != self._fingerprint:
            try:
                state = parse.parse_documents(docs, self.config)
                for error in validation.state_errors(state):
                    raise ModelError(error)
            except ModelError as exc:
                LOG.warning("Kueue setup is invalid, not scheduling: %s", exc)
                self.engine = None
                return False
            self._state = state
            self._fingerprint = fingerprint
            self.engine = Engine(state, now)
        engine = self.engine
        assert self._state is not None
        state = self._state
        seen: set[str] = set()
        for doc in self.store.list(WORKLOADS).items:
            key = _key(doc)
            status = doc.get("status") or {}
            if st.is_true(status, st.FINISHED) or st.is_true(status, st.WAITING_FOR_REPLACEMENT_PODS):
                continue
            if not (doc.get("spec") or {}).get("active", True):
                self._deactivate(doc, now)
                continue
            wl = self._model_workload(doc, state.priority_classes)
            if wl is None:
                continue
            if wl.admission is None and state.local_queue_for(wl) is None:
                continue
            seen.add(key)
            holder = engine.holders.get(key)
            pending = engine.pending.get(key)
            if holder is not None:
                if holder.uid != wl.uid:
                    engine.delete_workload(key)
                    engine.add_workload(wl)
                elif holder.priority != wl.priority:
                    # spec.priority of an admitted Workload is mutable; Kueue updates its cache
                    # and requeues the cohort's parked Workloads (Engine.update_admitted_priority).
                    engine.update_admitted_priority(key, wl.priority)
                continue
            if pending is not None:
                if pending.uid != wl.uid:
                    engine.delete_workload(key)
                    engine.add_workload(wl)
                elif pending.priority != wl.priority:
                    engine.update_pending_workload(wl)
                continue
            engine.add_workload(wl)
        for key in list(engine.holders) + list(engine.pending):
            if key not in seen:
                engine.delete_workload(key)
                self._running.pop(key, None)
        return True

    def _deactivate(self, doc: Obj, now: datetime.datetime) -> None:
        """Kueue's workload controller on ``spec.active: false``: a Workload not yet evicted is
        evicted with reason ``Deactivated`` and the eviction counted; its gated pods stay
        (``Stop`` skips gated pods). Its quota, if it held any, is released here at once."""
        status = doc.get("status") or {}
        if st.is_true(status, st.EVICTED):
            return
        ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
        self._mutate_status(WORKLOADS, name, ns, lambda s: st.deactivate(s, format_timestamp(now)))

    # --- 4. writing a cycle ---------------------------------------------------------

    def _write_cycle(self, result: CycleResult, now: datetime.datetime, report: StepReport) -> None:
        engine = self.engine
        assert engine is not None
        stamp = format_timestamp(now)
        admitted_keys = {e.info.key for e in result.admitted}
        for entry in result.entries:
            if entry.info.key in admitted_keys:
                continue
            ns, name = entry.info.key.split("/", 1)
            self._mutate_status(
                WORKLOADS,
                name,
                ns,
                lambda s, e=entry: st.pending(s, PENDING_REASON, e.message, stamp),
            )
        for entry in result.admitted:
            assert entry.assignment is not None
            admission = {
                "clusterQueue": entry.cq,
                "podSetAssignments": [
                    {
                        "name": ps.name,
                        "count": ps.count,
                        "flavors": {r: fa.name for r, fa in ps.flavors.items()},
                        "resourceUsage": {r: quantity.format_amount(r, ps.requests.get(r, 0)) for r in ps.flavors},
                    }
                    for ps in entry.assignment.pod_sets
                ],
            }
            ns, name = entry.info.key.split("/", 1)
            self._mutate_status(WORKLOADS, name, ns, lambda s, a=admission, cq=entry.cq: st.admit(s, a, cq, stamp))
            self._start_run(entry.info.key, now)
            report.admitted.append(entry.info.key)
        requeue: list[str] = []
        for p in result.preempted:
            victim = p.victim
            preemptor_ns, preemptor_name = p.preemptor.key.split("/", 1)
            preemptor_doc = self.store.try_get(WORKLOADS, preemptor_name, preemptor_ns) or {}
            job_uid = wls.labels_of(preemptor_doc).get(wls.JOB_UID_LABEL, "")
            message = st.preemption_message(
                p.preemptor.uid,
                job_uid,
                p.reason,
                self._cq_path(p.preemptor.cluster_queue),
                self._cq_path(victim.cluster_queue),
            )
            ns, name = victim.key.split("/", 1)
            self._mutate_status(
                WORKLOADS, name, ns, lambda s, r=p.reason, m=message: st.evict_for_preemption(s, r, m, stamp)
            )
            if self._stop_victim(victim.key, message):
                requeue.append(victim.key)
            report.preempted.append(victim.key)
        engine.settle_events(result)
        for key in requeue:
            doc = self.store.try_get(WORKLOADS, key.split("/", 1)[1], key.split("/", 1)[0])
            assert self._state is not None
            wl = self._model_workload(doc, self._state.priority_classes) if doc else None
            if wl is not None:
                engine.add_workload(wl)

    def _cq_path(self, cq_name: str) -> str:
        engine = self.engine
        assert engine is not None
        node = engine.shape.cqs.get(cq_name)
        if node is None:
            return ""
        parts = [cq_name] + [a.name for a in node.path_to_root()]
        return "/" + "/".join(reversed(parts))

    def _owners(self, key: str) -> tuple[str, list[tuple[str, str]]]:
        ns, name = key.split("/", 1)
        doc = self.store.try_get(WORKLOADS, name, ns) or {}
        refs = (doc.get("metadata") or {}).get("ownerReferences") or []
        kinds = {ref.get("kind") for ref in refs}
        owners = [(ns, str(ref.get("name"))) for ref in refs]
        if "Job" in kinds:
            return "Job", owners
        if wls.annotations_of(doc).get(wls.IS_GROUP_WORKLOAD_ANNOTATION) == "true":
            return "PodGroup", owners
        return "Pod", owners

    def _start_run(self, key: str, now: datetime.datetime) -> None:
        kind, owners = self._owners(key)
        seconds: float | None = None
        stamp = format_timestamp(now)
        if kind == "Job":
            ns, job_name = owners[0]

            def unsuspend(obj: Obj) -> None:
                obj.setdefault("spec", {})["suspend"] = False

            job = self.store.try_get("jobs.batch", job_name, ns)
            if job is not None:
                self.store.mutate("jobs.batch", job_name, unsuspend, ns)
                parallelism = int((job.get("spec") or {}).get("parallelism", 1) or 1)
                self._mutate_status("jobs.batch", job_name, ns, _job_running(parallelism, stamp))
                seconds = _run_seconds(job)
        else:
            for ns, pod_name in owners:
                pod = self.store.try_get("pods", pod_name, ns)
                if pod is None:
                    continue
                self.store.mutate("pods", pod_name, _ungate, ns)
                self._start_pod(pod_name, ns, stamp)
                pod_seconds = _run_seconds(pod)
                if pod_seconds is not None:
                    seconds = pod_seconds if seconds is None else max(seconds, pod_seconds)
        deadline = None if seconds is None else now + datetime.timedelta(seconds=seconds)
        self._running[key] = _Running(kind, owners, deadline)

    def _start_pod(self, name: str, namespace: str, stamp: str) -> None:
        """Bind the pod to a node that fits it (kube-scheduler) and report it Running (kubelet)."""
        pod = self.store.try_get("pods", name, namespace)
        if pod is None:
            return
        nodes = self.store.list("nodes").items
        node_name = (pod.get("spec") or {}).get("nodeName") or binding.choose_node(
            nodes, self.store.list("pods").items, pod
        )
        if node_name and not (pod.get("spec") or {}).get("nodeName"):

            def bind(obj: Obj, node_name: str = node_name) -> None:
                obj.setdefault("spec", {})["nodeName"] = node_name

            self.store.mutate("pods", name, bind, namespace)
        node = next((n for n in nodes if n["metadata"]["name"] == node_name), None)
        if self.pod_starter is not None:
            bound = self.store.try_get("pods", name, namespace)
            if bound is not None:
                self.pod_starter.start_pod(bound, node)
            return
        started = binding.running(stamp, self._pod_ips.allocate(), binding.host_ip_of(node))
        statuses = binding.container_statuses(pod, stamp)

        def change(status: Obj) -> None:
            started(status)
            status["containerStatuses"] = statuses

        self._mutate_status("pods", name, namespace, change)

    def _start_unqueued_pods(self) -> None:
        """Pods Kueue does not manage (no queue label) start as soon as nothing gates them."""
        for pod in self.store.list("pods").items:
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            meta = pod.get("metadata") or {}
            if (
                status.get("phase", "Pending") != "Pending"
                or spec.get("schedulingGates")
                or meta.get("deletionTimestamp")
                or wls.queue_name(pod)
            ):
                continue
            self._start_pod(meta["name"], meta.get("namespace", ""), format_timestamp(self.clock.now()))

    def _stop_victim(self, key: str, message: str) -> bool:
        """Stop a preempted workload's job; returns True if its Workload is requeued (Jobs).

        A pod group's (or pod's) pods are marked ``TerminationTarget`` and deleted; they keep
        running for their grace period, and the Workload its quota (the model keeps it as an
        evicted holder, so the preemptor waits), until :meth:`_finish_stopped_victims`."""
        stamp = format_timestamp(self.clock.now())
        self._running.pop(key, None)
        kind, owners = self._owners(key)
        ns, name = key.split("/", 1)
        if kind == "Job":
            job_name = owners[0][1]

            def suspend(obj: Obj) -> None:
                obj.setdefault("spec", {})["suspend"] = True

            if self.store.try_get("jobs.batch", job_name, ns) is not None:
                self.store.mutate("jobs.batch", job_name, suspend, ns)
                self._mutate_status("jobs.batch", job_name, ns, _job_stopped)
            self._mutate_status(WORKLOADS, name, ns, lambda s: st.release_quota_after_eviction(s, message, stamp))
            return True
        retriable = True
        for pod_ns, pod_name in owners:
            pod = self.store.try_get("pods", pod_name, pod_ns)
            if pod is None:
                continue
            if wls.annotations_of(pod).get(wls.RETRIABLE_IN_GROUP_ANNOTATION) == "false":
                retriable = False
            self._mutate_status("pods", pod_name, pod_ns, _termination_target(message, stamp))
            try:
                self.store.delete("pods", pod_name, pod_ns)
            except ApiError as exc:
                LOG.debug("pod %s/%s already gone: %s", pod_ns, pod_name, exc)
        self._stopping[key] = _Stopping(kind, owners, retriable)
        return False

    def _live_owners(self, ns: str, owners: list[tuple[str, str]]) -> bool:
        return any(self.store.try_get("pods", pod_name, pod_ns) is not None for pod_ns, pod_name in owners)

    def _release_pods(self, owners: list[tuple[str, str]]) -> None:
        """Kueue strips its finalizer from the pods of a finished group."""

        def strip(obj: Obj) -> None:
            finalizers = obj["metadata"].get("finalizers") or []
            obj["metadata"]["finalizers"] = [f for f in finalizers if f != wls.MANAGED_FINALIZER]

        for ns, pod_name in owners:
            if self.store.try_get("pods", pod_name, ns) is not None:
                try:
                    self.store.mutate("pods", pod_name, strip, ns)
                except ApiError as exc:
                    LOG.debug("pod %s/%s vanished: %s", ns, pod_name, exc)

    def _mutate_status(self, resource: str, name: str, namespace: str, change: Any) -> None:
        def apply(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            change(status)

        try:
            self.store.mutate(resource, name, apply, namespace, subresource="status")
        except ApiError as exc:
            LOG.debug("status write to %s %s/%s failed: %s", resource, namespace, name, exc)


# --- pure helpers for pod and Job status -------------------------------------------------


def _finished_with(succeeded: int, total: int, stamp: str) -> Any:
    def change(status: Obj) -> None:
        st.finish(status, "Succeeded", f"Pods succeeded: {succeeded}/{total}.", stamp)

    return change


def _run_seconds(obj: Mapping[str, Any]) -> float | None:
    value = wls.annotations_of(obj).get(RUN_SECONDS_ANNOTATION)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _ungate(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    gates = [g for g in spec.get("schedulingGates") or [] if g.get("name") != wls.ADMISSION_GATE]
    if gates:
        spec["schedulingGates"] = gates
    else:
        spec.pop("schedulingGates", None)


def _pod_phase(phase: str, stamp: str) -> Any:
    def change(status: Obj) -> None:
        status["phase"] = phase
        if phase == "Running":
            status.setdefault("startTime", stamp)

    return change


def _termination_target(message: str, stamp: str) -> Any:
    def change(status: Obj) -> None:
        st.set_condition(status, "TerminationTarget", "True", "WorkloadEvictedDueToPreempted", message, stamp)

    return change


def _wait_for_replacements(status: Obj, stamp: str) -> None:
    evicted = st.condition(status, st.EVICTED) or {}
    message = str(evicted.get("message", ""))
    st.release_quota_after_eviction(status, message, stamp, requeue=False)
    st.set_condition(status, st.WAITING_FOR_REPLACEMENT_PODS, "True", "Preempted", message, stamp)


def _killed(stamp: str) -> Any:
    """A pod whose containers were killed at the end of the grace period (exit code 137)."""

    def change(status: Obj) -> None:
        status["phase"] = "Failed"
        for container in status.get("containerStatuses") or []:
            started = (container.get("state") or {}).get("running", {}).get("startedAt", stamp)
            container["ready"] = False
            container["started"] = False
            container["state"] = {
                "terminated": {"exitCode": 137, "reason": "Error", "startedAt": started, "finishedAt": stamp}
            }

    return change


def _job_running(parallelism: int, stamp: str) -> Any:
    def change(status: Obj) -> None:
        status["active"] = parallelism
        status.setdefault("startTime", stamp)

    return change


def _job_stopped(status: Obj) -> None:
    status["active"] = 0


def _job_succeeded(stamp: str) -> Any:
    def change(status: Obj) -> None:
        status["succeeded"] = max(1, int(status.get("active", 1) or 1))
        status["active"] = 0
        status["completionTime"] = stamp
        status.setdefault("conditions", []).append({"type": "Complete", "status": "True", "lastTransitionTime": stamp})

    return change

"""Replay one oracle scenario (``tests/oracle/`` format) on a live Kueue and record what it did.

The recorded oracle feeds Kueue's scheduler directly, cycle by cycle, from a listing of the
scenario (``tests/oracle/README.md``, "Cycle / settle semantics"). A live Kueue schedules
continuously, so the replay builds the same starting point and lets Kueue run until it is
quiet:

1. The scenario's Namespaces (with their labels), ResourceFlavors, WorkloadPriorityClasses,
   Cohorts, ClusterQueues and LocalQueues are created through Kueue's webhooks, as the file
   has them, except one ResourceFlavor that every ClusterQueue lists (the *gate*; every
   public scenario has one): while it is missing Kueue keeps every ClusterQueue inactive
   (``FlavorNotFound``), so nothing is admitted while the scenario is being built.
2. The admitted Workloads are created bare (no owner: Kueue schedules any Workload with a
   queue name) and their ``status.admission`` and ``QuotaReserved``/``Admitted`` conditions
   are written through the status subresource exactly as the file has them, so their
   flavors and their quota-reservation times (what Kueue's victim order reads,
   ``pkg/scheduler/preemption/common/ordering.go``) are the recorded ones.
3. The pending Workloads are created in the file's ``creationTimestamp`` order, each in a
   later wall-clock second than the one before it of the same priority: the API server sets
   ``creationTimestamp`` itself, at one-second resolution, and Kueue orders equal priorities
   by that timestamp and then by UID (``baseCompareFunc``, ``pkg/cache/queue/cluster_queue.go``),
   so equal seconds would leave their order to random UIDs. Different priorities are never
   compared by time (queue order, the fair-sharing tournament and victim order all compare
   priority first), so they may share a second.
4. Once Kueue's ClusterQueue status counts every admitted and pending Workload, the gate
   flavor is created. Kueue's ResourceFlavor handler activates every ClusterQueue that
   lists it in one cache update and then wakes the scheduler once
   (``ResourceFlavorReconciler.Create``, ``pkg/controller/core/resourceflavor_controller.go``),
   so its first cycle sees every ClusterQueue's head, as the oracle's cycle 0 does.
   The other release (:data:`RELEASES`), kept for comparison, creates every ClusterQueue
   with ``stopPolicy: Hold`` and patches them back to ``None`` concurrently (``running``):
   N writes Kueue's ClusterQueue controller sees one after another, so its first cycle may
   see only some heads. (Patching them while Kueue's manager is stopped and restarting it
   was measured too and dropped: 2 of 18 hierarchical scenarios agreed, against 15 of the
   same 18 released while running; the restarted scheduler can run before its caches hold
   every Cohort.)
5. Every Workload Kueue evicts for preemption is deleted at once, as the oracle does (a
   SkyPilot pod group whose pods are deleted); Kueue then frees its quota. The replay ends
   when Kueue has changed no admission or preemption for :data:`QUIET_SECONDS`.
6. Everything the scenario created is deleted (finalizers stripped) before the next one;
   Namespaces stay until :meth:`OracleReplayer.close`.

What is not faithful, and why: the live Kueue runs its next cycle as soon as it has
written the last one's decisions, while the oracle lets every write land, and deletes every
preempted Workload, before the next cycle; so a victim still holding quota for the tens of
milliseconds until the replay deletes it can be seen by more cycles live than recorded.
UIDs are the API server's, not the file's (they only break ties that distinct timestamps already break); workloads
admitted during the replay get real, distinct admission times, where the oracle's fixed
clock gives them equal ones and falls back to UIDs. Admission fair sharing's usage history
cannot be injected: Kueue v0.17.0 seeds a LocalQueue's consumed usage in memory from what
it has admitted when it first sees the queue (``initializeAfsIfNeeded``,
``pkg/controller/core/localqueue_controller.go``) and never reads the status back.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sky_kueue.kueue import loader
from sky_kueue.kueue import objects as o
from sky_kueue.mirror import preemption_message
from sky_kueue.realcluster.oracle_agreement import LiveAdmission, LiveOutcome, LivePreemption

KUEUE_GROUP = "kueue.x-k8s.io"
#: The version the replay reads Workloads and ClusterQueues in (Kueue v0.17.0's storage version).
READ_VERSION = "v1beta2"
#: Kueue objects by kind: their plural, in the order the replay creates them.
PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
    "Workload": "workloads",
}
#: Kueue is quiet when it has changed no admission or preemption for this long (it acts on
#: an event within tens of milliseconds on this machine; a preemptor follows its victim's
#: deletion within a second).
QUIET_SECONDS = 3.0
#: A replay that is still changing after this long is cut off (and says so).
SETTLE_TIMEOUT_SECONDS = 120.0
#: How long the replay waits for Kueue to count the scenario's workloads, or for a deleted
#: object to go.
READY_TIMEOUT_SECONDS = 60.0
#: How often the replay reads the Workloads while Kueue settles.
POLL_SECONDS = 0.1
#: Margin past a whole second before the next pending Workload is created.
SECOND_MARGIN_SECONDS = 0.05

Log = Callable[[str], None]
#: How the replay hands the built scenario to Kueue (see the module docstring, step 4).
RELEASES = ("flavor", "running")


class ReplayError(RuntimeError):
    """The scenario could not be built on the cluster (the message says which object and why)."""


@dataclass(frozen=True)
class Scenario:
    """One oracle scenario file, validated by the model's loader."""

    path: Path
    documents: tuple[dict[str, Any], ...]
    config: o.KueueConfig

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def config_key(self) -> str:
        """Which Kueue manager configuration the scenario needs (``classical`` by default)."""
        if self.config.fair_sharing is not None:
            return "fairSharing"
        if self.config.admission_fair_sharing is not None:
            afs = self.config.admission_fair_sharing
            weights = ",".join(f"{res}:{weight}" for res, weight in sorted(afs.resource_weights.items()))
            return (
                f"admissionFairSharing usageHalfLifeTime={afs.usage_half_life_seconds}s "
                f"usageSamplingInterval={afs.usage_sampling_interval_seconds}s resourceWeights={weights}"
            )
        return "classical"


def read_scenario(path: Path) -> Scenario:
    """Read and validate a scenario file.

    Raises:
        ModelError: the file is unreadable, not YAML, or holds an object Kueue would reject.
    """
    text = loader.read_text(path)
    state = loader.load_state(text, str(path))  # validates as the oracle did
    docs = tuple(doc for doc in loader.load_documents(text, str(path)) if isinstance(doc, dict))
    return Scenario(path=path, documents=docs, config=state.config)


def manager_configuration(config: o.KueueConfig) -> dict[str, Any]:
    """The scheduling part of Kueue's manager Configuration (v1beta2) a scenario runs under."""
    out: dict[str, Any] = {}
    if config.fair_sharing is not None:
        out["fairSharing"] = {"preemptionStrategies": list(config.fair_sharing.preemption_strategies)}
    afs = config.admission_fair_sharing
    if afs is not None:
        out["admissionFairSharing"] = {
            "usageHalfLifeTime": f"{afs.usage_half_life_seconds}s",
            "usageSamplingInterval": f"{afs.usage_sampling_interval_seconds}s",
        }
        if afs.resource_weights:
            out["admissionFairSharing"]["resourceWeights"] = {
                res: float(weight) for res, weight in afs.resource_weights.items()
            }
    return out


def gate_flavor(cluster_queues: list[dict[str, Any]], flavors: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The first ResourceFlavor (in file order) that every ClusterQueue lists, if any."""
    listed = [
        {fl["name"] for group in (cq.get("spec") or {}).get("resourceGroups") or [] for fl in group["flavors"]}
        for cq in cluster_queues
    ]
    for flavor in flavors:
        if listed and all(flavor["metadata"]["name"] in names for names in listed):
            return flavor
    return None


def _key(doc: dict[str, Any]) -> str:
    meta = doc["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else str(meta["name"])


def _created_at(doc: dict[str, Any]) -> str:
    return str(doc["metadata"].get("creationTimestamp") or "")


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}


def _true(conds: dict[str, dict[str, Any]], kind: str) -> bool:
    return conds.get(kind, {}).get("status") == "True"


def _pod_set_flavors(admission: dict[str, Any]) -> dict[str, dict[str, str]]:
    return {psa["name"]: dict(psa.get("flavors") or {}) for psa in admission.get("podSetAssignments") or []}


@dataclass
class _Built:
    """What one scenario created, to observe and then to delete."""

    objects: list[tuple[str, str, str | None]] = field(default_factory=list)  # (plural, name, namespace)
    workloads: dict[str, str] = field(default_factory=dict)  # key -> UID
    admitted: dict[str, int] = field(default_factory=dict)  # ClusterQueue -> admitted workloads
    pending: dict[str, int] = field(default_factory=dict)  # ClusterQueue -> pending workloads
    cluster_queues: list[str] = field(default_factory=list)
    initially_admitted: list[str] = field(default_factory=list)
    release: str = "flavor"
    #: the ResourceFlavor created last, to release the scenario (release ``flavor``)
    gate: dict[str, Any] | None = None
    scenario: Scenario | None = None


class OracleReplayer:
    """Replays scenarios on one cluster (admin credentials), one after another."""

    def __init__(
        self,
        api_client: Any,
        log: Log = lambda _: None,
        clock: Callable[[], float] = time.monotonic,
        release: str = "flavor",
    ) -> None:
        """``release`` is one of :data:`RELEASES`."""
        from kubernetes import client

        if release not in RELEASES:
            raise ValueError(f"release {release!r} is not one of {', '.join(RELEASES)}")
        self.release = release
        self.api = api_client
        self.core = client.CoreV1Api(api_client)
        self.custom = client.CustomObjectsApi(api_client)
        self.log = log
        self.clock = clock
        #: Namespaces the replays created (deleted by :meth:`close`)
        self.namespaces: set[str] = set()
        #: Namespaces that existed before, with their labels then (restored by :meth:`close`)
        self.borrowed_namespaces: dict[str, dict[str, str]] = {}
        #: what the last replay noticed that makes it less faithful (a timeout, a late count)
        self.notes: list[str] = []

    # ----------------------------------------------------------------- replay
    def replay(self, scenario: Scenario) -> LiveOutcome:
        """Build ``scenario`` on the cluster, release it to Kueue, record until quiet, clean up.

        Raises:
            ReplayError: an object could not be created (the API server's reason is named).
        """
        self.notes = []
        built = _Built(scenario=scenario)
        try:
            self._build(scenario, built)
            self._wait_counted(built)
            released = self._release(built)
            return self._observe(scenario, built, released)
        finally:
            self._remove(built)

    def close(self) -> None:
        """Delete the Namespaces the replays created and wait until they are gone; give the
        ones that existed before their labels back."""
        from kubernetes.client.exceptions import ApiException

        for name, labels in sorted(self.borrowed_namespaces.items()):
            current = dict(self.core.read_namespace(name).metadata.labels or {})
            self._set_labels(name, current, labels)
        self.borrowed_namespaces.clear()
        for name in sorted(self.namespaces):
            try:
                self.core.delete_namespace(name)
            except ApiException as err:
                if err.status != 404:
                    raise
        self._wait_gone("scenario namespaces", lambda: [n for n in self.namespaces if self._namespace_exists(n)])
        self.namespaces.clear()

    # ----------------------------------------------------------------- build
    def _build(self, scenario: Scenario, built: _Built) -> None:
        docs = [copy.deepcopy(doc) for doc in scenario.documents]
        by_kind: dict[str, list[dict[str, Any]]] = {}
        for doc in docs:
            by_kind.setdefault(str(doc.get("kind")), []).append(doc)
        unknown = set(by_kind) - set(PLURALS) - {"Namespace"}
        if unknown:
            raise ReplayError(f"{scenario.path}: kinds the replay does not create: {', '.join(sorted(unknown))}")
        for ns in by_kind.get("Namespace", []):
            self._ensure_namespace(ns["metadata"]["name"], dict(ns["metadata"].get("labels") or {}))
        local_queues = {_key(lq): lq["spec"]["clusterQueue"] for lq in by_kind.get("LocalQueue", [])}
        release = self.release
        gate = gate_flavor(by_kind.get("ClusterQueue", []), by_kind.get("ResourceFlavor", []))
        if release == "flavor" and gate is None and by_kind.get("ClusterQueue"):
            self.notes.append("no ResourceFlavor every ClusterQueue lists: released while Kueue runs")
            release = "running"
        built.release = release
        for kind in ("ResourceFlavor", "WorkloadPriorityClass", "Cohort", "ClusterQueue", "LocalQueue"):
            for doc in by_kind.get(kind, []):
                doc.pop("status", None)
                if kind == "ClusterQueue":
                    built.cluster_queues.append(doc["metadata"]["name"])
                    if release != "flavor":
                        doc.setdefault("spec", {})["stopPolicy"] = "Hold"
                if kind == "ResourceFlavor" and release == "flavor" and doc is gate:
                    built.gate = doc
                    continue
                self._create(scenario, doc, built)
        workloads = sorted(by_kind.get("Workload", []), key=_created_at)
        admitted = [wl for wl in workloads if (wl.get("status") or {}).get("admission")]
        pending = [wl for wl in workloads if not (wl.get("status") or {}).get("admission")]
        for wl in admitted:
            status = wl.pop("status")
            self._create(scenario, wl, built)
            self._write_status(scenario, wl, status)
            cq = status["admission"]["clusterQueue"]
            built.admitted[cq] = built.admitted.get(cq, 0) + 1
            built.initially_admitted.append(_key(wl))
        last_second: dict[int, datetime] = {}  # priority -> second its last Workload was created in
        for wl in pending:
            wl.pop("status", None)
            priority = int(wl["spec"].get("priority") or 0)
            if priority in last_second:
                self._sleep_past(last_second[priority])
            created = self._create(scenario, wl, built)
            stamp = created["metadata"]["creationTimestamp"].replace("Z", "+00:00")
            last_second[priority] = datetime.fromisoformat(stamp)
            cq = local_queues.get(f"{wl['metadata']['namespace']}/{wl['spec']['queueName']}")
            if cq is not None:
                built.pending[cq] = built.pending.get(cq, 0) + 1

    def _sleep_past(self, second: datetime) -> None:
        """Wait until the wall clock is in a later second than ``second`` (the API server's
        clock is this machine's)."""
        target = second.timestamp() + 1 + SECOND_MARGIN_SECONDS
        delay = target - datetime.now(timezone.utc).timestamp()
        if delay > 0:
            time.sleep(delay)

    def _ensure_namespace(self, name: str, labels: dict[str, str]) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_namespace({"metadata": {"name": name, "labels": labels}})
            self.namespaces.add(name)
            return
        except ApiException as err:
            if err.status != 409:
                raise ReplayError(f"Namespace {name}: {_api_message(err)}") from None
        current = dict(self.core.read_namespace(name).metadata.labels or {})
        self.borrowed_namespaces.setdefault(name, current)
        self._set_labels(name, current, labels)

    def _set_labels(self, name: str, current: dict[str, str], labels: dict[str, str]) -> None:
        patch: dict[str, str | None] = {k: None for k in current if k not in labels}
        patch.pop("kubernetes.io/metadata.name", None)  # the API server's own
        self.core.patch_namespace(name, {"metadata": {"labels": {**patch, **labels}}})

    def _create(self, scenario: Scenario, doc: dict[str, Any], built: _Built) -> dict[str, Any]:
        from kubernetes.client.exceptions import ApiException

        meta = doc["metadata"]
        for generated in ("uid", "creationTimestamp", "resourceVersion", "generation"):
            meta.pop(generated, None)
        group, version = str(doc["apiVersion"]).split("/")
        plural = PLURALS[doc["kind"]]
        namespace = meta.get("namespace")
        try:
            if namespace:
                created: dict[str, Any] = self.custom.create_namespaced_custom_object(
                    group, version, namespace, plural, doc
                )
            else:
                created = self.custom.create_cluster_custom_object(group, version, plural, doc)
        except ApiException as err:
            raise ReplayError(f"{scenario.path}: {doc['kind']} {_key(doc)} was refused: {_api_message(err)}") from None
        built.objects.append((plural, meta["name"], namespace))
        if doc["kind"] == "Workload":
            built.workloads[_key(doc)] = created["metadata"]["uid"]
        return created

    def _write_status(self, scenario: Scenario, doc: dict[str, Any], status: dict[str, Any]) -> None:
        from kubernetes.client.exceptions import ApiException

        group, version = str(doc["apiVersion"]).split("/")
        meta = doc["metadata"]
        try:
            self.custom.patch_namespaced_custom_object_status(
                group, version, meta["namespace"], "workloads", meta["name"], {"status": status}
            )
        except ApiException as err:
            raise ReplayError(
                f"{scenario.path}: the admission of Workload {_key(doc)} was refused: {_api_message(err)}"
            ) from None

    def _wait_counted(self, built: _Built) -> None:
        """Until Kueue's ClusterQueue status counts the scenario's workloads (its cache and
        queues hold them), so the release starts from the whole scenario."""

        def counted() -> list[str]:
            missing = []
            for name in built.cluster_queues:
                status = self._read_cq(name).get("status") or {}
                want = (built.admitted.get(name, 0), built.pending.get(name, 0))
                have = (status.get("reservingWorkloads", 0), status.get("pendingWorkloads", 0))
                if have != want:
                    missing.append(f"{name} reserving/pending {have[0]}/{have[1]}, want {want[0]}/{want[1]}")
            return missing

        deadline = self.clock() + READY_TIMEOUT_SECONDS
        missing = counted()
        while missing and self.clock() < deadline:
            time.sleep(POLL_SECONDS)
            missing = counted()
        if missing:
            self.notes.append("released before Kueue counted every workload: " + "; ".join(missing))

    def _read_cq(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_cluster_custom_object(KUEUE_GROUP, READ_VERSION, "clusterqueues", name)
        return found

    # ----------------------------------------------------------------- run
    def _release(self, built: _Built) -> float:
        """Hand the scenario to Kueue (module docstring, step 4); returns when that started."""
        started = self.clock()
        if built.release == "flavor":
            if built.gate is not None and built.scenario is not None:
                self._create(built.scenario, built.gate, built)
            return started
        self._patch_released(built.cluster_queues)
        return started

    def _patch_released(self, names: list[str]) -> None:
        """The concurrent ``stopPolicy: None`` patches, started together."""
        body = {"spec": {"stopPolicy": "None"}}
        barrier = threading.Barrier(max(1, len(names)))

        def release(name: str) -> None:
            barrier.wait(timeout=READY_TIMEOUT_SECONDS)
            self.custom.patch_cluster_custom_object(KUEUE_GROUP, READ_VERSION, "clusterqueues", name, body)

        with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
            for future in [pool.submit(release, name) for name in names]:
                future.result()

    def _observe(self, scenario: Scenario, built: _Built, released: float) -> LiveOutcome:
        outcome = LiveOutcome(initially_admitted=tuple(sorted(built.initially_admitted)))
        by_uid = {uid: key for key, uid in built.workloads.items()}
        initially = set(built.initially_admitted)
        last_change = released
        while True:
            now = self.clock()
            present = set()
            changed = False
            for wl in self._scenario_workloads(built):
                key = _key(wl)
                present.add(key)
                if key in outcome.preempted:
                    continue
                conds = _conditions(wl)
                evicted = conds.get("Evicted", {})
                preempted = conds.get("Preempted") if _true(conds, "Preempted") else None
                if preempted is None and _true(conds, "Evicted") and evicted.get("reason") == "Preempted":
                    preempted = evicted
                if preempted is not None:
                    parsed = preemption_message.parse_preemptor(preempted.get("message") or "")
                    uid = parsed.workload_uid if parsed else None
                    by = by_uid.get(uid or "", uid or "unknown")
                    reason = conds["Preempted"]["reason"] if "Preempted" in conds else str(evicted.get("reason"))
                    outcome.preempted[key] = LivePreemption(by=by, reason=reason, at_seconds=now - released)
                    outcome.pending.pop(key, None)
                    self._delete_workload(wl)
                    changed = True
                elif _true(conds, "QuotaReserved"):
                    outcome.pending.pop(key, None)
                    if key not in initially and key not in outcome.admitted:
                        admission = (wl.get("status") or {}).get("admission") or {}
                        outcome.admitted[key] = LiveAdmission(
                            cluster_queue=str(admission.get("clusterQueue")),
                            pod_sets=_pod_set_flavors(admission),
                            at_seconds=now - released,
                        )
                        changed = True
                else:
                    outcome.pending[key] = str(conds.get("QuotaReserved", {}).get("message") or "")
            if changed:
                last_change = now
                outcome.settle_seconds = now - released
            deleting = [key for key in outcome.preempted if key in present]
            if not deleting and now - last_change >= QUIET_SECONDS:
                break
            if now - released > SETTLE_TIMEOUT_SECONDS:
                self.notes.append(f"still changing after {SETTLE_TIMEOUT_SECONDS:.0f} s; cut off")
                break
            time.sleep(POLL_SECONDS)
        self.log(
            f"{scenario.name}: {len(outcome.admitted)} admitted, {len(outcome.preempted)} preempted, "
            f"{len(outcome.pending)} pending; settled {outcome.settle_seconds:.1f} s after the release"
        )
        return outcome

    def _scenario_workloads(self, built: _Built) -> Iterable[dict[str, Any]]:
        items: list[dict[str, Any]] = self.custom.list_cluster_custom_object(KUEUE_GROUP, READ_VERSION, "workloads")[
            "items"
        ]
        return [wl for wl in items if _key(wl) in built.workloads]

    def _delete_workload(self, wl: dict[str, Any]) -> None:
        self._delete("workloads", wl["metadata"]["name"], wl["metadata"]["namespace"])

    # ----------------------------------------------------------------- clean up
    def _delete(self, plural: str, name: str, namespace: str | None) -> None:
        from kubernetes.client.exceptions import ApiException

        strip = {"metadata": {"finalizers": None}}
        try:
            if namespace:
                self.custom.patch_namespaced_custom_object(KUEUE_GROUP, READ_VERSION, namespace, plural, name, strip)
                self.custom.delete_namespaced_custom_object(KUEUE_GROUP, READ_VERSION, namespace, plural, name)
            else:
                self.custom.patch_cluster_custom_object(KUEUE_GROUP, READ_VERSION, plural, name, strip)
                self.custom.delete_cluster_custom_object(KUEUE_GROUP, READ_VERSION, plural, name)
        except ApiException as err:
            if err.status != 404:
                raise

    def _remove(self, built: _Built) -> None:
        """Delete what the scenario created, Workloads first, and wait until it is gone."""
        order = {plural: index for index, plural in enumerate(reversed(PLURALS.values()))}
        objects = sorted(built.objects, key=lambda obj: order[obj[0]])
        for plural, name, namespace in objects:
            self._delete(plural, name, namespace)

        def remaining() -> list[str]:
            # one list per kind, not one read per object (scale scenarios have thousands)
            present: set[tuple[str, str, str | None]] = set()
            for plural in {obj[0] for obj in objects}:
                items = self.custom.list_cluster_custom_object(KUEUE_GROUP, READ_VERSION, plural)["items"]
                present |= {(plural, i["metadata"]["name"], i["metadata"].get("namespace")) for i in items}
            return [f"{p}/{n}" for p, n, ns in objects if (p, n, ns) in present]

        self._wait_gone("the scenario's objects", remaining)

    def _namespace_exists(self, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.read_namespace(name)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    def _wait_gone(self, what: str, remaining: Callable[[], list[str]]) -> None:
        deadline = self.clock() + READY_TIMEOUT_SECONDS
        left = remaining()
        while left and self.clock() < deadline:
            time.sleep(POLL_SECONDS)
            left = remaining()
        if left:
            raise ReplayError(f"{what} still exist after {READY_TIMEOUT_SECONDS:.0f} s: {', '.join(sorted(left))}")


def _api_message(err: Any) -> str:
    """The API server's one-line message of a refused request."""
    import json

    try:
        return str(json.loads(err.body).get("message") or err.reason)
    except (TypeError, ValueError):
        return str(err.reason)

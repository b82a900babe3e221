"""The mirror model cache builds the uncached path's state while random watch events change a cluster.

A differential test of :class:`~sky_kueue.controller.mirror_model.MirrorModelCache` against
:func:`~sky_kueue.controller.safety_probe.whole_store_state` (the reference:
every document of the store, every question). Each seed builds a small cluster (nested and root
Cohorts, an implicit cohort, lone ClusterQueues, LocalQueues in three namespaces, two API
versions, priority classes, a few dozen Workloads, each a pod group whose pods carry the run-time
annotations) and changes it with random writes applied as the mirror applies them (watch events
through :func:`~sky_kueue.mirror.store.normalize` and :meth:`MirrorStore.apply`, relists through
:meth:`MirrorStore.replace`): Workloads added (new names, deleted names again, UIDs reused),
modified (priority, class, queue, admission anywhere, the quota reservation withdrawn, an
annotation of their own), deleted; pods added, modified (run time changed, removed, only the
source left, moved to another group, the group named by annotation), deleted; ClusterQueues,
Cohorts, LocalQueues, WorkloadPriorityClasses and Namespaces created, moved, changed, deleted;
relists that drop, change and add objects; documents the model cannot read (both paths must
raise the same first error) or the cache cannot order (it declines).

After every step (one to three writes) a few questions (Workloads that exist, one deleted, one
nobody has) get their state from two caches (one asked every step; one asked every few steps,
so many writes, some undone, pile up between its questions) and from the reference, for the
same relaunch callable (the relaunch wait's, the document as it is, none, another Workload's):
both raise the same error, or both give the same state, compared field by field with the order
of every dictionary's keys; a cache may decline (None) only while the store holds something it
documents it cannot order, or has not listed Namespaces. Some seeds run on a store whose
journal of writes is a few entries long, so the caches fall behind it and rebuild. No ETA
simulation: states only. The weights of the writes vary per seed.

What it found is at the end, each case as small as it goes.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import random
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from sky_kueue.controller import safety_probe
from sky_kueue.controller.detection import workload_facts
from sky_kueue.controller.mirror_model import MirrorModelCache, export_key
from sky_kueue.controller.safety_probe import MirrorSafetyProbe, whole_store_state
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import ADDED, DELETED, MODIFIED, MirrorStore, normalize, object_key
from sky_kueue.skypilot.labels import RUNTIME_SECONDS_ANNOTATION, RUNTIME_SOURCE_ANNOTATION

#: The inner loop's seeds, and the full suite's further ones.
FAST_SEEDS = range(12)
SLOW_SEEDS = range(12, 24)
STEPS = 40
#: The second cache asks every this many steps only.
LAGGING_EVERY = 6

V1B1 = "kueue.x-k8s.io/v1beta1"
V1B2 = "kueue.x-k8s.io/v1beta2"
GROUP_KEY = "kueue.x-k8s.io/pod-group-name"
NOW = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)

NAMESPACES = ("ns-a", "ns-b")
#: Workloads and LocalQueues live here too, but no Namespace object is ever listed for it.
WORKLOAD_NAMESPACES = (*NAMESPACES, "ns-c")
COHORTS = ("r1", "r2", "c1", "c2", "c3")
#: Cohorts ClusterQueues name: the objects above, an implicit one, and none.
COHORT_LINKS = (*COHORTS, "implicit", None)
CLUSTER_QUEUES = tuple(f"cq{i}" for i in range(6))
QUEUES = ("q0", "q1", "q2", "q3")
CLASSES = ("low", "high", "later")
WORKLOAD_NAMES = tuple(f"w{i:02d}" for i in range(40))

Doc = dict[str, Any]
Relaunch = Callable[[Mapping[str, Any] | None], Mapping[str, Any] | None]


class _FixedClock:
    def now(self) -> datetime.datetime:
        return NOW


def _stamp(minute: int) -> str:
    return (NOW - datetime.timedelta(minutes=minute)).strftime("%Y-%m-%dT%H:%M:%SZ")


def _resource_groups(cpu: str) -> list[Doc]:
    return [
        {"coveredResources": ["cpu"], "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}
    ]


class _Cluster:
    """The random writer: a store, and the writes the mirror would apply to it."""

    def __init__(self, rng: random.Random, store: MirrorStore) -> None:
        self.rng = rng
        self.store = store
        self._version = 100
        self._uids = 0
        #: (key, uid) of every Workload deleted (questions are asked about them).
        self.deleted: list[tuple[str, str]] = []
        #: The odd documents written and not repaired yet (kind, key).
        self.odd: list[tuple[KindName, str]] = []

    # ---- documents ----------------------------------------------------------------------

    def uid(self) -> str:
        self._uids += 1
        return f"uid-{self._uids}"

    def cohort(self, name: str) -> Doc:
        rng = self.rng
        api = rng.choice((V1B1, V1B2))
        spec: Doc = {}
        parent = rng.choice([None, None, *(c for c in COHORTS if c != name), "implicit"])
        if parent is not None:
            spec["parentName" if api == V1B2 else "parent"] = parent
        if rng.random() < 0.4:
            spec["resourceGroups"] = _resource_groups(rng.choice(("2", "6")))
        return {"apiVersion": api, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}

    def cluster_queue(self, name: str) -> Doc:
        rng = self.rng
        api = rng.choice((V1B1, V1B2))
        spec: Doc = {
            "namespaceSelector": {},
            "queueingStrategy": rng.choice(("BestEffortFIFO", "StrictFIFO")),
            "preemption": {"withinClusterQueue": rng.choice(("Never", "LowerPriority")), "reclaimWithinCohort": "Any"},
            "resourceGroups": _resource_groups(rng.choice(("2", "4", "8", "9500m"))),
        }
        link = rng.choice(COHORT_LINKS)
        if link is not None:
            spec["cohortName" if api == V1B2 else "cohort"] = link
        return {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}

    def local_queue(self, namespace: str, name: str) -> Doc:
        target = self.rng.choice([*CLUSTER_QUEUES, "no-such-cq"])
        return {
            "apiVersion": V1B1,
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterQueue": target},
        }

    def priority_class(self, name: str) -> Doc:
        return {
            "apiVersion": V1B1,
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": name},
            "value": self.rng.choice((-5, 10, 100, 1000)),
        }

    def workload(self, namespace: str, name: str, uid: str | None = None) -> Doc:
        rng = self.rng
        api = rng.choice((V1B1, V1B2))
        count = rng.choice((1, 1, 2))
        cpu = rng.choice(("1", "2", "500m"))
        spec: Doc = {
            "queueName": rng.choice([*QUEUES, "no-such-queue"]),
            "podSets": [
                {
                    "name": "main",
                    "count": count,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                }
            ],
        }
        doc: Doc = {
            "apiVersion": api,
            "kind": "Workload",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "uid": uid or self.uid(),
                "creationTimestamp": _stamp(rng.randrange(600)),
                "annotations": {"kueue.x-k8s.io/is-group-workload": "true"},
            },
            "spec": spec,
        }
        self.set_priority(doc)
        if rng.random() < 0.5:
            self.admit(doc)
        return doc

    def set_priority(self, doc: Doc) -> None:
        rng = self.rng
        spec = doc["spec"]
        for field in ("priority", "priorityClassName", "priorityClassSource", "priorityClassRef"):
            spec.pop(field, None)
        if rng.random() < 0.5:
            spec["priority"] = rng.choice((0, 5, 50, 500))
        if rng.random() < 0.7:
            name = rng.choice(CLASSES)
            if doc["apiVersion"] == V1B2:
                spec["priorityClassRef"] = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": name}
            else:
                spec["priorityClassName"] = name
                spec["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"

    def admit(self, doc: Doc) -> None:
        rng = self.rng
        pod_set = doc["spec"]["podSets"][0]
        cpu = pod_set["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
        at = _stamp(rng.randrange(60))
        doc["status"] = {
            "admission": {
                "clusterQueue": rng.choice([*CLUSTER_QUEUES, "no-such-cq"]),
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": pod_set["count"],
                        "flavors": {"cpu": "f"},
                        "resourceUsage": {"cpu": cpu if pod_set["count"] == 1 else "4"},
                    }
                ],
            },
            "conditions": [
                {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": at}
                for kind in ("QuotaReserved", "Admitted")
            ],
        }

    def pod(self, namespace: str, group: str) -> Doc:
        rng = self.rng
        pod: Doc = {
            "kind": "Pod",
            "metadata": {
                "name": f"{group}-{rng.randrange(4)}",
                "namespace": namespace,
                "uid": self.uid(),
                "labels": {"parent": "skypilot", GROUP_KEY: group},
                "annotations": {},
            },
            "status": {"phase": "Running"},
        }
        self.set_run_time(pod)
        return pod

    def set_run_time(self, pod: Doc) -> None:
        """Both annotations, one of them, or neither: the group's first pod with each wins."""
        rng = self.rng
        annotations = pod["metadata"].setdefault("annotations", {})
        annotations.pop(RUNTIME_SECONDS_ANNOTATION, None)
        annotations.pop(RUNTIME_SOURCE_ANNOTATION, None)
        shape = rng.random()
        if shape < 0.8:
            annotations[RUNTIME_SECONDS_ANNOTATION] = str(rng.choice((600, 1800, 3600)))
        if shape > 0.5:
            annotations[RUNTIME_SOURCE_ANNOTATION] = rng.choice(("history", "user"))

    # ---- writes ---------------------------------------------------------------------------

    def version(self) -> str:
        self._version += 1
        return str(self._version)

    def _normal(self, kind: KindName, doc: Doc, *, new_version: bool = True) -> Doc:
        """``doc`` as the mirror stores it, at a new resourceVersion (or its own, if it has one)."""
        doc = copy.deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        if new_version or "resourceVersion" not in meta:
            meta["resourceVersion"] = self.version()
        api_version = "v1" if kind in (KindName.NAMESPACE, KindName.POD) else str(doc.get("apiVersion") or V1B1)
        return normalize(kind, api_version, doc)

    def write(self, kind: KindName, doc: Doc) -> None:
        event = MODIFIED if self.store.get(kind, object_key(doc)) is not None else ADDED
        self.store.apply(kind, event, self._normal(kind, doc))

    def delete(self, kind: KindName, key: str) -> None:
        doc = self.store.get(kind, key)
        if doc is None:
            return
        if kind is KindName.WORKLOAD:
            uid = (doc.get("metadata") or {}).get("uid")
            if uid:
                self.deleted.append((export_key(doc), str(uid)))
        self.store.apply(kind, DELETED, self._normal(kind, doc))

    def relist(self, kind: KindName, docs: list[Doc]) -> None:
        """A list result: objects that kept their resourceVersion are left as they are."""
        items = [self._normal(kind, d, new_version=False) for d in docs]
        self.store.replace(kind, items, self.version(), gap=True)

    def current(self, kind: KindName) -> list[Doc]:
        return [copy.deepcopy(d) for d in self.store.items(kind)]

    def pick(self, kind: KindName) -> Doc | None:
        docs = self.store.items(kind)
        return copy.deepcopy(self.rng.choice(docs)) if docs else None

    # ---- the initial cluster ---------------------------------------------------------------

    def populate(self, *, namespaces_listed: bool) -> None:
        rng = self.rng
        initial: dict[KindName, list[Doc]] = {
            KindName.NAMESPACE: [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES
            ],
            KindName.RESOURCE_FLAVOR: [{"apiVersion": V1B1, "kind": "ResourceFlavor", "metadata": {"name": "f"}}],
            KindName.WORKLOAD_PRIORITY_CLASS: [self.priority_class(n) for n in CLASSES[:2]],
            KindName.COHORT: [self.cohort(n) for n in COHORTS if rng.random() < 0.7],
            KindName.CLUSTER_QUEUE: [self.cluster_queue(n) for n in CLUSTER_QUEUES if rng.random() < 0.85],
            KindName.LOCAL_QUEUE: [
                self.local_queue(ns, q) for ns in WORKLOAD_NAMESPACES for q in QUEUES if rng.random() < 0.8
            ],
        }
        workloads = []
        pods = []
        for name in rng.sample(WORKLOAD_NAMES, 28):
            namespace = rng.choice(WORKLOAD_NAMESPACES)
            workloads.append(self.workload(namespace, name))
            for _ in range(rng.choice((0, 1, 1, 2))):
                pods.append(self.pod(namespace, name))
        initial[KindName.WORKLOAD] = workloads
        initial[KindName.POD] = pods
        for kind, docs in initial.items():
            if kind is KindName.NAMESPACE and not namespaces_listed:
                continue
            self.relist(kind, docs)

    # ---- one random step -------------------------------------------------------------------

    def operations(self) -> list[tuple[Callable[[], str], float]]:
        """Each write and its weight, the weights varied per seed (some seeds churn pods, some
        the queue structure, some Workloads)."""
        ops: list[tuple[Callable[[], str], float]] = [
            (self.add_workload, 4),
            (self.modify_workload, 6),
            (self.delete_workload, 2.5),
            (self.add_pod, 3),
            (self.modify_pod, 4),
            (self.delete_pod, 2),
            (self.write_cluster_queue, 2),
            (self.delete_cluster_queue, 0.7),
            (self.write_cohort, 1.5),
            (self.delete_cohort, 0.7),
            (self.write_local_queue, 1.5),
            (self.delete_local_queue, 0.5),
            (self.write_priority_class, 1.2),
            (self.delete_priority_class, 0.5),
            (self.write_namespace, 0.5),
            (self.relist_a_kind, 1.2),
            (self.write_an_odd_document, 0.6),
        ]
        return [(op, weight * self.rng.choice((0.1, 0.5, 1, 1, 2, 4))) for op, weight in ops]

    def step(self, ops: list[tuple[Callable[[], str], float]]) -> str:
        if self.odd and self.rng.random() < 0.5:
            return self.repair()
        op = self.rng.choices([f for f, _ in ops], weights=[w for _, w in ops])[0]
        return op()

    def repair(self) -> str:
        """The oldest odd document goes, or is written again as the model reads it."""
        kind, key = self.odd.pop(0)
        if self.store.get(kind, key) is None:
            return f"{kind.value} {key} gone already"
        if self.rng.random() < 0.5 or (kind is KindName.WORKLOAD and "/" not in key):
            self.delete(kind, key)
            return f"delete odd {kind.value} {key}"
        if kind is KindName.WORKLOAD:
            namespace, name = key.split("/")
            self.write(kind, self.workload(namespace, name))
        elif kind is KindName.CLUSTER_QUEUE:
            self.write(kind, self.cluster_queue(key))
        elif kind is KindName.COHORT:
            self.write(kind, self.cohort(key))
        else:
            self.write(kind, self.priority_class(key))
        return f"repair odd {kind.value} {key}"

    def add_workload(self) -> str:
        rng = self.rng
        if self.deleted and rng.random() < 0.3:
            # a deleted Workload's name again (its relaunch), maybe under the same UID
            key, uid = rng.choice(self.deleted)
            namespace, name = key.split("/")
            if rng.random() < 0.3:  # another name under a deleted Workload's UID
                namespace, name = rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES)
            doc = self.workload(namespace or "ns-a", name, uid if rng.random() < 0.6 else None)
        else:
            doc = self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES))
        self.write(KindName.WORKLOAD, doc)
        if rng.random() < 0.5:
            self.write(KindName.POD, self.pod(doc["metadata"]["namespace"], doc["metadata"]["name"]))
        return f"add Workload {export_key(doc)}"

    def modify_workload(self) -> str:
        rng = self.rng
        doc = self.pick(KindName.WORKLOAD)
        if doc is None:
            return self.add_workload()
        spec = doc.setdefault("spec", {})
        change = rng.choice(("priority", "class", "queue", "admit", "unadmit", "unreserve", "annotate", "label"))
        if change == "priority":
            spec["priority"] = rng.choice((0, 7, 70, 700))
        elif change == "class":
            self.set_priority(doc)
        elif change == "queue":
            spec["queueName"] = rng.choice([*QUEUES, "no-such-queue"])
        elif change == "admit" and "podSets" in spec:
            self.admit(doc)
        elif change == "unadmit":
            doc.pop("status", None)
        elif change == "unreserve" and isinstance(doc.get("status", {}).get("conditions"), list):
            doc["status"]["conditions"][0]["status"] = "False"
        elif change == "annotate":
            annotations = doc["metadata"].setdefault("annotations", {})
            if RUNTIME_SECONDS_ANNOTATION in annotations:
                del annotations[RUNTIME_SECONDS_ANNOTATION]
            else:
                annotations[RUNTIME_SECONDS_ANNOTATION] = "42"  # the Workload's own wins over its pods'
        else:
            doc["metadata"]["labels"] = {"step": str(rng.randrange(100))}
        self.write(KindName.WORKLOAD, doc)
        return f"modify Workload {export_key(doc)}: {change}"

    def delete_workload(self) -> str:
        doc = self.pick(KindName.WORKLOAD)
        if doc is None:
            return "no Workload to delete"
        key = object_key(doc)
        self.delete(KindName.WORKLOAD, key)
        if self.rng.random() < 0.5:  # its pods go too
            for pod in self.store.items(KindName.POD):
                if pod["metadata"].get("labels", {}).get(GROUP_KEY) == doc["metadata"].get("name"):
                    self.delete(KindName.POD, object_key(pod))
        return f"delete Workload {key}"

    def add_pod(self) -> str:
        rng = self.rng
        workload = self.pick(KindName.WORKLOAD)
        if workload is None or rng.random() < 0.15:
            namespace, group = rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES)
        else:
            namespace, group = workload["metadata"].get("namespace", ""), workload["metadata"]["name"]
            if rng.random() < 0.15:  # a group of the same name in another namespace
                namespace = rng.choice(WORKLOAD_NAMESPACES)
        pod = self.pod(namespace, group)
        self.write(KindName.POD, pod)
        return f"add pod {object_key(pod)}"

    def modify_pod(self) -> str:
        rng = self.rng
        pod = self.pick(KindName.POD)
        if pod is None:
            return self.add_pod()
        meta = pod["metadata"]
        change = rng.choice(("run time", "run time", "drop annotations", "move", "annotated group", "ungroup"))
        if change == "run time":
            self.set_run_time(pod)
        elif change == "drop annotations":
            meta.pop("annotations", None)
        elif change == "move":
            meta.setdefault("labels", {})[GROUP_KEY] = rng.choice(WORKLOAD_NAMES)
        elif change == "annotated group":  # the annotation beats the label
            meta.setdefault("annotations", {})[GROUP_KEY] = rng.choice(WORKLOAD_NAMES)
        else:
            meta.get("labels", {}).pop(GROUP_KEY, None)
            meta.get("annotations", {}).pop(GROUP_KEY, None)
        self.write(KindName.POD, pod)
        return f"modify pod {object_key(pod)}: {change}"

    def delete_pod(self) -> str:
        pod = self.pick(KindName.POD)
        if pod is None:
            return "no pod to delete"
        self.delete(KindName.POD, object_key(pod))
        return f"delete pod {object_key(pod)}"

    def write_cluster_queue(self) -> str:
        name = self.rng.choice(CLUSTER_QUEUES)
        self.write(KindName.CLUSTER_QUEUE, self.cluster_queue(name))
        return f"write ClusterQueue {name}"

    def delete_cluster_queue(self) -> str:
        name = self.rng.choice(CLUSTER_QUEUES)
        self.delete(KindName.CLUSTER_QUEUE, name)
        return f"delete ClusterQueue {name}"

    def write_cohort(self) -> str:
        name = self.rng.choice(COHORTS)
        self.write(KindName.COHORT, self.cohort(name))
        return f"write Cohort {name}"

    def delete_cohort(self) -> str:
        name = self.rng.choice(COHORTS)
        self.delete(KindName.COHORT, name)
        return f"delete Cohort {name}"

    def write_local_queue(self) -> str:
        namespace, name = self.rng.choice(WORKLOAD_NAMESPACES), self.rng.choice(QUEUES)
        self.write(KindName.LOCAL_QUEUE, self.local_queue(namespace, name))
        return f"write LocalQueue {namespace}/{name}"

    def delete_local_queue(self) -> str:
        key = f"{self.rng.choice(WORKLOAD_NAMESPACES)}/{self.rng.choice(QUEUES)}"
        self.delete(KindName.LOCAL_QUEUE, key)
        return f"delete LocalQueue {key}"

    def write_priority_class(self) -> str:
        name = self.rng.choice(CLASSES)  # 'later' is referenced before it first exists
        self.write(KindName.WORKLOAD_PRIORITY_CLASS, self.priority_class(name))
        return f"write WorkloadPriorityClass {name}"

    def delete_priority_class(self) -> str:
        name = self.rng.choice(CLASSES)
        self.delete(KindName.WORKLOAD_PRIORITY_CLASS, name)
        return f"delete WorkloadPriorityClass {name}"

    def write_namespace(self) -> str:
        name = self.rng.choice(NAMESPACES)
        doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"step": "x"}}}
        self.write(KindName.NAMESPACE, doc)
        return f"write Namespace {name}"

    def relist_a_kind(self) -> str:
        """A relist after a lost stretch of the watch: some objects gone, some changed (at a new
        resourceVersion), some new; the rest as they were."""
        rng = self.rng
        kind = rng.choice(list(KindName))
        docs = []
        for doc in self.current(kind):
            if rng.random() < 0.15:
                continue
            if rng.random() < 0.15:
                if kind is KindName.WORKLOAD:
                    doc.setdefault("spec", {})["priority"] = rng.choice((1, 11, 111))
                elif kind is KindName.POD:
                    self.set_run_time(doc)
                elif kind is KindName.CLUSTER_QUEUE:
                    doc = self.cluster_queue(str(doc["metadata"]["name"]))
                doc.setdefault("metadata", {})["resourceVersion"] = self.version()
            docs.append(doc)
        if kind is KindName.WORKLOAD and rng.random() < 0.5:
            docs.append(self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES)))
        if kind is KindName.POD and rng.random() < 0.5:
            docs.append(self.pod(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES)))
        if kind is KindName.NAMESPACE and rng.random() < 0.7:
            docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES]
        self.relist(kind, docs)
        return f"relist {kind.value}: {len(docs)} objects"

    def write_an_odd_document(self) -> str:
        """Documents the model cannot read (a validation error for every tree holding them) or
        the cache cannot order (it declines); most go again soon (deleted, or fixed by a write)."""
        rng = self.rng
        odd = rng.choice(
            (
                "no creation time",
                "bad priority",
                "bad quota",
                "no namespace",
                "no spec",
                "bad class",
                "numeric name",
                "conditions not a list",
                "parent not a name",
                "cohort not a name",
            )
        )
        if odd == "no creation time":
            doc = self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES))
            del doc["metadata"]["creationTimestamp"]
            self.write(KindName.WORKLOAD, doc)
        elif odd == "bad priority":
            doc = self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES))
            doc["spec"]["priority"] = "high"
            self.write(KindName.WORKLOAD, doc)
        elif odd == "bad quota":
            doc = self.cluster_queue(rng.choice(CLUSTER_QUEUES))
            doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "lots"
            self.write(KindName.CLUSTER_QUEUE, doc)
        elif odd == "no namespace":  # filed under its name alone: the cache declines while it is here
            doc = self.workload("", rng.choice(WORKLOAD_NAMES))
            del doc["metadata"]["namespace"]
            self.write(KindName.WORKLOAD, doc)
        elif odd == "no spec":
            doc = self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES))
            del doc["spec"]
            self.write(KindName.WORKLOAD, doc)
        elif odd == "numeric name":  # and a pod group of that name
            namespace = rng.choice(WORKLOAD_NAMESPACES)
            doc = self.workload(namespace, "7")
            doc["metadata"]["name"] = 7
            self.write(KindName.WORKLOAD, doc)
            self.write(KindName.POD, self.pod(namespace, "7"))
        elif odd == "conditions not a list":
            doc = self.workload(rng.choice(WORKLOAD_NAMESPACES), rng.choice(WORKLOAD_NAMES))
            self.admit(doc)
            doc["status"]["conditions"] = {"type": "QuotaReserved", "status": "True"}
            self.write(KindName.WORKLOAD, doc)
        elif odd == "parent not a name":  # the raw rule cannot place it: kept with every tree
            doc = self.cohort(rng.choice(COHORTS))
            doc["spec"]["parentName"] = 7
            self.write(KindName.COHORT, doc)
        elif odd == "cohort not a name":
            doc = self.cluster_queue(rng.choice(CLUSTER_QUEUES))
            doc["spec"]["cohort"] = ["r1"]
            self.write(KindName.CLUSTER_QUEUE, doc)
        else:
            doc = self.priority_class(rng.choice(CLASSES))
            doc["value"] = "ten"
            self.write(KindName.WORKLOAD_PRIORITY_CLASS, doc)
        self.odd.append((_kind_of(doc), object_key(doc)))
        return f"odd document: {odd}"


def _kind_of(doc: Doc) -> KindName:
    return KindName(doc["kind"])


# ---- the comparison -------------------------------------------------------------------------


def _first_difference(a: object, b: object, path: str) -> str | None:
    """Where ``a`` and ``b`` first differ: a field, an item, a value, or a dictionary's key order."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        for field in dataclasses.fields(a):
            found = _first_difference(getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}")
            if found is not None:
                return found
        return None
    if isinstance(a, dict):
        assert isinstance(b, dict)
        if list(a) != list(b):
            return f"{path}: keys {list(a)} != {list(b)}"
        for key in a:
            found = _first_difference(a[key], b[key], f"{path}[{key!r}]")
            if found is not None:
                return found
        return None
    if isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple))
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = _first_difference(x, y, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if a == b else f"{path}: {a!r} != {b!r}"


Outcome = tuple[str, Any]


def _outcome(build: Callable[[], o.ClusterState | None]) -> Outcome:
    try:
        return "state", build()
    except ModelError as err:
        return "error", str(err)


def _relaunches(store: MirrorStore, uid: str, priority: int) -> dict[str, Relaunch]:
    """The relaunch callables a question may come with (as the relaunch wait builds them)."""

    def projected(pending: bool) -> Relaunch:
        def relaunch(current: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
            if current is not None:
                return safety_probe.as_relaunch(current, priority, NOW, pending=pending)
            deleted = store.deleted_workload(uid)
            return None if deleted is None else safety_probe.as_relaunch(deleted, priority, NOW, pending=False)

        return relaunch

    def another(current: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """Another mirrored Workload's document in its place (its key is not the question's)."""
        docs = store.items(KindName.WORKLOAD)
        return docs[priority % len(docs)] if docs else None

    return {
        "pending": projected(True),
        "preempted": projected(False),
        "as it is": lambda doc: doc,
        "withdrawn": lambda doc: None,
        "another": another,
    }


def _explained_decline(store: MirrorStore) -> str | None:
    """Why the cache may decline now (None: it may not): a Workload filed under another key
    than its namespace and name, or Namespaces not listed yet (the uncached path makes them up)."""
    for doc in store.items(KindName.WORKLOAD):
        if export_key(doc) != object_key(doc):
            return f"Workload {object_key(doc)} filed under another key"
    if not store.is_synced(KindName.NAMESPACE):
        return "Namespaces not listed"
    return None


@dataclasses.dataclass
class _Tally:
    compared: int = 0
    states: int = 0
    errors: int = 0
    declined: int = 0


def _compare(
    store: MirrorStore,
    model: MirrorModelCache,
    key: str,
    relaunch: Relaunch,
    tally: _Tally,
    context: str,
) -> None:
    cached = _outcome(lambda: model.relaunch_state(key, relaunch, NOW))
    whole = _outcome(lambda: whole_store_state(store, key, relaunch, NOW))
    tally.compared += 1
    if cached == ("state", None):
        assert _explained_decline(store) is not None, f"{context}: the cache declined {key} without a reason"
        tally.declined += 1
        return
    assert cached[0] == whole[0], f"{context}: {key}: cache {cached} != whole store {whole}"
    if cached[0] == "error":
        assert cached[1] == whole[1], context
        tally.errors += 1
        return
    state = cached[1]
    assert state == whole[1], f"{context}: {key}: {_first_difference(state, whole[1], 'state')}"
    if repr(state) != repr(whole[1]):  # a quick look at the order of every dictionary's keys
        difference = _first_difference(state, whole[1], "state")
        assert difference is None, f"{context}: {key}: {difference}"
    tally.states += 1
    # the state is the caller's: emptying it changes nothing the cache hands out next
    for field in ("namespaces", "priority_classes", "cohorts", "cluster_queues", "local_queues", "workloads"):
        getattr(state, field).clear()


def _questions(cluster: _Cluster, rng: random.Random) -> list[tuple[str, str, int]]:
    """(key, UID, priority) of a few questions: mirrored Workloads, a deleted one, nobody."""
    docs = cluster.store.items(KindName.WORKLOAD)
    picked = rng.sample(docs, min(2, len(docs)))
    out = [(export_key(d), str(d["metadata"].get("uid", "")), rng.choice((0, 50, 5000))) for d in picked]
    if cluster.deleted:
        key, uid = rng.choice(cluster.deleted)
        out.append((key, uid, 60))
    out.append((f"{rng.choice(WORKLOAD_NAMESPACES)}/nobody", "uid-nobody", 1))
    return out


def _run(seed: int) -> _Tally:
    rng = random.Random(seed)
    journal = rng.choice((None, None, None, 1, 3))
    options: dict[str, Any] = {} if journal is None else {"change_journal_entries": journal}
    store = MirrorStore(clock=_FixedClock(), **options)
    cluster = _Cluster(rng, store)
    namespaces_listed = rng.random() < 0.9
    cluster.populate(namespaces_listed=namespaces_listed)
    eager, lagging = MirrorModelCache(store), MirrorModelCache(store)
    tally = _Tally()
    ops = cluster.operations()
    done: list[str] = []
    for step in range(STEPS):
        for _ in range(rng.choice((1, 1, 1, 2, 3))):
            done.append(cluster.step(ops))
        if not namespaces_listed and step == 4:
            namespaces = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES]
            cluster.relist(KindName.NAMESPACE, namespaces)
        asking = [eager] if step % LAGGING_EVERY else [eager, lagging]
        for key, uid, priority in _questions(cluster, rng):
            name, relaunch = rng.choice(sorted(_relaunches(store, uid, priority).items()))
            for model in asking:
                context = f"seed {seed} step {step} ({'; '.join(done[-3:])}), relaunch {name}"
                _compare(store, model, key, relaunch, tally, context)
    return tally


def _check(seed: int) -> None:
    tally = _run(seed)
    assert tally.states > tally.compared // 2, tally  # most questions compare a state ...
    assert tally.declined <= tally.compared // 5, tally  # ... and few are declined


@pytest.mark.parametrize("seed", FAST_SEEDS)
def test_the_cache_builds_the_whole_stores_state_while_random_writes_change_the_cluster(seed: int) -> None:
    _check(seed)


@pytest.mark.slow  # 0.2-0.3 s a seed
@pytest.mark.parametrize("seed", SLOW_SEEDS)
def test_the_cache_builds_the_whole_stores_state_on_more_seeds(seed: int) -> None:
    _check(seed)


# ---- what the random test found, each as its smallest case -----------------------------------


def _listed(store: MirrorStore, kind: KindName, docs: list[Doc]) -> None:
    api_version = "v1" if kind in (KindName.NAMESPACE, KindName.POD) else V1B1
    store.replace(kind, [normalize(kind, api_version, copy.deepcopy(d)) for d in docs], "1")


def _group_pod(name: str, **annotations: str) -> Doc:
    meta = {"name": name, "namespace": "ns-a", "labels": {GROUP_KEY: "w"}, "annotations": annotations}
    return {"kind": "Pod", "metadata": meta, "status": {"phase": "Running"}}


def test_a_pod_group_giving_the_same_run_times_in_another_order_joins_them_in_that_order() -> None:
    """The run-time annotations the join adds to a Workload follow its group's pods in key
    order (the first pod with each wins). A group whose first pod carries only the source and
    whose next one the seconds gives {source, seconds}; when the first pod goes and a later
    one carries the same source, the same values come in the order {seconds, source}. The
    cache compared the annotations it had joined by value only, kept its parse, and handed
    out the Workload with its annotations in the old order."""
    store = MirrorStore(clock=_FixedClock())
    cluster = _Cluster(random.Random(0), store)
    for kind in KindName:
        _listed(store, kind, [])
    doc = cluster.workload("ns-a", "w")
    doc["spec"]["queueName"] = "no-such-queue"
    doc.pop("status", None)
    _listed(store, KindName.WORKLOAD, [doc])
    _listed(
        store,
        KindName.POD,
        [
            _group_pod("w-a", **{RUNTIME_SOURCE_ANNOTATION: "user"}),
            _group_pod("w-b", **{RUNTIME_SECONDS_ANNOTATION: "60"}),
        ],
    )
    model = MirrorModelCache(store)
    carried = [RUNTIME_SOURCE_ANNOTATION, RUNTIME_SECONDS_ANNOTATION]
    first = model.relaunch_state("ns-a/nobody", lambda doc: None, NOW)
    assert first is not None and list(first.workloads["ns-a/w"].annotations)[-2:] == carried
    store.apply(KindName.POD, DELETED, normalize(KindName.POD, "v1", _group_pod("w-a")))
    later = _group_pod("w-c", **{RUNTIME_SOURCE_ANNOTATION: "user"})
    store.apply(KindName.POD, ADDED, normalize(KindName.POD, "v1", later))
    cached = model.relaunch_state("ns-a/nobody", lambda doc: None, NOW)
    whole = whole_store_state(store, "ns-a/nobody", lambda doc: None, NOW)
    assert cached is not None
    assert list(whole.workloads["ns-a/w"].annotations)[-2:] == carried[::-1]
    difference = _first_difference(cached, whole, "state")
    assert difference is None, difference


def _small_workload(name: str, cpu: str, *, held: bool) -> Doc:
    """A Workload of LocalQueue ns-a/q0: held (inactive, pending), or admitted to cq0 five
    minutes ago for a ten-minute run."""
    doc: Doc = {
        "apiVersion": V1B1,
        "kind": "Workload",
        "metadata": {"name": name, "namespace": "ns-a", "uid": f"uid-{name}", "creationTimestamp": _stamp(10)},
        "spec": {
            "queueName": "q0",
            "priority": 0,
            "active": not held,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                }
            ],
        },
    }
    if not held:
        doc["metadata"]["annotations"] = {RUNTIME_SECONDS_ANNOTATION: "600"}
        doc["status"] = {
            "admission": {
                "clusterQueue": "cq0",
                "podSetAssignments": [
                    {"name": "main", "count": 1, "flavors": {"cpu": "f"}, "resourceUsage": {"cpu": cpu}}
                ],
            },
            "conditions": [
                {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": _stamp(5)}
                for kind in ("QuotaReserved", "Admitted")
            ],
        }
    return doc


def test_before_namespaces_are_listed_the_cache_declines() -> None:
    """Until the mirror has listed Namespaces (never, where RBAC forbids listing them: the kind
    is optional) the uncached path makes them up from the namespaces of LocalQueues and
    Workloads (:func:`sky_kueue.mirror.export.documents`); the cache built its state without
    any, so no ClusterQueue's namespaceSelector selected a Workload. The relaunch wait asks
    only once every kind is listed, but the safe-relaunch hold's probe asks the cache at any
    time: for a held relaunch waiting on a ten-minute run it predicted no safe wait at all. The
    cache now declines then, and the probe reads the whole store."""
    store = MirrorStore(clock=_FixedClock())
    for kind in KindName:
        if kind is not KindName.NAMESPACE:
            _listed(store, kind, [])
    flavor = {"apiVersion": V1B1, "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    _listed(store, KindName.RESOURCE_FLAVOR, [flavor])
    cq = {"apiVersion": V1B1, "kind": "ClusterQueue", "metadata": {"name": "cq0"}}
    _listed(
        store,
        KindName.CLUSTER_QUEUE,
        [{**cq, "spec": {"namespaceSelector": {}, "resourceGroups": _resource_groups("4")}}],
    )
    lq = {"apiVersion": V1B1, "kind": "LocalQueue", "metadata": {"name": "q0", "namespace": "ns-a"}}
    _listed(store, KindName.LOCAL_QUEUE, [{**lq, "spec": {"clusterQueue": "cq0"}}])
    held = _small_workload("held", "2", held=True)
    _listed(store, KindName.WORKLOAD, [held, _small_workload("busy", "4", held=False)])
    model = MirrorModelCache(store)
    whole = whole_store_state(store, "ns-a/held", lambda doc: doc, NOW)
    assert list(whole.namespaces) == ["ns-a"]
    assert model.relaunch_state("ns-a/held", lambda doc: doc, NOW) is None
    facts = workload_facts(held)
    answer = MirrorSafetyProbe(store, lambda: NOW.timestamp()).placement(facts, "here")
    assert answer is not None and answer.predicted_safe_wait_seconds == 300
    assert MirrorSafetyProbe(store, lambda: NOW.timestamp(), cached=model).placement(facts, "here") == answer
    _listed(store, KindName.NAMESPACE, [])
    cached = model.relaunch_state("ns-a/held", lambda doc: doc, NOW)
    assert cached is not None and not cached.namespaces

"""The burst gate's cached relaunch wait answers as the uncached one while the cluster changes.

A generated cluster of the predictor benchmark's shape (6 ClusterQueues in 3 cohorts, 600
admitted and 60 pending Workloads, each a pod group whose pod carries its run time) changes
step by step through the mirror's watch events: a Workload added (with a priority from its
class), a pod added to its group and deleted again, that WorkloadPriorityClass changed, a
pending Workload admitted, pods' run times changed and one removed, a ClusterQueue's quota
raised, admitted Workloads deleted (one of them a question's own, asked about after its
deletion), a ClusterQueue moved to another cohort. After every step each question gets the
same answer and is asked on the same cluster state from the cache
(:class:`~sky_kueue.controller.mirror_model.MirrorModelCache`) as from the whole store; every
step changes some answer, so a cache that kept any stale object would fail: one blind to a
step's writes keeps the state it had and gives the answers of the step before, which the test
checks differ from the new ones.
"""

from __future__ import annotations

import copy
import datetime
import importlib.util
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller import mirror_model, safety_probe
from sky_kueue.controller.detection import WorkloadFacts, workload_facts
from sky_kueue.controller.mirror_model import MirrorModelCache
from sky_kueue.controller.predicted_burst import PredictedWaitKind
from sky_kueue.controller.safety_probe import MirrorRelaunchWait, whole_store_state
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import DocumentsCut
from sky_kueue.kueue.eta import EXPECTED_RUNTIME_ANNOTATION
from sky_kueue.mirror.kinds import KindName
from sky_kueue.mirror.store import DELETED, MirrorStore, normalize

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
KUEUE_API = "kueue.x-k8s.io/v1beta1"
#: The questions: pending relaunches in both ClusterQueues of cohort-1 and one in cohort-0 (whose
#: tree the changes reach only when cq-004 joins it), and an admitted Workload just preempted
#: (projected as a new one; it is deleted midway and then projected from the deletion record).
QUESTIONS = ("team-001/wait-1", "team-001/wait-7", "team-004/wait-4", "team-000/wait-12", "team-001/run-3")

Doc = dict[str, Any]
Answers = dict[tuple[str, str], float | None]


def _benchmark() -> Any:
    spec = importlib.util.spec_from_file_location("predictor_benchmark", BENCHMARKS / "predictor.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def _scene(**store_options: Any) -> tuple[MirrorStore, float]:
    bench = _benchmark()
    now = bench.predictor.DEFAULT_NOW
    state = bench.large_state(cluster_queues=6, cohorts=3, admitted=600, pending=60)
    docs = bench.large_documents(state, bench.large_run_seconds(state, now))
    store = MirrorStore(**store_options)
    for kind, items in docs.items():
        api_version = "v1" if kind in (KindName.NAMESPACE, KindName.POD) else KUEUE_API
        store.replace(kind, [normalize(kind, api_version, d) for d in items], "1")
    return store, now.timestamp()


# --- the watch events of each step ---------------------------------------------------------

_versions = iter(range(1000, 10**6))


def _write(store: MirrorStore, kind: KindName, doc: Doc, event: str = "MODIFIED") -> None:
    doc["metadata"]["resourceVersion"] = str(next(_versions))
    api_version = "v1" if kind in (KindName.NAMESPACE, KindName.POD) else KUEUE_API
    store.apply(kind, event, normalize(kind, api_version, doc))


def _edit(store: MirrorStore, kind: KindName, key: str, change: Callable[[Doc], None]) -> None:
    doc = store.get(kind, key)
    assert doc is not None, key
    changed = copy.deepcopy(doc)
    change(changed)
    _write(store, kind, changed)


def _delete(store: MirrorStore, kind: KindName, key: str) -> None:
    doc = store.get(kind, key)
    assert doc is not None, key
    _write(store, kind, copy.deepcopy(doc), DELETED)


def _pod(namespace: str, group: str, run_seconds: int) -> Doc:
    return {
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-head",
            "namespace": namespace,
            "uid": f"pod-uid-{group}",
            "labels": {"kueue.x-k8s.io/pod-group-name": group, "kueue.x-k8s.io/queue-name": "lq"},
            "annotations": {EXPECTED_RUNTIME_ANNOTATION: str(run_seconds)},
        },
        "status": {"phase": "Pending"},
    }


def _add_a_high_class_workload(store: MirrorStore) -> None:
    """A Workload of class 'high' (no spec.priority: the class gives it) ahead in team-001's line."""
    doc = copy.deepcopy(store.get(KindName.WORKLOAD, "team-001/wait-1"))
    assert doc is not None
    doc["metadata"].update(name="urgent", uid="uid-urgent", creationTimestamp="2026-01-01T06:00:00Z")
    del doc["spec"]["priority"]
    doc["spec"]["priorityClassName"] = "high"
    doc["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    _write(store, KindName.WORKLOAD, doc, "ADDED")
    _write(store, KindName.POD, _pod("team-001", "urgent", 7200), "ADDED")


def _add_a_first_pod(store: MirrorStore) -> None:
    """The urgent group gains a pod filed before its head: the first pod's run time wins."""
    pod = _pod("team-001", "urgent", 5400)
    pod["metadata"].update(name="urgent-0", uid="pod-uid-urgent-0")
    _write(store, KindName.POD, pod, "ADDED")


def _remove_the_first_pod(store: MirrorStore) -> None:
    _delete(store, KindName.POD, "team-001/urgent-0")


def _raise_quota(store: MirrorStore) -> None:
    def more(doc: Doc) -> None:
        resources = doc["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
        resources[:] = [
            {"name": "cpu", "nominalQuota": "80000m"},
            {"name": "memory", "nominalQuota": str(80_000 * 2**20)},
        ]

    _edit(store, KindName.CLUSTER_QUEUE, "cq-001", more)


def _admitted_keys(store: MirrorStore, cluster_queue: str) -> list[str]:
    return [
        f"{d['metadata']['namespace']}/{d['metadata']['name']}"
        for d in store.workloads(cluster_queue=cluster_queue)
        if (d.get("status") or {}).get("admission")
    ]


def _change_run_times(store: MirrorStore) -> None:
    """Every admitted pod group of cq-004 runs an hour longer; one of cq-001 loses its run time."""
    for key in _admitted_keys(store, "cq-004"):
        namespace, name = key.split("/")

        def longer(pod: Doc) -> None:
            annotations = pod["metadata"]["annotations"]
            annotations[EXPECTED_RUNTIME_ANNOTATION] = str(int(annotations[EXPECTED_RUNTIME_ANNOTATION]) + 3600)

        _edit(store, KindName.POD, f"{namespace}/{name}-head", longer)
    _edit(store, KindName.POD, "team-001/run-0-head", lambda pod: pod["metadata"].pop("annotations"))


def _delete_admitted(store: MirrorStore) -> None:
    """Ten of cq-001's admitted Workloads go (run-3, a question, among them), with their pods."""
    for key in ["team-001/run-3", *_admitted_keys(store, "cq-001")[-9:]]:
        _delete(store, KindName.WORKLOAD, key)
        _delete(store, KindName.POD, f"{key}-head")


def _admit_a_pending_one(store: MirrorStore) -> None:
    def admitted(doc: Doc) -> None:
        at = "2026-01-01T11:59:00Z"
        doc["status"] = {
            "admission": {
                "clusterQueue": "cq-001",
                "podSetAssignments": [
                    {
                        "name": "main",
                        "count": 1,
                        "flavors": {"cpu": "default", "memory": "default"},
                        "resourceUsage": {"cpu": "8000m", "memory": str(8000 * 2**20)},
                    }
                ],
            },
            "conditions": [
                {"type": kind, "status": "True", "reason": kind, "message": "", "lastTransitionTime": at}
                for kind in ("QuotaReserved", "Admitted")
            ],
        }

    _edit(store, KindName.WORKLOAD, "team-001/wait-13", admitted)


def _lower_the_high_class(store: MirrorStore) -> None:
    _edit(store, KindName.WORKLOAD_PRIORITY_CLASS, "high", lambda doc: doc.update(value=10))


def _move_a_cluster_queue(store: MirrorStore) -> None:
    def moved(doc: Doc) -> None:
        doc["spec"]["cohort"] = "cohort-0"

    _edit(store, KindName.CLUSTER_QUEUE, "cq-004", moved)


STEPS: tuple[tuple[str, Callable[[MirrorStore], None]], ...] = (
    ("a Workload added", _add_a_high_class_workload),
    ("a pod added to its group", _add_a_first_pod),
    ("a pod deleted from its group", _remove_the_first_pod),
    ("a WorkloadPriorityClass modified", _lower_the_high_class),
    ("a Workload admitted", _admit_a_pending_one),
    ("pods modified", _change_run_times),
    ("a ClusterQueue modified", _raise_quota),
    ("Workloads deleted", _delete_admitted),
    ("a ClusterQueue moved to another cohort", _move_a_cluster_queue),
)


# --- asking ---------------------------------------------------------------------------------


def _facts(store: MirrorStore) -> dict[str, WorkloadFacts]:
    """Each question's facts, read once: run-3's stay as they were once it is deleted."""
    out = {}
    for key in QUESTIONS:
        doc = store.get(KindName.WORKLOAD, key)
        assert doc is not None, key
        out[key] = workload_facts(doc)
    return out


def _answers(waits: MirrorRelaunchWait, facts: Mapping[str, WorkloadFacts]) -> Answers:
    return {
        (key, kind.value): waits.relaunch_wait(fact, fact.priority, kind)
        for key, fact in facts.items()
        for kind in PredictedWaitKind
    }


def _same_states(store: MirrorStore, now: float, model: MirrorModelCache, facts: WorkloadFacts) -> None:
    """The cache's state of ``facts``' relaunch is the one the whole store gives, in the same order."""
    at = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)

    def relaunch(current: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        if current is not None:
            return safety_probe.as_relaunch(current, facts.priority, at, pending=True)
        deleted = store.deleted_workload(facts.uid)
        return None if deleted is None else safety_probe.as_relaunch(deleted, facts.priority, at, pending=False)

    key = f"{facts.namespace}/{facts.name}"
    cached = model.relaunch_state(key, relaunch, at)
    whole = whole_store_state(store, key, relaunch, at)
    assert cached is not None
    assert cached == whole
    for field in ("namespaces", "resource_flavors", "priority_classes", "cohorts", "cluster_queues", "local_queues"):
        assert list(getattr(cached, field)) == list(getattr(whole, field)), field
    assert list(cached.workloads) == list(whole.workloads)
    assert any(EXPECTED_RUNTIME_ANNOTATION in wl.annotations for wl in cached.workloads.values())


@pytest.mark.slow  # 5-8 s each: 9 steps x 10 questions on a 660-Workload cluster, both paths
def test_the_cached_relaunch_wait_answers_as_the_whole_store_while_the_cluster_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, now = _scene()
    reference = MirrorRelaunchWait(store, lambda: now)
    cached = MirrorRelaunchWait(store, lambda: now, cached=True)
    model = MirrorModelCache(store)
    cuts: list[int] = []
    real_cut = safety_probe.documents_of_trees

    def counted_cut(docs: Iterable[Mapping[str, Any]], workloads: Iterable[str]) -> DocumentsCut:
        cuts.append(1)
        return real_cut(docs, workloads)

    monkeypatch.setattr(safety_probe, "documents_of_trees", counted_cut)
    facts = _facts(store)
    previous = _answers(reference, facts)
    assert _answers(cached, facts) == previous
    for step, change in STEPS:
        change(store)
        cuts.clear()
        answers = _answers(reference, facts)
        assert len(cuts) == len(answers)  # the reference cut the whole store every time ...
        assert _answers(cached, facts) == answers, step
        assert len(cuts) == len(answers)  # ... the cache never did
        assert answers != previous, f"{step}: changed no answer, so it would not catch a stale cache"
        for fact in facts.values():
            _same_states(store, now, model, fact)
        previous = answers
    assert store.get(KindName.WORKLOAD, "team-001/run-3") is None
    assert isinstance(previous["team-001/run-3", "any"], float)  # answered from the deletion record


@pytest.mark.slow  # 5-8 s each: 9 steps x 10 questions on a 660-Workload cluster, both paths
def test_a_cache_further_behind_than_the_stores_journal_rebuilds() -> None:
    store, now = _scene(change_journal_entries=8)
    reference = MirrorRelaunchWait(store, lambda: now)
    cached = MirrorRelaunchWait(store, lambda: now, cached=True)
    facts = _facts(store)
    assert _answers(cached, facts) == _answers(reference, facts)
    for step, change in STEPS:  # pods modified and Workloads deleted write more than 8 objects
        change(store)
        assert _answers(cached, facts) == _answers(reference, facts), step


def test_documents_the_index_cannot_order_as_the_store_make_the_cache_decline() -> None:
    store, now = _scene()
    model = MirrorModelCache(store)
    at = datetime.datetime.fromtimestamp(now, tz=datetime.timezone.utc)
    assert isinstance(model.relaunch_state("team-001/wait-1", lambda doc: doc, at), o.ClusterState)
    odd = copy.deepcopy(store.get(KindName.WORKLOAD, "team-001/wait-1"))
    assert odd is not None
    odd["metadata"]["name"] = "filed-elsewhere"
    store.apply(KindName.WORKLOAD, "ADDED", {**odd, "metadata": {**odd["metadata"], "namespace": ""}})
    assert model.relaunch_state("team-001/wait-1", lambda doc: doc, at) is None
    store.apply(KindName.WORKLOAD, DELETED, {**odd, "metadata": {**odd["metadata"], "namespace": ""}})
    assert isinstance(model.relaunch_state("team-001/wait-1", lambda doc: doc, at), o.ClusterState)
    # a relaunch document without its kind: the uncached path files it with the other kinds
    assert model.relaunch_state("team-001/wait-1", lambda doc: {**(doc or {}), "kind": ""}, at) is None


def test_between_two_questions_only_the_documents_written_are_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    store, now = _scene()
    cached = MirrorRelaunchWait(store, lambda: now, cached=True)
    facts = _facts(store)["team-001/wait-7"]
    parsed: list[str] = []
    real_parse = mirror_model.parse_object

    def counted_parse(doc: Mapping[str, Any]) -> Any:
        parsed.append(doc["metadata"]["name"])
        return real_parse(doc)

    monkeypatch.setattr(mirror_model, "parse_object", counted_parse)
    first = cached.relaunch_wait(facts, facts.priority, PredictedWaitKind.ANY)
    assert len(parsed) > 200  # the tree: cohort-1's two ClusterQueues and their Workloads
    parsed.clear()
    assert cached.relaunch_wait(facts, facts.priority, PredictedWaitKind.ANY) == first
    assert parsed == ["wait-7"]  # the question's own relaunch, built anew each time
    parsed.clear()
    _edit(store, KindName.WORKLOAD, "team-001/run-5", lambda doc: doc["metadata"].update(labels={"new": "label"}))
    _edit(store, KindName.WORKLOAD, "team-002/run-5", lambda doc: doc["metadata"].update(labels={"new": "label"}))
    assert cached.relaunch_wait(facts, facts.priority, PredictedWaitKind.ANY) == first
    assert sorted(parsed) == ["run-5", "wait-7"]  # team-002's is in another tree: not read at all

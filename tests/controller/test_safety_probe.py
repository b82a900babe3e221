"""The predictor's answer for a held relaunch, on a mirror store: now, and the wait for a safe place.

The cluster of ``test_live_hold.py`` (team-a 6 CPU and team-b 4 CPU nominal in one cohort):
team-a's train job (6 CPU) and team-b's own job (4 CPU, expected to run 900 s) hold the whole
cohort; team-b's dev relaunch (4 CPU, held: inactive) waits. Made active, Kueue would not admit
it now; without borrowing it fits once own finishes, so the safe wait is own's remaining time.
Once train finishes instead, Kueue would admit dev now, but into team-a's idle quota: borrowed.
"""

from __future__ import annotations

import copy
import datetime
import importlib.util
import math
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.controller import safety_probe
from sky_kueue.controller.aging.safe_relaunch import Placement
from sky_kueue.controller.detection import WorkloadFacts, workload_facts
from sky_kueue.controller.mirror_model import MirrorModelCache
from sky_kueue.controller.predicted_burst import PredictedBurstSettings, PredictedWaitKind, decide_predicted_burst
from sky_kueue.controller.safety_probe import MirrorRelaunchWait, MirrorSafetyProbe, export_key
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import DocumentsCut
from sky_kueue.kueue.eta import EXPECTED_RUNTIME_ANNOTATION
from sky_kueue.mirror.kinds import ALL_KINDS, KindName
from sky_kueue.mirror.store import DELETED, DELETED_WORKLOAD_TTL_SECONDS, MirrorStore, normalize
from sky_kueue.sandbox.apiserver import ManualClock
from tests.mirror.builders import admitted_status

from .test_live_hold import hold_setup

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

START = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
OWN_RUN_SECONDS = 900
ELAPSED_SECONDS = 300


def _stamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _workload(
    name: str,
    namespace: str,
    cpu: str,
    priority: int,
    *,
    admitted: bool,
    runtime: int | None = None,
    active: bool = True,
) -> dict[str, Any]:
    annotations = {} if runtime is None else {EXPECTED_RUNTIME_ANNOTATION: str(runtime)}
    doc: dict[str, Any] = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "creationTimestamp": _stamp(START),
            "annotations": annotations,
        },
        "spec": {
            "queueName": f"{namespace}-lq",
            "priority": priority,
            "active": active,
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}},
                }
            ],
        },
    }
    if admitted:
        doc["status"] = admitted_status(f"{namespace}-cq", cpu, _stamp(START))
    return doc


def _store(*workloads: dict[str, Any], store: MirrorStore | None = None) -> MirrorStore:
    store = store if store is not None else MirrorStore()
    by_kind: dict[KindName, list[dict[str, Any]]] = {kind.name: [] for kind in ALL_KINDS}
    for doc in [*hold_setup(), *workloads]:
        by_kind[KindName(doc["kind"])].append(doc)
    for kind in ALL_KINDS:
        api_version = "v1" if not kind.group else "kueue.x-k8s.io/v1beta1"
        store.replace(kind.name, [normalize(kind.name, api_version, d) for d in by_kind[kind.name]], "1")
    return store


class BothProbes:
    """The probe on the whole store and the controller's cached one on the same store: every
    question is asked of both, which must answer alike (the cached one judges the relaunch's
    cohort tree as :class:`~sky_kueue.controller.mirror_model.MirrorModelCache` keeps it)."""

    def __init__(self, store: MirrorStore, now: float) -> None:
        self.store = store
        self.whole = MirrorSafetyProbe(store, lambda: now)
        self.cached = MirrorSafetyProbe(store, lambda: now, cached=True)
        self.tree_states: list[o.ClusterState | None] = []
        model = self.cached._model
        assert model is not None
        ask = model.relaunch_state

        def recorded(
            key: str, relaunch: Callable[[Mapping[str, Any] | None], Mapping[str, Any] | None], now: datetime.datetime
        ) -> o.ClusterState | None:
            self.tree_states.append(ask(key, relaunch, now))
            return self.tree_states[-1]

        model.relaunch_state = recorded  # type: ignore[method-assign]

    def placement(self, facts: WorkloadFacts, cluster: str, protected_level: int | None = None) -> Placement | None:
        answer = self.whole.placement(facts, cluster, protected_level)
        assert self.cached.placement(facts, cluster, protected_level) == answer
        # ... and the cached one did judge the cohort tree (it did not decline to the whole store)
        mirrored = self.store.get(KindName.WORKLOAD, f"{facts.namespace}/{facts.name}") is not None
        assert self.tree_states.pop() is not None or not mirrored
        return answer


def _probe(store: MirrorStore) -> BothProbes:
    now = (START + datetime.timedelta(seconds=ELAPSED_SECONDS)).timestamp()
    return BothProbes(store, now)


DEV = _workload("dev-1", "team-b", "4", 100, admitted=False, active=False)
OWN = _workload("own-3", "team-b", "4", 100, admitted=True, runtime=OWN_RUN_SECONDS)
TRAIN = _workload("train-2", "team-a", "6", 1000, admitted=True)


def test_a_held_relaunch_waits_for_nominal_quota_until_its_owner_finishes() -> None:
    placement = _probe(_store(DEV, OWN, TRAIN)).placement(workload_facts(DEV), "this cluster")

    assert placement is not None and not placement.admits_now
    assert placement.predicted_safe_wait_seconds == OWN_RUN_SECONDS - ELAPSED_SECONDS


def test_the_run_time_on_a_pod_groups_pods_reaches_the_safe_wait() -> None:
    """Kueue copies no pod annotation onto a pod group's Workload: the policy's expected run
    time is on the pods only, and the probe joins it as the burst gate does."""
    own = copy.deepcopy(OWN)
    own["metadata"]["annotations"] = {}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "own-3-head",
            "namespace": "team-b",
            "uid": "uid-own-3-head",
            "labels": {"kueue.x-k8s.io/pod-group-name": "own-3"},
            "annotations": {EXPECTED_RUNTIME_ANNOTATION: str(OWN_RUN_SECONDS)},
        },
        "spec": {"containers": [{"name": "c"}]},
    }
    without_pod = _probe(_store(DEV, own, TRAIN)).placement(workload_facts(DEV), "this cluster")
    assert without_pod is not None and without_pod.predicted_safe_wait_seconds is None  # unknown

    placement = _probe(_store(DEV, own, TRAIN, pod)).placement(workload_facts(DEV), "this cluster")

    assert placement is not None and placement.predicted_safe_wait_seconds == OWN_RUN_SECONDS - ELAPSED_SECONDS


def test_idle_borrowed_quota_is_admission_but_not_safety() -> None:
    placement = _probe(_store(DEV, OWN)).placement(workload_facts(DEV), "this cluster")  # train finished

    assert placement is not None and placement.admits_now and placement.borrows and not placement.safe_now
    assert placement.predicted_safe_wait_seconds == OWN_RUN_SECONDS - ELAPSED_SECONDS


def test_nominal_quota_free_is_safe_now() -> None:
    placement = _probe(_store(DEV, TRAIN)).placement(workload_facts(DEV), "this cluster")  # own finished

    assert placement is not None and placement.safe_now and placement.safe_wait_seconds == 0.0


def test_a_workload_the_mirror_does_not_hold_gets_no_answer() -> None:
    gone = _workload("dev-9", "team-b", "4", 100, admitted=False)
    assert _probe(_store(DEV, OWN)).placement(workload_facts(gone), "this cluster") is None


def test_a_relaunch_whose_turn_comes_in_borrowed_quota_first_borrows_later() -> None:
    train = _workload("train-2", "team-a", "6", 1000, admitted=True, runtime=OWN_RUN_SECONDS // 3)
    placement = _probe(_store(DEV, OWN, train)).placement(workload_facts(DEV), "this cluster")

    # train frees team-a's quota at 300 s, before own frees team-b's at 900 s: Kueue would
    # admit dev into borrowed quota first; nominal quota comes 600 s from now.
    assert placement is not None and not placement.admits_now and placement.borrows
    assert placement.predicted_safe_wait_seconds == OWN_RUN_SECONDS - ELAPSED_SECONDS


def test_a_relaunch_whose_turn_comes_in_nominal_quota_does_not_borrow() -> None:
    placement = _probe(_store(DEV, OWN, TRAIN)).placement(workload_facts(DEV), "this cluster")

    assert placement is not None and placement.safe_when_admitted  # a hold would only delay it


def _without_cohorts(store_docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    docs = copy.deepcopy(store_docs)
    for doc in docs:
        if doc["kind"] == "ClusterQueue":
            doc["spec"].pop("cohort", None)
    return docs


def test_a_cluster_queue_without_a_cohort_gets_a_safe_wait_not_a_validation_error() -> None:
    # Without a cohort nothing borrows; a zero borrowingLimit there fails Kueue's validation,
    # which used to leave every such relaunch without an answer.
    store = MirrorStore()
    by_kind: dict[KindName, list[dict[str, Any]]] = {kind.name: [] for kind in ALL_KINDS}
    for doc in [*_without_cohorts(hold_setup()), DEV, OWN]:
        by_kind[KindName(doc["kind"])].append(doc)
    for kind in ALL_KINDS:
        api_version = "v1" if not kind.group else "kueue.x-k8s.io/v1beta1"
        store.replace(kind.name, [normalize(kind.name, api_version, d) for d in by_kind[kind.name]], "1")

    placement = _probe(store).placement(workload_facts(DEV), "this cluster")

    assert placement is not None and not placement.admits_now and not placement.borrows
    assert placement.predicted_safe_wait_seconds == OWN_RUN_SECONDS - ELAPSED_SECONDS


# --- the burst gate's relaunch wait (MirrorRelaunchWait) ---------------------------------


def _waits(store: MirrorStore, *, horizon_seconds: float = 24 * 3600.0) -> MirrorRelaunchWait:
    now = (START + datetime.timedelta(seconds=ELAPSED_SECONDS)).timestamp()
    return MirrorRelaunchWait(store, lambda: now, horizon_seconds=horizon_seconds)


PENDING_DEV = _workload("dev-1", "team-b", "4", 100, admitted=False)
#: team-a's train job with a known run time: it frees team-a's quota 600 s from now.
TRAIN_KNOWN = _workload("train-2", "team-a", "6", 1000, admitted=True, runtime=ELAPSED_SECONDS + 600)


def test_the_relaunch_wait_for_any_admission_is_the_first_quota_to_free() -> None:
    # train frees team-a's quota (borrowable) 600 s from now, own team-b's nominal 3,300 s from now.
    own_long = _workload("own-3", "team-b", "4", 100, admitted=True, runtime=OWN_RUN_SECONDS * 4)
    waits = _waits(_store(PENDING_DEV, own_long, TRAIN_KNOWN))
    assert waits.relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.ANY) == 600.0
    # within nominal quota it waits for own: 3,600 - 300 s
    assert waits.relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.SAFE) == 4 * OWN_RUN_SECONDS - 300


def test_an_unknown_run_time_is_an_unknown_wait_and_a_late_one_is_beyond_the_horizon() -> None:
    unknown = _waits(_store(PENDING_DEV, OWN, TRAIN))  # train's run time unknown, own's 900 s
    assert unknown.relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.ANY) == 600.0  # own frees
    no_runtimes = _waits(_store(PENDING_DEV, _workload("own-3", "team-b", "4", 100, admitted=True), TRAIN))
    assert no_runtimes.relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.ANY) is None
    short_horizon = _waits(_store(PENDING_DEV, OWN, TRAIN_KNOWN), horizon_seconds=60.0)
    assert short_horizon.relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.ANY) == math.inf


def test_a_relaunch_nothing_in_its_tree_makes_room_for_is_beyond_the_horizon() -> None:
    # 11 cpu never fit the cohort's 10: once own and train (known run times) finish, nothing is
    # left to wait for, so the gate bursts; with train's run time unknown it cannot say.
    huge = _workload("huge-4", "team-b", "11", 100, admitted=False)
    known = _waits(_store(huge, OWN, TRAIN_KNOWN))
    assert known.relaunch_wait(workload_facts(huge), 100, PredictedWaitKind.ANY) == math.inf
    unknown = _waits(_store(huge, OWN, TRAIN))
    assert unknown.relaunch_wait(workload_facts(huge), 100, PredictedWaitKind.ANY) is None


def test_no_answer_before_the_mirror_has_listed_the_queue_kinds() -> None:
    store = _store(PENDING_DEV, OWN, TRAIN_KNOWN)
    fresh = MirrorStore()
    for kind in ALL_KINDS:
        if kind.name is not KindName.CLUSTER_QUEUE:
            api_version = "v1" if not kind.group else "kueue.x-k8s.io/v1beta1"
            fresh.replace(kind.name, [normalize(kind.name, api_version, d) for d in store.items(kind.name)], "1")
    assert _waits(fresh).relaunch_wait(workload_facts(PENDING_DEV), 100, PredictedWaitKind.ANY) is None


def test_a_preempted_workload_is_projected_as_a_new_relaunch_at_its_aged_priority() -> None:
    # dev was just preempted (its snapshot still holds quota). A rival of its size waits in
    # team-b's queue since before; when train frees team-a's quota (600 s) one of them borrows it
    # and the other waits for own (3,300 s). At dev's priority the relaunch (a new Workload, at
    # the back of the line) comes second; aged above the rival it comes first.
    preempted = _workload("dev-1", "team-b", "4", 100, admitted=True)
    rival = _workload("rival-5", "team-b", "4", 500, admitted=False)
    rival["metadata"]["creationTimestamp"] = _stamp(START - datetime.timedelta(seconds=60))
    own = _workload("own-3", "team-b", "4", 100, admitted=True, runtime=OWN_RUN_SECONDS * 4)
    waits = _waits(_store(preempted, own, rival, TRAIN_KNOWN))
    facts = workload_facts(preempted)

    behind = waits.relaunch_wait(facts, 100, PredictedWaitKind.ANY)
    ahead = waits.relaunch_wait(facts, 1_000, PredictedWaitKind.ANY)
    assert (behind, ahead) == (4 * OWN_RUN_SECONDS - ELAPSED_SECONDS, 600.0)


# --- a preempted Workload already gone from the mirror when the gate asks ----------------

DEV_KEY = "team-b/dev-1"


def _preempted_scene(store: MirrorStore) -> tuple[MirrorStore, dict[str, Any]]:
    """The scene of the test above (dev preempted, a rival waiting, own frees team-b's quota in
    3,300 s, train team-a's in 600 s); returns the store and dev's last snapshot."""
    preempted = _workload("dev-1", "team-b", "4", 100, admitted=True)
    rival = _workload("rival-5", "team-b", "4", 500, admitted=False)
    rival["metadata"]["creationTimestamp"] = _stamp(START - datetime.timedelta(seconds=60))
    own = _workload("own-3", "team-b", "4", 100, admitted=True, runtime=OWN_RUN_SECONDS * 4)
    _store(preempted, own, rival, TRAIN_KNOWN, store=store)
    return store, preempted


def _collect(store: MirrorStore, key: str = DEV_KEY) -> None:
    """The Workload's delete event (its pods went with no grace period; Kueue collected it)."""
    last = store.get(KindName.WORKLOAD, key)
    assert last is not None
    store.apply(KindName.WORKLOAD, DELETED, last)
    assert store.get(KindName.WORKLOAD, key) is None


def test_a_preempted_workload_deleted_before_the_gate_asks_is_still_projected_and_a_long_wait_bursts() -> None:
    store, preempted = _preempted_scene(MirrorStore())
    facts = workload_facts(preempted)
    live = _waits(store)
    expected = (
        live.relaunch_wait(facts, 100, PredictedWaitKind.ANY),
        live.relaunch_wait(facts, 1_000, PredictedWaitKind.ANY),
    )
    assert expected == (4 * OWN_RUN_SECONDS - ELAPSED_SECONDS, 600.0)

    _collect(store)
    waits = _waits(store)
    behind = waits.relaunch_wait(facts, 100, PredictedWaitKind.ANY)
    ahead = waits.relaunch_wait(facts, 1_000, PredictedWaitKind.ANY)
    assert (behind, ahead) == expected  # the same projection as while it was in the mirror
    # within nominal quota, aged ahead of the rival: own's end
    assert waits.relaunch_wait(facts, 1_000, PredictedWaitKind.SAFE) == 4 * OWN_RUN_SECONDS - ELAPSED_SECONDS

    gate = PredictedBurstSettings()  # bursts above 600 + 300 s
    assert decide_predicted_burst(1, 1, behind, gate).bursts
    assert not decide_predicted_burst(1, 1, ahead, gate).bursts


def test_without_the_record_of_deletions_a_collected_workload_is_an_unknown_wait_that_stays() -> None:
    store, preempted = _preempted_scene(MirrorStore(deleted_kept=0))
    _collect(store)
    wait = _waits(store).relaunch_wait(workload_facts(preempted), 100, PredictedWaitKind.ANY)
    assert wait is None
    assert not decide_predicted_burst(1, 1, wait, PredictedBurstSettings()).bursts


def test_a_deletion_older_than_the_bound_is_forgotten() -> None:
    mirror_clock = ManualClock(START)
    store, preempted = _preempted_scene(MirrorStore(clock=mirror_clock))
    _collect(store)
    facts = workload_facts(preempted)
    mirror_clock.advance(DELETED_WORKLOAD_TTL_SECONDS)
    assert _waits(store).relaunch_wait(facts, 100, PredictedWaitKind.ANY) == 4 * OWN_RUN_SECONDS - ELAPSED_SECONDS
    mirror_clock.advance(1)
    assert _waits(store).relaunch_wait(facts, 100, PredictedWaitKind.ANY) is None


def test_a_deletion_pushed_out_by_later_ones_is_forgotten() -> None:
    store, preempted = _preempted_scene(MirrorStore(deleted_kept=1))
    _collect(store)
    facts = workload_facts(preempted)
    assert _waits(store).relaunch_wait(facts, 100, PredictedWaitKind.ANY) == 4 * OWN_RUN_SECONDS - ELAPSED_SECONDS
    _collect(store, "team-b/rival-5")  # the rival was ahead of dev's relaunch: now it is not
    assert _waits(store).relaunch_wait(facts, 100, PredictedWaitKind.ANY) is None


def test_a_deleted_workload_whose_name_is_taken_again_gets_no_answer() -> None:
    # The relaunch (same pod group name, a new UID) is in the mirror before the controller
    # handled its predecessor's deletion: the relaunch's own reconcile asks the gate instead.
    store, preempted = _preempted_scene(MirrorStore())
    _collect(store)
    relaunch = _workload("dev-1", "team-b", "4", 100, admitted=False)
    relaunch["metadata"]["uid"] = "uid-dev-1-relaunch"
    store.apply(KindName.WORKLOAD, "ADDED", normalize(KindName.WORKLOAD, "kueue.x-k8s.io/v1beta1", relaunch))
    waits = _waits(store)
    assert waits.relaunch_wait(workload_facts(preempted), 100, PredictedWaitKind.ANY) is None
    assert (
        waits.relaunch_wait(workload_facts(relaunch), 100, PredictedWaitKind.ANY)
        == 4 * OWN_RUN_SECONDS - ELAPSED_SECONDS
    )


# --- the relaunch wait parses only the relaunch's cohort tree -----------------------------


def _whole_cluster(docs: Iterable[Mapping[str, Any]], workloads: Iterable[str]) -> DocumentsCut:
    """No cut: every document kept (the reference the cut must agree with)."""
    kept = list(docs)
    return DocumentsCut(kept, {export_key(doc) for doc in kept if doc.get("kind") == "Workload"})


def _answers(waits: MirrorRelaunchWait, store: MirrorStore, keys: list[str]) -> dict[tuple[str, str], float | None]:
    out: dict[tuple[str, str], float | None] = {}
    for key in keys:
        doc = store.get(KindName.WORKLOAD, key)
        assert doc is not None, key
        facts = workload_facts(doc)
        for kind in PredictedWaitKind:
            out[key, kind.value] = waits.relaunch_wait(facts, facts.priority + 5, kind)
    return out


def _generated_store() -> tuple[MirrorStore, float]:
    """A generated cluster of the predictor benchmark's shape: 6 ClusterQueues in 3 cohorts."""
    spec = importlib.util.spec_from_file_location("predictor_benchmark", BENCHMARKS / "predictor.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    now = bench.predictor.DEFAULT_NOW
    state = bench.large_state(cluster_queues=6, cohorts=3, admitted=300, pending=30)
    return bench.large_store(bench.large_documents(state, bench.large_run_seconds(state, now))), now.timestamp()


def test_the_cut_to_the_relaunchs_tree_gives_the_whole_clusters_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    store, now = _generated_store()
    keys = [f"team-{i:03d}/wait-{i}" for i in range(6)] + ["team-001/run-3", "team-004/run-40"]
    waits = MirrorRelaunchWait(store, lambda: now)
    calls: list[int] = []
    real_cut = safety_probe.documents_of_trees

    def counting_cut(docs: Iterable[Mapping[str, Any]], workloads: Iterable[str]) -> DocumentsCut:
        docs = list(docs)
        cut = real_cut(docs, workloads)
        calls.append(len(docs) - len(cut.documents))
        return cut

    monkeypatch.setattr(safety_probe, "documents_of_trees", counting_cut)
    cut = _answers(waits, store, keys)
    assert calls and min(calls) > 0  # the cut dropped the other trees every time
    monkeypatch.setattr(safety_probe, "documents_of_trees", _whole_cluster)
    whole = _answers(waits, store, keys)
    assert cut == whole
    assert sum(isinstance(v, float) and math.isfinite(v) for v in whole.values()) >= len(keys)


def test_the_existing_relaunch_cases_answer_the_same_without_the_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    huge = _workload("huge-4", "team-b", "11", 100, admitted=False)
    scenes = [
        (
            _store(PENDING_DEV, _workload("own-3", "team-b", "4", 100, admitted=True, runtime=3600), TRAIN_KNOWN),
            PENDING_DEV,
        ),
        (_store(PENDING_DEV, OWN, TRAIN), PENDING_DEV),
        (_store(huge, OWN, TRAIN_KNOWN), huge),
        (_store(huge, OWN, TRAIN), huge),
    ]

    def answers() -> list[float | None]:
        return [
            _waits(store).relaunch_wait(workload_facts(doc), 100, kind)
            for store, doc in scenes
            for kind in PredictedWaitKind
        ]

    cut = answers()
    monkeypatch.setattr(safety_probe, "documents_of_trees", _whole_cluster)
    assert answers() == cut
    assert None in cut and math.inf in cut and 600.0 in cut


def test_the_gate_and_the_hold_share_one_cache_and_answer_as_the_whole_store() -> None:
    # The controller builds one MirrorModelCache for both: questions of either kind, with a
    # write between them, get the whole store's answers from the shared cache.
    own_long = _workload("own-3", "team-b", "4", 100, admitted=True, runtime=OWN_RUN_SECONDS * 4)
    store = _store(DEV, own_long, TRAIN_KNOWN)
    now = (START + datetime.timedelta(seconds=ELAPSED_SECONDS)).timestamp()
    model = MirrorModelCache(store)
    probe = MirrorSafetyProbe(store, lambda: now, cached=model)
    waits = MirrorRelaunchWait(store, lambda: now, cached=model)
    whole_probe, whole_waits = MirrorSafetyProbe(store, lambda: now), MirrorRelaunchWait(store, lambda: now)
    facts = workload_facts(DEV)
    answers = []
    for step in range(2):
        placement = probe.placement(facts, "c")
        wait = waits.relaunch_wait(facts, 100, PredictedWaitKind.SAFE)
        assert placement == whole_probe.placement(facts, "c"), step
        assert wait == whole_waits.relaunch_wait(facts, 100, PredictedWaitKind.SAFE), step
        answers.append((placement, wait))
        if step == 0:
            _collect(store, "team-b/own-3")  # team-b's nominal quota frees
    assert answers[0] != answers[1]
    assert answers[1][0] is not None and answers[1][0].safe_now

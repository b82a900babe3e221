"""Benchmark the admission predictor; prints JSON figures.

* ``oracle``: median and max seconds per oracle scenario (parse + predict, in-process), per
  set, against the same run's median time to only parse and validate the scenarios
  (``ratio_to_parse``), and Kueue's own harness time recorded in the oracle's
  ``kueue_timing.jsonl`` (the harness's, not this machine's run: a reference, not a ratio).
* ``large``: a generated cluster of 100 ClusterQueues in 10 cohorts with 10,000 admitted
  and 1,000 pending workloads: the time to build the model from objects, of one scheduling
  cycle, and of a what-if verdict for one new workload (target: under 100 ms), and the
  peak memory of the process (target: under 300 MB).
* ``large.relaunch_wait``: the burst gate's question (``MirrorRelaunchWait.relaunch_wait``,
  asked by the controller for a gated team's job due a burst at its preemption and on each
  reconcile or re-age pass while its relaunch waits) on that cluster held in a mirror store,
  as the controller's: every Workload a pod group's whose pod carries its expected run time
  (admitted ones end within 20 h, pending ones run 1 h), asked with the controller's cache of
  the cut, the run times and the parsed objects (``cached=True``,
  :mod:`sky_kueue.controller.mirror_model`). ``first_call_ms``: the cache's first question
  (it reads the whole mirror). Per case (a pending relaunch, for any admission and within
  nominal quota; an admitted Workload just preempted; the first again after a watch event
  modified a Workload of its tree since its last question), the median and max milliseconds
  of :data:`RELAUNCH_WAIT_REPEATS` calls, the median's ratio to the same run's one-cycle time,
  and the median of as many calls without the cache (each a whole export, cut, run-time join
  and parse before the ETA), with the ratio to it; the answers must agree.
  ``large.relaunch_wait_ordinary`` is the same on a tenth of the cluster (10 ClusterQueues,
  1,000 admitted, 100 pending). Target: a reconcile that asks stays well under the
  controller's 100-ms eviction-to-patch target on an ordinary cluster. Under 100 ms on the
  tenth (49-70 ms a call; 80-101 ms uncached), above it on the large cluster: 0.14-0.21 s (it
  was 3.4-4.4 s while the ETA simulated every cohort tree, 0.8-1.0 s while the whole mirror
  was parsed, and 0.27-0.34 s while every call cut and parsed the tree's documents anew),
  about 94 % of it now the ETA on the tree's 1,000 admitted Workloads (most of that its
  preemption searches, about 600 a question); the gate's answer lags the preemption by that
  much.
* ``process``: the whole ``sky-kueue predict --snapshot FILE --output json`` process, as a
  user (and the oracle's ``score.py``) runs it, on each scale-public scenario: wall seconds
  (median of :data:`PROCESS_REPEATS` runs) and their ratio to Kueue's ``scheduleSeconds``
  for that scenario (targets: median 0.6, worst 1.5). Baselines of the same run: the same
  process reading YAML through the reader's reference path (the limit scan, then PyYAML's
  constructor: the only path before the one-pass reader), and the floor every such process
  pays, Python's start-up and the predict path's imports (the two processes alternate, so
  they share whatever else the machine does). For the largest scenario, the YAML reader
  alone in-process, one pass against the reference path. The subprocesses keep their
  bytecode in a temporary cache, warmed by one untimed run, as an installed package has it;
  ``imports_without_bytecode_s`` is the imports with ``PYTHONDONTWRITEBYTECODE=1`` and no
  cache, as this repository's environment runs them (the package compiled on every run).

* ``against_harness`` (``--against-harness``): Kueue's own scheduler timed in the same run, by
  the Go harness (``benchmarks/kueue_harness``, Kueue at the release the real cluster pins;
  :mod:`sky_kueue.realcluster.harness_build`), instead of the recorded ``scheduleSeconds`` of
  another commit on another day's machine. Per scale-public scenario (and with
  ``--harness-sample N`` the first N scenarios of each other public set), :data:`HARNESS_ROUNDS`
  rounds, each: one harness run (its time inside Kueue's scheduling cycles, setup excluded),
  one ``sky-kueue predict --snapshot FILE --output json`` process and one in-process
  prediction (parse + predict), alternating so all three share whatever else the machine does.
  Ratios per scenario are medians over medians; median and worst over the scale scenarios
  (issue 38's target: the process's median ratio at most 0.5), with the load average before
  and after, and each side's number of cycles (the served Kueue decides some scenarios in
  more cycles than the recorded commit, which the model follows).

Run: ``.venv/bin/python benchmarks/predictor.py`` (``--quick`` skips the scale set in
``oracle``; ``--large-only`` runs only ``large``; ``--process-only`` runs only ``process``;
``--markdown`` prints ``process`` as a table instead of JSON; ``--against-harness
[--harness-sample N] [--markdown]`` runs only ``against_harness``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from sky_kueue.controller.detection import WorkloadFacts, workload_facts
from sky_kueue.controller.predicted_burst import PredictedWaitKind
from sky_kueue.controller.safety_probe import MirrorRelaunchWait
from sky_kueue.inputs import files, yaml_reader
from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import compiled, eta, loader, parse, predictor, validation, whatif
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.mirror.kinds import ALL_KINDS, KindName
from sky_kueue.mirror.store import MirrorStore, normalize
from sky_kueue.realcluster import harness_build, versions
from sky_kueue.realcluster.harness_outcome import timing_rows

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "oracle"
SETS = ("seeds", "public", "hier-public", "fair-public", "afs-public", "scale-public")
LARGE_CLUSTER_QUEUES = 100
LARGE_COHORTS = 10
LARGE_ADMITTED = 10_000
LARGE_PENDING = 1_000
WHAT_IF_REPEATS = 20
#: An ordinary cluster for the relaunch wait's figure: the large one's shape at a tenth of its
#: size (10 ClusterQueues in 2 cohorts, 1,000 admitted, 100 pending).
ORDINARY_CLUSTER_QUEUES = 10
ORDINARY_COHORTS = 2
ORDINARY_ADMITTED = 1_000
ORDINARY_PENDING = 100
#: Timed calls of the burst gate's relaunch wait per case (each one a whole export + model + ETA).
RELAUNCH_WAIT_REPEATS = 3
#: The controller's eviction-to-patch target (benchmarks/README.md, controller row): a
#: reconcile that asks the gate should stay well under it on an ordinary cluster.
RELAUNCH_WAIT_TARGET_MS = 100
#: Remaining run times of the large cluster's admitted workloads at the measurement's ``now``
#: are spread over (0, this] seconds, so the ETA simulates many completions before the horizon.
LARGE_REMAINING_SPREAD_SECONDS = 20 * 3600
#: Expected run time of each pending workload of the large cluster once admitted.
LARGE_PENDING_RUN_SECONDS = 3600
#: The Workloads the relaunch wait is asked about: a pending relaunch (its own reconcile or a
#: re-age pass), and an admitted one just preempted (projected as a new Workload).
RELAUNCH_WAIT_PENDING = "team-007/wait-7"
RELAUNCH_WAIT_PREEMPTED = "team-007/run-50"
#: The admitted Workload of the relaunch's cohort tree modified between questions (the
#: ``_after_write`` case), and how many watch events it gets before each question.
RELAUNCH_WAIT_TOUCHED = "team-007/run-10"
RELAUNCH_WAIT_WRITES = 1
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta1"
PROCESS_SET = "scale-public"
PROCESS_REPEATS = 3
READER_REPEATS = 3
PROCESS_TARGET_MEDIAN = 0.6
PROCESS_TARGET_WORST = 1.5
#: Rounds per scenario of ``--against-harness`` (each: one harness run, one predict process,
#: one in-process prediction).
HARNESS_ROUNDS = 3
#: Issue 38's target: ``sky-kueue predict``'s median ratio to Kueue's scheduling time.
HARNESS_TARGET_MEDIAN = 0.5
#: The sets ``--harness-sample N`` takes N scenarios from (the scale set is always timed).
HARNESS_SAMPLE_SETS = ("public", "hier-public", "fair-public", "afs-public")
#: The modules ``sky-kueue predict --snapshot`` imports before it reads anything.
PREDICT_IMPORTS = (
    "import sky_kueue.cli.main, sky_kueue.cli.predict_cmd, sky_kueue.kueue.loader, sky_kueue.kueue.predictor"
)
#: ``sky-kueue`` as its console script runs it, and with the YAML reader held to its
#: reference path (what every run did before the one-pass reader).
CLI = "import sys; from sky_kueue.cli.main import main; sys.argv[0] = 'sky-kueue'; sys.exit(main())"
REFERENCE_CLI = "from sky_kueue.inputs import yaml_reader; yaml_reader._one_pass_applies = lambda: False; " + CLI


def _kueue_seconds(name: str) -> dict[str, float]:
    """Kueue's harness seconds per scenario of a set (its scheduling part when recorded)."""
    timing = ORACLE / name / "kueue_timing.jsonl"
    out: dict[str, float] = {}
    if timing.exists():
        for line in timing.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                out[row["id"]] = float(row.get("scheduleSeconds") or row.get("seconds") or 0.0)
    return out


def _oracle(sets: tuple[str, ...]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name in sets:
        paths = sorted((ORACLE / name / "scenarios").glob("*.yaml"))
        predict_s, parse_s = [], []
        for path in paths:
            text = path.read_text()
            start = time.perf_counter()
            state = loader.load_state(text, path.name)
            validation.validate_state(state)
            parse_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            predictor.predict(loader.load_state(text, path.name))
            predict_s.append(time.perf_counter() - start)
        kueue = list(_kueue_seconds(name).values())
        out[name] = {
            "scenarios": len(paths),
            "median_s": round(statistics.median(predict_s), 4),
            "max_s": round(max(predict_s), 4),
            "ratio_to_parse": round(statistics.median(predict_s) / statistics.median(parse_s), 2),
            "kueue_schedule_median_s": round(statistics.median(kueue), 4) if kueue else None,
        }
    return out


def _pod_set(cpu_milli: int) -> o.PodSet:
    return o.PodSet(name="main", count=1, requests={"cpu": cpu_milli, "memory": cpu_milli * 2**20})


def large_state(
    cluster_queues: int = LARGE_CLUSTER_QUEUES,
    cohorts: int = LARGE_COHORTS,
    admitted: int = LARGE_ADMITTED,
    pending: int = LARGE_PENDING,
) -> o.ClusterState:
    """100 ClusterQueues in 10 cohorts, 10,000 admitted and 1,000 pending workloads (by
    default; another scale keeps the shape: each ClusterQueue as full, as many waiting)."""
    base = datetime(2026, 1, 1, 6, 0, tzinfo=timezone.utc)
    state = o.ClusterState()
    state.resource_flavors["default"] = o.ResourceFlavor("default")
    for value, name in ((100, "low"), (1000, "high")):
        state.priority_classes[name] = o.WorkloadPriorityClass(name, value)
    quota = {"cpu": o.ResourceQuota(64_000), "memory": o.ResourceQuota(64_000 * 2**20)}
    group = o.ResourceGroup(("cpu", "memory"), (o.FlavorQuotas("default", quota),))
    preemption = o.Preemption(
        within_cluster_queue=o.PreemptionPolicy.LOWER_PRIORITY,
        reclaim_within_cohort=o.PreemptionPolicy.ANY,
        borrow_within_cohort=o.BorrowWithinCohortPolicy.LOWER_PRIORITY,
    )
    for i in range(cluster_queues):
        name = f"cq-{i:03d}"
        ns = f"team-{i:03d}"
        state.namespaces[ns] = o.Namespace(ns, {"kubernetes.io/metadata.name": ns})
        state.cluster_queues[name] = o.ClusterQueue(
            name=name,
            cohort=f"cohort-{i % cohorts}",
            namespace_selector=o.LabelSelector(),
            resource_groups=(group,),
            preemption=preemption,
        )
        state.local_queues[f"{ns}/lq"] = o.LocalQueue(ns, "lq", name)
    per_cq = admitted // cluster_queues
    for i in range(admitted):
        cq_index, slot = divmod(i, per_cq)
        ns, cq = f"team-{cq_index:03d}", f"cq-{cq_index:03d}"
        cpu = 600  # 100 x 600m = 60 of the 64 cpu
        created = base + timedelta(seconds=i)
        state.workloads[f"{ns}/run-{slot}"] = o.Workload(
            namespace=ns,
            name=f"run-{slot}",
            uid=f"uid-run-{i}",
            creation_timestamp=created,
            queue_name="lq",
            pod_sets=(_pod_set(cpu),),
            priority=100,
            admission=o.Admission(
                cq,
                (
                    o.PodSetAssignment(
                        "main", 1, {"cpu": "default", "memory": "default"}, {"cpu": cpu, "memory": cpu * 2**20}
                    ),
                ),
            ),
            conditions=(
                o.Condition("QuotaReserved", "True", last_transition_time=created),
                o.Condition("Admitted", "True", last_transition_time=created),
            ),
        )
    for i in range(pending):
        cq_index = i % cluster_queues
        ns = f"team-{cq_index:03d}"
        state.workloads[f"{ns}/wait-{i}"] = o.Workload(
            namespace=ns,
            name=f"wait-{i}",
            uid=f"uid-wait-{i}",
            creation_timestamp=base + timedelta(hours=4, seconds=i),
            queue_name="lq",
            pod_sets=(_pod_set(8000),),
            priority=100 if i % 3 else 1000,
        )
    return state


def _quantity(resource: str, amount: int) -> str:
    """The model's amount (milli-CPU, else base units) as a Kubernetes quantity."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def _stamp(at: datetime | None) -> str:
    assert at is not None
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _cluster_queue_doc(cq: o.ClusterQueue) -> dict[str, Any]:
    selector = cq.namespace_selector or o.LabelSelector()
    if selector.match_expressions:
        raise ValueError(f"ClusterQueue {cq.name}: match expressions are not written by this benchmark")
    spec: dict[str, Any] = {
        "namespaceSelector": {"matchLabels": dict(selector.match_labels)} if selector.match_labels else {},
        "resourceGroups": [
            {
                "coveredResources": list(group.covered_resources),
                "flavors": [
                    {
                        "name": flavor.name,
                        "resources": [
                            {"name": name, "nominalQuota": _quantity(name, quota.nominal)}
                            for name, quota in flavor.resources.items()
                        ],
                    }
                    for flavor in group.flavors
                ],
            }
            for group in cq.resource_groups
        ],
        "preemption": {
            "withinClusterQueue": cq.preemption.within_cluster_queue.value,
            "reclaimWithinCohort": cq.preemption.reclaim_within_cohort.value,
            "borrowWithinCohort": {"policy": cq.preemption.borrow_within_cohort.value},
        },
    }
    if cq.cohort:
        spec["cohort"] = cq.cohort
    return {"apiVersion": KUEUE_API_VERSION, "kind": "ClusterQueue", "metadata": {"name": cq.name}, "spec": spec}


def _workload_doc(wl: o.Workload) -> dict[str, Any]:
    """A pod group's Workload (named after the group, no annotations: Kueue copies none)."""
    doc: dict[str, Any] = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": wl.name,
            "namespace": wl.namespace,
            "uid": wl.uid,
            "creationTimestamp": _stamp(wl.creation_timestamp),
        },
        "spec": {
            "queueName": wl.queue_name,
            "priority": wl.priority,
            "active": wl.active,
            "podSets": [
                {
                    "name": ps.name,
                    "count": ps.count,
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "main",
                                    "resources": {"requests": {r: _quantity(r, v) for r, v in ps.requests.items()}},
                                }
                            ]
                        }
                    },
                }
                for ps in wl.pod_sets
            ],
        },
    }
    if wl.admission is not None:
        doc["status"] = {
            "admission": {
                "clusterQueue": wl.admission.cluster_queue,
                "podSetAssignments": [
                    {
                        "name": a.name,
                        "count": a.count,
                        "flavors": dict(a.flavors),
                        "resourceUsage": {r: _quantity(r, v) for r, v in a.resource_usage.items()},
                    }
                    for a in wl.admission.pod_set_assignments
                ],
            },
            "conditions": [
                {
                    "type": c.type,
                    "status": c.status,
                    "reason": c.reason,
                    "message": c.message,
                    "lastTransitionTime": _stamp(c.last_transition_time),
                }
                for c in wl.conditions
            ],
        }
    return doc


def _pod_doc(wl: o.Workload, run_seconds: float) -> dict[str, Any]:
    """The pod of ``wl``'s pod group, carrying the policy's expected run time (what the
    controller's mirror joins onto the Workload)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{wl.name}-head",
            "namespace": wl.namespace,
            "uid": f"pod-{wl.uid}",
            "labels": {kueue_api.POD_GROUP_NAME_KEY: wl.name, "kueue.x-k8s.io/queue-name": wl.queue_name},
            "annotations": {eta.EXPECTED_RUNTIME_ANNOTATION: str(int(run_seconds))},
        },
        "status": {"phase": "Running" if wl.admission is not None else "Pending"},
    }


def _without_shape(wl: o.Workload) -> o.Workload:
    """``wl`` without the pod template's digest the parser derives (the generator writes none)."""
    return dataclasses.replace(wl, pod_sets=tuple(dataclasses.replace(ps, shape="") for ps in wl.pod_sets))


def large_run_seconds(state: o.ClusterState, now: datetime) -> dict[str, float]:
    """Expected run time per workload of :func:`large_state`: an admitted one ends a
    deterministic (0, :data:`LARGE_REMAINING_SPREAD_SECONDS`] after ``now``; a pending one runs
    :data:`LARGE_PENDING_RUN_SECONDS` once admitted."""
    out: dict[str, float] = {}
    for i, (key, wl) in enumerate(sorted(state.workloads.items())):
        if wl.admission is None:
            out[key] = float(LARGE_PENDING_RUN_SECONDS)
            continue
        elapsed = (now - wl.creation_timestamp).total_seconds()
        out[key] = elapsed + 1 + (i * 7919) % LARGE_REMAINING_SPREAD_SECONDS
    return out


def large_documents(state: o.ClusterState, run_seconds: dict[str, float]) -> dict[KindName, list[dict[str, Any]]]:
    """:func:`large_state` as the Kubernetes objects a mirror lists, per kind: every Workload a
    pod group's with one pod carrying its run time.

    Raises:
        ValueError: the documents do not parse back into ``state``'s objects.
    """
    out: dict[KindName, list[dict[str, Any]]] = {kind.name: [] for kind in ALL_KINDS}
    for ns in state.namespaces.values():
        out[KindName.NAMESPACE].append(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns.name, "labels": dict(ns.labels)}}
        )
    for rf in state.resource_flavors.values():
        out[KindName.RESOURCE_FLAVOR].append(
            {"apiVersion": KUEUE_API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": rf.name}}
        )
    for pc in state.priority_classes.values():
        out[KindName.WORKLOAD_PRIORITY_CLASS].append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": pc.name},
                "value": pc.value,
            }
        )
    for cq in state.cluster_queues.values():
        out[KindName.CLUSTER_QUEUE].append(_cluster_queue_doc(cq))
    for lq in state.local_queues.values():
        out[KindName.LOCAL_QUEUE].append(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "LocalQueue",
                "metadata": {"name": lq.name, "namespace": lq.namespace},
                "spec": {"clusterQueue": lq.cluster_queue},
            }
        )
    for key, wl in state.workloads.items():
        out[KindName.WORKLOAD].append(_workload_doc(wl))
        out[KindName.POD].append(_pod_doc(wl, run_seconds[key]))
    parsed = parse.parse_documents([doc for kind in out for doc in out[kind] if kind is not KindName.POD])
    shapeless = {key: _without_shape(wl) for key, wl in parsed.workloads.items()}
    if shapeless != state.workloads or parsed.cluster_queues != state.cluster_queues:
        raise ValueError("the large cluster's documents do not parse back into its objects")
    return out


def large_store(docs: dict[KindName, list[dict[str, Any]]]) -> MirrorStore:
    """A mirror store that has listed ``docs`` (every kind synced), as the controller's."""
    store = MirrorStore()
    for kind in ALL_KINDS:
        api_version = KUEUE_API_VERSION if kind.group else "v1"
        store.replace(kind.name, [normalize(kind.name, api_version, d) for d in docs[kind.name]], "1")
    return store


def _timed(waits: MirrorRelaunchWait, facts: WorkloadFacts, kind: PredictedWaitKind) -> tuple[float, float | None]:
    """Seconds of one question, and its answer."""
    start = time.perf_counter()
    answer = waits.relaunch_wait(facts, facts.priority, kind)
    return time.perf_counter() - start, answer


def _touch(store: MirrorStore, key: str, version: int) -> None:
    """A watch event that modifies the Workload ``key`` without changing its meaning (a label),
    as the mirror sees between two of the gate's questions on a busy cluster."""
    doc = store.get(KindName.WORKLOAD, key)
    assert doc is not None, key
    meta = {**doc["metadata"], "labels": {"touched": str(version)}, "resourceVersion": str(version)}
    store.apply(KindName.WORKLOAD, "MODIFIED", {**doc, "metadata": meta})


def _relaunch_wait(state: o.ClusterState, cycle_s: float) -> dict[str, object]:
    """Milliseconds of one :meth:`MirrorRelaunchWait.relaunch_wait` call on ``state``'s mirror
    with the controller's cache (``cached=True``), per case (median and max of
    :data:`RELAUNCH_WAIT_REPEATS`, after the cache's first question, ``first_call_ms``), the
    median's ratio to ``cycle_s`` (one scheduling cycle of the large cluster in the same run)
    and to the same question without the cache (every call reads the whole store). The case
    ``pending_any_after_write`` asks again after each of :data:`RELAUNCH_WAIT_WRITES` watch
    events (an admitted Workload of the same cohort tree modified, untimed) since its last
    question, as a busy cluster's mirror changes between the gate's questions."""
    now = predictor.DEFAULT_NOW
    store = large_store(large_documents(state, large_run_seconds(state, now)))
    cached = MirrorRelaunchWait(store, now.timestamp, cached=True)
    uncached = MirrorRelaunchWait(store, now.timestamp)
    cases = {
        "pending_any": (RELAUNCH_WAIT_PENDING, PredictedWaitKind.ANY),
        "pending_safe": (RELAUNCH_WAIT_PENDING, PredictedWaitKind.SAFE),
        "preempted_any": (RELAUNCH_WAIT_PREEMPTED, PredictedWaitKind.ANY),
        "pending_any_after_write": (RELAUNCH_WAIT_PENDING, PredictedWaitKind.ANY),
    }
    facts = {}
    for key in {key for key, _ in cases.values()}:
        doc = store.get(KindName.WORKLOAD, key)
        assert doc is not None, key
        facts[key] = workload_facts(doc)
    out: dict[str, object] = {}
    first = facts[RELAUNCH_WAIT_PENDING]
    first_s, _ = _timed(cached, first, PredictedWaitKind.ANY)
    out["first_call_ms"] = round(first_s * 1000, 1)
    versions = iter(range(2, 10**9))
    for name, (key, kind) in cases.items():
        fact = facts[key]
        times, answers = [], set()
        for _ in range(RELAUNCH_WAIT_REPEATS):
            if name.endswith("_after_write"):
                for _ in range(RELAUNCH_WAIT_WRITES):
                    _touch(store, RELAUNCH_WAIT_TOUCHED, next(versions))
            seconds, answer = _timed(cached, fact, kind)
            times.append(seconds)
            answers.add(answer)
        reference = [_timed(uncached, fact, kind) for _ in range(RELAUNCH_WAIT_REPEATS)]
        answers.update(answer for _, answer in reference)
        if len(answers) != 1:
            raise RuntimeError(
                f"{name}: the relaunch wait changed between calls or without the cache: {sorted(map(str, answers))}"
            )
        median = statistics.median(times)
        uncached_median = statistics.median(seconds for seconds, _ in reference)
        out[name] = {
            "workload": key,
            "wait_s": answers.pop(),
            "median_ms": round(median * 1000, 1),
            "max_ms": round(max(times) * 1000, 1),
            "ratio_to_cycle": round(median / cycle_s, 2),
            "uncached_median_ms": round(uncached_median * 1000, 1),
            "ratio_to_uncached": round(median / uncached_median, 2),
        }
    out["repeats"] = RELAUNCH_WAIT_REPEATS
    out["writes_between_questions"] = RELAUNCH_WAIT_WRITES
    out["target_ms"] = RELAUNCH_WAIT_TARGET_MS
    return out


def _large() -> dict[str, object]:
    start = time.perf_counter()
    state = large_state()
    generate_s = time.perf_counter() - start
    start = time.perf_counter()
    validation.validate_state(state)
    engine = Engine(state, predictor.DEFAULT_NOW)
    build_s = time.perf_counter() - start
    start = time.perf_counter()
    result = engine.cycle()
    cycle_s = time.perf_counter() - start
    engine.settle_events(result)
    probe = o.Workload(
        namespace="team-007",
        name="what-if",
        uid="uid-what-if",
        creation_timestamp=datetime(2026, 1, 1, 11, tzinfo=timezone.utc),
        queue_name="lq",
        pod_sets=(_pod_set(16_000),),
        priority=1000,
    )
    times = []
    verdict = None
    for _ in range(WHAT_IF_REPEATS):
        start = time.perf_counter()
        verdict = whatif.quick_verdict(engine, probe)
        times.append(time.perf_counter() - start)
    assert verdict is not None
    what_if_s = statistics.median(times)
    ordinary = large_state(ORDINARY_CLUSTER_QUEUES, ORDINARY_COHORTS, ORDINARY_ADMITTED, ORDINARY_PENDING)
    return {
        "cluster_queues": LARGE_CLUSTER_QUEUES,
        "cohorts": LARGE_COHORTS,
        "admitted": LARGE_ADMITTED,
        "pending": LARGE_PENDING,
        "generate_objects_s": round(generate_s, 3),
        "build_model_s": round(build_s, 3),
        "one_cycle_s": round(cycle_s, 3),
        "one_cycle_heads": len(result.entries),
        "what_if_median_ms": round(what_if_s * 1000, 2),
        "what_if_verdict": verdict.kind.value,
        "what_if_victims": len(verdict.victims),
        "what_if_ratio_to_cycle": round(what_if_s / cycle_s, 4),
        "what_if_target_ms": 100,
        "relaunch_wait": _relaunch_wait(large_state(), cycle_s),
        "relaunch_wait_ordinary": _relaunch_wait(ordinary, cycle_s),
    }


def _wall(command: list[str], env: dict[str, str]) -> tuple[float, str]:
    """Wall seconds of one process and its stdout (it must succeed)."""
    start = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])}... exited {proc.returncode}: {proc.stderr[-300:]}")
    return seconds, proc.stdout


def _median_wall(command: list[str], env: dict[str, str], repeats: int = PROCESS_REPEATS) -> tuple[float, str]:
    runs = [_wall(command, env) for _ in range(repeats)]
    return statistics.median(seconds for seconds, _ in runs), runs[-1][1]


def _best(function: Callable[[], object], repeats: int = READER_REPEATS) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def _process() -> dict[str, object]:
    python = sys.executable
    script = Path(python).parent / "sky-kueue"
    cli = [str(script)] if script.exists() else [python, "-c", CLI]
    reference = [python, "-c", REFERENCE_CLI]
    kueue = _kueue_seconds(PROCESS_SET)
    paths = sorted((ORACLE / PROCESS_SET / "scenarios").glob("*.yaml"))
    out: dict[str, object] = {"set": PROCESS_SET, "repeats": PROCESS_REPEATS}
    with tempfile.TemporaryDirectory(prefix="predictor-bench-") as cache:
        cold = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
        cold["PYTHONDONTWRITEBYTECODE"] = "1"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        _wall([*cli, "predict", "--snapshot", str(paths[-1]), "--output", "json"], env)  # fills the cache
        out["python_startup_s"] = round(_median_wall([python, "-c", "pass"], env)[0], 3)
        imports = _median_wall([python, "-c", PREDICT_IMPORTS], env)[0]
        out["imports_s"] = round(imports, 3)
        out["imports_without_bytecode_s"] = round(_median_wall([python, "-c", PREDICT_IMPORTS], cold)[0], 3)
        rows: dict[str, dict[str, float]] = {}
        for path in paths:
            args = ["predict", "--snapshot", str(path), "--output", "json"]
            runs = [(_wall([*cli, *args], env), _wall([*reference, *args], env)) for _ in range(PROCESS_REPEATS)]
            if any(new[1] != old[1] for new, old in runs):
                raise RuntimeError(f"{path.name}: the two YAML paths predict differently")
            seconds = statistics.median(new[0] for new, _ in runs)
            reference_s = statistics.median(old[0] for _, old in runs)
            schedule = kueue[path.stem]
            rows[path.stem] = {
                "kueue_schedule_s": round(schedule, 3),
                "predict_s": round(seconds, 3),
                "ratio_to_kueue": round(seconds / schedule, 2),
                "reference_reader_s": round(reference_s, 3),
                "reference_ratio_to_kueue": round(reference_s / schedule, 2),
                "ratio_to_reference": round(seconds / reference_s, 2),
                "imports_ratio_to_kueue": round(imports / schedule, 2),
            }
    out["scenarios"] = rows
    for field, label in (
        ("ratio_to_kueue", ""),
        ("reference_ratio_to_kueue", "reference_"),
        ("imports_ratio_to_kueue", "imports_"),
    ):
        ratios = [row[field] for row in rows.values()]
        out[f"{label}ratio_to_kueue_median"] = round(statistics.median(ratios), 2)
        out[f"{label}ratio_to_kueue_worst"] = round(max(ratios), 2)
    out["target_median"] = PROCESS_TARGET_MEDIAN
    out["target_worst"] = PROCESS_TARGET_WORST
    largest = max(paths, key=lambda p: p.stat().st_size)
    text = files.read_text(largest)
    one_pass = _best(lambda: yaml_reader.load_all(text, largest.name))
    reference_read = _best(lambda: yaml_reader._load_all_reference(text, largest.name))
    out["largest_yaml"] = {
        "scenario": largest.stem,
        "mb": round(largest.stat().st_size / 1e6, 1),
        "one_pass_s": round(one_pass, 3),
        "reference_s": round(reference_read, 3),
        "ratio_to_reference": round(one_pass / reference_read, 2),
    }
    return out


def _cli_and_env(cache: str) -> tuple[list[str], dict[str, str]]:
    """``sky-kueue`` as its console script runs it, with its bytecode in ``cache``."""
    script = Path(sys.executable).parent / "sky-kueue"
    cli = [str(script)] if script.exists() else [sys.executable, "-c", CLI]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = cache
    return cli, env


def _loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _in_process_predict(text: str, name: str) -> float:
    """Seconds to parse and predict ``text`` in this process, with the garbage collector handled
    as ``sky-kueue predict`` handles it (held off while loading, the loaded state frozen out of
    later collections: ``predict_cmd._load_snapshot``), so the figure is the command's work
    without its start-up and not this long-lived process's collections."""
    start = time.perf_counter()
    gc.disable()
    try:
        state = loader.load_state(text, name)
    finally:
        gc.freeze()
        gc.enable()
    try:
        predictor.predict(state)
    finally:
        gc.unfreeze()
    return time.perf_counter() - start


def _time_against_harness(binary: Path, path: Path, cli: list[str], env: dict[str, str]) -> dict[str, Any]:
    """:data:`HARNESS_ROUNDS` alternating rounds on one scenario (see the module docstring)."""
    kueue_s: list[float] = []
    setup_s: list[float] = []
    process_s: list[float] = []
    in_process_s: list[float] = []
    kueue_cycles: set[int] = set()
    predict_cycles: set[int] = set()
    text = path.read_text()
    for _ in range(HARNESS_ROUNDS):
        result = harness_build.run(binary, [path], 1)[0]
        kueue_s.append(result.schedule_seconds[0])
        setup_s.append(result.setup_seconds[0])
        kueue_cycles.add(result.cycles)
        seconds, stdout = _wall([*cli, "predict", "--snapshot", str(path), "--output", "json"], env)
        process_s.append(seconds)
        predict_cycles.add(len(json.loads(stdout)["cycles"]))
        in_process_s.append(_in_process_predict(text, path.name))
    return {
        "kueue_schedule_s": kueue_s,
        "kueue_setup_s": setup_s,
        "predict_process_s": process_s,
        "predict_in_process_s": in_process_s,
        "kueue_cycles": sorted(kueue_cycles),
        "predict_cycles": sorted(predict_cycles),
    }


def _against_harness(sample: int) -> dict[str, Any]:
    pins = versions.load_pins()
    binary = harness_build.ensure_built(pins, log=lambda line: print(line, file=sys.stderr))
    groups: dict[str, list[Path]] = {PROCESS_SET: sorted((ORACLE / PROCESS_SET / "scenarios").glob("*.yaml"))}
    for name in HARNESS_SAMPLE_SETS if sample > 0 else ():
        groups[name] = sorted((ORACLE / name / "scenarios").glob("*.yaml"))[:sample]
    out: dict[str, Any] = {"kueue_release": pins.kueue, "rounds": HARNESS_ROUNDS, "loadavg_before": _loadavg()}
    with tempfile.TemporaryDirectory(prefix="predictor-bench-") as cache:
        cli, env = _cli_and_env(cache)
        _wall([*cli, "predict", "--snapshot", str(groups[PROCESS_SET][-1]), "--output", "json"], env)  # fills the cache
        for name, paths in groups.items():
            out[name] = timing_rows({path.stem: _time_against_harness(binary, path, cli, env) for path in paths})
    out["loadavg_after"] = _loadavg()
    out["target_median"] = HARNESS_TARGET_MEDIAN
    return out


def markdown_against_harness(report: dict[str, Any]) -> str:
    """The ``against_harness`` figures as a table (seconds; ratios to Kueue's scheduling time)."""
    lines = [
        "| scenario | Kueue scheduling (setup) | `sky-kueue predict` process | ratio | in-process | ratio "
        "| cycles Kueue / predict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    groups = [name for name, value in report.items() if isinstance(value, dict) and "scenarios" in value]
    for group in groups:
        for name, row in report[group]["scenarios"].items():
            cycles = f"{'/'.join(map(str, row['kueue_cycles']))} / {'/'.join(map(str, row['predict_cycles']))}"
            lines.append(
                f"| {name} | {row['kueue_schedule_s']:.3f} s ({row['kueue_setup_s']:.1f} s) | "
                f"{row['predict_process_s']:.2f} s | {row['process_ratio']:.2f} | "
                f"{row['predict_in_process_s']:.3f} s | {row['in_process_ratio']:.2f} | {cycles} |"
            )
        g = report[group]
        lines.append(
            f"| {group}: median / worst | | | {g['process_ratio_median']:.2f} / {g['process_ratio_worst']:.2f} | | "
            f"{g['in_process_ratio_median']:.2f} / {g['in_process_ratio_worst']:.2f} | |"
        )
    lines.append("")
    lines.append(
        f"Kueue {report['kueue_release']}, {report['rounds']} alternating rounds per scenario; load average "
        f"{report['loadavg_before']} before, {report['loadavg_after']} after; target: the process's median ratio on "
        f"{PROCESS_SET} at most {report['target_median']}."
    )
    return "\n".join(lines)


def markdown(process: dict[str, Any]) -> str:
    """The ``process`` figures as a table (seconds; ratios to Kueue's scheduleSeconds)."""
    lines = [
        "| scenario | Kueue schedule | `sky-kueue predict` | ratio | reference reader | ratio | predict / reference |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, row in process["scenarios"].items():
        lines.append(
            f"| {name} | {row['kueue_schedule_s']:.2f} s | {row['predict_s']:.2f} s | {row['ratio_to_kueue']:.2f} | "
            f"{row['reference_reader_s']:.2f} s | {row['reference_ratio_to_kueue']:.2f} | "
            f"{row['ratio_to_reference']:.2f} |"
        )
    lines.append(
        f"| median / worst | | | {process['ratio_to_kueue_median']:.2f} / {process['ratio_to_kueue_worst']:.2f} "
        f"(target {process['target_median']} / {process['target_worst']}) | | "
        f"{process['reference_ratio_to_kueue_median']:.2f} / {process['reference_ratio_to_kueue_worst']:.2f} | |"
    )
    big = process["largest_yaml"]
    lines.append("")
    lines.append(
        f"Python start-up {process['python_startup_s']:.2f} s; the predict path's imports {process['imports_s']:.2f} s "
        f"({process['imports_without_bytecode_s']:.2f} s without bytecode), "
        f"{process['imports_ratio_to_kueue_median']:.2f} / {process['imports_ratio_to_kueue_worst']:.2f} of Kueue's "
        f"time (median / worst). YAML of {big['scenario']} ({big['mb']} MB) in-process: one pass "
        f"{big['one_pass_s']:.2f} s, reference path {big['reference_s']:.2f} s ({big['ratio_to_reference']:.2f}x)."
    )
    return "\n".join(lines)


def _model_build() -> str:
    """Which model ran: the mypyc build (``compiled``) or the pure-Python modules (``pure``);
    ``SKY_KUEUE_PURE=1`` measures the pure one (:mod:`sky_kueue.kueue.compiled`)."""
    return "compiled" if compiled.in_use() else "pure"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the scale-public set in 'oracle'")
    parser.add_argument("--large-only", action="store_true", help="only the 'large' figures")
    parser.add_argument("--process-only", action="store_true", help="only the 'process' figures")
    parser.add_argument("--markdown", action="store_true", help="print the 'process' figures as a table, not JSON")
    parser.add_argument(
        "--against-harness", action="store_true", help="only predict against Kueue's own scheduler, timed in this run"
    )
    parser.add_argument(
        "--harness-sample", type=int, default=0, metavar="N", help="with --against-harness: N scenarios per public set"
    )
    args = parser.parse_args()
    if args.harness_sample < 0:
        parser.error("--harness-sample must be 0 or more")
    if args.against_harness:
        try:
            against = _against_harness(args.harness_sample)
        except harness_build.HarnessError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        if args.markdown:
            print(markdown_against_harness(against))
        else:
            json.dump({"against_harness": against}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        return 0
    if args.process_only or args.markdown:
        process = _process()
        if args.markdown:
            print(markdown(process))
        else:
            json.dump({"process": process}, sys.stdout, indent=2)
            sys.stdout.write("\n")
        return 0
    if args.large_only:
        json.dump({"model": _model_build(), "large": _large()}, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    sets = tuple(s for s in SETS if not (args.quick and s == "scale-public"))
    report: dict[str, object] = {
        "model": _model_build(),
        "oracle": _oracle(sets),
        "large": _large(),
        "process": _process(),
    }
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report["peak_memory_mb"] = round(peak_kib / 1024, 1)
    report["peak_memory_target_mb"] = 300
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark the admission predictor; prints JSON figures.

* ``oracle``: median and max seconds per oracle scenario (parse + predict, in-process), per
  set, against the same run's median time to only parse and validate the scenarios
  (``ratio_to_parse``), and Kueue's own harness time recorded in the oracle's
  ``kueue_timing.jsonl`` (the harness's, not this machine's run: a reference, not a ratio).
* ``large``: a generated cluster of 100 ClusterQueues in 10 cohorts with 10,000 admitted
  and 1,000 pending workloads: the time to build the model from objects, of one scheduling
  cycle, and of a what-if verdict for one new workload (target: under 100 ms), and the
  peak memory of the process (target: under 300 MB).

Run: ``.venv/bin/python benchmarks/predictor.py`` (``--quick`` skips the scale set).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sky_kueue.kueue import loader, predictor, validation, whatif
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.scheduler import Engine

ORACLE = Path(__file__).resolve().parent.parent / "tests" / "oracle"
SETS = ("seeds", "public", "hier-public", "fair-public", "afs-public", "scale-public")
LARGE_CLUSTER_QUEUES = 100
LARGE_COHORTS = 10
LARGE_ADMITTED = 10_000
LARGE_PENDING = 1_000
WHAT_IF_REPEATS = 20


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
        timing = ORACLE / name / "kueue_timing.jsonl"
        kueue: list[float] = []
        if timing.exists():
            for line in timing.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    kueue.append(float(row.get("scheduleSeconds") or row.get("seconds") or 0.0))
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


def large_state() -> o.ClusterState:
    """100 ClusterQueues in 10 cohorts, 10,000 admitted and 1,000 pending workloads."""
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
    for i in range(LARGE_CLUSTER_QUEUES):
        name = f"cq-{i:03d}"
        ns = f"team-{i:03d}"
        state.namespaces[ns] = o.Namespace(ns, {"kubernetes.io/metadata.name": ns})
        state.cluster_queues[name] = o.ClusterQueue(
            name=name,
            cohort=f"cohort-{i % LARGE_COHORTS}",
            namespace_selector=o.LabelSelector(),
            resource_groups=(group,),
            preemption=preemption,
        )
        state.local_queues[f"{ns}/lq"] = o.LocalQueue(ns, "lq", name)
    per_cq = LARGE_ADMITTED // LARGE_CLUSTER_QUEUES
    for i in range(LARGE_ADMITTED):
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
    for i in range(LARGE_PENDING):
        cq_index = i % LARGE_CLUSTER_QUEUES
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
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the scale-public set")
    args = parser.parse_args()
    sets = tuple(s for s in SETS if not (args.quick and s == "scale-public"))
    report: dict[str, object] = {"oracle": _oracle(sets), "large": _large()}
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    report["peak_memory_mb"] = round(peak_kib / 1024, 1)
    report["peak_memory_target_mb"] = 300
    json.dump(report, sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

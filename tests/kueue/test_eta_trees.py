"""The ETA simulates only the target's cohort trees, and admits at the same moments as the
whole cluster's simulation (Kueue never moves quota across cohort trees)."""

from __future__ import annotations

import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from sky_kueue.kueue import eta, loader, parse
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import documents_of_trees, restrict_to_trees

from .builders import V1B1, V1B2, cohort, cq, flavor, lq, namespace, state, workload

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SETS = ("seeds", "public", "hier-public", "fair-public", "afs-public", "scale-public")
#: Run times of the equivalence runs: 1 to 121 minutes, every seventh workload unknown.
RUNTIME_SPREAD_SECONDS = 7200
RUNTIME_MIN_SECONDS = 60
UNKNOWN_EVERY = 7
T0 = "2026-01-01T11:00:00Z"  # one hour before the default "now" (12:00)


def _runtime(wl: o.Workload) -> float | None:
    """A run time that is a fixed function of the workload's key (some unknown)."""
    digest = zlib.crc32(wl.key.encode())
    if digest % UNKNOWN_EVERY == 0:
        return None
    return float(RUNTIME_MIN_SECONDS + digest % RUNTIME_SPREAD_SECONDS)


def _pending(s: o.ClusterState) -> list[str]:
    return sorted(key for key, wl in s.workloads.items() if not (wl.admission is not None and wl.has_quota_reservation))


def _by_tree(s: o.ClusterState, keys: list[str]) -> list[list[str]]:
    """``keys`` grouped by the cohort tree they are in (its ClusterQueues), in order."""
    trees: dict[frozenset[str], list[str]] = {}
    for key in keys:
        trees.setdefault(frozenset(restrict_to_trees(s, [key]).state.cluster_queues), []).append(key)
    return list(trees.values())


def _spread(keys: list[str], most: int) -> list[str]:
    """At most ``most`` of ``keys``, evenly spread, the first and the last among them."""
    if len(keys) <= most:
        return keys
    step = (len(keys) - 1) / (most - 1)
    return [keys[round(i * step)] for i in range(most)]


def _assert_same_seconds(s: o.ClusterState, per_tree: int | None = None) -> int:
    """Every pending workload's pruned ETA (asked alone, as the burst gate asks) against the
    whole cluster's, or with ``per_tree`` that many of each cohort tree's pending workloads
    (first, last and evenly between); returns how many were admitted within the horizon."""
    keys = _pending(s)
    whole = eta._estimate_whole_cluster(s, keys, _runtime)
    admitted = 0
    asked = keys if per_tree is None else [k for tree in _by_tree(s, keys) for k in _spread(tree, per_tree)]
    for key in asked:
        pruned = eta.estimate(s, [key], _runtime)[key]
        assert pruned.seconds == whole[key].seconds, key
        assert set(pruned.waits_for) <= set(whole[key].waits_for), key
        admitted += pruned.seconds is not None
    # asked together, as `sky-kueue queue` asks: the same answers
    together = eta.estimate(s, keys, _runtime)
    assert {k: e.seconds for k, e in together.items()} == {k: e.seconds for k, e in whole.items()}
    return admitted


#: The large scenarios' whole-cluster reference runs take seconds each: the whole suite checks
#: them, the inner loop (``-m "not slow"``) the other sets.
SLOW_SETS = frozenset({"scale-public"})
#: In those, how many pending workloads of each cohort tree are asked about alone (up to 202
#: pending in 12 trees, 50 ms a question): every tree, its queue's first and last and between.
SCALE_QUESTIONS_PER_TREE = 4


def _is_scale(path: Path) -> bool:
    return path.parent.parent.name in SLOW_SETS


def _scenarios() -> list[Any]:
    found = [
        pytest.param(p, id=p.stem, marks=[pytest.mark.slow] if name in SLOW_SETS else [])
        for name in SETS
        for p in sorted((ORACLE / name / "scenarios").glob("*.yaml"))
    ]
    assert found, f"no oracle scenarios under {ORACLE}"
    return found


@pytest.mark.parametrize("path", _scenarios())
def test_every_oracle_scenario_gets_the_whole_clusters_eta(path: Path) -> None:
    s = loader.load_state_file(path)
    _assert_same_seconds(s, SCALE_QUESTIONS_PER_TREE if _is_scale(path) else None)


def _minutes_after_nine(minutes: int) -> str:
    at = datetime(2026, 1, 1, 9, 0, tzinfo=timezone.utc) + timedelta(minutes=minutes)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def _many_trees() -> o.ClusterState:
    """Three cohort trees (one two levels deep) and two lone ClusterQueues, all full, with
    pending work at two priorities, so borrowing, reclaiming and preemption all happen."""
    docs: list[dict[str, Any]] = [flavor("f"), cohort("root-x"), cohort("x1", "root-x", [{"f": {"cpu": "2"}}])]
    homes = {"a0": "x1", "a1": "x1", "a2": "root-x", "b0": "y", "b1": "y", "c0": "z", "c1": "z", "solo0": None}
    homes["solo1"] = None
    created = 0
    for i, (name, home) in enumerate(sorted(homes.items())):
        docs += [
            namespace(name),
            cq(name, [{"f": {"cpu": str(4 + i % 3)}}], cohort=home, within="LowerPriority", reclaim="Any"),
            lq(name, "q", name),
        ]
        for j in range(3):
            created += 1
            stamp = _minutes_after_nine(created)
            docs.append(
                workload(
                    f"run-{j}", name, "q", {"cpu": "2"}, stamp, priority=10, admitted_to=name, flavors={"cpu": "f"}
                )
            )
        for j in range(4):
            created += 1
            stamp = _minutes_after_nine(created)
            docs.append(workload(f"wait-{j}", name, "q", {"cpu": str(1 + j)}, stamp, priority=10 if j % 2 else 100))
    return state(*docs)


def test_a_many_tree_cluster_gets_the_whole_clusters_eta() -> None:
    s = _many_trees()
    assert _assert_same_seconds(s) > 10  # most are admitted: the comparison is not of Nones


def test_the_restricted_state_keeps_only_the_target_tree() -> None:
    s = _many_trees()
    cut = restrict_to_trees(s, ["a2/wait-0"])
    assert sorted(cut.state.cluster_queues) == ["a0", "a1", "a2"]
    assert sorted(cut.state.cohorts) == ["root-x", "x1"]
    assert {lq.cluster_queue for lq in cut.state.local_queues.values()} == {"a0", "a1", "a2"}
    assert {wl.namespace for wl in cut.state.workloads.values()} == {"a0", "a1", "a2"}
    assert cut.state.resource_flavors == s.resource_flavors and cut.state.namespaces == s.namespaces
    lone = restrict_to_trees(s, ["solo0/wait-1"])
    assert sorted(lone.state.cluster_queues) == ["solo0"] and not lone.state.cohorts


def test_a_workload_admitted_in_one_tree_from_anothers_queue_ties_the_trees() -> None:
    # "moved" holds quota in b's tree but its LocalQueue points at lone "a": both trees are kept.
    s = state(
        namespace("t"),
        flavor("f"),
        cq("a", [{"f": {"cpu": "4"}}]),
        cq("b", [{"f": {"cpu": "4"}}], cohort="y"),
        cq("c", [{"f": {"cpu": "4"}}]),
        lq("t", "qa", "a"),
        lq("t", "qc", "c"),
        workload("moved", "t", "qa", {"cpu": "2"}, T0, admitted_to="b", flavors={"cpu": "f"}),
        workload("new", "t", "qa", {"cpu": "2"}, T0),
    )
    assert sorted(restrict_to_trees(s, ["t/new"]).state.cluster_queues) == ["a", "b"]


def _two_trees(*extra: dict[str, Any]) -> o.ClusterState:
    """Lone ClusterQueue "a" (holder a-run ends in 1 h) and "b" (4 cpu, full)."""
    a_run = workload("a-run", "t", "qa", {"cpu": "4"}, T0, admitted_to="a", flavors={"cpu": "f"})
    a_run["metadata"]["annotations"] = {eta.EXPECTED_RUNTIME_ANNOTATION: str(2 * 3600)}
    return state(
        namespace("t"),
        flavor("f"),
        cq("a", [{"f": {"cpu": "4"}}]),
        cq("b", [{"f": {"cpu": "4"}}]),
        lq("t", "qa", "a"),
        lq("t", "qb", "b"),
        a_run,
        *extra,
    )


def _b_run(runtime_s: int | None) -> dict[str, Any]:
    doc = workload("b-run", "t", "qb", {"cpu": "4"}, T0, admitted_to="b", flavors={"cpu": "f"})
    if runtime_s is not None:
        doc["metadata"]["annotations"] = {eta.EXPECTED_RUNTIME_ANNOTATION: str(runtime_s)}
    return doc


def test_waits_for_lists_only_completions_of_its_own_tree() -> None:
    # a-run ends at 1 h but frees nothing in b's tree; b-run ends at 2 h and makes room.
    s = _two_trees(_b_run(3 * 3600), workload("new", "t", "qb", {"cpu": "4"}, "2026-01-01T11:30:00Z"))
    runtime = eta.runtime_from_annotation()
    got = eta.estimate(s, ["t/new"], runtime)["t/new"]
    assert got.seconds == 2 * 3600
    assert got.waits_for == ["t/b-run"]
    assert got.runtime_sources == [eta.UNSPECIFIED_SOURCE]
    whole = eta._estimate_whole_cluster(s, ["t/new"], runtime)["t/new"]
    assert whole.seconds == got.seconds and whole.waits_for == ["t/a-run", "t/b-run"]


def test_an_unknown_run_time_in_its_tree_is_not_hidden_by_another_trees_horizon() -> None:
    # b-run's run time is unknown; a-run ends after a 30-min horizon. The whole cluster said
    # "not admitted within"; only b's tree decides: it waits on an unknown run time.
    s = _two_trees(_b_run(None), workload("new", "t", "qb", {"cpu": "4"}, "2026-01-01T11:30:00Z"))
    runtime = eta.runtime_from_annotation()
    got = eta.estimate(s, ["t/new"], runtime, horizon_seconds=1800)["t/new"]
    assert got.seconds is None
    assert got.reason.startswith(eta.NO_KNOWN_RUNTIME_REASON)
    assert got.waits_on_unknown_runtime
    whole = eta._estimate_whole_cluster(s, ["t/new"], runtime, horizon_seconds=1800)["t/new"]
    assert whole.reason.startswith(eta.BEYOND_HORIZON_REASON)


def test_nothing_in_its_tree_frees_room_when_every_holder_there_finishes() -> None:
    # 5 cpu never fit b's 4: after b-run ends there is nothing left to wait for.
    s = _two_trees(_b_run(600), workload("big", "t", "qb", {"cpu": "5"}, "2026-01-01T11:30:00Z"))
    got = eta.estimate(s, ["t/big"], eta.runtime_from_annotation())["t/big"]
    assert got.seconds is None
    assert got.reason.startswith(eta.NO_KNOWN_RUNTIME_REASON)
    assert not got.waits_on_unknown_runtime
    assert got.waits_for == []


def test_an_unknown_workload_is_reported_as_such() -> None:
    s = _two_trees(_b_run(600))
    got = eta.estimate(s, ["t/missing"], eta.runtime_from_annotation())["t/missing"]
    assert got.seconds is None and got.reason == "not a pending workload of this cluster"


def _parsed_cut(docs: list[Any], config: o.KueueConfig, key: str) -> o.ClusterState:
    return parse.parse_documents(documents_of_trees(docs, [key]).documents, config)


@pytest.mark.parametrize("path", _scenarios())
def test_cutting_the_documents_gives_the_restricted_state_of_every_oracle_scenario(path: Path) -> None:
    text = loader.read_text(path)
    config = parse.parse_header(text)
    docs = parse.flatten_documents(loader.load_documents(text, str(path)))
    whole = parse.parse_documents(docs, config)
    keys = _pending(whole)
    # The cut depends on the key's tree only: one key per tree covers every cut of a large scenario.
    for key in [tree[0] for tree in _by_tree(whole, keys)] if _is_scale(path) else keys:
        restricted = restrict_to_trees(whole, [key]).state
        cut = _parsed_cut(docs, config, key)
        assert cut.cluster_queues == restricted.cluster_queues, key
        assert cut.cohorts == restricted.cohorts, key
        assert cut.local_queues == restricted.local_queues, key
        assert cut.workloads == restricted.workloads, key
        assert cut.resource_flavors == whole.resource_flavors and cut.namespaces == whole.namespaces
        assert cut.priority_classes == whole.priority_classes


def _api_tree_docs(api: str) -> list[dict[str, Any]]:
    """Two trees in ``api``'s field names: cohort "top" (child cohort "mid", ClusterQueues "a"
    under "mid" and "b" under "top") and lone "c"; a Workload admitted to "b" from "c"'s queue
    ties "c" to the first tree; lone "d" stays apart."""
    parent_field, cohort_field = ("parentName", "cohortName") if api == V1B2 else ("parent", "cohort")
    docs: list[dict[str, Any]] = [namespace("t"), flavor("f")]
    docs += [
        {"apiVersion": api, "kind": "Cohort", "metadata": {"name": "top"}, "spec": {}},
        {"apiVersion": api, "kind": "Cohort", "metadata": {"name": "mid"}, "spec": {parent_field: "top"}},
    ]
    for name, home in (("a", "mid"), ("b", "top"), ("c", None), ("d", None)):
        doc = cq(name, [{"f": {"cpu": "4"}}], api=api)
        if home:
            doc["spec"][cohort_field] = home
        docs += [doc, {**lq("t", f"q{name}", name), "apiVersion": api}]
    docs += [
        workload("moved", "t", "qc", {"cpu": "2"}, T0, admitted_to="b", flavors={"cpu": "f"}, api=api),
        workload("wait-a", "t", "qa", {"cpu": "2"}, T0, api=api),
        workload("wait-d", "t", "qd", {"cpu": "2"}, T0, api=api),
    ]
    return docs


def _names(docs: list[Any], kind: str) -> list[str]:
    return sorted(d["metadata"]["name"] for d in docs if d["kind"] == kind)


@pytest.mark.parametrize("api", [V1B1, V1B2])
def test_the_raw_cut_reads_both_api_versions_field_names(api: str) -> None:
    docs = _api_tree_docs(api)
    cut = documents_of_trees(docs, ["t/wait-a"])
    assert _names(cut.documents, "ClusterQueue") == ["a", "b", "c"]
    assert _names(cut.documents, "Cohort") == ["mid", "top"]
    assert _names(cut.documents, "LocalQueue") == ["qa", "qb", "qc"]
    assert cut.workload_keys == {"t/moved", "t/wait-a"}
    assert _names(cut.documents, "Namespace") == ["t"] and _names(cut.documents, "ResourceFlavor") == ["f"]
    lone = documents_of_trees(docs, ["t/wait-d"])
    assert _names(lone.documents, "ClusterQueue") == ["d"] and _names(lone.documents, "Cohort") == []
    assert lone.workload_keys == {"t/wait-d"}
    # the same cut as the parsed rule
    whole = parse.parse_documents(docs)
    assert (
        parse.parse_documents(cut.documents).cluster_queues
        == restrict_to_trees(whole, ["t/wait-a"]).state.cluster_queues
    )


def test_what_the_raw_cut_cannot_place_is_kept() -> None:
    docs = _api_tree_docs(V1B2)
    docs += [
        workload("lost", "t", "no-such-queue", {"cpu": "1"}, T0, api=V1B2),
        {**lq("t", "orphan", "no-such-cq"), "apiVersion": V1B2},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "odd"}, "spec": {"cohortName": 7}},
        {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "loop1"}, "spec": {"parentName": "loop2"}},
        {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "loop2"}, "spec": {"parentName": "loop1"}},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cyc"}, "spec": {"cohortName": "loop1"}},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {}, "spec": {}},
    ]
    cut = documents_of_trees(docs, ["t/wait-d"])
    assert "t/lost" in cut.workload_keys
    assert _names(cut.documents, "LocalQueue") == ["orphan", "qd"]
    assert _names(cut.documents, "Cohort") == ["loop1", "loop2"]
    assert sorted(d["metadata"].get("name", "") for d in cut.documents if d["kind"] == "ClusterQueue") == [
        "",
        "cyc",
        "d",
        "odd",
    ]

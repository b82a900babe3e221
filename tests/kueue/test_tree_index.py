"""TreeIndex keeps exactly documents_of_trees's cut while its documents change one at a time.

Random clusters (cohort hierarchies, lone ClusterQueues, LocalQueues of unknown ClusterQueues,
Workloads admitted into another tree than their queue's, documents the raw rule cannot place),
edited step by step; after every edit each Workload's cut from the index is compared with the
function's cut of the same documents in the same order, with the question's Workload left out
or replaced by another document as the burst gate asks.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from sky_kueue.kueue.cohort_trees import TreeIndex, documents_of_trees

from .builders import V1B2, cohort, cq, flavor, lq, namespace, workload

T0 = "2026-01-01T11:00:00Z"
#: Random clusters per seed and edits per cluster (each edit is followed by every cut).
SEEDS = range(12)
EDITS_PER_CLUSTER = 25

Doc = dict[str, Any]
OtherSlot = tuple[str, str]


def _odd_documents() -> list[Doc]:
    """Documents the raw rule cannot place (kept with every tree), and a cohort cycle."""
    return [
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "odd"}, "spec": {"cohortName": 7}},
        {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "loop1"}, "spec": {"parentName": "loop2"}},
        {"apiVersion": V1B2, "kind": "Cohort", "metadata": {"name": "loop2"}, "spec": {"parentName": "loop1"}},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {"name": "cyc"}, "spec": {"cohortName": "loop1"}},
        {"apiVersion": V1B2, "kind": "ClusterQueue", "metadata": {}, "spec": {}},
        {"apiVersion": V1B2, "kind": "LocalQueue", "metadata": {"name": "nospec", "namespace": "t"}, "spec": 3},
    ]


def _others(rng: random.Random) -> list[Doc]:
    """Namespaces, a flavor, cohorts (some nested), ClusterQueues and their LocalQueues."""
    docs: list[Doc] = [namespace("t"), flavor("f")]
    cohorts = [f"co{i}" for i in range(rng.randint(1, 4))]
    for i, name in enumerate(cohorts):
        parent = rng.choice(cohorts[:i]) if i and rng.random() < 0.5 else None
        docs.append(cohort(name, parent))
    for i in range(rng.randint(3, 8)):
        home = rng.choice([*cohorts, None, "implicit-root"])
        docs.append(cq(f"cq{i}", [{"f": {"cpu": "4"}}], cohort=home))
        docs.append(lq("t", f"q{i}", f"cq{i}"))
    docs.append(lq("t", "orphan", "no-such-cq"))
    if rng.random() < 0.5:
        docs += _odd_documents()
    return docs


def _queues(docs: list[Doc]) -> tuple[list[str], list[str]]:
    cqs = [d["metadata"].get("name", "") for d in docs if d["kind"] == "ClusterQueue"]
    lqs = [d["metadata"]["name"] for d in docs if d["kind"] == "LocalQueue"]
    return [c for c in cqs if c], lqs


def _workload(rng: random.Random, name: str, docs: list[Doc]) -> Doc:
    """Pending in a random queue, or admitted to a random ClusterQueue (maybe not its queue's
    one, maybe with its quota reservation withdrawn), or queued nowhere known."""
    cqs, lqs = _queues(docs)
    queue = rng.choice([*lqs, "no-such-queue"])
    admitted = rng.choice([None, None, *cqs, "no-such-cq"])
    doc = workload(name, "t", queue, {"cpu": "1"}, T0, admitted_to=admitted, flavors={"cpu": "f"})
    if admitted is not None and rng.random() < 0.2:
        doc["status"]["conditions"][0]["status"] = "False"
    return doc


def _check(
    rng: random.Random,
    index: TreeIndex[OtherSlot, str],
    others: list[tuple[OtherSlot, Doc]],
    workloads: dict[str, Doc],
    removed: dict[str, Doc],
) -> int:
    """Every Workload's cut from the index against documents_of_trees, and each removed one's
    (the burst gate asks about a deleted Workload's relaunch); returns the cuts compared."""
    compared = 0
    other_docs = [doc for _, doc in others]
    for wanted_slot, wanted_doc in sorted({**removed, **workloads}.items()):
        wanted = f"t/{wanted_doc['metadata']['name']}"
        # as it is; left out (deleted, nothing in its place); replaced by a pending copy (the
        # relaunch of an admitted Workload) or by another document of its name (which may tie
        # two trees); with a document of another name added; a question about a name nothing carries
        replacement = copy.deepcopy(wanted_doc)
        replacement.pop("status", None)
        another = _workload(rng, wanted_doc["metadata"]["name"], other_docs)
        stranger = _workload(rng, "stranger", other_docs)
        for extra, without, key in (
            (None, None, wanted),
            (None, wanted_slot, wanted),
            (replacement, wanted_slot, wanted),
            (replacement, None, wanted),
            (another, wanted_slot, wanted),
            (stranger, None, wanted),
            (another, None, "t/nobody"),
        ):
            got = index.cut(key, extra, without)
            docs = [doc for _, doc in others]
            slots = [slot for slot in sorted(workloads) if slot != without]
            docs += [workloads[slot] for slot in slots]
            if extra is not None:
                docs.append(extra)
            want = documents_of_trees(docs, [key])
            kept = {id(doc) for doc in want.documents}
            assert got.others == [slot for slot, doc in others if id(doc) in kept]
            assert got.workloads == {slot for slot in slots if id(workloads[slot]) in kept}
            assert got.extra_kept == (extra is not None and id(extra) in kept)
            assert got.workload_keys == want.workload_keys
            compared += 1
    return compared


@pytest.mark.parametrize("seed", SEEDS)
def test_the_index_cuts_as_documents_of_trees_while_documents_change(seed: int) -> None:
    rng = random.Random(seed)
    other_docs = _others(rng)
    others = [((d["kind"], str(i)), d) for i, d in enumerate(other_docs)]
    index: TreeIndex[OtherSlot, str] = TreeIndex()
    index.set_others(others)
    workloads: dict[str, Doc] = {}
    for i in range(rng.randint(4, 12)):
        slot = f"w{i:02d}"
        workloads[slot] = _workload(rng, slot, other_docs)
        index.put_workload(slot, workloads[slot])
    removed: dict[str, Doc] = {}
    compared = _check(rng, index, others, workloads, removed)
    for step in range(EDITS_PER_CLUSTER):
        edit = rng.choice(["add", "replace", "remove", "others"])
        if edit == "add" or not workloads:
            slot = rng.choice([f"n{step:02d}", *sorted(removed)])  # new, or a removed one's name again
            removed.pop(slot, None)
            workloads[slot] = _workload(rng, slot, other_docs)
            index.put_workload(slot, workloads[slot])
        elif edit == "replace":
            slot = rng.choice(sorted(workloads))
            workloads[slot] = _workload(rng, slot, other_docs)
            index.put_workload(slot, workloads[slot])
        elif edit == "remove":
            slot = rng.choice(sorted(workloads))
            removed[slot] = workloads.pop(slot)
            index.remove_workload(slot)
        else:
            # a ClusterQueue moves to another cohort (or out of every cohort), and the set is
            # handed over again in a new order: the trees and every Workload's place change
            other_docs = [copy.deepcopy(d) for d in other_docs]
            movable = [d for d in other_docs if d["kind"] == "ClusterQueue" and d["metadata"].get("name")]
            moved = rng.choice(movable)
            moved["spec"]["cohort"] = rng.choice([None, "co0", "elsewhere"])
            rng.shuffle(other_docs)
            others = [((d["kind"], str(i)), d) for i, d in enumerate(other_docs)]
            index.set_others(others)
        compared += _check(rng, index, others, workloads, removed)
    assert compared > EDITS_PER_CLUSTER


def test_a_workload_among_the_other_documents_is_refused() -> None:
    with pytest.raises(ValueError, match="put_workload"):
        TreeIndex[str, str]().set_others([("w", workload("w", "t", "q", {"cpu": "1"}, T0))])

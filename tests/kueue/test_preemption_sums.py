"""The preemption search's summed verdict and the copy-on-write snapshot give the answers of
the one-by-one path (issue 38: faster, not different).

``_Search.viable_passes`` decides from per-queue sums which passes of a search may fit (none:
the search finds nothing); every search of
the oracle scenarios and of simulated runs is checked against the candidates listed one by one
(:meth:`_Search.collect` and :meth:`_Search._cannot_fit`, the path it replaces). The snapshot
keeps a queue's holders only once a cycle changes them; after a cycle every queue's holders
(in order) and sums must be those before it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.kueue import loader, objects, predictor
from sky_kueue.kueue import preemption as p
from sky_kueue.kueue.scheduler import Engine
from sky_kueue.kueue.snapshot import Bucket, Snapshot
from sky_kueue.sim import compare, policies, traces
from sky_kueue.sim.simulator import SimConfig

ORACLE = Path(__file__).resolve().parent.parent / "oracle"
SETS = ("seeds", "hier-public", "afs-public")


def _one_by_one(search: p._Search) -> tuple[bool, ...]:
    """The passes the path ``viable_passes`` stands in for keeps: none without candidates, else
    those :meth:`_Search._cannot_fit` does not rule out."""
    same, hierarchy, priority = search.collect()
    if not same and not hierarchy and not priority:
        return ()
    unordered = same + hierarchy + priority
    passes = search.passes(bool(hierarchy), bool(priority))
    return tuple(allow for allow in passes if not search._cannot_fit(unordered, allow))


def _needs_one_by_one(search: p._Search) -> bool:
    newer = objects.PreemptionPolicy.LOWER_OR_NEWER_EQUAL_PRIORITY
    return newer in (search.spec.preemption.within_cluster_queue, search.spec.preemption.reclaim_within_cohort)


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """Every search run while the fixture is active is checked; the counts say how many
    searches were decided each way (so a test can tell it covered both)."""
    counts = {"rejected": 0, "searched": 0}
    original = p._Search.run

    def run(search: p._Search) -> list[p.Target]:
        viable = search.viable_passes()
        if _needs_one_by_one(search):
            assert viable is None, "a policy comparing creation times is decided one by one"
        else:
            assert viable == _one_by_one(search), f"{search.preemptor.key} in {search.cq.name}"
        found = original(search)
        assert not (viable == () and found), "rejected, yet the search found targets"
        counts["rejected" if viable == () else "searched"] += 1
        return found

    monkeypatch.setattr(p._Search, "run", run)
    yield counts


def test_every_oracle_search_gets_the_one_by_one_verdict(checked: dict[str, int]) -> None:
    for name in SETS:
        for path in sorted((ORACLE / name / "scenarios").glob("*.yaml")):
            predictor.predict(loader.load_state_file(path))
    assert checked["rejected"] > 50 and checked["searched"] > 50, checked


@pytest.mark.parametrize(
    ("trace", "jobs", "policy", "burst"),
    [
        ("reclaim-storm", 400, "rank", False),
        ("dev-starvation", 150, "safe-place", False),
        ("reclaim-storm-hot", 250, "rank", True),
    ],
)
def test_every_simulated_search_gets_the_one_by_one_verdict(
    checked: dict[str, int], trace: str, jobs: int, policy: str, burst: bool
) -> None:
    loaded = traces.load_trace(trace, seed=1, jobs=jobs)
    settings = policies.with_burst_defaults(AgingSettings()) if burst else None
    config = SimConfig(seed=1, allow_burst=burst)
    compare.run_policy(loaded, policies.resolve(policy, settings), config)
    assert checked["rejected"] > 10 and checked["searched"] > 1, checked


def _buckets_from_scratch(snapshot: Snapshot) -> dict[str, dict[frozenset[objects.FR], dict[int, tuple[int, dict]]]]:
    out: dict[str, dict[frozenset[objects.FR], dict[int, tuple[int, dict]]]] = {}
    for cq_name, holders in snapshot.workloads.items():
        for info in holders.values():
            bucket = out.setdefault(cq_name, {}).setdefault(info.assigned_frs(), {})
            count, usage = bucket.get(info.priority, (0, {}))
            summed = {fr: usage.get(fr, 0) + info.usage.get(fr, 0) for fr in {*usage, *info.usage}}
            bucket[info.priority] = (count + 1, summed)
    return out


def _buckets(snapshot: Snapshot) -> dict[str, dict[frozenset[objects.FR], dict[int, tuple[int, dict]]]]:
    def one(bucket: Bucket) -> tuple[int, dict]:
        return bucket.count, {fr: v for fr, v in bucket.usage.items() if v}

    return {
        cq: {frs: {prio: one(b) for prio, b in by.items()} for frs, by in groups.items() if by}
        for cq, groups in snapshot.buckets.items()
        if any(groups.values())
    }


def test_a_cycle_leaves_the_holders_in_order_and_the_sums_of_a_fresh_count() -> None:
    """Cycles with preemptions (searches remove and restore holders, Kueue preempts 6)."""
    state = loader.load_state_file(ORACLE / "hier-public" / "scenarios" / "hier-public-s3-012.yaml")
    engine = Engine(state, predictor.DEFAULT_NOW)
    preempted = 0
    for _ in range(5):
        before = {cq: list(holders) for cq, holders in engine.snapshot.workloads.items()}
        usage = {name: dict(node.usage) for name, node in engine.shape.cqs.items()}
        result = engine.cycle()
        assert {cq: list(holders) for cq, holders in engine.snapshot.workloads.items()} == before
        assert {name: dict(node.usage) for name, node in engine.shape.cqs.items()} == usage
        assert _buckets(engine.snapshot) == _buckets_from_scratch(engine.snapshot)
        engine.settle_events(result)
        preempted += len(result.preempted)
        assert _buckets(engine.snapshot) == _buckets_from_scratch(engine.snapshot)
    assert preempted == 6


def test_restore_takes_only_the_open_checkpoint() -> None:
    state = loader.load_state_file(ORACLE / "hier-public" / "scenarios" / "hier-public-s3-012.yaml")
    engine = Engine(state, predictor.DEFAULT_NOW)
    first = engine.snapshot.checkpoint()
    second = engine.snapshot.checkpoint()
    with pytest.raises(ValueError, match="not the open checkpoint"):
        engine.snapshot.restore(first)
    engine.snapshot.restore(second)
    with pytest.raises(ValueError, match="not the open checkpoint"):
        engine.snapshot.restore(second)

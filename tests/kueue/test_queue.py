"""The pending queue's heaps give exactly Kueue's order, through pushes, deletes, requeues, shapes
parked together and flushes."""

from __future__ import annotations

import random
from dataclasses import replace

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import queue as q
from sky_kueue.kueue.parse import parse_documents
from sky_kueue.kueue.workload import new_info
from tests.kueue import builders as b


def _cq(strategy: str) -> o.ClusterQueue:
    state = parse_documents([b.flavor("default"), b.cq("cq", [{"default": {"cpu": "10"}}], strategy=strategy)])
    return state.cluster_queues["cq"]


def _info(index: int, rng: random.Random) -> o.Workload:
    second = rng.randrange(0, 30)  # many equal timestamps: the UID breaks ties
    doc = b.workload(
        f"wl-{index:04d}", "ns", "lq", {"cpu": "1"}, f"2026-01-01T00:00:{second:02d}Z", priority=rng.choice([0, 5, 10])
    )
    return next(iter(parse_documents([doc]).workloads.values()))


def _scan_order(queue: q.PendingQueue) -> str | None:
    if not queue.active:
        return None
    return min(queue.active.values(), key=queue.order_key).key


def test_heap_pops_in_the_same_order_as_a_full_scan() -> None:
    rng = random.Random(7)
    for strategy in ("BestEffortFIFO", "StrictFIFO"):
        queue = q.PendingQueue(spec=_cq(strategy))
        live: dict[str, o.Workload] = {}
        popped = 0
        for step in range(3_000):
            action = rng.random()
            if action < 0.45 or not live:
                wl = _info(step, rng)
                live[wl.key] = wl
                queue.push(new_info(wl, "cq"))
            elif action < 0.6:
                key = rng.choice(sorted(live))
                queue.delete(key)
                del live[key]
            elif action < 0.7:
                key = rng.choice(sorted(live))
                if key in queue.active:  # a priority change re-pushes a new info object
                    wl = replace(live[key], priority=rng.choice([0, 5, 10, 20]))
                    live[key] = wl
                    queue.active[key] = new_info(wl, "cq")
            else:
                expected = _scan_order(queue)
                head = queue.pop()
                assert (head.key if head else None) == expected
                if head is not None:
                    popped += 1
                    if rng.random() < 0.5:  # put it back: sticky, at once, or parked with its shape
                        reason = rng.choice(
                            [q.REQUEUE_PENDING_PREEMPTION, q.REQUEUE_FAILED_AFTER_NOMINATION, q.REQUEUE_NO_FIT]
                        )
                        queue.requeue(head, reason)
                        if reason == q.REQUEUE_NO_FIT and queue.best_effort:
                            assert not any(i.hash == head.hash for i in queue.active.values())
                    else:
                        del live[head.key]
            if step % 97 == 0:  # a deletion in the cohort returns every parked Workload
                queue.flush_inadmissible(lambda info: True)
            elif step % 89 == 0:  # ... that its namespace selector selects (none here)
                queue.flush_inadmissible(lambda info: False)
            assert set(queue.active).isdisjoint(queue.inadmissible)
        assert popped > 300
        queue.pop()  # stale heap entries are pruned when a pop finds too many
        assert queue.active.entries == sum(len(heap) for heap in queue.active.heaps.values())
        assert queue.active.entries <= 2 * len(queue.active) + q.HEAP_COMPACT_SLACK_ENTRIES

"""The age of the work queue's oldest item: it grows with the clock while the item waits,
passes to the next item when the consumer takes one, and is 0 when nothing is queued; the
controller's collector exports it at scrape time."""

from __future__ import annotations

from sky_kueue.controller.history import StoreWriteStats
from sky_kueue.controller.metrics import ControllerMetrics, WatchRequests
from sky_kueue.controller.work_queue import WorkCause, WorkItem, WorkQueue

AGE_METRIC = "sky_kueue_controller_work_queue_oldest_item_age_seconds"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class _QueueProbe:
    """A controller reduced to its work queue."""

    leader_transitions = 0

    def __init__(self, queue: WorkQueue) -> None:
        self.queue = queue

    def is_leader(self) -> bool:
        return True

    def queue_depth(self) -> int:
        return self.queue.depth

    def queue_oldest_age_seconds(self) -> float:
        return self.queue.oldest_age_seconds()

    def watch_requests(self) -> WatchRequests:
        return WatchRequests(0, 0, 0)

    def store_write_stats(self) -> StoreWriteStats | None:
        return None


def test_oldest_item_age_follows_the_clock_and_the_consumer() -> None:
    clock = _Clock()
    queue = WorkQueue(clock=clock)
    assert queue.oldest_age_seconds() == 0.0
    queue.put(WorkItem(WorkCause.REAGE))
    clock.now += 5.0
    queue.put(WorkItem(WorkCause.RETRY))
    clock.now += 2.5
    assert queue.oldest_age_seconds() == 7.5
    assert queue.get() == WorkItem(WorkCause.REAGE)
    assert queue.oldest_age_seconds() == 2.5  # the next one's age, not the taken one's
    queue.done()
    assert queue.get() == WorkItem(WorkCause.RETRY)
    assert queue.oldest_age_seconds() == 0.0  # taken, even before done()
    queue.put(WorkItem(WorkCause.REAGE))
    clock.now += 1.0
    queue.close()
    assert queue.oldest_age_seconds() == 0.0


def test_the_gauge_is_read_at_scrape_time() -> None:
    clock = _Clock()
    queue = WorkQueue(clock=clock)
    metrics = ControllerMetrics()
    metrics.bind(_QueueProbe(queue))
    assert metrics.registry.get_sample_value(AGE_METRIC) == 0.0
    queue.put(WorkItem(WorkCause.SYNCED))
    clock.now += 42.0
    assert metrics.registry.get_sample_value(AGE_METRIC) == 42.0
    assert metrics.registry.get_sample_value("sky_kueue_controller_work_queue_depth") == 1.0
    queue.get()
    assert metrics.registry.get_sample_value(AGE_METRIC) == 0.0

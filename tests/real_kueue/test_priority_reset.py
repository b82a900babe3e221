"""Kueue >= v0.16 rewrites ``spec.priority`` to the class value on every WorkloadPriorityClass
create event, which every Kueue start delivers (``pkg/controller/core/
workloadpriorityclass_controller.go``): the controller must put the aged level back.

Every version of the Workload is read from a watch, so a reset the controller undoes within
milliseconds is still seen, and the window it was open is measured.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from sky_kueue.controller.manager import Controller
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from tests.real_kueue.support import KUEUE_GROUP, KUEUE_VERSION, KueueCluster
from tests.real_kueue.test_preemption import controller, preempt_and_relaunch  # noqa: F401 - the fixture

#: How soon after Kueue's reset the aged level must be back (seconds).
RESTORE_BOUND_SECONDS = 5.0
#: How long to watch after Kueue's restart.
WATCH_SECONDS = 60


class PriorityLog:
    """``spec.priority`` of one Workload at each version a watch delivers, with arrival times."""

    def __init__(self, kueue: KueueCluster, namespace: str, name: str, since: str) -> None:
        from kubernetes import watch

        self.values: list[tuple[float, int | None]] = []
        self._changed = threading.Condition()
        self._watch = watch.Watch()
        self._thread = threading.Thread(target=self._run, args=(kueue, namespace, name, since), daemon=True)
        self._thread.start()

    def _run(self, kueue: KueueCluster, namespace: str, name: str, since: str) -> None:
        stream = self._watch.stream(
            kueue.custom.list_namespaced_custom_object,
            KUEUE_GROUP,
            KUEUE_VERSION,
            namespace,
            "workloads",
            field_selector=f"metadata.name={name}",
            resource_version=since,
            timeout_seconds=WATCH_SECONDS,
        )
        for event in stream:
            obj: dict[str, Any] = event["object"]
            with self._changed:
                self.values.append((time.monotonic(), obj.get("spec", {}).get("priority")))
                self._changed.notify_all()

    def wait_for(self, test: Any, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: test(self.values), timeout)

    def stop(self) -> None:
        self._watch.stop()


def test_a_kueue_restart_resets_the_aged_priority_and_the_controller_restores_it(
    kueue: KueueCluster,
    controller: tuple[Controller, SqliteHistoryStore],  # noqa: F811
) -> None:
    aged = preempt_and_relaunch(kueue, controller[1])
    log = PriorityLog(
        kueue, aged["metadata"]["namespace"], aged["metadata"]["name"], aged["metadata"]["resourceVersion"]
    )
    try:
        cluster = kueue.cluster
        cluster.stop_kueue()
        cluster.start_kueue()
        cluster.wait_kueue_ready(time.monotonic() + 60)

        def reset_then_restored(values: list[tuple[float, int | None]]) -> bool:
            seen = [v for _, v in values]
            return 100 in seen and 200 in seen[seen.index(100) :]

        assert log.wait_for(reset_then_restored, WATCH_SECONDS), f"spec.priority versions: {log.values}"
    finally:
        log.stop()
    reset_at = next(t for t, v in log.values if v == 100)
    restored_at = next(t for t, v in log.values if v == 200 and t > reset_at)
    window = restored_at - reset_at
    print(f"Kueue reset spec.priority 200 -> 100; the controller restored it {window * 1000:.0f} ms later")
    assert window <= RESTORE_BOUND_SECONDS, log.values


def test_a_class_value_edit_resets_the_aged_priority_and_the_controller_restores_it(
    kueue: KueueCluster,
    controller: tuple[Controller, SqliteHistoryStore],  # noqa: F811
) -> None:
    """An admin raising dev-priority's value (100 -> 110): Kueue rewrites every dev Workload's
    ``spec.priority`` to 110; the aged relaunch gets its step back (its base stays the value
    it was first seen with, 100, so it returns to 200)."""
    aged = preempt_and_relaunch(kueue, controller[1])
    log = PriorityLog(
        kueue, aged["metadata"]["namespace"], aged["metadata"]["name"], aged["metadata"]["resourceVersion"]
    )
    try:
        kueue.custom.patch_cluster_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", "dev-priority", {"value": 110}
        )

        def reset_then_restored(values: list[tuple[float, int | None]]) -> bool:
            seen = [v for _, v in values]
            return 110 in seen and 200 in seen[seen.index(110) :]

        assert log.wait_for(reset_then_restored, WATCH_SECONDS), f"spec.priority versions: {log.values}"
    finally:
        log.stop()

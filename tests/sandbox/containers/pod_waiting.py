"""Run one pod on the container runtime's kubelet side and record its waiting states.

Only the image step runs: with an image that fails before any pull or build, no network or
container is made, so the tests that use this need no root.
"""

from __future__ import annotations

import pathlib
import time
from collections.abc import Callable
from typing import Any

from sky_kueue.sandbox.apiserver.clock import SystemClock
from sky_kueue.sandbox.apiserver.events import StoreEvent
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.containers.images import ImageStore
from sky_kueue.sandbox.containers.network import PodNetwork
from sky_kueue.sandbox.containers.runtime import PodRuntime

#: How long to wait for the state the caller waits for (the runtime writes within a second).
WAIT_SECONDS = 20.0
POLL_SECONDS = 0.02


def waiting_states(
    tmp_path: pathlib.Path,
    image: str,
    until: Callable[[list[dict[str, Any]]], bool],
    *,
    then_seconds: float = 0.0,
) -> list[dict[str, Any]]:
    """The container's waiting states as they changed, until ``until`` holds for them (or
    :data:`WAIT_SECONDS`), then ``then_seconds`` more; the runtime is shut down after."""
    store = ObjectStore()
    pod = store.create(
        "pods",
        {
            "metadata": {"name": "waiting", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    )
    waiting: list[dict[str, Any]] = []

    def record(event: StoreEvent) -> None:
        for status in (event.obj.get("status") or {}).get("containerStatuses") or []:
            state = status["state"].get("waiting")
            if state and (not waiting or waiting[-1] != state):
                waiting.append(dict(state))

    store.add_commit_hook(record, "pods")
    runtime = PodRuntime(
        store, tmp_path / "pods", ImageStore(tmp_path / "images"), PodNetwork(tmp_path), SystemClock(), lambda p, c: {}
    )
    try:
        runtime.start_pod(pod, None)
        deadline = time.monotonic() + WAIT_SECONDS
        while not until(waiting) and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
        time.sleep(then_seconds)
    finally:
        runtime.shutdown()
    return waiting

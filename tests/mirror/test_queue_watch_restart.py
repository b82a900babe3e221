"""``sky-kueue queue --watch`` across an API-server restart: it says when it lost the server,
says when it resynced, and then shows the new server's state (not the dead one's)."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO
from urllib.parse import urlsplit

from sky_kueue.sandbox.apiserver import ApiServer, ObjectStore
from tests.mirror import builders

WAIT_SECONDS = 30.0


def _seed(store: ObjectStore, workload: str) -> None:
    store.create("namespaces", builders.namespace("team-a"))
    store.create("resourceflavors", builders.flavor())
    store.create("clusterqueues", builders.cluster_queue("cq"))
    store.create("localqueues", builders.local_queue("lq", "team-a", "cq"))
    store.create("workloads", builders.workload(workload, "team-a"))


def _lines(stream: IO[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _until(lines: queue.Queue[str], needle: str) -> str:
    deadline = time.monotonic() + WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.2)
        except queue.Empty:
            continue
        if needle in line:
            return line
    raise AssertionError(f"never saw {needle!r}")


def test_queue_watch_warns_resyncs_and_shows_the_restarted_servers_state(tmp_path: Path) -> None:
    first = ApiServer().start()
    port = urlsplit(first.url).port
    kubeconfig = first.write_kubeconfig(tmp_path / "kubeconfig")
    _seed(first.store, "before-restart")
    for i in range(20):  # the old server's resourceVersions run ahead of the new one's
        first.store.create("configmaps", {"metadata": {"name": f"c{i}", "namespace": "team-a"}})
    process = subprocess.Popen(
        [sys.executable, "-m", "sky_kueue.cli.main", "queue", "--kubeconfig", str(kubeconfig), "--watch", "-o", "json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out: queue.Queue[str] = queue.Queue()
    err: queue.Queue[str] = queue.Queue()
    assert process.stdout is not None and process.stderr is not None
    threading.Thread(target=_lines, args=(process.stdout, out), daemon=True).start()
    threading.Thread(target=_lines, args=(process.stderr, err), daemon=True).start()
    second: ApiServer | None = None
    try:
        _until(out, "before-restart")
        first.stop()
        warning = _until(err, "warning:")
        second = ApiServer("127.0.0.1", port or 0).start()
        _seed(second.store, "after-restart")
        _until(err, "note: resynced")
        latest = _until(out, "after-restart")
    finally:
        process.terminate()
        process.wait(WAIT_SECONDS)
        if second is not None:
            second.stop()
        first.stop()
    assert "showing the last known state while reconnecting" in warning
    assert "before-restart" not in latest

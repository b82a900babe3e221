"""Stopping a mirror ends its watches at once, even on a quiet cluster.

A reflector blocked reading a watch that carries no events (and, here, no bookmarks for ten
minutes) must not wait for the next byte: ``Mirror.stop`` shuts the watch's socket down, so
every reflector thread has ended when ``stop`` returns. Before, the threads outlived the
stop's join bound and every controller and live view paid it on shutdown.
"""

from __future__ import annotations

from pathlib import Path

from sky_kueue.mirror import Mirror
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.sandbox.apiserver import ApiServer
from tests.mirror import builders
from tests.mirror.conftest import WAIT_SECONDS, wait_converged

#: No bookmark and no read timeout within the test: only the stop can end the watches.
QUIET_BOOKMARK_INTERVAL_SECONDS = 600.0
QUIET_READ_TIMEOUT_SECONDS = 600


def test_stop_ends_every_watch_at_once_on_a_quiet_cluster(tmp_path: Path) -> None:
    with ApiServer(bookmark_interval_seconds=QUIET_BOOKMARK_INTERVAL_SECONDS) as server:
        server.store.create("namespaces", builders.namespace("team-a"))
        server.store.create("resourceflavors", builders.flavor())
        mirror = Mirror.connect(
            server.write_kubeconfig(tmp_path / "kubeconfig"),
            retries=False,
            settings=ReflectorSettings(watch_read_timeout_seconds=QUIET_READ_TIMEOUT_SECONDS),
        )
        mirror.start()
        mirror.wait_synced(WAIT_SECONDS)
        wait_converged(server.store, mirror)
        assert all(r.running for r in mirror.reflectors.values())
        watching_before = {kind: r.watches for kind, r in mirror.reflectors.items()}

        mirror.stop()

        assert [kind for kind, r in mirror.reflectors.items() if r.running] == []
        # Each reflector ended inside the watch it had open, not by timing out and re-watching.
        assert {kind: r.watches for kind, r in mirror.reflectors.items()} == watching_before

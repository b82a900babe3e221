"""The port of a SkyPilot API server of one's own, and the queue port SkyPilot derives from it."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from sky_kueue.sandbox import skypilot_home
from sky_kueue.sandbox.skypilot_home import free_api_server_port, skypilot_queue_manager_port

#: API server ports to compare: SkyPilot's default, its neighbour, and ports whose offset wraps.
API_PORTS = (46580, 46581, 40000, 53000, 60999)


def test_the_queue_port_is_the_one_skypilot_derives() -> None:
    code = (
        "import os, sys\n"
        "from sky.server.requests.queues import mp_queue\n"
        "for port in sys.argv[1:]:\n"
        "    os.environ['SKYPILOT_API_SERVER_LOCAL_PORT'] = port\n"
        "    print(mp_queue.get_queue_manager_port())\n"
    )
    argv = [sys.executable, "-c", code, *map(str, API_PORTS)]
    out = subprocess.run(argv, env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    assert [int(line) for line in out.stdout.split()] == [skypilot_queue_manager_port(p) for p in API_PORTS]


def _hold_a_queue_range_port() -> socket.socket:
    """A listening socket on some port in SkyPilot's queue-manager range."""
    for port in range(55000, 60000):
        held = socket.socket()
        try:
            held.bind(("", port))
        except OSError:
            held.close()
            continue
        held.listen()
        return held
    raise AssertionError("no port free in 55000-59999")


def test_a_port_whose_queue_port_is_held_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    held = _hold_a_queue_range_port()
    busy = held.getsockname()[1]
    clashing = next(p for p in range(1024, 65536) if p != busy and skypilot_queue_manager_port(p) == busy)
    offered = iter([clashing, 47000])
    monkeypatch.setattr(skypilot_home, "free_local_port", lambda: next(offered))
    try:
        assert free_api_server_port() == 47000
    finally:
        held.close()


def test_no_free_pair_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(skypilot_home, "_bindable", lambda port: False)
    with pytest.raises(OSError, match="no free port pair"):
        free_api_server_port()

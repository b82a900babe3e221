"""``up`` to a Ready cluster with Kueue's webhooks serving, and ``down`` leaving nothing behind:
no process, no listening port, no file (the state directory, the fixed-path certificates)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

from sky_kueue.realcluster import build, versions
from sky_kueue.realcluster.cluster import KUEUE_FIXED_CERT_DIRS, RealCluster, is_alive

#: The issue's bound on a warm start (binaries cached) to a Ready cluster, seconds.
WARM_START_SECONDS = 60.0


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def test_up_is_ready_within_the_warm_bound_and_down_leaves_nothing(tmp_path: Path) -> None:
    binaries = build.ensure_built(versions.load_pins())
    cluster = RealCluster(tmp_path / "cluster", binaries)
    had_certs = {d: (d / "tls.crt").exists() for d in KUEUE_FIXED_CERT_DIRS}
    started = time.monotonic()
    cluster.up()
    took = time.monotonic() - started
    assert took < WARM_START_SECONDS, f"warm start took {took:.1f} s"
    nodes = cluster.core().list_node().items
    assert len(nodes) == 2 and all(n.status.allocatable["nvidia.com/gpu"] == "4" for n in nodes)
    processes = dict(cluster.state.processes)
    ports = dict(cluster.state.ports)
    assert all(is_alive(p.pid) for p in processes.values())
    assert listening(ports["apiserver"]) and listening(ports["kueue_webhook"])

    cluster.down()
    assert not any(is_alive(p.pid) for p in processes.values()), processes
    assert not any(listening(port) for name, port in ports.items() if name != "etcd_peer"), ports
    assert not (tmp_path / "cluster").exists()
    for directory, had in had_certs.items():
        assert (directory / "tls.crt").exists() == had, directory

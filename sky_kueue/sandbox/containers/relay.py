"""A TCP relay that lets pods reach the sandbox's API server on the pod network's gateway.

Why a relay and not a second listener in the API server: the API server binds 127.0.0.1
(nothing else on the machine should see it), and a pod's loopback is its own. The relay
listens on the gateway address - which exists only on the sandbox's bridge - with the API
server's port, and copies bytes both ways to 127.0.0.1; watches and exec streams pass through
unchanged. Containers find it as ``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver

from sky_kueue.sandbox.containers.proxy import pipe_both_ways
from sky_kueue.sandbox.containers.tcp_server import BackgroundTcpServer


class _Handler(socketserver.BaseRequestHandler):
    server: ApiRelay

    def handle(self) -> None:
        try:
            upstream = socket.create_connection(self.server.target)
        except OSError:
            return
        with upstream:
            pipe_both_ways(self.request, upstream, None)  # watches may be quiet for long
            with contextlib.suppress(OSError):
                upstream.shutdown(socket.SHUT_RDWR)


class ApiRelay(BackgroundTcpServer):
    """Relays ``(host, port)`` to ``target``; ``start()``/``stop()``."""

    thread_name = "sky-kueue-api-relay"

    def __init__(self, host: str, port: int, target: tuple[str, int]) -> None:
        super().__init__((host, port), _Handler)
        self.target = target

    @property
    def port(self) -> int:
        return int(self.server_address[1])

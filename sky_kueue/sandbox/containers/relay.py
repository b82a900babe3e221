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
import threading

from sky_kueue.sandbox.containers.proxy import pipe_both_ways


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


class ApiRelay(socketserver.ThreadingTCPServer):
    """Relays ``(host, port)`` to ``target``; ``start()``/``stop()``."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, target: tuple[str, int]) -> None:
        super().__init__((host, port), _Handler)
        self.target = target
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def start(self) -> ApiRelay:
        self._thread = threading.Thread(target=self.serve_forever, name="sky-kueue-api-relay", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

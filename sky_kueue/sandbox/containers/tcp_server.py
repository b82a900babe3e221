"""A threaded TCP server that serves from a daemon thread: the proxy's and the relay's base.

Why one base: the registry proxy (:mod:`sky_kueue.sandbox.containers.proxy`) and the API
relay (:mod:`sky_kueue.sandbox.containers.relay`) are both per-connection TCP servers that a
node starts next to its bridge and stops with it; the start (a named daemon thread, so a
stuck connection never keeps the process alive) and the orderly stop (stop accepting, close
the socket, join the thread) are the same for both and are kept here once.
"""

from __future__ import annotations

import socketserver
import threading
from typing import TypeVar

_Server = TypeVar("_Server", bound="BackgroundTcpServer")


class BackgroundTcpServer(socketserver.ThreadingTCPServer):
    """``start()`` serves in a daemon thread named :attr:`thread_name`; ``stop()`` ends it."""

    daemon_threads = True
    allow_reuse_address = True
    #: Name of the serving thread (shows in thread dumps); subclasses set their own.
    thread_name = "sky-kueue-tcp-server"

    def __init__(self, address: tuple[str, int], handler: type[socketserver.BaseRequestHandler]) -> None:
        super().__init__(address, handler)
        self._thread: threading.Thread | None = None

    def start(self: _Server) -> _Server:
        self._thread = threading.Thread(target=self.serve_forever, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()

"""``pods/portforward`` over WebSockets, as the kubelet serves it to the official Python client.

The protocol (``kubernetes/pkg/kubelet/cri/streaming/portforward/websocket.go``): the request
names ``ports=P1&ports=P2...``; port *i* gets data channel ``2i`` and error channel ``2i+1``;
the server's first frame on each channel is the channel byte and the port number as two bytes,
little-endian; after that, channel bytes prefix the payload both ways. One TCP connection per
port per WebSocket, to the pod's address. kubectl's own ``port-forward`` speaks SPDY tunnelled
in a WebSocket instead: :mod:`.spdy_portforward`.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Sequence

from sky_kueue.sandbox.kubelet.websocket import WebSocket, WebSocketError

SUBPROTOCOLS = ("v4.channel.k8s.io", "portforward.k8s.io")
CONNECT_TIMEOUT_SECONDS = 10.0
READ_CHUNK_BYTES = 64 * 1024


def parse_ports(values: Sequence[str]) -> list[int]:
    """The ports of the query (``ports=80&ports=8080`` or ``ports=80,8080``).

    Raises:
        ValueError: a port that is not a number in 1..65535 (the message names it).
    """
    ports: list[int] = []
    for value in values:
        for text in value.split(","):
            text = text.strip()
            if not text.isdigit() or not 0 < int(text) < 65536:
                raise ValueError(f"invalid port {text!r}")
            ports.append(int(text))
    return ports


def serve(socket_: WebSocket, address: str, ports: Sequence[int]) -> None:
    """Forward each port to ``address`` until the client or every connection closes."""
    connections: dict[int, socket.socket] = {}
    for index, port in enumerate(ports):
        header = struct.pack("<H", port)
        socket_.send(bytes([2 * index]) + header)
        socket_.send(bytes([2 * index + 1]) + header)
        try:
            connections[index] = socket.create_connection((address, port), timeout=CONNECT_TIMEOUT_SECONDS)
            connections[index].settimeout(None)
        except OSError as exc:
            failure = f"error forwarding port {port} to pod at {address}: {exc.strerror or exc}"
            with contextlib.suppress(OSError):
                socket_.send(bytes([2 * index + 1]) + failure.encode())
    remaining = [len(connections)]
    lock = threading.Lock()

    def forward(conn: socket.socket, channel: int) -> None:
        _pump(conn, channel, socket_)
        with lock:
            remaining[0] -= 1
            last = remaining[0] == 0
        if last:  # every pod side closed: so does the stream (the client sees its sockets end)
            with contextlib.suppress(OSError):
                socket_.close()

    pumps = [
        threading.Thread(target=forward, args=(conn, 2 * index), daemon=True) for index, conn in connections.items()
    ]
    for pump in pumps:
        pump.start()
    try:
        while any(p.is_alive() for p in pumps):
            message = socket_.receive()
            if message is None:
                break
            data = message.data
            if len(data) < 2 or data[0] % 2:
                continue
            conn = connections.get(data[0] // 2)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(data[1:])
    except (WebSocketError, OSError):
        pass  # the client left; close the pod side below
    finally:
        for conn in connections.values():
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        with contextlib.suppress(OSError):
            socket_.close()


def _pump(conn: socket.socket, channel: int, socket_: WebSocket) -> None:
    while True:
        try:
            chunk = conn.recv(READ_CHUNK_BYTES)
        except OSError:
            return
        if not chunk:
            return
        try:
            socket_.send(bytes([channel]) + chunk)
        except OSError:
            return

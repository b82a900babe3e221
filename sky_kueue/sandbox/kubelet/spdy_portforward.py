"""``kubectl port-forward``: SPDY/3.1 streams tunnelled in a WebSocket, served to a pod's ports.

Why: kubectl (1.30+) dials port-forward as a WebSocket with subprotocol
``SPDY/3.1+portforward.k8s.io`` and speaks SPDY inside it, the byte stream split across binary
messages (``k8s.io/client-go/transport/websocket``'s tunnelling connection). SkyPilot reaches
pods' sshd through ``kubectl port-forward`` (its Kubernetes SSH proxy command), so the sandbox
serves it.

What is served (SPDY Protocol Draft 3; ``k8s.io/kubelet/pkg/cri/streaming/portforward``'s
``httpstream`` handler for the headers): for each forwarded connection kubectl opens an
*error* stream and a *data* stream (``SYN_STREAM`` with headers ``streamtype``, ``port``,
``requestid``); each gets a ``SYN_REPLY``; the data stream is tied to a TCP connection to the
pod's address and port; a connection failure is written on the error stream. ``PING`` is
echoed; ``WINDOW_UPDATE`` and ``SETTINGS`` are ignored (no flow control, as spdystream).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import zlib
from dataclasses import dataclass, field

from sky_kueue.sandbox.kubelet.spdy_dictionary import DICTIONARY
from sky_kueue.sandbox.kubelet.websocket import WebSocket, WebSocketError

SUBPROTOCOL = "SPDY/3.1+portforward.k8s.io"
SPDY_VERSION = 3
SYN_STREAM, SYN_REPLY, RST_STREAM, SETTINGS, PING, GOAWAY, HEADERS, WINDOW_UPDATE = 1, 2, 3, 4, 6, 7, 8, 9
FLAG_FIN = 0x01
CONNECT_TIMEOUT_SECONDS = 10.0
READ_CHUNK_BYTES = 32 * 1024
#: The largest frame accepted (SPDY's length field is 24 bits).
MAX_FRAME_BYTES = 1 << 24


class SpdyError(Exception):
    """The peer sent something that is not SPDY/3 as kubectl speaks it."""


def parse_header_block(block: bytes) -> dict[str, str]:
    """Name/value pairs of a decompressed SPDY/3 header block (32-bit counts and lengths)."""
    if len(block) < 4:
        raise SpdyError("short header block")
    (count,), offset, headers = struct.unpack_from("!I", block), 4, {}
    for _ in range(count):
        (name_length,) = struct.unpack_from("!I", block, offset)
        name = block[offset + 4 : offset + 4 + name_length].decode()
        offset += 4 + name_length
        (value_length,) = struct.unpack_from("!I", block, offset)
        headers[name] = block[offset + 4 : offset + 4 + value_length].decode()
        offset += 4 + value_length
    return headers


def control_frame(kind: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!HHI", 0x8000 | SPDY_VERSION, kind, (flags << 24) | len(payload)) + payload


def data_frame(stream_id: int, flags: int, payload: bytes) -> bytes:
    return struct.pack("!II", stream_id & 0x7FFFFFFF, (flags << 24) | len(payload)) + payload


class _ByteStream:
    """The SPDY byte stream carried in the WebSocket's binary messages."""

    def __init__(self, ws: WebSocket) -> None:
        self._ws = ws
        self._buffer = b""

    def read(self, count: int) -> bytes | None:
        while len(self._buffer) < count:
            message = self._ws.receive()
            if message is None:
                return None
            self._buffer += message.data
        data, self._buffer = self._buffer[:count], self._buffer[count:]
        return data


@dataclass
class _Forward:
    """One forwarded connection: its two streams and the TCP connection to the pod."""

    port: int
    error_stream: int | None = None
    data_stream: int | None = None
    conn: socket.socket | None = None
    pump: threading.Thread | None = field(default=None, repr=False)


class SpdyPortForward:
    """Serves one tunnelled port-forward session to ``address`` until the client leaves."""

    def __init__(self, ws: WebSocket, address: str) -> None:
        self.ws = ws
        self.address = address
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        # Headers sent are compressed without the dictionary: a zlib reader primed with one
        # accepts a stream whose header does not name it.
        self._deflate = zlib.compressobj()
        self._lock = threading.Lock()
        self._by_request: dict[str, _Forward] = {}
        self._by_stream: dict[int, _Forward] = {}

    def serve(self) -> None:
        stream = _ByteStream(self.ws)
        try:
            while True:
                head = stream.read(8)
                if head is None:
                    return
                first, second = struct.unpack("!II", head)
                length = second & 0xFFFFFF
                if length > MAX_FRAME_BYTES:
                    raise SpdyError(f"frame of {length} bytes")
                payload = stream.read(length) if length else b""
                if payload is None:
                    return
                flags = second >> 24
                if first & 0x80000000:
                    if not self._control((first >> 16) & 0x7FFF, first & 0xFFFF, flags, payload):
                        return
                else:
                    self._data(first & 0x7FFFFFFF, flags, payload)
        except (WebSocketError, OSError, SpdyError, zlib.error, struct.error, UnicodeDecodeError):
            return  # the client left or spoke garbage; close the pod side below
        finally:
            self._close_all()

    # --- frames from the client --------------------------------------------------------------

    def _control(self, version: int, kind: int, flags: int, payload: bytes) -> bool:
        if version != SPDY_VERSION:
            raise SpdyError(f"SPDY version {version}")
        if kind == SYN_STREAM:
            (stream_id,) = struct.unpack_from("!I", payload)
            stream_id &= 0x7FFFFFFF
            headers = parse_header_block(self._inflate.decompress(payload[10:]))
            self._send(control_frame(SYN_REPLY, 0, struct.pack("!I", stream_id) + self._header_block({})))
            self._open(stream_id, headers)
        elif kind == PING:
            self._send(control_frame(PING, 0, payload[:4]))
        elif kind == RST_STREAM:
            (stream_id,) = struct.unpack_from("!I", payload)
            self._close_stream(stream_id & 0x7FFFFFFF)
        elif kind == GOAWAY:
            return False
        return True  # SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do

    def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        with self._lock:
            forward = self._by_stream.get(stream_id)
        if forward is None or forward.data_stream != stream_id or forward.conn is None:
            return  # the error stream's half-close, or a stream already gone
        with contextlib.suppress(OSError):
            if payload:
                forward.conn.sendall(payload)
            if flags & FLAG_FIN:
                forward.conn.shutdown(socket.SHUT_WR)

    # --- streams -----------------------------------------------------------------------------

    def _open(self, stream_id: int, headers: dict[str, str]) -> None:
        kind, request = headers.get("streamtype", ""), headers.get("requestid", "")
        try:
            port = int(headers.get("port", ""))
        except ValueError:
            self._send(data_frame(stream_id, FLAG_FIN, b""))
            return
        with self._lock:
            forward = self._by_request.setdefault(request, _Forward(port))
            self._by_stream[stream_id] = forward
            if kind == "error":
                forward.error_stream = stream_id
            elif kind == "data":
                forward.data_stream = stream_id
        if kind != "data":
            return
        try:
            conn = socket.create_connection((self.address, port), timeout=CONNECT_TIMEOUT_SECONDS)
            conn.settimeout(None)
        except OSError as exc:
            message = f"error forwarding port {port} to pod at {self.address}: {exc.strerror or exc}"
            if forward.error_stream is not None:
                self._send(data_frame(forward.error_stream, FLAG_FIN, message.encode()))
            self._send(data_frame(stream_id, FLAG_FIN, b""))
            return
        forward.conn = conn
        forward.pump = threading.Thread(target=self._pump, args=(forward, stream_id), daemon=True)
        forward.pump.start()

    def _pump(self, forward: _Forward, stream_id: int) -> None:
        assert forward.conn is not None
        while True:
            try:
                chunk = forward.conn.recv(READ_CHUNK_BYTES)
            except OSError:
                chunk = b""
            try:
                if not chunk:
                    self._send(data_frame(stream_id, FLAG_FIN, b""))
                    if forward.error_stream is not None:
                        self._send(data_frame(forward.error_stream, FLAG_FIN, b""))
                    return
                self._send(data_frame(stream_id, 0, chunk))
            except OSError:
                return

    def _close_stream(self, stream_id: int) -> None:
        with self._lock:
            forward = self._by_stream.get(stream_id)
        if forward is not None and forward.conn is not None:
            with contextlib.suppress(OSError):
                forward.conn.shutdown(socket.SHUT_RDWR)

    def _close_all(self) -> None:
        with self._lock:
            forwards = list(self._by_request.values())
        for forward in forwards:
            if forward.conn is not None:
                with contextlib.suppress(OSError):
                    forward.conn.shutdown(socket.SHUT_RDWR)
                forward.conn.close()
        with contextlib.suppress(OSError):
            self.ws.close()

    # --- frames to the client ----------------------------------------------------------------

    def _header_block(self, headers: dict[str, str]) -> bytes:
        raw = struct.pack("!I", len(headers))
        for name, value in headers.items():
            raw += struct.pack("!I", len(name)) + name.encode() + struct.pack("!I", len(value)) + value.encode()
        with self._lock:
            return self._deflate.compress(raw) + self._deflate.flush(zlib.Z_SYNC_FLUSH)

    def _send(self, frame: bytes) -> None:
        self.ws.send(frame)

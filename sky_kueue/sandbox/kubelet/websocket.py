"""The server side of RFC 6455 WebSockets, as much as Kubernetes' streaming protocols use.

Why by hand: kubectl 1.30+ and the official Python client speak ``pods/exec`` over WebSockets
(subprotocols ``v5.channel.k8s.io`` / ``v4.channel.k8s.io``), and the sandbox's API server is
the standard library's ``http.server`` (see ``sandbox/apiserver/server.py`` for why); the
``websockets`` package SkyPilot brings is asyncio-only and cannot take over a connection
``http.server`` has accepted. What is here: the opening handshake, reading masked client
frames (with continuation frames joined), writing unmasked server frames, ping/pong and the
closing handshake. Nothing else of the RFC (extensions, compression) is needed or offered.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import struct
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import BinaryIO

#: The GUID every server appends to the client's key (RFC 6455 §1.3).
_ACCEPT_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#: Largest message accepted from a client; exec stdin arrives in small frames.
MAX_MESSAGE_BYTES = 16 * 1024 * 1024


class Opcode(IntEnum):
    CONTINUATION = 0x0
    TEXT = 0x1
    BINARY = 0x2
    CLOSE = 0x8
    PING = 0x9
    PONG = 0xA


class WebSocketError(Exception):
    """The peer broke the protocol (or went away mid-frame)."""


def accept_key(client_key: str) -> str:
    """``Sec-WebSocket-Accept`` for a client's ``Sec-WebSocket-Key``."""
    digest = hashlib.sha1((client_key.strip() + _ACCEPT_GUID).encode("ascii")).digest()
    return base64.b64encode(digest).decode("ascii")


def offered_subprotocols(header: str | None) -> list[str]:
    """The names in a client's ``Sec-WebSocket-Protocol`` header (RFC 6455 §11.3.4), in order."""
    return [name.strip() for name in (header or "").split(",") if name.strip()]


def choose_subprotocol(offered: str | None, supported: Sequence[str]) -> str | None:
    """The first of ``supported`` (listed in the server's preference order) that the client offers.

    One negotiation for every streaming subresource (exec, port-forward): RFC 6455 §4.2.2 lets
    the server answer with any one name the client offered, and ``None`` means none fits.
    """
    names = offered_subprotocols(offered)
    for candidate in supported:
        if candidate in names:
            return candidate
    return None


@dataclass(frozen=True)
class Message:
    opcode: Opcode
    data: bytes


class WebSocket:
    """One accepted WebSocket connection; writes are safe from several threads."""

    def __init__(self, reader: BinaryIO, writer: BinaryIO) -> None:
        self._reader = reader
        self._writer = writer
        self._write_lock = threading.Lock()
        self.closed = False

    # --- writing --------------------------------------------------------------------------

    def send(self, data: bytes, opcode: Opcode = Opcode.BINARY) -> None:
        header = bytearray([0x80 | int(opcode)])
        length = len(data)
        if length < 126:
            header.append(length)
        elif length < 1 << 16:
            header.append(126)
            header += struct.pack("!H", length)
        else:
            header.append(127)
            header += struct.pack("!Q", length)
        with self._write_lock:
            if self.closed and opcode is not Opcode.CLOSE:
                return
            try:
                self._writer.write(bytes(header) + data)
                self._writer.flush()
            except ValueError as exc:  # the HTTP handler already closed the connection's file
                raise BrokenPipeError("connection closed") from exc

    def close(self, code: int = 1000, reason: str = "") -> None:
        """Send a close frame once (the peer's close frame, if any, is not awaited)."""
        if self.closed:
            return
        with contextlib.suppress(OSError):  # the peer is gone already; nothing left to tell it
            self.send(struct.pack("!H", code) + reason.encode("utf-8")[:120], Opcode.CLOSE)
        self.closed = True

    # --- reading --------------------------------------------------------------------------

    def receive(self) -> Message | None:
        """The next data message (pings answered, pongs skipped); None once the peer closes.

        Raises:
            WebSocketError: an unmasked or oversized frame, or a connection cut mid-frame.
        """
        parts: list[bytes] = []
        first_opcode: Opcode | None = None
        while True:
            fin, opcode, payload = self._read_frame()
            if opcode is Opcode.CLOSE:
                self.close()
                return None
            if opcode is Opcode.PING:
                self.send(payload, Opcode.PONG)
                continue
            if opcode is Opcode.PONG:
                continue
            if opcode is not Opcode.CONTINUATION:
                first_opcode = opcode
            parts.append(payload)
            if sum(len(p) for p in parts) > MAX_MESSAGE_BYTES:
                raise WebSocketError("message too large")
            if fin:
                return Message(first_opcode or Opcode.BINARY, b"".join(parts))

    def _read(self, count: int) -> bytes:
        try:
            return self._reader.read(count) or b""
        except ValueError as exc:  # the HTTP handler already closed the connection's file
            raise WebSocketError("connection closed") from exc

    def _read_exact(self, count: int) -> bytes:
        data = self._read(count)
        if data is None or len(data) < count:
            raise WebSocketError("connection closed mid-frame")
        return data

    def _read_frame(self) -> tuple[bool, Opcode, bytes]:
        head = self._read(2)
        if not head:
            return True, Opcode.CLOSE, b""
        if len(head) < 2:
            raise WebSocketError("connection closed mid-frame")
        fin = bool(head[0] & 0x80)
        try:
            opcode = Opcode(head[0] & 0x0F)
        except ValueError as exc:
            raise WebSocketError(f"unknown opcode {head[0] & 0x0F}") from exc
        if not head[1] & 0x80:
            raise WebSocketError("client frames must be masked")
        length = head[1] & 0x7F
        if length == 126:
            length = struct.unpack("!H", self._read_exact(2))[0]
        elif length == 127:
            length = struct.unpack("!Q", self._read_exact(8))[0]
        if length > MAX_MESSAGE_BYTES:
            raise WebSocketError("frame too large")
        mask = self._read_exact(4)
        return fin, opcode, unmask(self._read_exact(length), mask)


def unmask(data: bytes, mask: bytes) -> bytes:
    """XOR ``data`` with the repeated 4-byte ``mask`` (one big-integer XOR, not a byte loop)."""
    if not data:
        return b""
    key = (mask * (len(data) // 4 + 1))[: len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(key, "big")).to_bytes(len(data), "big")

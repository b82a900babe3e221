"""SPDY/3 framing as kubectl's port-forward uses it: header blocks compressed with the
protocol's dictionary, frames with 24-bit lengths and flags."""

from __future__ import annotations

import struct
import zlib

from sky_kueue.sandbox.kubelet.spdy_dictionary import DICTIONARY, DICTIONARY_ADLER32
from sky_kueue.sandbox.kubelet.spdy_portforward import (
    FLAG_FIN,
    SYN_STREAM,
    control_frame,
    data_frame,
    parse_header_block,
)


def _block(headers: dict[str, str]) -> bytes:
    raw = struct.pack("!I", len(headers))
    for name, value in headers.items():
        raw += struct.pack("!I", len(name)) + name.encode() + struct.pack("!I", len(value)) + value.encode()
    return raw


def test_a_header_block_compressed_with_the_dictionary_reads_back() -> None:
    headers = {"streamtype": "data", "port": "22", "requestid": "0"}
    deflate = zlib.compressobj(zdict=DICTIONARY)
    compressed = deflate.compress(_block(headers)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert struct.unpack("!I", compressed[2:6])[0] == DICTIONARY_ADLER32  # the DICTID kubectl names
    inflate = zlib.decompressobj(zdict=DICTIONARY)
    assert parse_header_block(inflate.decompress(compressed)) == headers


def test_frames_carry_version_type_flags_and_length() -> None:
    frame = control_frame(SYN_STREAM, 0, b"x" * 10)
    assert frame[:4] == bytes([0x80, 0x03, 0x00, 0x01]) and frame[4:8] == bytes([0, 0, 0, 10])
    data = data_frame(5, FLAG_FIN, b"hello")
    assert struct.unpack("!II", data[:8]) == (5, (FLAG_FIN << 24) | 5) and data[8:] == b"hello"

"""Reading input files safely: regular files only, size-capped, UTF-8.

Why not ``Path.read_text``: it blocks forever on a FIFO with no writer, reads ``/dev/zero``
until ``MemoryError``, and reads a multi-gigabyte file whole before anything can object
(issue 17). Here the file is opened non-blocking, its kind and size are checked with
``fstat`` on the open descriptor (no race with a rename), and at most
:data:`MAX_INPUT_BYTES` are ever read.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sky_kueue.inputs.errors import InputError

#: Largest input file accepted. The biggest recorded scenario (2,000 Workloads) is 3.3 MB;
#: a snapshot of a very large cluster stays well below this.
MAX_INPUT_BYTES = 64 * 1024 * 1024
#: Bytes read per ``os.read`` call.
READ_CHUNK_BYTES = 1024 * 1024


def _kind_of(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_bytes(path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """Read a regular file of at most ``max_bytes``.

    Args:
        path: the file.
        what: what the file should be ("YAML file", "CSV file"), for messages.
        max_bytes: the size limit.

    Raises:
        InputError: missing, unreadable, not a regular file, or too large.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputError(os.fspath(path), f"no such file; give a {what}") from None
    except PermissionError:
        raise InputError(os.fspath(path), "permission denied") from None
    except IsADirectoryError:
        raise InputError(os.fspath(path), f"is a directory; give a {what}") from None
    except OSError as exc:
        raise InputError(os.fspath(path), f"cannot open: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(os.fspath(path), f"is {_kind_of(info.st_mode)}; give a {what}")
        if info.st_size > max_bytes:
            raise InputError(os.fspath(path), f"{info.st_size} bytes is larger than the {max_bytes} accepted")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, READ_CHUNK_BYTES)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise InputError(os.fspath(path), f"larger than the {max_bytes} bytes accepted")
            chunks.append(chunk)
    except OSError as exc:
        raise InputError(os.fspath(path), f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return b"".join(chunks)


def decode_text(data: bytes, source: str) -> str:
    """Decode UTF-8 (a leading byte-order mark is dropped).

    Raises:
        InputError: the bytes are not UTF-8.
    """
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(source, f"not UTF-8 text (invalid byte at offset {exc.start}); save it as UTF-8") from None


def read_text(path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_INPUT_BYTES) -> str:
    """Read a regular UTF-8 text file of at most ``max_bytes``.

    Raises:
        InputError: see :func:`read_bytes` and :func:`decode_text`.
    """
    return decode_text(read_bytes(path, what, max_bytes), os.fspath(Path(path)))

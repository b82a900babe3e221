"""``pods/exec`` over WebSockets: run a command for a pod as a local process and stream it.

The channel protocol (``k8s.io/apimachinery/pkg/util/remotecommand``, the ``v4``/``v5``
``channel.k8s.io`` subprotocols): every binary message starts with a channel byte - 0 stdin
(client to server), 1 stdout, 2 stderr, 3 the final status (a ``metav1.Status`` JSON document),
4 terminal resize; ``v5`` adds 255, a message ``[255, channel]`` that closes one stream (kubectl
sends ``[255, 0]`` when its stdin ends). Without ``v5`` stdin ends only when the connection does.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from collections.abc import Mapping, Sequence
from typing import IO, Any, Protocol

from sky_kueue.sandbox.kubelet.websocket import WebSocket, WebSocketError

#: Subprotocols served, preferred first (what the client offers decides).
SUBPROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
#: How long to wait for the client's close frame once the command is done.
CLOSE_WAIT_SECONDS = 2.0
#: Bytes read from a process pipe per message.
READ_CHUNK_BYTES = 64 * 1024


def exit_status(returncode: int) -> dict[str, Any]:
    """The channel-3 document for a finished command, as the kubelet writes it."""
    if returncode == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: {returncode}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(returncode)}]},
    }


class ProcessRegistry(Protocol):
    """Where a session reports its process, so that the kubelet can kill it with its pod."""

    def started(self, process: subprocess.Popen[bytes]) -> None: ...

    def exited(self, process: subprocess.Popen[bytes]) -> None: ...


def run_exec(
    socket: WebSocket,
    subprotocol: str,
    argv: Sequence[str],
    *,
    cwd: str,
    env: Mapping[str, str],
    stdin: bool,
    stdout: bool,
    stderr: bool,
    registry: ProcessRegistry | None = None,
) -> int:
    """Run ``argv`` and stream it over ``socket`` until it exits; returns its exit code."""
    try:
        process = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        message = f'failed to exec in container: exec: "{argv[0] if argv else ""}": {exc.strerror}'
        socket.send(bytes([ERROR]) + json.dumps({"metadata": {}, "status": "Failure", "message": message}).encode())
        socket.close()
        return 127
    if registry is not None:
        registry.started(process)
    try:
        return _stream(socket, subprotocol, process)
    finally:
        if registry is not None:
            registry.exited(process)


def _stream(socket: WebSocket, subprotocol: str, process: subprocess.Popen[bytes]) -> int:
    pumps = [
        threading.Thread(target=_pump, args=(pipe, channel, socket), daemon=True)
        for pipe, channel in ((process.stdout, STDOUT), (process.stderr, STDERR))
        if pipe is not None
    ]
    for pump in pumps:
        pump.start()
    reader = threading.Thread(
        target=_feed_stdin, args=(socket, process.stdin, subprotocol.startswith("v5"), process), daemon=True
    )
    reader.start()
    returncode = process.wait()
    for pump in pumps:
        pump.join()
    # A client that left before the end cannot be told; the command ran all the same.
    with contextlib.suppress(OSError):
        socket.send(bytes([ERROR]) + json.dumps(exit_status(returncode)).encode())
    socket.close()
    # Let the reader take the client's answering close frame before the connection goes.
    reader.join(CLOSE_WAIT_SECONDS)
    return returncode


def _pump(pipe: IO[bytes], channel: int, socket: WebSocket) -> None:
    while True:
        chunk = pipe.read1(READ_CHUNK_BYTES) if hasattr(pipe, "read1") else pipe.read(READ_CHUNK_BYTES)
        if not chunk:
            return
        try:
            socket.send(bytes([channel]) + chunk)
        except OSError:
            return  # the client is gone; let the process finish on its own


def _feed_stdin(socket: WebSocket, pipe: IO[bytes] | None, closable: bool, process: subprocess.Popen[bytes]) -> None:
    try:
        while True:
            message = socket.receive()
            if message is None:
                break
            data = message.data
            if not data:
                continue
            channel, payload = data[0], data[1:]
            if channel == STDIN and pipe is not None and payload:
                try:
                    pipe.write(payload)
                    pipe.flush()
                except BrokenPipeError:
                    pipe = None
            elif closable and channel == CLOSE and payload[:1] == bytes([STDIN]):
                break
    except (WebSocketError, OSError):
        if process.poll() is None and pipe is None:
            process.kill()
    finally:
        if pipe is not None:
            with contextlib.suppress(OSError):  # the process exited first; its stdin is gone
                pipe.close()

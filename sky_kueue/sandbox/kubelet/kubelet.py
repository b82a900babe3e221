"""A local kubelet for the sandbox: ``kubectl exec`` (and the official client's ``stream``) run
commands for a pod as local processes, in a directory of the pod's own.

Why: SkyPilot sets up its runtime on a Kubernetes cluster by running commands in the pod over
``pods/exec`` (``KubernetesCommandRunner`` in ``sky/utils/command_runner.py``); a cluster that
cannot exec stops every launch right after the pod starts. A sandbox pod is not a container:
its main command is never started (SkyPilot's would install packages on the host); each exec
runs ``argv`` with the pod's directory as ``HOME`` and working directory and the container's
environment. ``pods/log`` answers with what the pod's log file holds (empty: no main process).

Opt-in (``Sandbox(kubelet=True)``, ``sandbox up --kubelet``): anyone who can reach the
sandbox's port can run commands as the user who started it, as with a real kubelet and no
authentication. The sandbox binds 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import re
import signal
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

from sky_kueue.sandbox.apiserver import errors
from sky_kueue.sandbox.apiserver.events import EventType, StoreEvent
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.kubelet import downward, exec_session, portforward, spdy_portforward
from sky_kueue.sandbox.kubelet.websocket import WebSocket, accept_key, choose_subprotocol, offered_subprotocols

if TYPE_CHECKING:
    from sky_kueue.sandbox.containers.runtime import PodRuntime

#: ``/api/v1/namespaces/<ns>/pods/<name>/<exec|attach|portforward|log>``
STREAM_PATH = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)/(exec|attach|portforward|log)/?$")
#: Environment passed through from the sandbox process to every exec (what a shell needs).
INHERITED_ENV = ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")
LOG_FILE = "container.log"
#: How long to wait for a killed process to be reaped.
KILL_WAIT_SECONDS = 5.0
#: How often ``logs --follow`` looks for new output.
LOG_FOLLOW_POLL_SECONDS = 0.2


class StreamConnection(Protocol):
    """What the kubelet needs of the HTTP handler that received the request."""

    path: str
    headers: Mapping[str, str]
    rfile: Any
    wfile: Any
    close_connection: bool

    def respond_raw(self, code: int, body: bytes, headers: dict[str, str], content_type: str) -> None: ...

    def switch_protocols(self, headers: dict[str, str]) -> None: ...


@dataclass(frozen=True)
class StreamTarget:
    namespace: str
    name: str
    subresource: str


def match(path: str) -> StreamTarget | None:
    """The pod and streaming subresource a request path names, or None."""
    found = STREAM_PATH.match(urlsplit(path).path)
    return StreamTarget(found.group(1), found.group(2), found.group(3)) if found else None


class LocalKubelet:
    """Serves the streaming subresources of the sandbox's pods from local processes.

    Every exec'd process runs in a session of its own and is killed (its whole process group)
    when its pod is deleted or the kubelet shuts down, as a container's processes die with it.
    """

    def __init__(self, store: ObjectStore, root: pathlib.Path) -> None:
        self.store = store
        self.root = root
        #: The container runtime (containers mode): exec, logs and port-forward reach the
        #: pod's containers instead of local processes.
        self.runtime: PodRuntime | None = None
        self._lock = threading.Lock()
        self._processes: dict[tuple[str, str], set[subprocess.Popen[bytes]]] = {}
        self._unhook = store.add_commit_hook(self._on_pod_event, "pods")

    def processes(self, namespace: str, name: str) -> list[subprocess.Popen[bytes]]:
        """The pod's exec'd processes still running."""
        with self._lock:
            return [p for p in self._processes.get((namespace, name), set()) if p.poll() is None]

    def kill_pod(self, namespace: str, name: str) -> None:
        """Kill every process exec'd for the pod (its process groups)."""
        with self._lock:
            doomed = list(self._processes.pop((namespace, name), set()))
        for process in doomed:
            _kill_group(process)

    def shutdown(self) -> None:
        """Kill every process of every pod and stop following pod deletions."""
        self._unhook()
        with self._lock:
            keys = list(self._processes)
        for namespace, name in keys:
            self.kill_pod(namespace, name)

    def _on_pod_event(self, event: StoreEvent) -> None:
        if event.type is EventType.DELETED:
            meta = event.obj.get("metadata") or {}
            # Under the store lock: only hand the work off (killing may take a moment).
            threading.Thread(
                target=self.kill_pod, args=(str(meta.get("namespace", "")), str(meta.get("name", ""))), daemon=True
            ).start()

    def _registry(self, namespace: str, name: str) -> exec_session.ProcessRegistry:
        kubelet = self

        class _PodProcesses:
            def started(self, process: subprocess.Popen[bytes]) -> None:
                with kubelet._lock:
                    kubelet._processes.setdefault((namespace, name), set()).add(process)

            def exited(self, process: subprocess.Popen[bytes]) -> None:
                with kubelet._lock:
                    kubelet._processes.get((namespace, name), set()).discard(process)

        return _PodProcesses()

    def workspace(self, namespace: str, name: str) -> pathlib.Path:
        """The pod's directory (``HOME`` and working directory of its execs)."""
        path = self.root / namespace / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def serve(self, connection: StreamConnection, method: str, target: StreamTarget) -> None:
        """Answer one streaming request (raises ``ApiError`` for what the API server refuses)."""
        pod = self.store.try_get("pods", target.name, target.namespace)
        if pod is None:
            raise errors.ApiError(404, errors.Reason.NOT_FOUND, f'pods "{target.name}" not found')
        query = parse_qs(urlsplit(connection.path).query, keep_blank_values=True)
        if target.subresource == "log":
            if self.runtime is not None:
                self._container_log(connection, pod, target, query)
            else:
                self._log(connection, pod, target)
            return
        served = ("exec", "portforward") if self.runtime is not None else ("exec",)
        if target.subresource not in served:
            raise errors.ApiError(
                400,
                errors.Reason.BAD_REQUEST,
                f"pods/{target.subresource} is not served by the sandbox kubelet ({', '.join(served)} and log are)",
            )
        phase = (pod.get("status") or {}).get("phase")
        if phase != "Running":
            raise errors.ApiError(
                400,
                errors.Reason.BAD_REQUEST,
                f"unable to upgrade connection: pod {target.name} is not running ({phase})",
            )
        if target.subresource == "portforward":
            _require_websocket(connection)
            self._port_forward(connection, target, query)
            return
        container = self._container(pod, (query.get("container") or [""])[-1])
        argv = query.get("command") or []
        if not argv:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, "you must specify at least 1 command")
        _require_websocket(connection)
        subprotocol = _negotiate(connection, exec_session.SUBPROTOCOLS)
        home = self.workspace(target.namespace, target.name)
        env = self.environment(pod, container, home)
        if self.runtime is not None:
            # the command runs inside the container: its namespaces, root and environment
            argv, env = self.runtime.exec_argv(target.namespace, target.name, str(container.get("name", "")), argv)
        exec_session.run_exec(
            _accept_websocket(connection, subprotocol),
            subprotocol,
            argv,
            cwd=str(home),
            env=env,
            stdin=_flag(query, "stdin"),
            stdout=_flag(query, "stdout", default=True),
            stderr=_flag(query, "stderr", default=True),
            registry=self._registry(target.namespace, target.name),
        )

    def environment(self, pod: Mapping[str, Any], container: Mapping[str, Any], home: pathlib.Path) -> dict[str, str]:
        """What a process in the container sees: the container's env over a minimal base."""
        meta = pod.get("metadata") or {}
        env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
        env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        env.update(HOME=str(home), HOSTNAME=str(meta.get("name", "")), PWD=str(home))
        for item in container.get("env") or []:
            name = item.get("name")
            value = downward.env_value(pod, container, item) if name else None
            if value is not None:
                env[str(name)] = value
        return env

    def _container(self, pod: Mapping[str, Any], wanted: str) -> Mapping[str, Any]:
        containers = (pod.get("spec") or {}).get("containers") or []
        if not containers:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, "pod has no containers")
        if not wanted:
            return containers[0]
        for container in containers:
            if container.get("name") == wanted:
                return container
        names = " ".join(str(c.get("name")) for c in containers)
        pod_name = pod["metadata"]["name"]
        raise errors.ApiError(
            400, errors.Reason.BAD_REQUEST, f"container {wanted} is not valid for pod {pod_name}: {names}"
        )

    def _log(self, connection: StreamConnection, pod: Mapping[str, Any], target: StreamTarget) -> None:
        log = self.workspace(target.namespace, target.name) / LOG_FILE
        body = log.read_bytes() if log.exists() else b""
        connection.respond_raw(200, body, {}, "text/plain")

    def _port_forward(self, connection: StreamConnection, target: StreamTarget, query: Mapping[str, list[str]]) -> None:
        assert self.runtime is not None
        offered = offered_subprotocols(connection.headers.get("Sec-WebSocket-Protocol"))
        if spdy_portforward.SUBPROTOCOL in offered:  # kubectl: SPDY in the WebSocket, ports in its streams
            self._spdy_port_forward(connection, target)
            return
        try:
            ports = portforward.parse_ports(query.get("ports") or [])
        except ValueError as exc:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, str(exc)) from exc
        if not ports:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, "at least 1 port must be specified")
        address = self.runtime.pod_ip(target.namespace, target.name)
        if address is None:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, f"pod {target.name} has no network yet")
        subprotocol = _negotiate(connection, portforward.SUBPROTOCOLS)
        portforward.serve(_accept_websocket(connection, subprotocol), address, ports)

    def _spdy_port_forward(self, connection: StreamConnection, target: StreamTarget) -> None:
        assert self.runtime is not None
        address = self.runtime.pod_ip(target.namespace, target.name)
        if address is None:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, f"pod {target.name} has no network yet")
        socket = _accept_websocket(connection, spdy_portforward.SUBPROTOCOL)
        spdy_portforward.SpdyPortForward(socket, address).serve()

    def _container_log(
        self, connection: StreamConnection, pod: Mapping[str, Any], target: StreamTarget, query: Mapping[str, list[str]]
    ) -> None:
        """A container's output: ``container``, ``tailLines``, ``follow`` as the kubelet reads them."""
        assert self.runtime is not None
        wanted = (query.get("container") or [""])[-1]
        containers = (pod.get("spec") or {}).get("containers") or []
        if not wanted and len(containers) > 1:
            names = " ".join(str(c.get("name")) for c in containers)
            raise errors.ApiError(
                400,
                errors.Reason.BAD_REQUEST,
                f"a container name must be specified for pod {target.name}, choose one of: [{names}]",
            )
        container = str(self._container(pod, wanted).get("name", ""))
        path = self.runtime.log_path(target.namespace, target.name, container)
        tail_text = (query.get("tailLines") or [""])[-1]
        try:
            tail = int(tail_text) if tail_text else None
        except ValueError as exc:
            raise errors.ApiError(400, errors.Reason.BAD_REQUEST, f"invalid tailLines {tail_text!r}") from exc
        body = path.read_bytes() if path.exists() else b""
        if tail is not None:
            lines = body.splitlines(keepends=True)
            body = b"".join(lines[-tail:]) if tail > 0 else b""
        if not _flag(query, "follow"):
            connection.respond_raw(200, body, {}, "text/plain")
            return
        connection.close_connection = True
        connection.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n")
        offset = path.stat().st_size if path.exists() else 0
        try:
            if body:
                _write_chunk(connection.wfile, body)
            while True:
                done = self.runtime.is_terminated(target.namespace, target.name, container)
                size = path.stat().st_size if path.exists() else 0
                if size > offset:
                    with open(path, "rb") as handle:
                        handle.seek(offset)
                        data = handle.read(size - offset)
                    offset = size
                    _write_chunk(connection.wfile, data)
                elif done:
                    break
                else:
                    time.sleep(LOG_FOLLOW_POLL_SECONDS)
            connection.wfile.write(b"0\r\n\r\n")
            connection.wfile.flush()
        except OSError:
            return  # the client stopped following


def _require_websocket(connection: StreamConnection) -> None:
    if "websocket" not in (connection.headers.get("Upgrade") or "").lower():
        raise errors.ApiError(
            400, errors.Reason.BAD_REQUEST, "the sandbox kubelet streams over WebSockets only (no SPDY)"
        )


def _negotiate(connection: StreamConnection, supported: tuple[str, ...]) -> str:
    """The subprotocol to answer with, or a 400 naming the ones served."""
    subprotocol = choose_subprotocol(connection.headers.get("Sec-WebSocket-Protocol"), supported)
    if subprotocol is None:
        raise errors.ApiError(
            400,
            errors.Reason.BAD_REQUEST,
            f"unsupported WebSocket subprotocol; offer one of {', '.join(supported)}",
        )
    return subprotocol


def _accept_websocket(connection: StreamConnection, subprotocol: str) -> WebSocket:
    """Answer the upgrade with ``subprotocol`` (101) and take the connection over as a WebSocket."""
    connection.switch_protocols(
        {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Accept": accept_key(connection.headers.get("Sec-WebSocket-Key") or ""),
            "Sec-WebSocket-Protocol": subprotocol,
        }
    )
    connection.close_connection = True
    return WebSocket(connection.rfile, connection.wfile)


def _write_chunk(wfile: Any, data: bytes) -> None:
    wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    wfile.flush()


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):  # it exited meanwhile
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(KILL_WAIT_SECONDS)


def _flag(query: Mapping[str, list[str]], name: str, default: bool = False) -> bool:
    values = query.get(name)
    if not values:
        return default
    return values[-1].lower() in ("1", "true", "t")

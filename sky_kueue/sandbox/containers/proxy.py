"""An HTTP(S) proxy on the host side of the pod network, open to package registries only.

Why: pods have no route off the machine (no NAT, no iptables: the sandbox changes nothing on
the host outside the namespaces it creates), yet SkyPilot's runtime setup runs apt and pip in
the pod. The proxy listens on the pod network's gateway address; containers get
``http_proxy``/``https_proxy`` (and apt a proxy setting, since ``sudo`` drops the environment).
``CONNECT host:443`` is tunnelled and an absolute-URI ``GET`` forwarded, both only for
:data:`ALLOWED_HOSTS`; anything else gets 403 and a log line.
"""

from __future__ import annotations

import contextlib
import logging
import select
import socket
import socketserver
from collections.abc import Iterable
from urllib.parse import urlsplit

from sky_kueue.sandbox.containers.tcp_server import BackgroundTcpServer

LOG = logging.getLogger(__name__)

#: Hosts pods may reach through the proxy (Debian's archives and PyPI).
ALLOWED_HOSTS = frozenset({"deb.debian.org", "security.debian.org", "pypi.org", "files.pythonhosted.org"})
#: Ports pods may reach on them.
ALLOWED_PORTS = frozenset({80, 443})
DEFAULT_PROXY_PORT = 3128
CONNECT_TIMEOUT_SECONDS = 30.0
#: A tunnel with no traffic either way for this long is closed.
IDLE_TIMEOUT_SECONDS = 300.0
HEADER_LIMIT_BYTES = 64 * 1024
CHUNK_BYTES = 64 * 1024


class _Handler(socketserver.BaseRequestHandler):
    server: RegistryProxy

    def handle(self) -> None:
        client: socket.socket = self.request
        client.settimeout(CONNECT_TIMEOUT_SECONDS)
        head = _read_head(client)
        if head is None:
            return
        request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
        parts = request_line.split()
        if len(parts) != 3:
            _reply(client, 400, "Bad Request")
            return
        method, target, _version = parts
        if method == "CONNECT":
            host, _, port_text = target.rpartition(":")
            port = int(port_text) if port_text.isdigit() else 443
        else:
            url = urlsplit(target)
            if url.scheme != "http" or not url.hostname:
                _reply(client, 400, "Bad Request")
                return
            host, port = url.hostname, url.port or 80
        if not self.server.allows(host, port):
            LOG.warning("registry proxy refused %s %s from %s", method, target, self.client_address[0])
            self.server.refused.append(f"{method} {target}")
            _reply(client, 403, "Forbidden", f"sandbox proxy: {host}:{port} is not a package registry\n")
            return
        try:
            upstream = socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_SECONDS)
        except OSError as exc:
            _reply(client, 502, "Bad Gateway", f"sandbox proxy: {host}:{port}: {exc}\n")
            return
        with upstream:
            if method == "CONNECT":
                client.sendall(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                rest = head.split(b"\r\n\r\n", 1)[1]
                if rest:
                    upstream.sendall(rest)
            else:
                upstream.sendall(_origin_form(head))
            pipe_both_ways(client, upstream, IDLE_TIMEOUT_SECONDS)


def _read_head(client: socket.socket) -> bytes | None:
    data = b""
    while b"\r\n\r\n" not in data:
        try:
            chunk = client.recv(CHUNK_BYTES)
        except OSError:
            return None
        if not chunk or len(data) > HEADER_LIMIT_BYTES:
            return None
        data += chunk
    return data


def _origin_form(head: bytes) -> bytes:
    """The request as the origin server expects it: path-only target, no proxy headers."""
    line, _, rest = head.partition(b"\r\n")
    method, target, version = line.split(b" ", 2)
    url = urlsplit(target.decode("latin-1"))
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers, _, body = rest.partition(b"\r\n\r\n")
    kept = [h for h in headers.split(b"\r\n") if h and not h.lower().startswith((b"proxy-", b"connection:"))]
    kept.append(b"Connection: close")
    return b" ".join([method, path.encode(), version]) + b"\r\n" + b"\r\n".join(kept) + b"\r\n\r\n" + body


def pipe_both_ways(a: socket.socket, b: socket.socket, idle_timeout_seconds: float | None) -> None:
    """Copy bytes both ways until either side closes (or nothing moves for the timeout)."""
    a.settimeout(None)
    b.settimeout(None)
    peers = {a: b, b: a}
    while True:
        readable, _, _ = select.select(list(peers), [], [], idle_timeout_seconds)
        if not readable:
            return
        for source in readable:
            try:
                chunk = source.recv(CHUNK_BYTES)
            except OSError:
                return
            if not chunk:
                return
            try:
                peers[source].sendall(chunk)
            except OSError:
                return


def _reply(client: socket.socket, code: int, reason: str, body: str = "") -> None:
    payload = body.encode()
    with contextlib.suppress(OSError):
        client.sendall(
            f"HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {len(payload)}\r\n"
            f"Connection: close\r\n\r\n".encode()
            + payload
        )


class RegistryProxy(BackgroundTcpServer):
    """The proxy server; ``start()`` serves in a thread, ``stop()`` closes it."""

    thread_name = "sky-kueue-registry-proxy"

    def __init__(self, host: str, port: int = DEFAULT_PROXY_PORT, allowed_hosts: Iterable[str] = ALLOWED_HOSTS):
        super().__init__((host, port), _Handler)
        self.allowed_hosts = frozenset(h.lower() for h in allowed_hosts)
        #: Exact ``(host, port)`` pairs also tunnelled (see :meth:`allow_endpoint`).
        self.allowed_endpoints: set[tuple[str, int]] = set()
        self.refused: list[str] = []

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}"

    def allow_endpoint(self, host: str, port: int) -> None:
        """Tunnel to ``host:port`` too: the API server's relay on the gateway. The official
        Python client sends in-cluster requests through ``https_proxy`` whatever ``no_proxy``
        says (kubernetes 35.0.0's ``Configuration.__init__`` reads ``NO_PROXY`` and then resets
        it to None), so a pod's controller reaches the API server only through the proxy."""
        self.allowed_endpoints.add((host.lower(), port))

    def allows(self, host: str, port: int) -> bool:
        if (host.lower(), port) in self.allowed_endpoints:
            return True
        return host.lower().rstrip(".") in self.allowed_hosts and port in ALLOWED_PORTS

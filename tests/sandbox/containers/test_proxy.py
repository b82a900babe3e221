"""The registry proxy: package registries only; anything else is refused with 403 and logged."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from sky_kueue.sandbox.containers.proxy import RegistryProxy, _origin_form


@pytest.fixture
def proxy() -> Iterator[RegistryProxy]:
    server = RegistryProxy("127.0.0.1", 0).start()
    yield server
    server.stop()


def _ask(proxy: RegistryProxy, request: bytes) -> bytes:
    host, port = proxy.server_address[:2]
    with socket.create_connection((str(host), int(port)), timeout=10) as conn:
        conn.sendall(request)
        reply = b""
        while chunk := conn.recv(4096):
            reply += chunk
    return reply


def test_connect_to_a_non_registry_host_is_refused_and_recorded(proxy: RegistryProxy) -> None:
    reply = _ask(proxy, b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 403 ")
    assert b"example.com:443 is not a package registry" in reply
    assert proxy.refused == ["CONNECT example.com:443"]


def test_plain_get_to_a_non_registry_host_and_odd_ports_are_refused(proxy: RegistryProxy) -> None:
    assert _ask(proxy, b"GET http://example.org/x HTTP/1.1\r\nHost: example.org\r\n\r\n").startswith(b"HTTP/1.1 403 ")
    assert _ask(proxy, b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n").startswith(b"HTTP/1.1 403 ")
    assert proxy.allows("deb.debian.org", 80) and proxy.allows("PyPI.org.", 443)


def test_a_forwarded_get_uses_the_origin_form_and_drops_proxy_headers() -> None:
    head = (
        b"GET http://deb.debian.org/debian/dists?x=1 HTTP/1.1\r\n"
        b"Host: deb.debian.org\r\nProxy-Connection: keep-alive\r\n\r\n"
    )
    forwarded = _origin_form(head)
    assert forwarded.startswith(b"GET /debian/dists?x=1 HTTP/1.1\r\n")
    assert b"Proxy-Connection" not in forwarded and b"Connection: close" in forwarded

"""How a sandbox pod reaches the API server: an HTTPS listener, the ``KUBERNETES_SERVICE_*``
environment and ServiceAccount credentials, together.

Why together: ``load_incluster_config`` needs all three to agree - the address in the
environment must be one the serving certificate names, verified with the ``ca.crt`` in the
pod's files, and the ``token`` beside it must be one the server authenticates. The sandbox
keeps its plain-HTTP listener on 127.0.0.1 for its kubeconfig (kubectl, tests, SkyPilot on
the host); pods get a second, HTTPS listener, also on 127.0.0.1: with containers, the pod
network's relay (``sandbox.containers.relay``) forwards the gateway's port to it unchanged, and
:meth:`InClusterAccess.add_addresses` names the gateway in the certificate once the network
exists.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sky_kueue.sandbox.apiserver.server import ApiServer
from sky_kueue.sandbox.workloads import certificates
from sky_kueue.sandbox.workloads.service_accounts import ServiceAccountTokens

#: The loopback address, always in the serving certificate (process-mode pods and tests dial it).
LOOPBACK = "127.0.0.1"


@dataclass
class InClusterAccess:
    """The HTTPS listener pods use, its certificate and the tokens it accepts."""

    server: ApiServer
    host: str
    port: int
    authority: certificates.CertificateAuthority
    certificate: certificates.ServingCertificate
    context: ssl.SSLContext
    tokens: ServiceAccountTokens
    addresses: list[str] = field(default_factory=list)
    _closed: bool = field(default=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_addresses(self, addresses: Iterable[str]) -> None:
        """Name more addresses in the serving certificate (e.g. the pod network's gateway,
        which a relay forwards to this listener); new connections get the new certificate."""
        with self._lock:
            wanted = list(dict.fromkeys([*self.addresses, *addresses]))
            if wanted == self.addresses:
                return
            self.certificate = self.authority.issue(wanted)
            self.certificate.load_into(self.context)
            self.addresses = wanted

    def environment(self) -> dict[str, str]:
        """The variables a kubelet sets in every container for the ``kubernetes`` Service."""
        return {
            "KUBERNETES_SERVICE_HOST": self.host,
            "KUBERNETES_SERVICE_PORT": str(self.port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(self.port),
            "KUBERNETES_PORT": f"tcp://{self.host}:{self.port}",
            f"KUBERNETES_PORT_{self.port}_TCP": f"tcp://{self.host}:{self.port}",
        }

    def pod_files(self, pod: Mapping[str, Any]) -> dict[str, bytes]:
        """The pod's ServiceAccount files (see :meth:`ServiceAccountTokens.pod_files`)."""
        return self.tokens.pod_files(pod)

    def close(self) -> None:
        """Stop authenticating (the listener stops with the server)."""
        if self._closed:
            return
        self._closed = True
        self.tokens.close()
        if self.server.authenticator == self.tokens.authenticate:
            self.server.authenticator = None


def serve(
    server: ApiServer, host: str = LOOPBACK, port: int = 0, *, extra_addresses: Iterable[str] = ()
) -> InClusterAccess:
    """Start HTTPS on ``host:port`` for ``server`` (started), with a new CA, and authenticate
    ServiceAccount tokens on every listener.

    Raises:
        OSError: the address cannot be bound.
        RuntimeError: the server is not started.
    """
    addresses = list(dict.fromkeys([host, LOOPBACK, *extra_addresses]))
    authority = certificates.CertificateAuthority()
    certificate = authority.issue(addresses)
    context = certificate.server_context()
    bound_port = server.add_listener(host, port, ssl_context=context)
    tokens = ServiceAccountTokens(server.store, authority.ca_pem)
    server.authenticator = tokens.authenticate
    return InClusterAccess(server, host, bound_port, authority, certificate, context, tokens, addresses)

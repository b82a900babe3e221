"""``/metrics`` for a sky-kueue process: one Prometheus endpoint per registry, on its own port.

Why a registry per instance (never ``prometheus_client``'s global one): tests, the demo and
a benchmark run several controllers and policy servers in one process; each must count only
what it did, and two instances must not fail on registering the same name twice.

Why a separate port rather than a path on the policy server: the controller has no HTTP
server of its own, and a scrape must not queue behind policy requests (SkyPilot fails
closed on a slow policy). Both bind 127.0.0.1 unless told otherwise, like the policy server;
the controller's Deployment binds the pod's addresses so that Prometheus can reach it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

#: Where ``--metrics-host`` binds by default (the loopback, as the policy server).
DEFAULT_METRICS_HOST = "127.0.0.1"
#: The metrics port the controller's Deployment uses (``configs/controller/deployment.yaml``).
DEPLOYMENT_METRICS_PORT = 9464
#: How long :meth:`MetricsServer.stop` waits for the serving thread.
STOP_JOIN_SECONDS = 5.0


@dataclass
class MetricsServer:
    """A running ``/metrics`` endpoint (stop it with :meth:`stop`)."""

    httpd: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.httpd.server_address[1])

    @property
    def url(self) -> str:
        host = str(self.httpd.server_address[0])
        return f"http://{f'[{host}]' if ':' in host else host}:{self.port}/metrics"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(STOP_JOIN_SECONDS)


def serve_metrics(registry: CollectorRegistry, host: str = DEFAULT_METRICS_HOST, port: int = 0) -> MetricsServer:
    """Serves ``registry`` at ``http://host:port/metrics`` on a daemon thread (port 0: any free one).

    Raises:
        OSError: the address cannot be bound.
    """
    httpd, thread = start_http_server(port, addr=host, registry=registry)
    return MetricsServer(httpd, thread)

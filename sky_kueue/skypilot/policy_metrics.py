"""The policy server's Prometheus metrics: requests by verdict, latency, and view staleness.

Named as Kueue names its own (``pkg/metrics/metrics.go``: base units, ``_total`` counters,
a ``reason`` label), under ``sky_kueue_policy_``; one registry per server (see
:mod:`sky_kueue.metrics_http`). The rejection reason is the decision's stable
:class:`~sky_kueue.skypilot.decision.RejectionCode` value, never the message (a message
names the task and would make one series per request).
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

PREFIX = "sky_kueue_policy"
#: Latency buckets in seconds: a decision from a warm cache takes about a millisecond; a cold
#: config load or a first cluster sync takes seconds.
LATENCY_BUCKETS_SECONDS: tuple[float, ...] = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class Verdict(str, enum.Enum):
    """How the server answered one policy request."""

    PLACED = "placed"
    PASSED_THROUGH = "passed-through"
    REJECTED = "rejected"
    MALFORMED = "malformed"
    UNAUTHORIZED = "unauthorized"
    BUSY = "busy"
    ERROR = "error"


@runtime_checkable
class StalenessSource(Protocol):
    """Views that know how long ago each context last reflected its cluster."""

    def staleness(self) -> Mapping[str, float]: ...


class PolicyMetrics:
    """The policy server's metrics and their registry.

    Args:
        views: returns the server's current views without loading anything (None: not loaded
            yet); live views report their staleness per context.
    """

    def __init__(self, views: Callable[[], object | None] = lambda: None) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            f"{PREFIX}_requests_total",
            "Policy requests answered, per verdict and rejection reason (the RejectionCode; empty unless rejected)",
            ["verdict", "reason"],
            registry=self.registry,
        )
        self.latency = Histogram(
            f"{PREFIX}_request_duration_seconds",
            "Seconds from a policy request's arrival to its answer, per verdict",
            ["verdict"],
            buckets=LATENCY_BUCKETS_SECONDS,
            registry=self.registry,
        )
        self.registry.register(_StalenessCollector(views))

    def answered(self, verdict: Verdict, started: float, reason: str = "") -> None:
        """Counts one answer; ``started`` is its ``time.perf_counter()`` on arrival."""
        self.requests.labels(verdict=verdict.value, reason=reason).inc()
        self.latency.labels(verdict=verdict.value).observe(max(0.0, time.perf_counter() - started))


class _StalenessCollector(Collector):
    def __init__(self, views: Callable[[], object | None]) -> None:
        self._views = views

    def collect(self) -> Iterator[Metric]:
        gauge = GaugeMetricFamily(
            f"{PREFIX}_view_staleness_seconds",
            "Seconds since the live view of a kubeconfig context last reflected its cluster "
            "(0 while it does; absent for an offline view: manifests or the plugin config)",
            labels=["context"],
        )
        views = self._views()
        if isinstance(views, StalenessSource):
            for context, seconds in sorted(views.staleness().items()):
                gauge.add_metric([context], seconds)
        yield gauge

"""Queue positions from Kueue's own pending-workloads API, when it is served.

Why prefer it: the visibility API (``apis/visibility/v1beta2`` in Kueue) reports Kueue's live queue
order, which
includes state no object shows: the sticky preemptor at the head of a BestEffortFIFO queue,
admission-fair-sharing usage, in-flight workloads. Computing positions with the model is the
fallback when the API is not served, forbidden, or failing.

It is a request-per-query API, so it is called on demand (one GET per ClusterQueue shown),
never on a timer. Positions are 0-based over the whole ClusterQueue
(``positionInClusterQueue``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.mirror import rest
from sky_kueue.mirror.discovery import VISIBILITY_GROUP

log = logging.getLogger(__name__)

#: Most pending workloads asked for per ClusterQueue (Kueue's default page is 1000).
PENDING_LIMIT_WORKLOADS = 1000


@dataclass(frozen=True)
class PendingPosition:
    """One entry of a ClusterQueue's pending list."""

    namespace: str
    name: str
    priority: int
    local_queue: str
    position_in_cluster_queue: int
    position_in_local_queue: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _entry(item: Any) -> PendingPosition | None:
    if not isinstance(item, dict):
        return None
    meta = item.get("metadata") or {}
    try:
        return PendingPosition(
            namespace=str(meta.get("namespace", "")),
            name=str(meta.get("name", "")),
            priority=int(item.get("priority") or 0),
            local_queue=str(item.get("localQueueName", "")),
            position_in_cluster_queue=int(item.get("positionInClusterQueue", 0)),
            position_in_local_queue=int(item.get("positionInLocalQueue", 0)),
        )
    except (TypeError, ValueError):
        return None


def pending_in_cluster_queue(
    api_client: client.ApiClient, version: str, cluster_queue: str, *, limit: int = PENDING_LIMIT_WORKLOADS
) -> list[PendingPosition]:
    """The pending workloads of one ClusterQueue in Kueue's order.

    Raises:
        ApiException: an error answer (403 without RBAC on ``clusterqueues/pendingworkloads``).
        urllib3.exceptions.HTTPError: transport failures.
    """
    document = rest.get_json(
        api_client,
        f"/apis/{VISIBILITY_GROUP}/{version}/clusterqueues/{cluster_queue}/pendingworkloads",
        {"limit": limit, "offset": 0},
    )
    items = document.get("items") if isinstance(document, dict) else None
    return [entry for entry in (_entry(item) for item in items or []) if entry is not None]


def positions(
    api_client: client.ApiClient, version: str | None, cluster_queues: Iterable[str]
) -> dict[str, int] | None:
    """``namespace/name`` -> position in its ClusterQueue, or None when the API cannot be used.

    One failing ClusterQueue makes the whole answer None, so a view never mixes Kueue's
    positions with the model's.
    """
    if version is None:
        return None
    out: dict[str, int] = {}
    for cq in cluster_queues:
        try:
            entries = pending_in_cluster_queue(api_client, version, cq)
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            status = exc.status if isinstance(exc, ApiException) else type(exc).__name__
            log.info("visibility API unusable for ClusterQueue %s (%s); using the model's positions", cq, status)
            return None
        for entry in entries:
            out[entry.key] = entry.position_in_cluster_queue
    return out

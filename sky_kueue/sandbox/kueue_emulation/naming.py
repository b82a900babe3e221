"""Names and hashes Kueue gives to the Workloads of jobs (``jobframework/workload_names.go``)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

#: Kueue keeps this many hex characters of the owner hash.
NAME_HASH_LENGTH_CHARS = 5
#: Workload names are capped at the DNS subdomain length.
MAX_NAME_LENGTH_CHARS = 253
ROLE_HASH_LENGTH_CHARS = 8


def workload_name(kind: str, group: str, owner_name: str, owner_uid: str) -> str:
    """``<kind>-<name>-<hash5>``, the hash being sha1 of kind, group, name and uid."""
    digest = hashlib.sha1("\n".join([kind, group, owner_name, owner_uid]).encode()).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"
    prefix = prefix[: MAX_NAME_LENGTH_CHARS - NAME_HASH_LENGTH_CHARS - 1]
    return f"{prefix}-{digest[:NAME_HASH_LENGTH_CHARS]}"


def role_hash(pod_spec: Mapping[str, Any]) -> str:
    """A stable hash of a pod's shape: pods with the same shape form one pod set of a group."""

    def containers(items: Any) -> list[Any]:
        return [
            {"resources": c.get("resources"), "ports": c.get("ports")} for c in (items or []) if isinstance(c, Mapping)
        ]

    shape = {
        "containers": containers(pod_spec.get("containers")),
        "initContainers": containers(pod_spec.get("initContainers")),
        "nodeSelector": pod_spec.get("nodeSelector"),
        "tolerations": pod_spec.get("tolerations"),
        "affinity": pod_spec.get("affinity"),
    }
    return hashlib.sha256(json.dumps(shape, sort_keys=True, default=str).encode()).hexdigest()[:ROLE_HASH_LENGTH_CHARS]

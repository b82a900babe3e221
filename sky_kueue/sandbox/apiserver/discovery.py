"""Discovery documents: how kubectl and dynamic clients learn what the server serves.

Why complete: ``kubectl get cq`` works only if ``/apis/kueue.x-k8s.io/v1beta2`` lists
``clusterqueues`` with its short names, scope, verbs and the ``clusterqueues/status``
subresource; the preferred version in ``/apis`` decides which version kubectl reads; the
``/version`` document decides which server-side features kubectl assumes. The aggregated
discovery format (``apidiscovery.k8s.io/v2``) is not served: clients that ask for it accept
the legacy documents in its place.
"""

from __future__ import annotations

from typing import Any

from sky_kueue.sandbox.apiserver.resources import STANDARD_VERBS, STATUS_VERBS, ResourceRegistry

#: What ``/version`` reports; a recent minor so kubectl uses its current code paths.
SERVER_MAJOR_VERSION = "1"
SERVER_MINOR_VERSION = "32"
SERVER_GIT_VERSION = "v1.32.0-sky-kueue-sandbox"


def version_info() -> dict[str, Any]:
    return {
        "major": SERVER_MAJOR_VERSION,
        "minor": SERVER_MINOR_VERSION,
        "gitVersion": SERVER_GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "n/a (python)",
        "compiler": "n/a",
        "platform": "linux/amd64",
    }


def core_versions(server_address: str) -> dict[str, Any]:
    """``/api``."""
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{version}", "version": version} for version in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def group_list(registry: ResourceRegistry) -> dict[str, Any]:
    """``/apis``: every non-core group with its versions, preferred first."""
    groups = [_group(name, versions) for name, versions in sorted(registry.groups().items()) if name]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def group(registry: ResourceRegistry, name: str) -> dict[str, Any] | None:
    """``/apis/<group>``, or None if the group is not served."""
    versions = registry.groups().get(name)
    if not name or not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group(name, versions)}


def resource_list(registry: ResourceRegistry, group_name: str, version: str) -> dict[str, Any] | None:
    """``/api/v1`` or ``/apis/<group>/<version>``, or None if nothing is served there."""
    served = registry.in_group_version(group_name, version)
    if not served:
        return None
    resources: list[dict[str, Any]] = []
    for resource in sorted(served, key=lambda r: r.plural):
        entry: dict[str, Any] = {
            "name": resource.plural,
            "singularName": resource.singular,
            "namespaced": resource.namespaced,
            "kind": resource.kind,
            "verbs": list(STANDARD_VERBS),
        }
        if resource.short_names:
            entry["shortNames"] = list(resource.short_names)
        if resource.categories:
            entry["categories"] = list(resource.categories)
        resources.append(entry)
        for subresource in resource.subresources:
            resources.append(
                {
                    "name": f"{resource.plural}/{subresource}",
                    "singularName": "",
                    "namespaced": resource.namespaced,
                    "kind": resource.kind,
                    "verbs": list(STATUS_VERBS),
                }
            )
    group_version = f"{group_name}/{version}" if group_name else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }

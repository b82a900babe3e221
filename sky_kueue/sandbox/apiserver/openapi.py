"""OpenAPI v3 documents, enough for kubectl to validate what it applies.

Why: ``kubectl apply``/``create`` validate by default (``--validate=strict``). kubectl 1.32 first
asks the server's OpenAPI v3 whether the resource's PATCH operation takes the ``fieldValidation``
query parameter; if it does, kubectl leaves validation to the server and sends
``fieldValidation=Strict``; otherwise it validates client-side against the schemas. Without
``/openapi/v3`` it refuses to apply at all unless told ``--validate=false``.

What is served (the shape of kube-apiserver's, trimmed): ``/openapi/v3`` lists one document per
served group-version, each at ``/openapi/v3/<api/v1 | apis/<group>/<version>>?hash=...``; a
document has the resource paths, every PATCH operation carrying
``x-kubernetes-group-version-kind`` and the ``fieldValidation`` parameter, and a schema per kind
with ``x-kubernetes-group-version-kind`` that keeps unknown fields (the sandbox does not hold
the Kubernetes type schemas; like a CRD without a structural schema, it accepts any fields and
stores them as given).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sky_kueue.sandbox.apiserver.resources import ResourceRegistry, ResourceType

#: The prefix of every OpenAPI v3 path.
OPENAPI_V3_PREFIX = "/openapi/v3"
#: Query parameters of a write that kubectl looks for; ``fieldValidation`` is the one it needs.
_WRITE_PARAMETERS = ("dryRun", "fieldManager", "fieldValidation")


def group_version_key(group: str, version: str) -> str:
    """``api/v1`` for the core group, ``apis/<group>/<version>`` otherwise."""
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def index(registry: ResourceRegistry) -> dict[str, Any]:
    """``/openapi/v3``: where each group-version's document is (with a content hash, as kubectl caches by it)."""
    paths = {}
    for group, versions in sorted(registry.groups().items()):
        for version in versions:
            key = group_version_key(group, version)
            digest = hashlib.sha256(json.dumps(document(registry, group, version), sort_keys=True).encode()).hexdigest()
            paths[key] = {"serverRelativeURL": f"{OPENAPI_V3_PREFIX}/{key}?hash={digest[:32].upper()}"}
    return {"paths": paths}


def document_for_path(registry: ResourceRegistry, path: str) -> dict[str, Any] | None:
    """The document at ``path`` (without query), the index for ``/openapi/v3``, or None."""
    trimmed = path.rstrip("/")
    if trimmed == OPENAPI_V3_PREFIX:
        return index(registry)
    if not trimmed.startswith(OPENAPI_V3_PREFIX + "/"):
        return None
    parts = trimmed[len(OPENAPI_V3_PREFIX) + 1 :].split("/")
    if len(parts) == 2 and parts[0] == "api":
        group, version = "", parts[1]
    elif len(parts) == 3 and parts[0] == "apis":
        group, version = parts[1], parts[2]
    else:
        return None
    if not registry.in_group_version(group, version):
        return None
    return document(registry, group, version)


def document(registry: ResourceRegistry, group: str, version: str) -> dict[str, Any]:
    """The OpenAPI v3 document of one group-version."""
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    for resource in sorted(registry.in_group_version(group, version), key=lambda r: r.plural):
        gvk = {"group": group, "version": version, "kind": resource.kind}
        schema_name = _schema_name(resource, group, version)
        schemas[schema_name] = {
            "type": "object",
            "x-kubernetes-group-version-kind": [gvk],
            "x-kubernetes-preserve-unknown-fields": True,
        }
        reference = {"$ref": f"#/components/schemas/{schema_name}"}
        for item_path, collection_path in _paths(resource, group, version):
            paths[collection_path] = {
                "get": _operation("list", gvk, reference),
                "post": _operation("create", gvk, reference, writes=True),
            }
            paths[item_path] = {
                "get": _operation("read", gvk, reference),
                "put": _operation("replace", gvk, reference, writes=True),
                "patch": _operation("patch", gvk, reference, writes=True),
                "delete": _operation("delete", gvk, reference),
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (sky-kueue sandbox)", "version": "v1.32.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _schema_name(resource: ResourceType, group: str, version: str) -> str:
    prefix = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
    return f"{prefix}.{version}.{resource.kind}"


def _paths(resource: ResourceType, group: str, version: str) -> list[tuple[str, str]]:
    base = f"/{group_version_key(group, version)}"
    if resource.namespaced:
        collection = f"{base}/namespaces/{{namespace}}/{resource.plural}"
    else:
        collection = f"{base}/{resource.plural}"
    return [(f"{collection}/{{name}}", collection)]


def _operation(action: str, gvk: dict[str, str], reference: dict[str, str], *, writes: bool = False) -> dict[str, Any]:
    operation: dict[str, Any] = {
        "operationId": f"{action}{gvk['kind']}",
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}},
    }
    if writes:
        operation["parameters"] = [
            {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for name in _WRITE_PARAMETERS
        ]
        operation["requestBody"] = {"content": {"application/json": {"schema": reference}}, "required": True}
    return operation

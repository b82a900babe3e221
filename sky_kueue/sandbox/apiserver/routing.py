"""Request routing: from a method and URL path to what is being asked of which resource.

Why spelled out: the apiserver's URL space has a few irregularities clients depend on — the
core group lives under ``/api/v1`` and the others under ``/apis/<group>/<version>``; a
collection may be addressed across all namespaces or inside one; ``/api/v1/namespaces/<n>``
is the Namespace object itself while ``/api/v1/namespaces/<n>/pods`` is a collection inside
it; and the same GET is a get, a list or a watch depending on the name and ``?watch``. This
module only parses; it does not touch the store.
"""

from __future__ import annotations

import dataclasses
import enum

from sky_kueue.sandbox.apiserver import errors
from sky_kueue.sandbox.apiserver.faults import RequestInfo
from sky_kueue.sandbox.apiserver.resources import ResourceRegistry, ResourceType

_TRUE_VALUES = frozenset({"true", "1"})


class PathKind(str, enum.Enum):
    """Which kind of endpoint a path addresses."""

    RESOURCE = "resource"
    DISCOVERY_CORE = "discovery-core"  # /api
    DISCOVERY_GROUPS = "discovery-groups"  # /apis
    DISCOVERY_GROUP = "discovery-group"  # /apis/<group>
    DISCOVERY_RESOURCES = "discovery-resources"  # /api/v1, /apis/<group>/<version>
    VERSION = "version"
    HEALTH = "health"
    OPENAPI = "openapi"
    UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class Route:
    """A parsed request path; resource fields are set only for ``PathKind.RESOURCE``."""

    kind: PathKind
    group: str = ""
    version: str = ""
    resource: ResourceType | None = None
    namespace: str = ""
    name: str = ""
    subresource: str = ""

    def request_info(self, method: str, watch: bool) -> RequestInfo:
        """The Kubernetes verb and coordinates of this request (for faults and the log)."""
        if self.kind is not PathKind.RESOURCE or self.resource is None:
            return RequestInfo(verb=method.lower())
        return RequestInfo(
            verb=verb_for(method, bool(self.name), watch),
            resource=self.resource.plural,
            group=self.group,
            version=self.version,
            namespace=self.namespace,
            name=self.name,
            subresource=self.subresource,
        )


def is_true(value: str | None) -> bool:
    """Query booleans as the apiserver parses them (``watch=true``, ``watch=True``, ``watch=1``)."""
    return value is not None and value.lower() in _TRUE_VALUES


def verb_for(method: str, has_name: bool, watch: bool) -> str:
    """The Kubernetes verb of a resource request."""
    method = method.upper()
    if method == "GET":
        if watch:
            return "watch"
        return "get" if has_name else "list"
    if method == "POST":
        return "create"
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if has_name else "deletecollection"
    return method.lower()


_HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/livez"})


def route(path: str, registry: ResourceRegistry) -> Route:
    """Parses a URL path (without query string).

    Raises:
        ApiError: 404 for a resource path naming an unserved resource or version.
    """
    trimmed = path.rstrip("/") or "/"
    if trimmed in _HEALTH_PATHS or trimmed.startswith(("/healthz/", "/readyz/", "/livez/")):
        return Route(PathKind.HEALTH)
    if trimmed == "/version":
        return Route(PathKind.VERSION)
    if trimmed.startswith("/openapi"):
        return Route(PathKind.OPENAPI)
    parts = [part for part in trimmed.split("/") if part]
    if not parts:
        return Route(PathKind.UNKNOWN)
    if parts[0] == "api":
        if len(parts) == 1:
            return Route(PathKind.DISCOVERY_CORE)
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) == 1:
            return Route(PathKind.DISCOVERY_GROUPS)
        if len(parts) == 2:
            return Route(PathKind.DISCOVERY_GROUP, group=parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Route(PathKind.UNKNOWN)
    if not rest:
        return Route(PathKind.DISCOVERY_RESOURCES, group=group, version=version)
    return _resource_route(group, version, rest, registry)


def _resource_route(group: str, version: str, rest: list[str], registry: ResourceRegistry) -> Route:
    namespace = ""
    # /namespaces/<ns>/<plural>[/<name>[/<sub>]] addresses a namespaced collection, unless the
    # segment after <ns> is one of the Namespace object's own subresources.
    if rest[0] == "namespaces" and len(rest) >= 3 and not group:
        namespace_type = registry.for_url(group, version, "namespaces")
        if len(rest) == 3 and rest[2] in (*namespace_type.subresources, "finalize"):
            return Route(PathKind.RESOURCE, group, version, namespace_type, "", rest[1], rest[2])
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise errors.ApiError(404, errors.Reason.NOT_FOUND, "the server could not find the requested resource")
    resource = registry.for_url(group, version, rest[0])
    if namespace and not resource.namespaced:
        raise errors.ApiError(
            404,
            errors.Reason.NOT_FOUND,
            f"the server could not find the requested resource ({resource.plural})",
        )
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and subresource not in resource.subresources:
        raise errors.ApiError(
            404,
            errors.Reason.NOT_FOUND,
            f"the server could not find the requested resource ({resource.plural}/{subresource})",
        )
    return Route(PathKind.RESOURCE, group, version, resource, namespace, name, subresource)

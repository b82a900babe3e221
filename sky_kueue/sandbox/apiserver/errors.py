"""API errors, shaped as the Kubernetes API server reports them.

Why a single exception type: every failure the store or the HTTP layer can produce ends up
as a ``Status`` object with an HTTP code and a machine-readable ``reason``; clients (the
official ``kubernetes`` client, ``kubectl``, our own mirror) branch on exactly those two
fields. Raising :class:`ApiError` anywhere below the HTTP layer and rendering it once keeps
the codes and reasons consistent with the real server.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any


class Reason(str, enum.Enum):
    """``Status.reason`` values (``metav1.StatusReason``) the server emits."""

    BAD_REQUEST = "BadRequest"
    UNAUTHORIZED = "Unauthorized"
    NOT_FOUND = "NotFound"
    ALREADY_EXISTS = "AlreadyExists"
    CONFLICT = "Conflict"
    INVALID = "Invalid"
    GONE = "Gone"
    EXPIRED = "Expired"
    FORBIDDEN = "Forbidden"
    METHOD_NOT_ALLOWED = "MethodNotAllowed"
    UNSUPPORTED_MEDIA_TYPE = "UnsupportedMediaType"
    NOT_ACCEPTABLE = "NotAcceptable"
    TOO_MANY_REQUESTS = "TooManyRequests"
    INTERNAL_ERROR = "InternalError"
    TIMEOUT = "Timeout"


@dataclasses.dataclass
class ApiError(Exception):
    """A failed API operation: HTTP ``code``, ``reason`` and a one-line ``message``."""

    code: int
    reason: Reason
    message: str
    group: str = ""
    kind: str = ""
    name: str = ""
    retry_after_seconds: int | None = None
    #: ``details.causes[].reason`` values (e.g. ``ResourceVersionTooLarge``).
    causes: tuple[str, ...] = ()

    def __str__(self) -> str:
        return f"{self.code} {self.reason.value}: {self.message}"

    def to_status(self) -> dict[str, Any]:
        """Renders the error as a ``meta.k8s.io/v1`` ``Status`` object."""
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if self.causes:
            details["causes"] = [{"reason": cause, "message": self.message} for cause in self.causes]
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason.value,
            "code": self.code,
        }
        if details:
            status["details"] = details
        return status


#: ``metav1.CauseTypeResourceVersionTooLarge``: the client knows a newer state than the server.
RESOURCE_VERSION_TOO_LARGE = "ResourceVersionTooLarge"


def resource_version_too_large(requested: int, current: int) -> ApiError:
    """What kube-apiserver answers a watch or list from a resourceVersion it has not reached
    (e.g. a client that resumes after the server restarted with a fresh store): 504, and
    client-go's reflector relists on it (``isTooLargeResourceVersionError``)."""
    return ApiError(
        504,
        Reason.TIMEOUT,
        f"Too large resource version: {requested}, current: {current}",
        causes=(RESOURCE_VERSION_TOO_LARGE,),
        retry_after_seconds=1,
    )


def _qualified(resource: str, group: str) -> str:
    return f"{resource}.{group}" if group else resource


def not_found(resource: str, group: str, name: str) -> ApiError:
    return ApiError(404, Reason.NOT_FOUND, f'{_qualified(resource, group)} "{name}" not found', group, resource, name)


def already_exists(resource: str, group: str, name: str) -> ApiError:
    return ApiError(
        409,
        Reason.ALREADY_EXISTS,
        f'{_qualified(resource, group)} "{name}" already exists',
        group,
        resource,
        name,
    )


def conflict(resource: str, group: str, name: str, detail: str) -> ApiError:
    return ApiError(
        409,
        Reason.CONFLICT,
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {detail}',
        group,
        resource,
        name,
    )


STALE_OBJECT_MESSAGE = "the object has been modified; please apply your changes to the latest version and try again"


def stale(resource: str, group: str, name: str) -> ApiError:
    """The 409 an update with an out-of-date ``metadata.resourceVersion`` gets."""
    return conflict(resource, group, name, STALE_OBJECT_MESSAGE)


def invalid(kind: str, group: str, name: str, detail: str) -> ApiError:
    return ApiError(422, Reason.INVALID, f'{kind}.{group or "core"} "{name}" is invalid: {detail}', group, kind, name)


def bad_request(message: str) -> ApiError:
    return ApiError(400, Reason.BAD_REQUEST, message)


def forbidden(message: str) -> ApiError:
    return ApiError(403, Reason.FORBIDDEN, message)


def method_not_allowed(message: str) -> ApiError:
    return ApiError(405, Reason.METHOD_NOT_ALLOWED, message)


def unsupported_media_type(content_type: str, accepted: list[str], detail: str = "") -> ApiError:
    """The 415 for a body the server cannot read; ``detail`` says why when the media type itself
    is known (a protobuf body of a kind the sandbox has no field table for)."""
    return ApiError(
        415,
        Reason.UNSUPPORTED_MEDIA_TYPE,
        f"the body of the request was in an unknown format ({content_type!r}) - "
        "accepted media types include: " + ", ".join(accepted) + (f"; {detail}" if detail else ""),
    )


def gone(message: str) -> ApiError:
    return ApiError(410, Reason.EXPIRED, message)


def too_old_resource_version(requested: int, oldest: int) -> ApiError:
    """The 410 a watch or exact list gets when its resourceVersion was compacted away."""
    return gone(f"too old resource version: {requested} ({oldest})")


def too_many_requests(retry_after_seconds: int) -> ApiError:
    return ApiError(
        429,
        Reason.TOO_MANY_REQUESTS,
        "Too many requests, please try again later.",
        retry_after_seconds=retry_after_seconds,
    )


def internal(message: str) -> ApiError:
    return ApiError(500, Reason.INTERNAL_ERROR, message)

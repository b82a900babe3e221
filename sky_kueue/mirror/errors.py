"""Failures the mirror reports, each as one line a user can act on.

Why a hierarchy: the CLI prints one line and exits non-zero; the controller must tell a
cluster that will never work (Kueue not installed, RBAC) from one that is briefly unwell (a
500, a dropped connection) which the reflectors ride out on their own. Every message names
what failed and where (server URL, resource), never credentials: kubeconfig contents, tokens
and client certificates are not part of any message.

:func:`explain` turns what the ``kubernetes`` client and ``urllib3`` raise into these errors.
"""

from __future__ import annotations

import json

import urllib3
from kubernetes.client.exceptions import ApiException

#: HTTP statuses after which the same request may succeed (server trouble, throttling).
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class MirrorError(Exception):
    """A failure to mirror a cluster; ``str()`` is the one-line explanation."""


class KubeconfigError(MirrorError):
    """The kubeconfig cannot be read or does not describe a usable cluster."""


class UnknownContextError(KubeconfigError):
    """The requested context is not in the kubeconfig."""


class UnreachableError(MirrorError):
    """No HTTP conversation with the API server was possible."""


class KueueNotInstalledError(MirrorError):
    """The API server does not serve Kueue's API group (or not a version we read)."""


class ForbiddenError(MirrorError):
    """RBAC (or authentication) refused a request the mirror needs."""


class ApiRequestError(MirrorError):
    """The API server answered an error that retrying did not cure."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class SyncTimeoutError(MirrorError):
    """The initial list of some kind did not complete in time."""


def is_transient(exc: BaseException) -> bool:
    """Whether retrying the same request in a moment may succeed.

    Server-side trouble (5xx), throttling (429), timeouts and broken connections are
    transient; authorization failures, missing resources and malformed requests are not,
    and neither is a connection that cannot be opened at all (refused, unknown host: urllib3
    has already retried that). Reflectors keep retrying those too, at their slower pace; a
    command reports them at once instead of making the user wait for a server that is not there.
    """
    if isinstance(exc, ApiException):
        return exc.status in TRANSIENT_STATUSES
    if _cannot_connect(exc):
        return False
    return isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError))


#: ``metav1.CauseTypeResourceVersionTooLarge``.
_TOO_LARGE_CAUSE = "ResourceVersionTooLarge"


def is_resource_version_too_large(exc: BaseException) -> bool:
    """Whether the server has not reached the resourceVersion asked for (504, "Too large
    resource version"): after an API server restart with a fresh store, or behind a lagging
    cache. Retrying the same watch can never succeed against a restarted server; the cure is
    a fresh list (client-go's reflector: ``isTooLargeResourceVersionError``).
    """
    if not isinstance(exc, ApiException) or exc.status != 504:
        return False
    body = exc.body.decode("utf-8", errors="replace") if isinstance(exc.body, bytes) else exc.body
    if not isinstance(body, str) or not body:
        return False
    try:
        status = json.loads(body)
    except ValueError:
        return "Too large resource version" in body
    causes = ((status.get("details") or {}).get("causes") or []) if isinstance(status, dict) else []
    return any(isinstance(c, dict) and c.get("reason") == _TOO_LARGE_CAUSE for c in causes) or (
        "Too large resource version" in str(status.get("message", "") if isinstance(status, dict) else "")
    )


def list_retryable(exc: BaseException) -> bool:
    """For paged lists: transient failures, and a 410 in the middle of the pages (the continue
    token expired), after which the list starts over."""
    return is_transient(exc) or (isinstance(exc, ApiException) and exc.status == 410)


def _cannot_connect(exc: BaseException) -> bool:
    inner = exc.reason if isinstance(exc, urllib3.exceptions.MaxRetryError) else exc
    return isinstance(inner, urllib3.exceptions.NewConnectionError)


def retry_after_seconds(exc: BaseException) -> float | None:
    """The ``Retry-After`` delay (seconds) an API error asks for, if any."""
    if not isinstance(exc, ApiException) or not exc.headers:
        return None
    value = exc.headers.get("Retry-After")
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return None  # an HTTP-date; the apiserver only sends seconds
    return max(0.0, seconds)


def _server_message(exc: ApiException) -> str:
    """The ``message`` of the Status body, or the HTTP reason phrase."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", errors="replace")
    if isinstance(body, str) and body:
        try:
            status = json.loads(body)
        except ValueError:
            status = None
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"]).splitlines()[0]
    return str(exc.reason or "").splitlines()[0] if exc.reason else f"HTTP {exc.status}"


def _connection_problem(exc: BaseException) -> str:
    """A short phrase for a transport failure, from the innermost cause."""
    inner: BaseException = exc
    if isinstance(exc, urllib3.exceptions.MaxRetryError) and exc.reason is not None:
        inner = exc.reason
    if isinstance(inner, urllib3.exceptions.NewConnectionError):
        text = str(inner).lower()
        if "refused" in text:
            return "connection refused"
        if "name or service not known" in text or "nodename nor servname" in text or "resolve" in text:
            return "host name not resolved"
        return "cannot connect"
    if isinstance(inner, urllib3.exceptions.ConnectTimeoutError):
        return "connection timed out"
    if isinstance(inner, urllib3.exceptions.ReadTimeoutError):
        return "no answer before the read timeout"
    if isinstance(inner, urllib3.exceptions.ProtocolError):
        return "connection dropped"
    if isinstance(inner, urllib3.exceptions.SSLError):
        return "TLS handshake failed"
    return type(inner).__name__


def explain(exc: BaseException, *, host: str, what: str) -> MirrorError:
    """Turn a client failure into a one-line :class:`MirrorError`.

    Args:
        exc: what the client raised.
        host: the API server URL (for the message).
        what: the request in words, e.g. ``"list workloads.kueue.x-k8s.io/v1beta2"``.
    """
    if isinstance(exc, MirrorError):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        detail = _server_message(exc)
        if status in (401, 403):
            word = "unauthorized" if status == 401 else "forbidden"
            return ForbiddenError(
                f"{word}: cannot {what} on {host} ({detail}); ask a cluster admin for RBAC rights to list and "
                "watch Kueue's objects"
            )
        if status == 0:
            return UnreachableError(f"cannot {what} on {host}: {detail}")
        return ApiRequestError(f"cannot {what} on {host}: HTTP {status}: {detail}", status)
    if isinstance(exc, (urllib3.exceptions.HTTPError, ConnectionError, TimeoutError)):
        return UnreachableError(f"cannot reach the Kubernetes API server at {host}: {_connection_problem(exc)}")
    return MirrorError(f"cannot {what} on {host}: {type(exc).__name__}: {exc}")

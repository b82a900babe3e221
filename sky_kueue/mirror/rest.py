"""Plain JSON requests through the official client, for endpoints it has no method for.

Why: discovery documents of one group (``/apis/kueue.x-k8s.io``), the visibility API
(``/apis/visibility.kueue.x-k8s.io/.../pendingworkloads``) and streamed watches have no
generated method we want (the generated list methods would turn large answers into models).
Going through ``ApiClient.call_api`` keeps the client's authentication, TLS settings and
connection pool, and raises the same ``ApiException`` as generated methods.

Only the ``call_api`` signature shared by every client SkyPilot 0.14.1's ``kubernetes`` extra
accepts (``kubernetes>=29,<36``) is used: keyword arguments ``query_params``,
``header_params``, ``auth_settings``, ``_preload_content``, ``_return_http_data_only`` and
``_request_timeout``. Newer clients (36+) split it into ``param_serialize`` + ``call_api``;
SkyPilot's own ``pod_config`` validation breaks on them, so they are excluded by
``pyproject.toml``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.mirror.connection import REQUEST_TIMEOUT

_AUTH_SETTINGS = ["BearerToken"]

QueryValue = str | int | bool


def _query_params(query: Mapping[str, QueryValue] | None) -> list[tuple[str, str]]:
    return [
        (key, str(value).lower() if isinstance(value, bool) else str(value)) for key, value in (query or {}).items()
    ]


def request(
    api_client: client.ApiClient,
    method: str,
    path: str,
    query: Mapping[str, QueryValue] | None = None,
    *,
    body: Any = None,
    content_type: str | None = None,
    timeout: tuple[int, int] | float = REQUEST_TIMEOUT,
) -> Any:
    """Send one request and return the raw, unread urllib3 response (for streaming).

    The caller reads (or streams) the body and releases the connection. ``body`` is sent as
    JSON with ``content_type`` (e.g. ``application/merge-patch+json``), chosen by the caller
    rather than by the generated method, whose default differs between client releases.

    Raises:
        ApiException: a non-2xx answer (``status``, ``headers`` and ``body`` set).
        urllib3.exceptions.HTTPError: transport failures.
    """
    headers = {"Accept": "application/json"}
    if content_type is not None:
        headers["Content-Type"] = content_type
    return api_client.call_api(
        path,
        method,
        query_params=_query_params(query),
        header_params=headers,
        body=body,
        auth_settings=_AUTH_SETTINGS,
        _return_http_data_only=True,
        _preload_content=False,
        _request_timeout=timeout,
    )


def get_json(
    api_client: client.ApiClient,
    path: str,
    query: Mapping[str, QueryValue] | None = None,
    *,
    timeout: tuple[int, int] = REQUEST_TIMEOUT,
) -> Any:
    """GET ``path`` and decode the JSON answer.

    Raises:
        ApiException: a non-2xx answer (``status``, ``headers`` and ``body`` set).
        urllib3.exceptions.HTTPError: transport failures.
        ValueError: the answer is not JSON.
    """
    response = request(api_client, "GET", path, query, timeout=timeout)
    try:
        data = response.data
    finally:
        response.release_conn()
    if not 200 <= response.status <= 299:
        raise ApiException(status=response.status, reason=response.reason)
    return json.loads(data)

"""Plain JSON GETs through the official client, for endpoints it has no method for.

Why: discovery documents of one group (``/apis/kueue.x-k8s.io``) and the visibility API
(``/apis/visibility.kueue.x-k8s.io/.../pendingworkloads``) have no generated method, and the
generated list methods would turn large answers into models we do not want. Going through
``ApiClient.param_serialize``/``call_api`` keeps the client's authentication, TLS settings,
retry policy and connection pool, and raises the same ``ApiException`` as generated methods.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.mirror.connection import REQUEST_TIMEOUT

_AUTH_SETTINGS = ["BearerToken"]


def get_json(
    api_client: client.ApiClient,
    path: str,
    query: Mapping[str, str | int | bool] | None = None,
    *,
    timeout: tuple[int, int] = REQUEST_TIMEOUT,
) -> Any:
    """GET ``path`` and decode the JSON answer.

    Raises:
        ApiException: a non-2xx answer (``status``, ``headers`` and ``body`` set).
        urllib3.exceptions.HTTPError: transport failures.
        ValueError: the answer is not JSON.
    """
    params = [
        (key, str(value).lower() if isinstance(value, bool) else str(value)) for key, value in (query or {}).items()
    ]
    request = api_client.param_serialize(
        method="GET",
        resource_path=path,
        query_params=params,
        header_params={"Accept": "application/json"},
        auth_settings=_AUTH_SETTINGS,
    )
    response = api_client.call_api(*request, _request_timeout=timeout)
    try:
        data = response.read()
    finally:
        response.response.release_conn()
    if not 200 <= response.status <= 299:
        raise ApiException.from_response(http_resp=response, body=data.decode("utf-8", errors="replace"), data=None)
    return json.loads(data)

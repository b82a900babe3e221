"""One HTTP request through the official client's connection pool, with headers we choose.

Why: the generated methods of the ``kubernetes`` releases SkyPilot 0.14.1 accepts (<36)
pick a patch's content type themselves (``_content_type`` arrived in 36); conformance tests
must send exactly the media type under test, and paths that have no generated method.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from kubernetes import client


@dataclass(frozen=True)
class RawResponse:
    status: int
    data: bytes

    def json(self) -> Any:
        return json.loads(self.data)


def send(
    api_client: client.ApiClient,
    method: str,
    path: str,
    *,
    body: Any = None,
    headers: dict[str, str] | None = None,
) -> RawResponse:
    """Send ``body`` (a str as is, anything else as JSON) and return status and raw body."""
    all_headers = dict(headers or {})
    api_client.update_params_for_auth(all_headers, [], ["BearerToken"])
    if body is not None and not isinstance(body, (str, bytes)):
        body = json.dumps(body)
    response = api_client.rest_client.pool_manager.request(
        method, f"{api_client.configuration.host}{path}", body=body, headers=all_headers, preload_content=True
    )
    return RawResponse(response.status, response.data)

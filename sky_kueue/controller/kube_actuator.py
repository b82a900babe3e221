"""Applies Workload patches with the official ``kubernetes`` client (the I/O edge).

Thin on purpose: the patch is built and reasoned about in
:mod:`sky_kueue.controller.actuators`; this module only sends it as a JSON merge patch
(through the client's ``call_api`` with an explicit ``application/merge-patch+json``
content type, which every supported client release sends unchanged) and maps the API server's answer to an
:class:`~sky_kueue.controller.actuators.ActuationOutcome`:

* 2xx → applied. The patch sets absolute values, so applying it twice is harmless.
* 404 → the Workload is gone (admitted and finished, or garbage-collected).
* 409/422 → a precondition failed: the name now belongs to another Workload (UID), or, for a
  band level, the Workload changed since the snapshot the level was planned on (resourceVersion).
* anything else (5xx, 429, connection errors) → :class:`ActuationError`, retried later.

:class:`KubernetesWorkloadDeleter` deletes a stale Workload in the relaunch race
(:mod:`sky_kueue.controller.relaunch`) with a UID precondition.

Tested against the sandbox API server (``sky_kueue.sandbox``), not here.
"""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING, Any

from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from sky_kueue.controller.actuators import (
    ActuationError,
    ActuationOutcome,
    ActuationResult,
    Actuator,
    WorkloadPatch,
)
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror import rest

#: ``fieldManager`` recorded in managedFields for our patches.
FIELD_MANAGER = "sky-kueue-controller"
#: Per-request (connect, read) timeout; the client ignores float scalars (see fake-apiserver notes).
DEFAULT_REQUEST_TIMEOUT_SECONDS = (5, 15)
_MERGE_PATCH = "application/merge-patch+json"
_JSON = "application/json"


class KubernetesWorkloadActuator:
    """An :class:`~sky_kueue.controller.actuators.Actuator` over ``CustomObjectsApi``."""

    def __init__(
        self,
        api_client: ApiClient | None = None,
        *,
        field_manager: str = FIELD_MANAGER,
        request_timeout: tuple[int, int] = DEFAULT_REQUEST_TIMEOUT_SECONDS,
    ) -> None:
        self._api_client = api_client if api_client is not None else ApiClient()
        self._field_manager = field_manager
        self._timeout = request_timeout

    @property
    def name(self) -> str:
        return "kubernetes"

    def apply(self, patch: WorkloadPatch) -> ActuationResult:
        target = patch.target
        try:
            _send(
                self._api_client,
                "PATCH",
                _workload_path(target.version, target.namespace, target.name),
                {"fieldManager": self._field_manager},
                body=dict(patch.body),
                content_type=_MERGE_PATCH,
                timeout=self._timeout,
            )
        except ApiException as err:
            status: Any = err.status
            if status == 404:
                return ActuationResult(ActuationOutcome.TARGET_GONE, f"{target} not found")
            if status in (409, 422):
                return ActuationResult(
                    ActuationOutcome.TARGET_REPLACED,
                    f"{target} (uid {target.uid}) rejected the patch: {err.reason}",
                )
            raise ActuationError(f"patching Workload {target} failed with HTTP {status}: {err.reason}") from err
        except HTTPError as err:
            raise ActuationError(f"patching Workload {target} failed: {err}") from err
        return ActuationResult(ActuationOutcome.APPLIED, patch.summary)


def _workload_path(version: str, namespace: str, name: str) -> str:
    return f"/apis/{kueue_api.KUEUE_GROUP}/{version}/namespaces/{namespace}/{kueue_api.WORKLOAD_PLURAL}/{name}"


def _send(api_client: ApiClient, method: str, path: str, *args: Any, **kwargs: Any) -> None:
    """One request whose answer is only its status: the body is drained, the connection returned.

    Raises:
        ApiException: the server refused it; ``HTTPError``: it never got an answer.
    """
    response = rest.request(api_client, method, path, *args, **kwargs)
    response.drain_conn()
    response.release_conn()


class DeletionOutcome(str, Enum):
    DELETED = "deleted"
    #: 404 or 409: already gone, or the name now belongs to a new Workload (the UID
    #: precondition protected it). Expected when the controller's view lags.
    GONE_OR_REPLACED = "gone-or-replaced"
    FAILED = "failed"


class KubernetesWorkloadDeleter:
    """Deletes a Workload by name *and UID* (a precondition), for the relaunch race.

    Why the UID precondition: the name is reused by SkyPilot's relaunch within seconds; the
    precondition makes the server refuse (409) if the name now belongs to the new Workload.
    """

    def __init__(self, api_client: ApiClient, *, request_timeout: tuple[int, int] = DEFAULT_REQUEST_TIMEOUT_SECONDS):
        self._api_client = api_client
        self._timeout = request_timeout

    def delete(self, namespace: str, name: str, uid: str, version: str) -> tuple[DeletionOutcome, str]:
        """Returns the outcome and, when it failed, why (never raises for API errors)."""
        body = {"kind": "DeleteOptions", "apiVersion": "v1", "preconditions": {"uid": uid}}
        try:
            _send(
                self._api_client,
                "DELETE",
                _workload_path(version, namespace, name),
                body=body,
                content_type=_JSON,
                timeout=self._timeout,
            )
        except ApiException as err:
            if err.status in (404, 409):
                return DeletionOutcome.GONE_OR_REPLACED, f"HTTP {err.status}"
            return DeletionOutcome.FAILED, f"HTTP {err.status} {err.reason}"
        except HTTPError as err:
            return DeletionOutcome.FAILED, str(err)
        return DeletionOutcome.DELETED, ""


if TYPE_CHECKING:

    def _conforms(actuator: KubernetesWorkloadActuator) -> Actuator:
        return actuator  # mypy checks that the class implements the Protocol

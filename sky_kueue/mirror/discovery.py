"""Which Kueue API version to read, which kinds it serves, and whether visibility is served.

Why discovery rather than a fixed version: Kueue serves ``v1beta2`` (storage) and the
deprecated ``v1beta1`` today, older clusters serve only ``v1beta1``, and a future release
will drop ``v1beta1`` (Kueue ``apis/kueue/v1beta1/*_conversion.go``). The mirror asks ``/apis/kueue.x-k8s.io`` once,
prefers ``v1beta2``, and reads everything in the chosen version; the model's parser
normalises either spelling (``cohort``/``cohortName``, priority-class fields).

The pending-workloads visibility API (``visibility.kueue.x-k8s.io``) is an aggregated API
that may be off (feature gate ``VisibilityOnDemand``), not installed, or forbidden: its
absence is a normal state, recorded as None.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror import kinds, rest
from sky_kueue.mirror.backoff import ONE_SHOT_POLICY, RetryPolicy, Sleep, retrying
from sky_kueue.mirror.errors import KueueNotInstalledError, explain

VISIBILITY_GROUP = kueue_api.VISIBILITY_GROUP
#: Visibility versions we can read, preferred first.
VISIBILITY_VERSIONS: tuple[str, ...] = ("v1beta2", "v1beta1")


@dataclass(frozen=True)
class KueueApi:
    """What the cluster serves.

    Attributes:
        version: the Kueue version the mirror reads (``v1beta2`` or ``v1beta1``).
        served_plurals: Kueue resources served under that version.
        visibility_version: the visibility API version, or None if not served.
    """

    version: str
    served_plurals: frozenset[str]
    visibility_version: str | None = None

    def serves(self, kind: kinds.Kind) -> bool:
        return not kind.is_kueue or kind.plural in self.served_plurals

    def version_of(self, kind: kinds.Kind) -> str:
        return self.version if kind.is_kueue else kinds.CORE_VERSION


def _group_versions(document: Any) -> list[str]:
    versions = document.get("versions") if isinstance(document, dict) else None
    return [str(v.get("version")) for v in versions or [] if isinstance(v, dict) and v.get("version")]


class _Getter:
    """GETs discovery documents with retries; None when the server does not serve one (404)."""

    def __init__(self, api_client: client.ApiClient, policy: RetryPolicy, sleep: Sleep) -> None:
        self._api_client = api_client
        self._policy = policy
        self._sleep = sleep

    def __call__(self, path: str) -> Any | None:
        try:
            for attempt in retrying(self._policy, sleep=self._sleep):
                with attempt:
                    return rest.get_json(self._api_client, path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return None  # unreachable: tenacity either returns or re-raises


def discover(
    api_client: client.ApiClient,
    host: str = "",
    *,
    policy: RetryPolicy = ONE_SHOT_POLICY,
    sleep: Sleep = time.sleep,
) -> KueueApi:
    """Find the Kueue version to read and what it serves.

    Raises:
        KueueNotInstalledError: the group, or every version we read, is not served.
        MirrorError: the server is unreachable, or discovery is forbidden or keeps failing.
    """
    host = host or str(api_client.configuration.host)
    get = _Getter(api_client, policy, sleep)
    try:
        group = get(f"/apis/{kinds.KUEUE_GROUP}")
        if group is None:
            raise KueueNotInstalledError(
                f"Kueue is not installed on {host}: the API group {kinds.KUEUE_GROUP} is not served"
            )
        served = _group_versions(group)
        version = next((v for v in kinds.KUEUE_VERSIONS if v in served), None)
        if version is None:
            raise KueueNotInstalledError(
                f"Kueue on {host} serves {kinds.KUEUE_GROUP} versions {', '.join(served) or 'none'}; "
                f"sky-kueue reads {' or '.join(kinds.KUEUE_VERSIONS)} (Kueue 0.9 or newer)"
            )
        resources = get(f"/apis/{kinds.KUEUE_GROUP}/{version}") or {}
        plurals = frozenset(
            str(r.get("name"))
            for r in resources.get("resources") or []
            if isinstance(r, dict) and "/" not in str(r.get("name", ""))
        )
        missing = [k.plural for k in kinds.ALL_KINDS if k.is_kueue and k.required and k.plural not in plurals]
        if missing:
            raise KueueNotInstalledError(
                f"Kueue is not installed completely on {host}: {kinds.KUEUE_GROUP}/{version} does not serve "
                f"{', '.join(missing)}"
            )
        return KueueApi(version=version, served_plurals=plurals, visibility_version=_visibility(get))
    except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
        # ValueError: a discovery answer that is not JSON (not an API server at all).
        raise explain(exc, host=host, what=f"discover the API group {kinds.KUEUE_GROUP}") from exc


def _visibility(get: _Getter) -> str | None:
    """The visibility API version served, or None (not served, or not readable)."""
    try:
        group = get(f"/apis/{VISIBILITY_GROUP}")
    except ApiException as exc:
        if exc.status in (401, 403, 503):  # forbidden, or the aggregated server is down
            return None
        raise
    if group is None:
        return None
    served = _group_versions(group)
    return next((v for v in VISIBILITY_VERSIONS if v in served), None)

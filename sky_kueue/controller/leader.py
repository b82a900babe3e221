"""Leader election over a ``coordination.k8s.io/v1`` Lease: only one replica acts.

Why: aging patches and relaunch-race deletions must come from one writer. Two controllers
acting at once would not corrupt anything (patches are absolute and UID-guarded, history
writes are idempotent), but they would race on the history store, double the API traffic
and make the logs contradict each other. The Lease is the Kubernetes-native mutex for this,
and what ``kube-controller-manager`` and Kueue itself use.

The algorithm is client-go's ``leaderelection`` (``tryAcquireOrRenew``), in the same words:

* A candidate reads the Lease. If none exists it creates one naming itself.
* If another holder is named, the candidate only takes over once the record has not changed
  for ``leaseDurationSeconds`` *as measured by the candidate's own clock* since it first
  observed that record. Comparing with the holder's ``renewTime`` would trust the holder's
  clock; measuring locally tolerates clock skew between nodes.
* The leader renews every ``retry_period_seconds``; every write is an update with the read
  ``resourceVersion``, so of two racing candidates exactly one wins (the other gets 409).
* The leader considers itself leader only while its last successful renewal is younger than
  ``renew_deadline_seconds`` (shorter than the lease duration): it stops acting before any
  follower can take over. The controller checks :meth:`LeaderElector.is_leader` before
  every write (fencing).
* On graceful shutdown the leader releases the Lease (empty holder, 1 s duration) so a
  follower takes over at once instead of after a full lease duration.

Time comes from an injected :class:`~sky_kueue.controller.clock.Clock`, so tests hand the
lease over by advancing a manual clock instead of sleeping.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Protocol

from sky_kueue.controller.clock import Clock, system_clock

if TYPE_CHECKING:
    from kubernetes.client import ApiClient, V1Lease
    from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

#: Name of the Lease the controller replicas compete for.
DEFAULT_LEASE_NAME = "sky-kueue-controller"
#: How long a lease is valid after its last observed change (client-go default: 15 s).
DEFAULT_LEASE_DURATION_SECONDS = 15.0
#: The leader stops acting if it could not renew for this long (client-go default: 10 s).
DEFAULT_RENEW_DEADLINE_SECONDS = 10.0
#: How often candidates try to acquire and the leader renews (client-go default: 2 s).
DEFAULT_RETRY_PERIOD_SECONDS = 2.0
#: ``leaseDurationSeconds`` written on release, so followers take over immediately.
RELEASED_LEASE_DURATION_SECONDS = 1
#: The API server's answer when RBAC refuses a call.
HTTP_FORBIDDEN = 403
#: Per-request (connect, read) timeout of Lease calls, whole seconds (the client ignores floats).
LEASE_REQUEST_TIMEOUT_SECONDS = (5, 10)


class LeaseConflict(RuntimeError):
    """Another candidate wrote the Lease first (HTTP 409), or it vanished under us."""


class LeaseUnavailable(RuntimeError):
    """The Lease could not be read or written (network, 5xx, 403); retried next period."""


@dataclass(frozen=True)
class LeaseRecord:
    """The fields of ``Lease.spec`` that leader election reads and writes."""

    holder: str | None
    lease_duration_seconds: int
    acquire_time: float | None
    renew_time: float | None
    transitions: int

    @property
    def held(self) -> bool:
        return bool(self.holder)


class LeaseClient(Protocol):
    """Reads and writes one Lease (the I/O edge, replaceable in tests)."""

    def get(self, namespace: str, name: str) -> tuple[LeaseRecord, str] | None:
        """The record and its resourceVersion, or None if the Lease does not exist.

        Raises:
            LeaseUnavailable: the API could not be reached or refused the read.
        """
        ...

    def create(self, namespace: str, name: str, record: LeaseRecord) -> str:
        """Creates the Lease; returns its resourceVersion.

        Raises:
            LeaseConflict: it exists already.
            LeaseUnavailable: any other failure.
        """
        ...

    def update(self, namespace: str, name: str, record: LeaseRecord, resource_version: str) -> str:
        """Replaces the Lease if it is still at ``resource_version``; returns the new one.

        Raises:
            LeaseConflict: someone else wrote it first, or it was deleted.
            LeaseUnavailable: any other failure.
        """
        ...


@dataclass(frozen=True)
class LeaseSettings:
    """Where the Lease lives, who we are, and the timing (seconds)."""

    namespace: str
    identity: str
    name: str = DEFAULT_LEASE_NAME
    lease_duration_seconds: float = DEFAULT_LEASE_DURATION_SECONDS
    renew_deadline_seconds: float = DEFAULT_RENEW_DEADLINE_SECONDS
    retry_period_seconds: float = DEFAULT_RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("leader election needs a non-empty identity")
        if not self.lease_duration_seconds > self.renew_deadline_seconds > self.retry_period_seconds > 0:
            raise ValueError(
                "leader election needs lease_duration_seconds > renew_deadline_seconds > retry_period_seconds > 0, "
                f"got {self.lease_duration_seconds}, {self.renew_deadline_seconds}, {self.retry_period_seconds}"
            )


def default_identity() -> str:
    """``<hostname>_<pid>_<random>``: unique per process, readable in ``kubectl get lease``."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:8]}"


class LeaderElector:
    """One candidate's view of the Lease. Not thread-safe: call it from one thread."""

    def __init__(self, client: LeaseClient, settings: LeaseSettings, *, clock: Clock = system_clock) -> None:
        self._client = client
        self._settings = settings
        self._clock = clock
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self._leader = False

    @property
    def identity(self) -> str:
        return self._settings.identity

    @property
    def settings(self) -> LeaseSettings:
        return self._settings

    @property
    def observed_holder(self) -> str | None:
        """The holder named in the last record read (None before the first read)."""
        return self._observed.holder if self._observed is not None else None

    def is_leader(self) -> bool:
        """True while we hold the Lease and renewed it within the renew deadline."""
        if not self._leader or self._renewed_at is None:
            return False
        return self._clock() - self._renewed_at < self._settings.renew_deadline_seconds

    def try_acquire_or_renew(self) -> bool:
        """One round of the election; returns whether we lead afterwards.

        Never raises for API failures: they are logged and leave the leadership to expire at
        the renew deadline (:meth:`is_leader`).
        """
        s = self._settings
        now = self._clock()
        try:
            current = self._client.get(s.namespace, s.name)
        except LeaseUnavailable as err:
            log.warning("cannot read Lease %s/%s: %s", s.namespace, s.name, err)
            return self.is_leader()
        desired = LeaseRecord(s.identity, max(1, round(s.lease_duration_seconds)), now, now, 0)
        if current is None:
            try:
                self._client.create(s.namespace, s.name, desired)
            except LeaseConflict:
                return self._lose("another candidate created the Lease first")
            except LeaseUnavailable as err:
                log.warning("cannot create Lease %s/%s: %s", s.namespace, s.name, err)
                return self.is_leader()
            return self._win(desired, now, "created")
        record, version = current
        if record != self._observed:
            self._observed, self._observed_at = record, now
        held_by_other = record.held and record.holder != s.identity
        if held_by_other and self._observed_at + record.lease_duration_seconds > now:
            return self._lose(f"held by {record.holder}")
        if record.holder == s.identity:
            desired = replace(desired, acquire_time=record.acquire_time, transitions=record.transitions)
        else:
            desired = replace(desired, transitions=record.transitions + 1)
        try:
            self._client.update(s.namespace, s.name, desired, version)
        except LeaseConflict:
            return self._lose("another candidate updated the Lease first")
        except LeaseUnavailable as err:
            log.warning("cannot renew Lease %s/%s: %s", s.namespace, s.name, err)
            return self.is_leader()
        return self._win(desired, now, "renewed" if record.holder == s.identity else f"taken over from {record.holder}")

    def release(self) -> bool:
        """Gives the Lease up (graceful shutdown); returns whether it was released."""
        if not self._leader:
            return False
        s = self._settings
        self._leader = False
        try:
            current = self._client.get(s.namespace, s.name)
            if current is None or current[0].holder != s.identity:
                return False
            now = self._clock()
            released = replace(
                current[0], holder=None, lease_duration_seconds=RELEASED_LEASE_DURATION_SECONDS, renew_time=now
            )
            self._client.update(s.namespace, s.name, released, current[1])
        except (LeaseConflict, LeaseUnavailable) as err:
            log.warning("could not release Lease %s/%s: %s", s.namespace, s.name, err)
            return False
        log.info("released Lease %s/%s", s.namespace, s.name)
        return True

    def _win(self, record: LeaseRecord, now: float, how: str) -> bool:
        if not self._leader:
            log.info("became leader (%s)", how, extra={"fields": {"lease": self._settings.name, "how": how}})
        self._observed, self._observed_at = record, now
        self._renewed_at = now
        self._leader = True
        return True

    def _lose(self, why: str) -> bool:
        if self._leader:
            log.warning("lost leadership: %s", why, extra={"fields": {"lease": self._settings.name}})
        self._leader = False
        self._renewed_at = None
        return False


def _to_datetime(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, tz=timezone.utc)


def _to_seconds(value: datetime | None) -> float | None:
    if value is None:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def _forbidden_hint(err: ApiException, namespace: str, name: str) -> str:
    """What to fix when RBAC refuses a Lease call (a ``--lease-name`` the Lease rule does not name)."""
    if err.status != HTTP_FORBIDDEN:
        return ""
    return (
        f": the controller's RBAC does not allow it on Lease {namespace}/{name}; the Lease rule's "
        "resourceNames (configs/controller/rbac.yaml) must name the --lease-name"
    )


def _resource_version(lease: V1Lease) -> str:
    metadata = lease.metadata
    return str(metadata.resource_version) if metadata is not None else ""


class KubernetesLeaseClient:
    """:class:`LeaseClient` over ``CoordinationV1Api`` (typed ``V1Lease``)."""

    def __init__(self, api_client: ApiClient | None = None) -> None:
        from kubernetes.client import CoordinationV1Api

        self._api = CoordinationV1Api(api_client)

    @staticmethod
    def _body(namespace: str, name: str, record: LeaseRecord, resource_version: str | None) -> V1Lease:
        from kubernetes.client import V1Lease, V1LeaseSpec, V1ObjectMeta

        return V1Lease(
            api_version="coordination.k8s.io/v1",
            kind="Lease",
            metadata=V1ObjectMeta(name=name, namespace=namespace, resource_version=resource_version),
            spec=V1LeaseSpec(
                holder_identity=record.holder or None,
                lease_duration_seconds=record.lease_duration_seconds,
                acquire_time=_to_datetime(record.acquire_time),
                renew_time=_to_datetime(record.renew_time),
                lease_transitions=record.transitions,
            ),
        )

    @staticmethod
    def _failure(err: Exception, action: str, namespace: str, name: str) -> Exception:
        from kubernetes.client.exceptions import ApiException

        if isinstance(err, ApiException) and err.status in (404, 409):
            return LeaseConflict(f"{action}: HTTP {err.status} {err.reason}")
        if isinstance(err, ApiException):
            return LeaseUnavailable(f"{action}: HTTP {err.status} {err.reason}{_forbidden_hint(err, namespace, name)}")
        return LeaseUnavailable(f"{action}: {err}")

    def get(self, namespace: str, name: str) -> tuple[LeaseRecord, str] | None:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            lease = self._api.read_namespaced_lease(name, namespace, _request_timeout=LEASE_REQUEST_TIMEOUT_SECONDS)
        except ApiException as err:
            if err.status == 404:
                return None
            raise LeaseUnavailable(
                f"read: HTTP {err.status} {err.reason}{_forbidden_hint(err, namespace, name)}"
            ) from err
        except HTTPError as err:
            raise LeaseUnavailable(f"read: {err}") from err
        spec = lease.spec
        record = LeaseRecord(
            holder=(spec.holder_identity or None) if spec else None,
            lease_duration_seconds=int((spec.lease_duration_seconds if spec else None) or 0),
            acquire_time=_to_seconds(spec.acquire_time) if spec else None,
            renew_time=_to_seconds(spec.renew_time) if spec else None,
            transitions=int((spec.lease_transitions if spec else None) or 0),
        )
        return record, _resource_version(lease)

    def create(self, namespace: str, name: str, record: LeaseRecord) -> str:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            created = self._api.create_namespaced_lease(
                namespace, self._body(namespace, name, record, None), _request_timeout=LEASE_REQUEST_TIMEOUT_SECONDS
            )
        except (ApiException, HTTPError) as err:
            raise self._failure(err, "create", namespace, name) from err
        return _resource_version(created)

    def update(self, namespace: str, name: str, record: LeaseRecord, resource_version: str) -> str:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            replaced = self._api.replace_namespaced_lease(
                name,
                namespace,
                self._body(namespace, name, record, resource_version),
                _request_timeout=LEASE_REQUEST_TIMEOUT_SECONDS,
            )
        except (ApiException, HTTPError) as err:
            raise self._failure(err, "update", namespace, name) from err
        return _resource_version(replaced)


if TYPE_CHECKING:

    def _conforms(client: KubernetesLeaseClient) -> LeaseClient:
        return client  # mypy checks that the class implements the Protocol

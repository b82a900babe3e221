"""ServiceAccount credentials for the sandbox's pods, and their authentication.

Why: a controller installed from ``configs/controller`` talks to the API server as its
ServiceAccount, through the official client's ``load_incluster_config``
(``kubernetes/config/incluster_config.py``), which reads three files a kubelet mounts in
every container (``/var/run/secrets/kubernetes.io/serviceaccount/``): ``token`` (sent as
``Authorization: Bearer``), ``ca.crt`` (verifies the HTTPS server) and ``namespace``.

What is modelled, after Kubernetes' bound service account tokens (KEP-1205, the
``ServiceAccount`` admission plugin and the kubelet's projected ``kube-api-access-*`` volume):

* a pod's ``spec.serviceAccountName`` defaults to ``default`` (admission);
* a token is issued per pod and bound to it: the API server accepts it as
  ``system:serviceaccount:<namespace>:<name>`` while the pod exists and refuses it (401) once
  the pod is gone; a token it never issued is refused too. "Gone" counts the pod's
  termination grace period (``terminationGracePeriodSeconds``, default 30): the sandbox's
  store removes a deleted pod at once, where kube-apiserver keeps it (and its token valid)
  until the kubelet has stopped its containers - time a controller uses to release its Lease;
* nothing is mounted when the pod or its ServiceAccount sets
  ``automountServiceAccountToken: false``.

Not modelled: tokens are opaque random strings, not signed JWTs (clients treat them as
opaque; nothing here verifies a signature offline), they do not expire, and the sandbox does
not authorize: RBAC objects are stored, not enforced (the request log records each request's
user, so a test can check what a ServiceAccount did against its Roles).
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sky_kueue.sandbox.apiserver.events import EventType, StoreEvent
from sky_kueue.sandbox.apiserver.store import AdmissionRequest, ObjectStore, Operation

#: Where the kubelet mounts a pod's ServiceAccount credentials (and the client reads them).
SERVICE_ACCOUNT_DIRECTORY = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_FILE = f"{SERVICE_ACCOUNT_DIRECTORY}/token"
CA_FILE = f"{SERVICE_ACCOUNT_DIRECTORY}/ca.crt"
NAMESPACE_FILE = f"{SERVICE_ACCOUNT_DIRECTORY}/namespace"
#: A ServiceAccount's user name prefix (``serviceaccount.MakeUsername``).
USER_PREFIX = "system:serviceaccount:"
DEFAULT_SERVICE_ACCOUNT = "default"
#: Kubernetes' default ``terminationGracePeriodSeconds``.
DEFAULT_GRACE_SECONDS = 30.0
#: Random bytes per token.
TOKEN_BYTES = 32


def user_name(namespace: str, service_account: str) -> str:
    """``system:serviceaccount:<namespace>:<name>``, the user a ServiceAccount's token authenticates as."""
    return f"{USER_PREFIX}{namespace}:{service_account}"


@dataclass(frozen=True)
class BoundToken:
    """Who a token speaks for, and the pod whose deletion ends it."""

    namespace: str
    service_account: str
    pod_uid: str

    @property
    def user(self) -> str:
        return user_name(self.namespace, self.service_account)


class ServiceAccountTokens:
    """Issues pod-bound tokens, authenticates them, and writes the pod's credential files."""

    def __init__(self, store: ObjectStore, ca_pem: bytes) -> None:
        self.store = store
        self.ca_pem = ca_pem
        self._lock = threading.Lock()
        self._tokens: dict[str, BoundToken] = {}
        self._by_pod: dict[str, str] = {}
        self._timers: list[threading.Timer] = []
        self._unhooks: list[Callable[[], None]] = [
            store.add_admission_hook(_default_service_account, "pods"),
            store.add_commit_hook(self._on_pod_event, "pods"),
        ]

    def close(self) -> None:
        """Stop following pods (tokens already issued keep their state)."""
        for unhook in self._unhooks:
            unhook()
        self._unhooks = []
        with self._lock:
            timers, self._timers = self._timers, []
        for timer in timers:
            timer.cancel()

    def _on_pod_event(self, event: StoreEvent) -> None:
        if event.type is not EventType.DELETED:
            return
        uid = str((event.obj.get("metadata") or {}).get("uid", ""))
        grace = (event.obj.get("spec") or {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
        seconds = float(grace) if isinstance(grace, (int, float)) and grace >= 0 else DEFAULT_GRACE_SECONDS
        if seconds == 0:
            self.revoke(uid)
            return
        timer = threading.Timer(seconds, self.revoke, args=(uid,))
        timer.daemon = True
        with self._lock:
            self._timers = [t for t in self._timers if t.is_alive()]
            self._timers.append(timer)
        timer.start()

    def revoke(self, pod_uid: str) -> None:
        """End the token bound to the pod (its deletion)."""
        with self._lock:
            token = self._by_pod.pop(pod_uid, None)
            if token is not None:
                self._tokens.pop(token, None)

    def token_for(self, pod: Mapping[str, Any]) -> str:
        """The pod's token (issued on first call)."""
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid = str(meta.get("uid", ""))
        if not uid:
            raise ValueError("a token is bound to a stored pod; this one has no uid")
        bound = BoundToken(
            str(meta.get("namespace", "")), str(spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT), uid
        )
        with self._lock:
            existing = self._by_pod.get(uid)
            if existing is not None:
                return existing
            token = secrets.token_urlsafe(TOKEN_BYTES)
            self._tokens[token] = bound
            self._by_pod[uid] = token
            return token

    def authenticate(self, token: str) -> str | None:
        """The user ``token`` authenticates as, or None (unknown, or its pod is gone)."""
        with self._lock:
            bound = self._tokens.get(token)
        return bound.user if bound is not None else None

    def automounts(self, pod: Mapping[str, Any]) -> bool:
        """Whether the pod gets credentials: the pod's setting wins, then its ServiceAccount's."""
        spec = pod.get("spec") or {}
        if spec.get("automountServiceAccountToken") is not None:
            return bool(spec["automountServiceAccountToken"])
        name = str(spec.get("serviceAccountName") or DEFAULT_SERVICE_ACCOUNT)
        namespace = str((pod.get("metadata") or {}).get("namespace", ""))
        account = self.store.try_get("serviceaccounts", name, namespace)
        if account is not None and account.get("automountServiceAccountToken") is not None:
            return bool(account["automountServiceAccountToken"])
        return True

    def pod_files(self, pod: Mapping[str, Any]) -> dict[str, bytes]:
        """The files the kubelet mounts in the pod's containers (absolute path -> content);
        empty when the pod does not automount credentials."""
        if not self.automounts(pod):
            return {}
        return {
            TOKEN_FILE: self.token_for(pod).encode(),
            CA_FILE: self.ca_pem,
            NAMESPACE_FILE: str((pod.get("metadata") or {}).get("namespace", "")).encode(),
        }


def _default_service_account(request: AdmissionRequest) -> None:
    """The ServiceAccount admission plugin's defaulting: a pod without one runs as ``default``."""
    if request.operation is Operation.CREATE and request.subresource is None:
        spec = request.obj.setdefault("spec", {})
        if isinstance(spec, dict) and not spec.get("serviceAccountName"):
            spec["serviceAccountName"] = DEFAULT_SERVICE_ACCOUNT

"""Reads the cluster's identity: the UID of its ``kube-system`` namespace.

Why (:mod:`.server_state`): a cluster replaced under a running mirror, or under a consumer's
saved position, keeps its address but not this UID, which every cluster creates once and
which survives restarts and etcd restores. One GET of one small object, allowed by a
``get`` on that one namespace (``configs/controller/rbac.yaml``).
"""

from __future__ import annotations

import logging
import threading

from kubernetes import client
from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

#: The namespace whose UID names the cluster.
IDENTITY_NAMESPACE = "kube-system"
#: Answers after which the identity is not read again (RBAC denies it, or it does not exist).
_UNREADABLE_STATUSES = frozenset({403, 404})


class ClusterIdentityReader:
    """Reads the cluster's identity (the ``kube-system`` UID); shared by a mirror's reflectors.

    Thread-safe. Once the server refuses the read for good, :meth:`read` answers None without
    a request.
    """

    def __init__(self, api_client: client.ApiClient, request_timeout: tuple[int, int]) -> None:
        self._api = client.CoreV1Api(api_client)
        self._timeout = request_timeout
        self._lock = threading.Lock()
        self._readable = True

    def read(self) -> str | None:
        """The identity now, or None when it cannot be read (refused for good).

        Raises:
            ApiException: a transient failure (the caller retries as for its own request).
            urllib3.exceptions.HTTPError, OSError: the server is unreachable.
        """
        with self._lock:
            if not self._readable:
                return None
        try:
            namespace = self._api.read_namespace(IDENTITY_NAMESPACE, _request_timeout=self._timeout)
        except ApiException as exc:
            if exc.status not in _UNREADABLE_STATUSES:
                raise
            with self._lock:
                self._readable = False
            log.info(
                "cannot read namespace %s (HTTP %s): a cluster replaced under the mirror is noticed "
                "only by its older resourceVersions",
                IDENTITY_NAMESPACE,
                exc.status,
            )
            return None
        uid = namespace.metadata.uid if namespace.metadata is not None else None
        return str(uid) if uid else None

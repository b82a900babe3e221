"""From a kubeconfig (and context) to a configured ``kubernetes`` API client.

Why explicit settings rather than the client's defaults (what the ``kubernetes`` client does
in ``client/rest.py`` and ``watch/watch.py``, read for 29-35):

* urllib3's default retry policy silently retries GET/PUT/DELETE on dropped connections,
  timeouts and 429/503. That hides exactly the failures an informer must see (a dropped
  watch means "re-watch from the last resourceVersion", a 429 means "wait as long as the
  server asks"), and it retries without jitter. The mirror therefore lets urllib3 retry only
  failures to *establish* a connection (the request was never sent, so this is always safe)
  and handles everything else itself with bounded, jittered backoff
  (:mod:`sky_kueue.mirror.backoff`).
* Every request carries a ``(connect, read)`` timeout given as integers: the client ignores
  a float timeout, and a request without one can hang forever on a half-open connection.
* The connection pool holds one connection per concurrent watch plus room for lists, so
  urllib3 never has to discard connections.

Tests pass ``retries=False`` so that injected faults reach the code under test.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException

from sky_kueue.mirror.errors import KubeconfigError, UnknownContextError
from sky_kueue.mirror.kubeconfig import find_kubeconfig, why_none

#: Seconds to establish a TCP (and TLS) connection.
CONNECT_TIMEOUT_SECONDS = 5
#: Seconds to wait for a (non-watch) response; a page of 500 Workloads is well under 1 MB.
READ_TIMEOUT_SECONDS = 60
#: How often urllib3 may retry establishing a connection (nothing was sent yet: safe).
CONNECT_RETRIES = 2
#: urllib3's pause between connection attempts: factor * 2**(attempt-1) seconds.
CONNECT_RETRY_BACKOFF_FACTOR_SECONDS = 0.2
#: Connections kept per host: eight watches, a list, a visibility query, and slack.
CONNECTION_POOL_CONNECTIONS = 16

#: ``(connect, read)`` timeout of ordinary requests.
REQUEST_TIMEOUT: tuple[int, int] = (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)


def production_retry_policy() -> urllib3.Retry:
    """Retry connection establishment only; reads, statuses and redirects are not retried."""
    return urllib3.Retry(
        total=CONNECT_RETRIES,
        connect=CONNECT_RETRIES,
        read=0,
        status=0,
        other=0,
        redirect=0,
        backoff_factor=CONNECT_RETRY_BACKOFF_FACTOR_SECONDS,
        respect_retry_after_header=False,
        raise_on_status=False,
    )


@dataclass
class Connection:
    """A configured API client and where it points.

    Attributes:
        api_client: shared by every reflector (urllib3's pool is thread-safe).
        host: the API server URL, for messages.
        context: the kubeconfig context used (None in-cluster or with a bare client).
        namespace: the context's default namespace, if it names one.
    """

    api_client: client.ApiClient
    host: str
    context: str | None = None
    namespace: str | None = None

    def close(self) -> None:
        self.api_client.close()


def _kubeconfig_contexts(path: str) -> tuple[list[dict[str, Any]], str | None]:
    """The contexts of a kubeconfig (a file or an ``os.pathsep``-separated list, merged as
    kubectl merges ``$KUBECONFIG``: the first file to define a name or the current context
    wins) and its current context.

    Raises:
        KubeconfigError: unreadable or not a kubeconfig.
    """
    contexts: list[dict[str, Any]] = []
    current: str | None = None
    for part in [p for p in path.split(os.pathsep) if p]:
        part_contexts, part_current = _kubeconfig_file_contexts(part)
        known = {str(c.get("name")) for c in contexts}
        contexts.extend(c for c in part_contexts if str(c.get("name")) not in known)
        current = current or part_current
    return contexts, current


def _kubeconfig_file_contexts(path: str) -> tuple[list[dict[str, Any]], str | None]:
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise KubeconfigError(f"kubeconfig {path}: no such file") from exc
    except OSError as exc:
        raise KubeconfigError(f"kubeconfig {path}: cannot read: {exc.strerror}") from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"kubeconfig {path}: not valid YAML") from exc
    if not isinstance(document, dict):
        raise KubeconfigError(f"kubeconfig {path}: not a kubeconfig (expected a mapping)")
    contexts = [c for c in document.get("contexts") or [] if isinstance(c, dict)]
    current = document.get("current-context")
    return contexts, str(current) if current else None


def connect(
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    *,
    retries: urllib3.Retry | bool | None = None,
) -> Connection:
    """Build an API client from a kubeconfig, or from the pod's service account in-cluster.

    Args:
        kubeconfig: path; None means ``$KUBECONFIG`` or ``~/.kube/config``, and in a pod
            without either, the in-cluster configuration.
        context: kubeconfig context; None means the file's current context.
        retries: urllib3 retry policy; None means :func:`production_retry_policy`. Tests
            pass False so faults are visible.

    Raises:
        UnknownContextError: ``context`` is not in the kubeconfig.
        KubeconfigError: no usable kubeconfig.
    """
    configuration = client.Configuration()
    found = find_kubeconfig(str(kubeconfig) if kubeconfig is not None else None, os.environ, os.path.exists)
    path = found.path if found is not None else None
    chosen_context: str | None = None
    namespace: str | None = None
    if path is None:
        if found is None or context is not None:
            why = f" ({why_none(os.environ, os.path.exists)})" if found is None else ""
            raise KubeconfigError(
                f"no kubeconfig{why}: pass --kubeconfig FILE, set $KUBECONFIG, or create ~/.kube/config"
            )
        try:
            config.load_incluster_config(client_configuration=configuration)
        except ConfigException as exc:
            raise KubeconfigError(f"in-cluster configuration: {exc}") from exc
    else:
        contexts, current = _kubeconfig_contexts(path)
        names = [str(c.get("name")) for c in contexts]
        chosen_context = context or current
        if chosen_context is None:
            raise KubeconfigError(f"kubeconfig {path}: no current-context; pass --context (one of: {', '.join(names)})")
        if chosen_context not in names:
            available = ", ".join(names) if names else "none"
            raise UnknownContextError(
                f"context {chosen_context!r} not found in kubeconfig {path} (available: {available})"
            )
        entry = next(c for c in contexts if str(c.get("name")) == chosen_context)
        ns = (entry.get("context") or {}).get("namespace")
        namespace = str(ns) if ns else None
        try:
            config.load_kube_config(
                config_file=path, context=chosen_context, client_configuration=configuration, persist_config=False
            )
        except ConfigException as exc:
            raise KubeconfigError(f"kubeconfig {path}, context {chosen_context!r}: {exc}") from exc
    configuration.retries = production_retry_policy() if retries is None else retries
    configuration.connection_pool_maxsize = max(configuration.connection_pool_maxsize or 0, CONNECTION_POOL_CONNECTIONS)
    api_client = client.ApiClient(configuration)
    return Connection(api_client=api_client, host=str(configuration.host), context=chosen_context, namespace=namespace)

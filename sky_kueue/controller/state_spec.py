"""``--state``: where the controller keeps its history and runtime state, and opening it.

Two stores implement :class:`~sky_kueue.controller.history.HistoryStore`:

* ``sqlite:PATH`` (the default; a bare ``PATH`` is accepted too): one embedded file, for a
  laptop run or a single replica with a volume (:mod:`sky_kueue.controller.sqlite_store`).
* ``kubernetes`` or ``kubernetes:NAMESPACE``: ``JobHistory`` objects in the API server, for
  an in-cluster deployment with several replicas (:mod:`sky_kueue.controller.kube_store`).
  Without a namespace: the pod's own (its service account's), else ``sky-kueue-system``.

A ``kubernetes`` history may live in another cluster than the controller's own: the *home*
cluster of a fleet, where every cluster's controller keeps its JobHistory objects, so a job
relaunched on another cluster of its team (placement, burst) continues one history
(``--state-kubeconfig``/``--state-context``; docs/operations.md, "One history across
clusters"). The runtime state (the Workload watch cursor, whose resourceVersions are the
controller's own cluster's, and the heartbeat) stays in the controller's own cluster, in the
namespace of the same name.

Parsing is pure; opening imports the adapter it needs, so the SQLite path never loads the
Kubernetes client and vice versa.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sky_kueue.controller.history import HistoryStore, StoreError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from sky_kueue.controller.runtime_state import Heartbeat

#: Where the SQLite state file lives unless ``--state`` or ``$SKY_KUEUE_STATE`` says otherwise.
DEFAULT_STATE_PATH = "~/.sky/sky-kueue/controller.db"
STATE_ENV_VAR = "SKY_KUEUE_STATE"
#: In-cluster: the pod's namespace (its service account's).
SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
#: The namespace of ``kubernetes`` without one when the pod's is unknown.
DEFAULT_KUBERNETES_NAMESPACE = "sky-kueue-system"
#: A namespace is a DNS-1123 label (Kubernetes ``apimachinery/pkg/util/validation``).
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(.*)$")
SPEC_FORMS = "sqlite:PATH, a bare PATH, kubernetes or kubernetes:NAMESPACE"


class StateKind(str, Enum):
    SQLITE = "sqlite"
    KUBERNETES = "kubernetes"


@dataclass(frozen=True)
class StateSpec:
    """A parsed ``--state``: a SQLite file, or a namespace of the API server."""

    kind: StateKind
    path: Path | None = None
    #: None for ``kubernetes`` without a namespace: resolved when opening.
    namespace: str | None = None

    def __str__(self) -> str:
        if self.kind is StateKind.SQLITE:
            return f"sqlite:{self.path}"
        return f"kubernetes:{self.namespace}" if self.namespace else "kubernetes"


def parse_state_spec(text: str | os.PathLike[str] | None, option: str = "--state") -> StateSpec:
    """Parses ``--state`` (None: ``$SKY_KUEUE_STATE``, else the default file).

    Raises:
        ValueError: the spec is malformed (one line, saying which forms are accepted).
    """
    if text is None:
        text = os.environ.get(STATE_ENV_VAR, DEFAULT_STATE_PATH)
    raw = os.fspath(text).strip()
    if not raw:
        raise ValueError(f"{option} is empty; expected {SPEC_FORMS}")
    if raw.lower() == StateKind.KUBERNETES.value:
        return StateSpec(StateKind.KUBERNETES)
    match = _SCHEME.match(raw)
    # "C:..." style single letters and paths with a slash before the colon are file paths.
    if match is None or len(match.group(1)) == 1 or "/" in match.group(1):
        return StateSpec(StateKind.SQLITE, Path(os.path.expanduser(raw)))
    scheme, rest = match.group(1).lower(), match.group(2)
    if scheme == StateKind.SQLITE.value:
        if not rest.strip():
            raise ValueError(f"{option} {raw!r}: sqlite: needs a file path (sqlite:PATH)")
        return StateSpec(StateKind.SQLITE, Path(os.path.expanduser(rest.strip())))
    if scheme == StateKind.KUBERNETES.value:
        namespace = rest.strip()
        if namespace and not _DNS1123_LABEL.match(namespace):
            raise ValueError(
                f"{option} {raw!r}: {namespace!r} is not a namespace name (lowercase letters, digits, '-', at most 63)"
            )
        return StateSpec(StateKind.KUBERNETES, namespace=namespace or None)
    raise ValueError(f"{option} {raw!r}: unknown store {scheme!r}; expected {SPEC_FORMS}")


def parse_kubernetes_spec(text: str, option: str = "--to") -> StateSpec:
    """Like :func:`parse_state_spec`, but only ``kubernetes[:NAMESPACE]`` is accepted.

    Raises:
        ValueError: malformed, or not a Kubernetes spec.
    """
    spec = parse_state_spec(text, option)
    if spec.kind is not StateKind.KUBERNETES:
        raise ValueError(f"{option} {text!r}: not a Kubernetes store; expected kubernetes or kubernetes:NAMESPACE")
    return spec


def pod_namespace(fallback: str, service_account_namespace_file: str = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """The pod's own namespace (its service account's), else ``fallback`` (not in a pod)."""
    try:
        return Path(service_account_namespace_file).read_text(encoding="utf-8").strip() or fallback
    except OSError:
        return fallback


def resolve_namespace(spec: StateSpec, service_account_namespace_file: str = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """The namespace a Kubernetes spec writes to."""
    return spec.namespace or pod_namespace(DEFAULT_KUBERNETES_NAMESPACE, service_account_namespace_file)


class ControllerState(Protocol):
    """What the controller keeps next to the history: watch cursors and a heartbeat.

    Implemented by :class:`~sky_kueue.controller.runtime_state.RuntimeState` (SQLite) and
    :class:`~sky_kueue.controller.kube_store.KubernetesRuntimeState`.
    """

    def cursor(self, resource: str) -> str | None: ...

    def save_cursor(self, resource: str, resource_version: str, at: float) -> None: ...

    def clear_cursor(self, resource: str) -> None: ...

    def beat(self, identity: str, leader: bool, at: float, details: dict[str, Any]) -> None: ...

    def heartbeat(self) -> Heartbeat | None: ...

    def cursors(self) -> dict[str, str]: ...

    def close(self) -> None: ...


@dataclass
class OpenedState:
    """An opened history store and its runtime state; close both with :meth:`close`."""

    spec: StateSpec
    store: HistoryStore
    runtime: ControllerState
    #: Where it lives, for messages: the file, or ``namespace/jobhistories.sky-kueue.io``.
    location: str

    def close(self) -> None:
        self.store.close()
        self.runtime.close()


def open_state(
    spec: StateSpec,
    *,
    api_client: ApiClient | None = None,
    read_only: bool = False,
    history_api_client: ApiClient | None = None,
) -> OpenedState:
    """Opens the store ``spec`` names (a Kubernetes spec needs ``api_client``).

    Args:
        api_client: the controller's own cluster (a Kubernetes spec's runtime state, and its
            history unless ``history_api_client`` is given).
        history_api_client: the cluster holding a Kubernetes spec's history (the fleet's home).

    Raises:
        StoreError: the file cannot be opened or created, or the API server does not serve
            (or lets this client read) the JobHistory resource in the namespace; or
            ``history_api_client`` given for a SQLite spec.
    """
    if spec.kind is StateKind.SQLITE:
        if history_api_client is not None:
            raise StoreError(f"the history is the file {spec.path}: only a kubernetes store lives in another cluster")
        from sky_kueue.controller.runtime_state import RuntimeState
        from sky_kueue.controller.sqlite_store import SqliteHistoryStore

        assert spec.path is not None
        path = spec.path
        if read_only:
            if not path.exists():
                raise StoreError(f"state file {path} does not exist (start the controller with --state {path})")
            if path.is_dir():
                raise StoreError(f"state path {path} is a directory, expected the controller's state file")
        else:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f"cannot create {path.parent}: {err.strerror}") from None
        sqlite_store = SqliteHistoryStore(path, read_only=read_only)
        try:
            runtime = RuntimeState(path, read_only=read_only)
        except StoreError:
            sqlite_store.close()
            raise
        return OpenedState(spec, sqlite_store, runtime, str(path))
    if api_client is None:
        raise StoreError(f"--state {spec}: needs a cluster connection (--kubeconfig/--context or --in-cluster)")
    from sky_kueue.controller.kube_store import KubernetesHistoryStore, KubernetesRuntimeState

    namespace = resolve_namespace(spec)
    location = f"jobhistories.sky-kueue.io in namespace {namespace}"
    kube_store = KubernetesHistoryStore(history_api_client or api_client, namespace)
    kube_store.check()
    kube_runtime = KubernetesRuntimeState(api_client, namespace)
    if history_api_client is not None:
        kube_runtime.check()  # the cursor and heartbeat stay in the controller's own cluster
        location += f" of {history_api_client.configuration.host}"
    return OpenedState(spec, kube_store, kube_runtime, location)

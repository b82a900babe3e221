"""A Kueue cluster in a box: the sandbox API server plus the Kueue emulation.

``with Sandbox(time_scale=60) as sb:`` starts an API server on 127.0.0.1 that behaves like a
cluster running Kueue (see :mod:`sky_kueue.sandbox.kueue_emulation`), writes a kubeconfig,
and lets tests, the demo and users talk to it with the official ``kubernetes`` client or
``kubectl``. ``sb.apply(...)`` loads manifests (files, directories, or dicts) straight into
the store, the way ``kubectl apply`` would create them.

Production code never imports this package; the sandbox imports the model, not the other
way round.
"""

from __future__ import annotations

import datetime
import pathlib
import tempfile
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import yaml

from sky_kueue.kueue import objects as o
from sky_kueue.sandbox import kubelet as kubelet_module
from sky_kueue.sandbox.apiserver import ApiError, ApiServer, Fault, FaultKind
from sky_kueue.sandbox.apiserver import kubeconfig as kubeconfig_file
from sky_kueue.sandbox.apiserver.clock import Clock
from sky_kueue.sandbox.apiserver.resources import default_resources
from sky_kueue.sandbox.apiserver.store import NAMESPACES
from sky_kueue.sandbox.containers import node as container_node
from sky_kueue.sandbox.containers.node import ContainerNode
from sky_kueue.sandbox.kubelet import LocalKubelet
from sky_kueue.sandbox.kueue_emulation.clock import ScaledClock
from sky_kueue.sandbox.kueue_emulation.emulator import DEFAULT_STEP_INTERVAL_SECONDS, KueueEmulator
from sky_kueue.sandbox.workloads import services as workload_services

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from sky_kueue.sandbox.apiserver.requestlog import RequestLog

#: Where ``(apiVersion, kind)`` maps to the store's resource name for ``apply``: every version
#: of every resource the server serves (Kueue's v1beta1 and v1beta2 alike).
#: The namespace Kueue's install manifests create and run in. A sandbox that emulates Kueue
#: has it, as a cluster with Kueue installed does: ``configs/controller/rbac.yaml`` binds the
#: controller's gate-detection Role there, so ``kubectl apply -k configs/controller`` needs it.
KUEUE_SYSTEM_NAMESPACE = "kueue-system"

_KIND_RESOURCES = {
    (resource.api_version(version), resource.kind): str(resource.key)
    for resource in default_resources()
    for version in resource.versions
}


class SandboxError(ValueError):
    """A manifest the sandbox cannot load (one line: which file, which object, why)."""


def _resource_for(doc: Mapping[str, Any]) -> str:
    api_version, kind = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
    if (api_version, kind) in _KIND_RESOURCES:
        return _KIND_RESOURCES[(api_version, kind)]
    raise SandboxError(f"{kind or '<no kind>'} {api_version or '<no apiVersion>'}: not served by the sandbox")


def _documents(source: str | pathlib.Path | Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(source, Mapping):
        return [dict(source)]
    if isinstance(source, (str, pathlib.Path)):
        path = pathlib.Path(source)
        if path.is_dir():
            docs: list[dict[str, Any]] = []
            for child in sorted(path.iterdir()):
                if child.suffix in (".yaml", ".yml"):
                    docs.extend(_documents(child))
            return docs
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise SandboxError(f"{path}: cannot read: {exc.strerror or exc}") from exc
        try:
            loaded = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise SandboxError(f"{path}: invalid YAML: {exc}") from exc
        result: list[dict[str, Any]] = []
        for doc in loaded:
            if not isinstance(doc, dict):
                raise SandboxError(f"{path}: expected Kubernetes objects, got {type(doc).__name__}")
            result.extend(doc.get("items") or [] if doc.get("kind") == "List" else [doc])
        return result
    return [dict(d) for d in source]


class Sandbox:
    """An API server on 127.0.0.1 with Kueue's behaviour; a context manager."""

    def __init__(
        self,
        time_scale: float = 1.0,
        priority_boost: bool = False,
        *,
        port: int = 0,
        host: str = "127.0.0.1",
        kubeconfig_path: str | pathlib.Path | None = None,
        config: o.KueueConfig | None = None,
        clock: Clock | None = None,
        start: datetime.datetime | None = None,
        step_interval_seconds: float = DEFAULT_STEP_INTERVAL_SECONDS,
        run_emulator: bool = True,
        kubelet: bool = False,
        kubelet_root: str | pathlib.Path | None = None,
        name: str = kubeconfig_file.DEFAULT_CONTEXT,
        containers: bool = False,
        pod_subnet: str | None = None,
        image_cache: str | pathlib.Path | None = None,
        pod_grace_periods: bool = False,
    ) -> None:
        """``name`` is the kubeconfig's cluster, user and context name: distinct names let
        several sandboxes share one ``KUBECONFIG`` (``KUBECONFIG=kc1:kc2:kc3``).

        ``containers`` (implies ``kubelet``; root only) runs pods' containers in namespaces of
        their own (:mod:`sky_kueue.sandbox.containers`); its state, pods' writable layers and
        logs live under ``kubelet_root`` (default ``~/.local/state/sky-kueue/sandboxes/<name>``),
        where the next start also finds a killed run's leftovers. ``pod_subnet`` (default: the
        first free 10.N.0.0/16 from 10.213) and ``image_cache`` (default
        ``$SKY_KUEUE_IMAGE_CACHE`` or ``~/.cache/sky-kueue/images``) configure it.

        ``pod_grace_periods`` makes deleted Kueue-managed pods run out their grace period on
        the sandbox's clock, as on a cluster (:class:`KueueEmulator`)."""
        # Real time unless told otherwise: a controller reads Workload ages off these stamps,
        # and a fixed past epoch made every Workload look months old (and aged at once).
        self.clock: Clock = clock or ScaledClock(time_scale, start)
        self.server = ApiServer(host, port, clock=self.clock)
        self.emulator = KueueEmulator(
            self.server.store, self.clock, config, priority_boost=priority_boost, pod_grace_periods=pod_grace_periods
        )
        self._kubeconfig_path = pathlib.Path(kubeconfig_path) if kubeconfig_path else None
        self.name = name
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._step_interval_seconds = step_interval_seconds
        self._run_emulator = run_emulator
        self._kubelet_wanted = kubelet or containers
        self._containers_wanted = containers
        self._pod_subnet = pod_subnet
        self._image_cache = image_cache
        self.containers: ContainerNode | None = None
        self.workload_services: workload_services.WorkloadServices | None = None
        self._kubelet_root = pathlib.Path(kubelet_root) if kubelet_root else None
        self._kubelet_tempdir: tempfile.TemporaryDirectory[str] | None = None
        self.kubelet: LocalKubelet | None = None

    # --- lifecycle ------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> Sandbox:
        self.server.start()
        if self._kubeconfig_path is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="sky-kueue-sandbox-")
            self._kubeconfig_path = pathlib.Path(self._tempdir.name) / "kubeconfig"
        self.server.write_kubeconfig(self._kubeconfig_path, context=self.name)
        if self._kubelet_wanted:
            root = self._kubelet_root
            if root is None and self._containers_wanted:
                root = (container_node.DEFAULT_STATE_ROOT / self.name).expanduser()
            if root is None:
                self._kubelet_tempdir = tempfile.TemporaryDirectory(prefix="sky-kueue-pods-")
                root = pathlib.Path(self._kubelet_tempdir.name)
            self.kubelet = kubelet_module.attach(self.server, root)
            if self._containers_wanted:
                self._start_containers(self.kubelet, root)
        if self._run_emulator:
            if self.server.store.try_get(NAMESPACES, KUEUE_SYSTEM_NAMESPACE) is None:
                namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KUEUE_SYSTEM_NAMESPACE}}
                self.server.store.create(NAMESPACES, namespace)
            self.emulator.start(self._step_interval_seconds)
        return self

    def _start_containers(self, kubelet: LocalKubelet, root: pathlib.Path) -> None:
        """Bring up the pod network and runtime; on failure undo what :meth:`start` did.

        Raises:
            ContainersUnavailable: not root, tools missing, or this sandbox already running.
            NetworkError: the pod network could not be created.
        """
        # Pods reach the API server over HTTPS as their ServiceAccount (load_incluster_config),
        # through the node's relay on the gateway; Deployments get pods (sandbox.workloads).
        services = self.workload_services = workload_services.start(self.server)
        node = container_node.ContainerNode(
            self.server.store,
            self.clock,
            root,
            lambda pod, container: kubelet.environment(pod, container, pathlib.Path("/root")),
            api_port=services.api_port,
            subnet=self._pod_subnet,
            image_cache=self._image_cache,
        )
        try:
            runtime = node.start()
        except BaseException:
            self.stop()
            raise
        self.containers = node
        assert node.network is not None
        services.connect(runtime, node.network.gateway)
        if node.proxy is not None:  # containers get https_proxy; the API relay must be reachable
            node.proxy.allow_endpoint(node.network.gateway, services.api_port)
        kubelet.runtime = runtime
        self.emulator.pod_starter = runtime

    def stop(self) -> None:
        self.emulator.stop()
        if self.containers is not None:
            self.emulator.pod_starter = None
            self.containers.stop()
            self.containers = None
        if self.workload_services is not None:
            self.workload_services.stop()
            self.workload_services = None
        if self.kubelet is not None:
            self.kubelet.shutdown()
        self.server.stop()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
        if self._kubelet_tempdir is not None:
            self._kubelet_tempdir.cleanup()
            self._kubelet_tempdir = None

    # --- access ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def kubeconfig_path(self) -> pathlib.Path:
        assert self._kubeconfig_path is not None, "start the sandbox first"
        return self._kubeconfig_path

    @property
    def store(self) -> Any:
        return self.server.store

    @property
    def requests(self) -> RequestLog:
        return self.server.requests

    def inject(self, kind: FaultKind | str, **match_and_options: Any) -> Fault:
        return self.server.inject(kind, **match_and_options)

    def api_client(self, retries: bool = False) -> ApiClient:
        """An official-client ``ApiClient`` for the sandbox (urllib3 retries off by default)."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.retries = None if retries else False
        return client.ApiClient(configuration)

    def apply(
        self, source: str | pathlib.Path | Mapping[str, Any] | Iterable[Mapping[str, Any]]
    ) -> list[dict[str, Any]]:
        """Create (or replace the spec of) every object in ``source``; returns what was stored.

        A new object's ``status`` is kept (written through the status subresource), so a
        snapshot with admitted Workloads loads as it was taken.

        Raises:
            SandboxError: for unreadable files, invalid YAML or a kind the sandbox does not serve.
        """
        stored = []
        for original in _documents(source):
            resource = _resource_for(original)
            rtype = self.store.resource(resource)
            version = str(original.get("apiVersion", "")).rpartition("/")[2]
            doc = rtype.to_storage(original, version) if version in rtype.versions else dict(original)
            meta = doc.get("metadata") or {}
            name, namespace = meta.get("name"), meta.get("namespace")
            existing = self.store.try_get(resource, name, namespace) if name else None
            try:
                if existing is None:
                    created = self.store.create(resource, doc, namespace)
                    if doc.get("status") and "status" in rtype.subresources:
                        # a snapshot's status (e.g. an admitted Workload) is restored as its
                        # controller would have written it
                        status = doc["status"]

                        def restore(obj: dict[str, Any], status: Any = status) -> None:
                            obj["status"] = status

                        created = self.store.mutate(
                            resource, created["metadata"]["name"], restore, namespace, subresource="status"
                        )
                    stored.append(created)
                else:
                    merged = dict(existing)
                    for field, value in doc.items():
                        if field not in ("metadata", "status"):
                            merged[field] = value
                    stored.append(self.store.update(resource, merged, namespace))
            except ApiError as exc:
                raise SandboxError(f"{doc.get('kind')} {namespace + '/' if namespace else ''}{name}: {exc}") from exc
        return stored

    def step(self) -> Any:
        """Run one emulation step now (for tests driving a manual clock)."""
        return self.emulator.step()

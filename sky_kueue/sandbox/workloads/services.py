"""What a sandbox with containers runs besides its pods: the deployment controller and
in-cluster access (HTTPS, ServiceAccount credentials, ConfigMap/Secret volume files).

Why one object: the sandbox starts these around its container node in a fixed order - the
HTTPS listener first (the node's relay forwards the pod gateway's port to it), then, once the
node's network exists, the gateway named in the serving certificate and the per-pod files
hooked into the runtime - and stops them in reverse.

Only with containers: in a process-only sandbox nothing would run a Deployment's pods, and a
Deployment some test loads as plain data (Kueue's own, for gate detection) must stay data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from sky_kueue.sandbox.apiserver.server import ApiServer
from sky_kueue.sandbox.workloads import in_cluster
from sky_kueue.sandbox.workloads.deployments import DeploymentController
from sky_kueue.sandbox.workloads.volumes import VolumeFiles

FilesHook = Any  # runtime.ExtraFiles: (pod, container) -> {path: bytes}


class FileHookRuntime(Protocol):
    """What of the container runtime the services use: its per-container files hooks."""

    extra_files: list[FilesHook]


@dataclass
class WorkloadServices:
    """The deployment controller and in-cluster access of one sandbox."""

    deployments: DeploymentController
    access: in_cluster.InClusterAccess

    @property
    def api_port(self) -> int:
        """The HTTPS port pods reach (through the node's relay on the gateway)."""
        return self.access.port

    def connect(self, runtime: FileHookRuntime, gateway: str) -> None:
        """Once the pod network exists: name its gateway in the certificate and give every
        container its ServiceAccount files and ConfigMap/Secret volumes."""
        self.access.add_addresses([gateway])
        volumes = VolumeFiles(self.access.server.store)

        def service_account_files(pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, bytes]:
            return self.access.pod_files(pod)

        runtime.extra_files.extend([service_account_files, volumes])

    def stop(self) -> None:
        self.deployments.stop()
        self.access.close()


def start(server: ApiServer) -> WorkloadServices:
    """Start HTTPS for pods and the deployment controller on a started ``server``.

    Raises:
        OSError: the HTTPS listener could not bind.
    """
    access = in_cluster.serve(server)
    return WorkloadServices(DeploymentController(server.store).start(), access)

"""The sandbox's node when containers are on: pod network, API relay, registry proxy, runtime.

Why one object: these start together (the runtime needs the network's gateway, the relay and
the proxy listen on it) and stop in the reverse order, and a killed sandbox's leftovers must be
cleaned before anything new is created. :class:`ContainerNode` owns that order; the sandbox
only starts and stops it.

The sandbox's directory (default ``~/.local/state/sky-kueue/sandboxes/<name>``) holds the
network state file, the pods' writable layers and logs, and a lock held while the sandbox
runs, so that a second sandbox of the same name fails instead of removing the first one's
namespaces as leftovers.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import pathlib
import shutil
import subprocess
from collections.abc import Callable, Iterator, Mapping
from typing import IO, Any

from sky_kueue.sandbox.apiserver.clock import Clock
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.containers import images as images_module
from sky_kueue.sandbox.containers import recipes_controller, recipes_skypilot
from sky_kueue.sandbox.containers.images import ImageStore
from sky_kueue.sandbox.containers.network import REQUIRED_TOOLS, NetworkError, PodNetwork, cleanup_leftovers
from sky_kueue.sandbox.containers.proxy import DEFAULT_PROXY_PORT, RegistryProxy
from sky_kueue.sandbox.containers.relay import ApiRelay
from sky_kueue.sandbox.containers.runtime import PodRuntime

#: Recipes every containers sandbox can build, registered by importing their modules: the
#: image SkyPilot's Kubernetes pods name by default (``sandbox up --containers`` then
#: ``sky launch`` finds it instead of ErrImagePull), and, when sky-kueue runs from a checkout,
#: the controller's image ``configs/controller/deployment.yaml`` names (then ``kubectl apply -k
#: configs/controller`` runs the controller; from an installed wheel there are no sources to
#: build it from, and its pods' ErrImagePull says how to get the image).
PRESET_RECIPES = tuple(
    recipe for recipe in (recipes_skypilot.SKYPILOT_RUNTIME, recipes_controller.CONTROLLER) if recipe is not None
)

DEFAULT_STATE_ROOT = pathlib.Path("~/.local/state/sky-kueue/sandboxes")
#: Where the automatic subnet choice starts (10.<N>.0.0/16, N counting up to 254).
FIRST_AUTO_SUBNET_OCTET = 213
SUBNET_LOCK = pathlib.Path("/run/sky-kueue-subnets.lock")
LOCK_FILE = "sandbox.lock"
PODS_DIR = "pods"
#: Only used to find the state file before the real subnet is chosen.
DEFAULT_PLACEHOLDER_SUBNET = "10.213.0.0/16"


class ContainersUnavailable(RuntimeError):
    """Containers cannot run here (one line: what is missing, what to install)."""


def preflight() -> None:
    """Raise if this process cannot run containers.

    Raises:
        ContainersUnavailable: not root, or a required tool is missing (naming its package).
    """
    if os.geteuid() != 0:
        raise ContainersUnavailable("--containers needs root (network namespaces, mounts); run it as root")
    tools = {**REQUIRED_TOOLS, "debootstrap": "debootstrap", "chroot": "coreutils"}
    missing = [f"{tool} (package {package})" for tool, package in tools.items() if shutil.which(tool) is None]
    if missing:
        raise ContainersUnavailable(f"--containers needs {', '.join(missing)}: apt-get install the packages named")


def used_ipv4_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network configured on the host's interfaces."""
    done = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, check=False)
    networks = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if "inet" in fields:
            networks.append(ipaddress.IPv4Interface(fields[fields.index("inet") + 1]).network)
    return networks


def pick_subnet(used: list[ipaddress.IPv4Network]) -> str:
    """The first 10.N.0.0/16 (N from 213) that overlaps no network the host has."""
    for octet in range(FIRST_AUTO_SUBNET_OCTET, 255):
        candidate = ipaddress.IPv4Network(f"10.{octet}.0.0/16")
        if not any(candidate.overlaps(net) for net in used):
            return str(candidate)
    raise ContainersUnavailable("no free 10.N.0.0/16 for the pod network; pass a pod subnet explicitly")


@contextlib.contextmanager
def _subnet_lock() -> Iterator[None]:
    with open(SUBNET_LOCK, "w", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class ContainerNode:
    """Starts and stops the container machinery of one sandbox."""

    def __init__(
        self,
        store: ObjectStore,
        clock: Clock,
        root: pathlib.Path,
        environment: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, str]],
        *,
        api_port: int,
        subnet: str | None = None,
        image_cache: str | os.PathLike[str] | None = None,
        proxy_port: int = DEFAULT_PROXY_PORT,
    ) -> None:
        self.root = root
        self._store = store
        self._clock = clock
        self._environment = environment
        self._api_port = api_port
        self._subnet = subnet
        self._proxy_port = proxy_port
        self.images = ImageStore(image_cache)
        self.network: PodNetwork | None = None
        self.relay: ApiRelay | None = None
        self.proxy: RegistryProxy | None = None
        self.runtime: PodRuntime | None = None
        self._lock_handle: IO[str] | None = None

    def start(self) -> PodRuntime:
        """Clean a killed predecessor's leftovers, then bring everything up.

        Raises:
            ContainersUnavailable: not root, a tool missing, the sandbox already running.
            NetworkError: the bridge could not be created.
            OSError: the relay or proxy could not bind.
        """
        preflight()
        self.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.root / LOCK_FILE, "w", encoding="utf-8")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            handle.close()
            raise ContainersUnavailable(f"a sandbox with containers already runs from {self.root}") from exc
        self._lock_handle = handle
        try:
            pods = self.root / PODS_DIR
            with _subnet_lock():
                network = PodNetwork(self.root, self._subnet or DEFAULT_PLACEHOLDER_SUBNET, str(os.getpid()))
                # the predecessor's bridge would make its own subnet look taken: clean first
                cleanup_leftovers(network.state_path)
                images_module.remove_tree(pods)
                subnet = self._subnet or pick_subnet(used_ipv4_networks())
                network = PodNetwork(self.root, subnet, str(os.getpid()))
                network.start()
            self.network = network
            self.relay = ApiRelay(network.gateway, self._api_port, ("127.0.0.1", self._api_port)).start()
            self.proxy = RegistryProxy(network.gateway, self._proxy_port).start()
            self.runtime = PodRuntime(
                self._store,
                pods,
                self.images,
                network,
                self._clock,
                self._environment,
                api_address=(network.gateway, self.relay.port),
                proxy_url=self.proxy.url,
            )
        except BaseException:
            self.stop()
            raise
        return self.runtime

    def stop(self) -> None:
        """Stop every pod, the relay and proxy, remove the network; release the lock."""
        if self.runtime is not None:
            self.runtime.shutdown()
            self.runtime = None
        for server in (self.relay, self.proxy):
            if server is not None:
                server.stop()
        self.relay = self.proxy = None
        if self.network is not None:
            with contextlib.suppress(NetworkError):
                self.network.stop()
            self.network = None
        with contextlib.suppress(images_module.ImageError, OSError):
            images_module.remove_tree(self.root / PODS_DIR)
        if self._lock_handle is not None:
            self._lock_handle.close()
            self._lock_handle = None

"""The sandbox's pod network: one bridge, one network namespace and veth pair per pod.

Why this shape: several SkyPilot pods each run sshd on port 22, so each pod needs an address
of its own; a network namespace per pod with a veth whose host end joins a bridge gives that
without touching anything the host already has. The bridge holds the gateway address (``.1``
of a private /16, 10.213.0.0/16 unless configured); the host reaches pods through it, and pods
reach the host's API server relay and registry proxy on it. There is no NAT and no route off
the machine: a pod reaches nothing but the host side of this network.

Every name the sandbox creates (bridge ``skbr<hash>``, namespaces ``sk-<hash>``, host veth
ends ``skv<hash>``) is recorded in a state file under the sandbox root *before* it is
created, so that the next start can remove what a killed sandbox left behind - and only that.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import logging
import os
import pathlib
import shutil
import signal
import subprocess
import threading
from dataclasses import dataclass, field

LOG = logging.getLogger(__name__)

DEFAULT_POD_SUBNET = "10.213.0.0/16"
#: Interface names are at most 15 bytes (IFNAMSIZ - 1).
IFNAME_MAX_CHARS = 15
STATE_FILE = "network-state.json"
#: The pod's interface, inside its namespace.
POD_INTERFACE = "eth0"
#: Tools this module runs, with the Debian package that provides each.
REQUIRED_TOOLS = {"ip": "iproute2", "unshare": "util-linux", "nsenter": "util-linux", "mount": "mount"}


class NetworkError(RuntimeError):
    """A network change failed (one line: which command, its error)."""


def _short_hash(*parts: str, length: int = 10) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


def run_ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ip ARGS``; raises :class:`NetworkError` with ip's message when it fails and ``check``."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {done.stderr.strip() or f'exit code {done.returncode}'}")
    return done


def missing_tools() -> list[str]:
    """``"tool (package)"`` for every required tool not on PATH."""
    return [f"{tool} (apt-get install {package})" for tool, package in REQUIRED_TOOLS.items() if not shutil.which(tool)]


@dataclass
class NetworkState:
    """What the sandbox created, written before each creation (the cleanup list after a crash)."""

    bridge: str | None = None
    namespaces: list[str] = field(default_factory=list)
    veths: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, path: pathlib.Path) -> NetworkState:
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, ValueError) as exc:
            raise NetworkError(
                f"{path}: unreadable sandbox state ({exc}); remove it after checking `ip netns`"
            ) from exc
        return cls(
            bridge=raw.get("bridge"),
            namespaces=list(raw.get("namespaces") or []),
            veths=list(raw.get("veths") or []),
            mounts=list(raw.get("mounts") or []),
        )

    def save(self, path: pathlib.Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.__dict__, indent=1), encoding="utf-8")
        os.replace(temporary, path)


@dataclass(frozen=True)
class PodAddress:
    """A pod's place on the network."""

    netns: str
    host_veth: str
    address: str
    prefix_length: int


class PodNetwork:
    """Creates and removes the bridge and the per-pod namespaces; thread-safe.

    ``root`` is the sandbox's directory (its state file lives there); ``subnet`` a private
    IPv4 network of at least /24. ``sandbox_id`` distinguishes the names of two sandboxes
    running at once (their subnets must differ too).
    """

    def __init__(self, root: pathlib.Path, subnet: str = DEFAULT_POD_SUBNET, sandbox_id: str = "") -> None:
        network = ipaddress.IPv4Network(subnet)
        if not network.is_private or network.prefixlen > 24:
            raise NetworkError(f"pod subnet {subnet}: must be a private IPv4 network of /24 or larger")
        self.subnet = network
        self.gateway = str(network.network_address + 1)
        self.root = root
        self.state_path = root / STATE_FILE
        self._id = _short_hash(str(root.resolve()), sandbox_id, length=6)
        self.bridge = f"skbr{self._id}"
        self._lock = threading.Lock()
        self._state = NetworkState()
        self._used: set[str] = {self.gateway}
        self._next = int(network.network_address) + 2

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        """Clean up a previous run's leftovers, then create the bridge with the gateway address.

        Raises:
            NetworkError: a leftover could not be removed, or the bridge not created.
        """
        cleanup_leftovers(self.state_path)
        with self._lock:
            self._state = NetworkState(bridge=self.bridge)
            self._state.save(self.state_path)
        if run_ip("link", "show", self.bridge, check=False).returncode == 0:
            run_ip("link", "del", self.bridge)
        run_ip("link", "add", self.bridge, "type", "bridge")
        run_ip("addr", "add", f"{self.gateway}/{self.subnet.prefixlen}", "dev", self.bridge)
        run_ip("link", "set", self.bridge, "up")

    def stop(self) -> None:
        """Remove every namespace and veth still recorded, then the bridge and the state file."""
        with self._lock:
            namespaces = list(self._state.namespaces)
        for netns in namespaces:
            self._delete_netns(netns)
        cleanup_leftovers(self.state_path)

    # --- pods -------------------------------------------------------------------------------

    def names(self, namespace: str, pod: str, uid: str) -> tuple[str, str]:
        """The network namespace and host veth names of a pod."""
        digest = _short_hash(self._id, namespace, pod, uid)
        return f"sk-{digest}", f"skv{digest}"[:IFNAME_MAX_CHARS]

    def add_pod(self, namespace: str, pod: str, uid: str, hostname: str) -> PodAddress:
        """A new network namespace for the pod, wired to the bridge, with an address of its own.

        Raises:
            NetworkError: an ``ip`` command failed (what was created is removed again).
        """
        netns, host_veth = self.names(namespace, pod, uid)
        peer = f"skp{host_veth[3:]}"[:IFNAME_MAX_CHARS]
        with self._lock:
            address = self._allocate()
            self._state.namespaces.append(netns)
            self._state.veths.append(host_veth)
            self._state.save(self.state_path)
        try:
            run_ip("netns", "add", netns)
            run_ip("link", "add", host_veth, "type", "veth", "peer", "name", peer)
            run_ip("link", "set", peer, "netns", netns)
            run_ip("link", "set", host_veth, "master", self.bridge)
            run_ip("link", "set", host_veth, "up")
            inside = ("-n", netns)
            run_ip(*inside, "link", "set", "lo", "up")
            run_ip(*inside, "link", "set", peer, "name", POD_INTERFACE)
            run_ip(*inside, "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", POD_INTERFACE)
            run_ip(*inside, "link", "set", POD_INTERFACE, "up")
            run_ip(*inside, "route", "add", "default", "via", self.gateway)
        except NetworkError:
            self.remove_pod(PodAddress(netns, host_veth, address, self.subnet.prefixlen))
            raise
        return PodAddress(netns, host_veth, address, self.subnet.prefixlen)

    def remove_pod(self, pod: PodAddress) -> None:
        """Delete the pod's namespace (its veth goes with it) and free its address."""
        self._delete_netns(pod.netns)
        if run_ip("link", "show", pod.host_veth, check=False).returncode == 0:
            run_ip("link", "del", pod.host_veth, check=False)
        with self._lock:
            self._used.discard(pod.address)
            if pod.host_veth in self._state.veths:
                self._state.veths.remove(pod.host_veth)
            self._state.save(self.state_path)

    def _delete_netns(self, netns: str) -> None:
        if _netns_exists(netns):
            run_ip("netns", "del", netns, check=False)
        with self._lock:
            if netns in self._state.namespaces:
                self._state.namespaces.remove(netns)
            self._state.save(self.state_path)

    def _allocate(self) -> str:
        last = int(self.subnet.broadcast_address) - 1
        first = int(self.subnet.network_address) + 2
        for _ in range(last - first + 1):
            candidate = str(ipaddress.IPv4Address(self._next))
            self._next = self._next + 1 if self._next < last else first
            if candidate not in self._used:
                self._used.add(candidate)
                return candidate
        raise NetworkError(f"pod subnet {self.subnet} is full")


def _netns_exists(netns: str) -> bool:
    return (pathlib.Path("/run/netns") / netns).exists() or (pathlib.Path("/var/run/netns") / netns).exists()


def kill_processes_in(netns: str) -> None:
    """SIGKILL every process in a network namespace the sandbox created (a killed sandbox's
    containers outlive it: their ``unshare`` parents were children of the dead process)."""
    if not _netns_exists(netns):
        return
    done = run_ip("netns", "pids", netns, check=False)
    for text in done.stdout.split():
        if text.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(text), signal.SIGKILL)


def cleanup_leftovers(state_path: pathlib.Path) -> NetworkState:
    """Remove what a state file lists (a killed sandbox's namespaces, veths, bridge, mounts).

    Returns what was listed. Only names in the file are touched.

    Raises:
        NetworkError: the state file is unreadable, or something listed would not go away.
    """
    state = NetworkState.load(state_path)
    for netns in state.namespaces:
        kill_processes_in(netns)
    for point in reversed(state.mounts):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)
    for netns in state.namespaces:
        if _netns_exists(netns):
            run_ip("netns", "del", netns, check=False)
    for veth in state.veths:
        if run_ip("link", "show", veth, check=False).returncode == 0:
            run_ip("link", "del", veth, check=False)
    if state.bridge and run_ip("link", "show", state.bridge, check=False).returncode == 0:
        run_ip("link", "del", state.bridge, check=False)
    leftovers = [n for n in state.namespaces if _netns_exists(n)]
    if leftovers:
        raise NetworkError(f"network namespaces {', '.join(leftovers)} would not go away (`ip netns del` them)")
    if state.namespaces or state.veths or state.mounts:
        LOG.info("removed network namespaces and links listed in %s", state_path)
    state_path.unlink(missing_ok=True)
    return state

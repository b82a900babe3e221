"""A minimal kube-scheduler and kubelet status: pods that may run are bound to a Node that
fits them and reported Running, with a pod IP and the usual conditions.

Why: Kueue only decides *whether* a workload may start (it removes the scheduling gate); on a
real cluster kube-scheduler then binds each pod (``spec.nodeName``) and the kubelet reports it
Running with ``status.podIP``. SkyPilot's provisioner waits for exactly that
(``sky/provision/kubernetes/instance.py``: scheduled, then Running and Ready), so a sandbox
that only flipped ``phase`` could not be launched on.

The fit is requests against allocatable, summed over the pods already bound to a node and not
finished (first fit, Nodes in name order). A pod that fits nowhere, or a sandbox without
Nodes, stays Running without a node, as before Nodes existed: Kueue's quota, not node
capacity, is what the sandbox models. Pod IPs come from the loopback range (127.0.1.x): the
sandbox's pods are local processes, and no traffic may leave the machine.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterable, Mapping
from decimal import Decimal
from typing import Any, Protocol

from sky_kueue.kueue import quantity
from sky_kueue.kueue.errors import ModelError

Obj = dict[str, Any]

#: First pod IP handed out; loopback, so whatever connects to a pod stays on this machine.
FIRST_POD_IP = ipaddress.IPv4Address("127.0.1.1")
#: Last pod IP before the allocator wraps around.
LAST_POD_IP = ipaddress.IPv4Address("127.0.255.254")
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class PodStarter(Protocol):
    """A kubelet that runs bound pods itself (``sandbox.containers``) and so owns their
    Running transition; without one, a bound pod is reported Running at once (:func:`running`).

    ``start_pod`` is called each time the scheduler finds the pod bound and ungated; it must be
    idempotent and must not block (it runs in the emulator's step).
    """

    def start_pod(self, pod: Mapping[str, Any], node: Mapping[str, Any] | None) -> None: ...


class PodIpAllocator:
    """Hands out distinct loopback addresses (thread-safe; wraps after ~65,000 pods)."""

    def __init__(self) -> None:
        self._next = int(FIRST_POD_IP)
        self._lock = threading.Lock()

    def allocate(self) -> str:
        with self._lock:
            address = ipaddress.IPv4Address(self._next)
            self._next = self._next + 1 if self._next < int(LAST_POD_IP) else int(FIRST_POD_IP)
            return str(address)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Decimal]:
    """The pod's requests as the scheduler counts them: the sum over containers, at least each
    init container's (Kubernetes' effective request), plus overhead."""
    spec = pod.get("spec") or {}
    total = _sum(c for c in spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        for name, value in _sum([init]).items():
            total[name] = max(total.get(name, Decimal(0)), value)
    for name, value in _quantities(spec.get("overhead") or {}).items():
        total[name] = total.get(name, Decimal(0)) + value
    return total


def choose_node(
    nodes: Iterable[Mapping[str, Any]], bound: Iterable[Mapping[str, Any]], pod: Mapping[str, Any]
) -> str | None:
    """The first Ready node (by name) whose free allocatable covers the pod's requests."""
    used: dict[str, dict[str, Decimal]] = {}
    for other in bound:
        node = (other.get("spec") or {}).get("nodeName")
        if not node or (other.get("status") or {}).get("phase") in _TERMINAL_PHASES:
            continue
        usage = used.setdefault(node, {})
        for name, value in pod_requests(other).items():
            usage[name] = usage.get(name, Decimal(0)) + value
    wanted = pod_requests(pod)
    for node in sorted(nodes, key=lambda n: str((n.get("metadata") or {}).get("name", ""))):
        name = str((node.get("metadata") or {}).get("name", ""))
        if not _ready(node):
            continue
        allocatable = _quantities((node.get("status") or {}).get("allocatable") or {})
        usage = used.get(name, {})
        if all(usage.get(r, Decimal(0)) + v <= allocatable.get(r, Decimal(0)) for r, v in wanted.items() if v > 0):
            return name
    return None


def running(stamp: str, pod_ip: str, host_ip: str | None) -> Any:
    """The status change of a pod the kubelet started: Running, Ready, with its IPs."""

    def change(status: Obj) -> None:
        status["phase"] = "Running"
        status.setdefault("startTime", stamp)
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
        if host_ip is not None:
            status["hostIP"] = host_ip
            status["hostIPs"] = [{"ip": host_ip}]
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in _RUNNING_CONDITIONS]
        conditions.extend({"type": kind, "status": "True", "lastTransitionTime": stamp} for kind in _RUNNING_CONDITIONS)
        status["conditions"] = conditions

    return change


_RUNNING_CONDITIONS = ("PodScheduled", "Initialized", "ContainersReady", "Ready")


def container_statuses(pod: Mapping[str, Any], stamp: str) -> list[Obj]:
    """``status.containerStatuses`` of a started pod (every container running and ready)."""
    return [
        {
            "name": container.get("name", ""),
            "image": container.get("image", ""),
            "imageID": "",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": stamp}},
        }
        for container in (pod.get("spec") or {}).get("containers") or []
    ]


def host_ip_of(node: Mapping[str, Any] | None) -> str | None:
    """A pod's ``status.hostIP``: its node's ``InternalIP`` address (None without a node or one).

    Both the binding here and the container runtime's kubelet report it, from the same node.
    """
    if node is None:
        return None
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return None


def _ready(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _sum(containers: Iterable[Mapping[str, Any]]) -> dict[str, Decimal]:
    total: dict[str, Decimal] = {}
    for container in containers:
        requests = dict((container.get("resources") or {}).get("limits") or {})
        requests.update((container.get("resources") or {}).get("requests") or {})
        for name, value in _quantities(requests).items():
            total[name] = total.get(name, Decimal(0)) + value
    return total


def _quantities(values: Mapping[str, Any]) -> dict[str, Decimal]:
    result = {}
    for name, value in values.items():
        try:
            result[str(name)] = quantity.parse_quantity(value)
        except (ModelError, ValueError, TypeError):
            continue  # the API server stored it; an unreadable quantity just does not count
    return result

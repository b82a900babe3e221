"""The machine-wide settings a real node changes, recorded before the first node and put back after the last.

Why a record: a kubelet changes settings that belong to the whole machine, not to one
cluster. With ``protectKernelDefaults: false`` it sets six kernel tunables
(``pkg/kubelet/cm/container_manager_linux.go`` ``setupKernelTunables``), and it creates
iptables chains (``pkg/kubelet/kubelet_network_linux.go`` ``syncIPTablesRules``: the
``KUBE-IPTABLES-HINT`` chain, ``KUBE-FIREWALL`` with the jumps to it from ``INPUT`` and
``OUTPUT``, and the ``KUBE-KUBELET-CANARY`` chains its monitor uses). Pod traffic off the
machine needs ``net.ipv4.ip_forward``. Several local clusters may run nodes at once, so the
first node to start writes what the machine had (:data:`RECORD`), and the last one to stop
puts it back and removes the record; a chain that existed before is never removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

#: The record of what the machine had before the first real node (removed by the last).
RECORD = Path("/run/sky-kueue/host-before-real-nodes.json")
#: Kernel tunables the kubelet sets (``setupKernelTunables``) and the forwarding pods need.
SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
#: The kubelet's chains: (iptables binary, table, chain).
KUBELET_CHAINS = (
    ("iptables", "mangle", "KUBE-IPTABLES-HINT"),
    ("ip6tables", "mangle", "KUBE-IPTABLES-HINT"),
    ("iptables", "filter", "KUBE-FIREWALL"),
    ("iptables", "mangle", "KUBE-KUBELET-CANARY"),
    ("iptables", "nat", "KUBE-KUBELET-CANARY"),
    ("iptables", "filter", "KUBE-KUBELET-CANARY"),
    ("ip6tables", "mangle", "KUBE-KUBELET-CANARY"),
    ("ip6tables", "nat", "KUBE-KUBELET-CANARY"),
    ("ip6tables", "filter", "KUBE-KUBELET-CANARY"),
)
#: Rules the kubelet adds to built-in chains, to remove before its chains.
KUBELET_JUMPS = (
    ("iptables", "filter", "INPUT", "KUBE-FIREWALL"),
    ("iptables", "filter", "OUTPUT", "KUBE-FIREWALL"),
)
PROC_SYS = Path("/proc/sys")


def read_sysctl(name: str) -> str:
    return (PROC_SYS / name).read_text(encoding="ascii").strip()


def write_sysctl(name: str, value: str) -> None:
    (PROC_SYS / name).write_text(value + "\n", encoding="ascii")


def chain_exists(binary: str, table: str, chain: str) -> bool:
    done = subprocess.run([binary, "-w", "-t", table, "-S", chain], capture_output=True, check=False)
    return done.returncode == 0


def iptables(binary: str, *args: str, check: bool = True) -> bool:
    """Run ``binary -w ARGS``; False when it fails and ``check`` is off.

    Raises:
        RuntimeError: it failed and ``check`` is on (iptables's message in one line).
    """
    done = subprocess.run([binary, "-w", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0 and check:
        raise RuntimeError(f"{binary} {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done.returncode == 0


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    RECORD.parent.mkdir(parents=True, exist_ok=True)
    with (RECORD.parent / ".host-record.lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def record_before(node_id: str) -> None:
    """Add ``node_id`` to the nodes holding the record, writing the record if it is the first."""
    with _locked():
        if RECORD.exists():
            data = json.loads(RECORD.read_text(encoding="utf-8"))
        else:
            data = {
                "sysctls": {name: read_sysctl(name) for name in SYSCTLS},
                "chains": [list(c) for c in KUBELET_CHAINS if chain_exists(*c)],
                "nodes": [],
            }
        if node_id not in data["nodes"]:
            data["nodes"].append(node_id)
        RECORD.write_text(json.dumps(data, indent=2), encoding="utf-8")


def restore_after(node_id: str) -> list[str]:
    """Drop ``node_id`` from the record; if no node is left, put the machine back. Returns
    what was restored (one line each), empty while other nodes run."""
    with _locked():
        if not RECORD.exists():
            return []
        data = json.loads(RECORD.read_text(encoding="utf-8"))
        data["nodes"] = [n for n in data["nodes"] if n != node_id]
        if data["nodes"]:
            RECORD.write_text(json.dumps(data, indent=2), encoding="utf-8")
            return []
        done: list[str] = []
        for name, value in data["sysctls"].items():
            if read_sysctl(name) != value:
                write_sysctl(name, value)
                done.append(f"{name}={value}")
        existed = {tuple(c) for c in data["chains"]}
        for binary, table, chain, target in KUBELET_JUMPS:
            if (binary, table, target) not in existed:
                while iptables(binary, "-t", table, "-D", chain, "-j", target, check=False):
                    done.append(f"{binary} -t {table} -D {chain} -j {target}")
        for binary, table, chain in KUBELET_CHAINS:
            if (binary, table, chain) not in existed and chain_exists(binary, table, chain):
                iptables(binary, "-t", table, "-F", chain)
                iptables(binary, "-t", table, "-X", chain)
                done.append(f"{binary} -t {table} -X {chain}")
        RECORD.unlink()
        with contextlib.suppress(OSError):
            (RECORD.parent / ".host-record.lock").unlink()
            RECORD.parent.rmdir()
        return done

"""A real node for the real cluster: containerd, runc, CNI's bridge and a kubelet, all as upstream ships them.

Why: KWOK's nodes make pods Running without containers, so exec, logs, port-forward, a pod's
termination grace and the job inside SkyPilot's pod never happen on them. This node runs
them: the kubelet from the same ``k8s.io/kubernetes`` release as the control plane
(:mod:`.build`), Debian's ``containerd`` (1.6, CRI v1) and ``runc``, and Debian's
``containernetworking-plugins`` (``bridge``, ``host-local``, ``loopback``, ``portmap``).

What it owns, all removed by :meth:`RealNode.down` (the order is the reverse of ``start``):

* processes: containerd, the kubelet, the image registry of :mod:`.registry`, and the
  containerd shims and containers they start (found by containerd's socket, never by name);
* directories: ``<cluster>/node`` (containerd's root, the kubelet's root, pod logs, CNI
  config and IPAM state) and ``/run/sky-kueue/<id>`` (containerd's state and socket: short
  paths, as a unix socket's path is limited to 107 bytes);
* mounts below those (overlay snapshots, pod volumes, network namespaces: containerd is told
  to keep them under its state directory, ``netns_mounts_under_state_dir``);
* cgroups: ``/<id>`` in every cgroup hierarchy, the kubelet's ``cgroupRoot``;
* the bridge ``skrn<hash>`` with the node's address, the iptables rules of this node (the
  ``kubernetes`` Service's address translated to the API server on 127.0.0.1, the
  masquerade of pod traffic leaving the machine), and the machine-wide settings of
  :mod:`.host`.

Networking: the node's address is the bridge's gateway address (the kubelet refuses a
loopback node IP), the kubelet serves on it with a certificate for it, and the API server
reaches it there. There is no kube-proxy: the one Service address that works is the
``kubernetes`` Service's (``10.96.0.1:443``), translated to the API server on 127.0.0.1
with ``route_localnet`` on the bridge (the kubelet's own ``KUBE-FIREWALL`` rule drops any
other packet to 127.0.0.0/8 from off the host). Pods reach the API server and whatever this
machine reaches (the package registries): their traffic is masqueraded behind the host.

The machine's cgroups are v1 (hybrid: v1 controllers, an empty cgroup2 at
``/sys/fs/cgroup/unified``); kubelet v1.35 refuses v1 unless ``failCgroupV1: false``
(``pkg/kubelet/apis/config/validation/validation_linux.go``), which its configuration sets.
"""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from sky_kueue.realcluster import host, manifests, oci_layout
from sky_kueue.realcluster.cluster import KUBELET_CLIENT_USER, ClusterError, Process, free_port, stop_process
from sky_kueue.realcluster.pki import CertificateAuthority

if TYPE_CHECKING:
    from sky_kueue.realcluster.cluster import RealCluster

#: The node's name (one real node per cluster).
NODE_NAME = "real-node-0"
#: Where the per-node runtime directories go (containerd's state and socket).
RUN_ROOT = Path("/run/sky-kueue")
#: The range the node's pod subnet (a free /24) is taken from.
POD_SUPERNET = ipaddress.IPv4Network("10.218.0.0/16")
#: Where containerd 1.6's shims put their sockets, whatever containerd's own state directory.
SHIM_SOCKET_DIR = Path("/run/containerd/s")
#: Debian's CNI plugins.
CNI_BIN_DIR = Path("/usr/lib/cni")
#: The tools and the Debian package of each.
REQUIRED_TOOLS = {
    "containerd": "containerd",
    "ctr": "containerd",
    "runc": "runc",
    "iptables": "iptables",
    "ip": "iproute2",
    "tar": "tar",
}
#: The reference of the pause image the node builds (no registry has it; ``.invalid`` says so).
PAUSE_REFERENCE = "sky-kueue.invalid/pause:{hash}"
#: The kubernetes Service's address and port (the first address of ``SERVICE_CIDR``).
KUBERNETES_SERVICE = ("10.96.0.1", 443)
#: Registries the project's images are named in; the node's registry mirrors each (:mod:`.registry`).
MIRRORED_REGISTRIES = ("docker.io", "ghcr.io", "us-docker.pkg.dev", "sky-kueue.invalid")
#: The cap of the tmpfs holding containerd's root (used only as images and pods fill it:
#: SkyPilot's image is 1.2 GB twice, as a blob and unpacked).
CONTAINERD_TMPFS_SIZE = "12g"
#: How long ``down`` gives the kubelet and containerd after SIGTERM.
STOP_GRACE_SECONDS = 10.0
#: How long to wait for containerd's socket and the node's Ready condition.
START_TIMEOUT_SECONDS = 120.0
POLL_SECONDS = 0.25
RBAC_GROUP = "rbac.authorization.k8s.io"

Log = Callable[[str], None]


class NodeError(ClusterError):
    """The node could not start or stop (one line: what failed, and the log to read)."""


def missing_tools() -> list[str]:
    """``"tool (apt-get install package)"`` for every required tool not on PATH, and the CNI plugins."""
    found = [f"{t} (apt-get install {p})" for t, p in REQUIRED_TOOLS.items() if shutil.which(t) is None]
    if not (CNI_BIN_DIR / "bridge").exists():
        found.append(f"{CNI_BIN_DIR}/bridge (apt-get install containernetworking-plugins)")
    return found


def cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy (v1 controllers, named ones and the unified one)."""
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            fields = line.split()
            fstype = fields[fields.index("-") + 1]
            if fstype in ("cgroup", "cgroup2"):
                found.append(Path(fields[4]))
    return found


def free_subnet(existing: Iterable[ipaddress.IPv4Network]) -> ipaddress.IPv4Network:
    """The first /24 of :data:`POD_SUPERNET` that overlaps no route of the machine."""
    taken = list(existing)
    for subnet in POD_SUPERNET.subnets(new_prefix=24):
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise NodeError(f"no free /24 left in {POD_SUPERNET} for the node's pods")


def _routes() -> list[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-4", "route", "show", "table", "all"], capture_output=True, text=True, check=False)
    nets = []
    for line in out.stdout.splitlines():
        first = line.split()[0] if line.split() else ""
        if first in ("local", "broadcast"):
            first = line.split()[1]
        with contextlib.suppress(ValueError):
            if first != "default":
                nets.append(ipaddress.ip_network(first, strict=False))
    return [n for n in nets if isinstance(n, ipaddress.IPv4Network)]


@dataclass
class NodeState:
    """What a started node owns (saved in the cluster's ``state.json`` under ``node``)."""

    node_id: str
    bridge: str
    subnet: str
    run_dir: str
    cgroup_root: str
    registry_port: int
    kubelet_port: int
    kubelet_healthz_port: int
    iptables_rules: list[list[str]]
    images: dict[str, float]

    @property
    def gateway(self) -> str:
        return str(next(ipaddress.ip_network(self.subnet).hosts()))


def _pause_reference(pause: Path) -> str:
    return PAUSE_REFERENCE.format(hash=hashlib.sha256(pause.read_bytes()).hexdigest()[:12])


class RealNode:
    """The real node of ``cluster``; see the module docstring."""

    def __init__(self, cluster: RealCluster) -> None:
        self.cluster = cluster
        self.log: Log = cluster.log
        self.state: NodeState | None = None

    # ------------------------------------------------------------- paths
    @property
    def directory(self) -> Path:
        return self.cluster.directory / "node"

    @property
    def run_dir(self) -> Path:
        assert self.state is not None
        return Path(self.state.run_dir)

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def layouts(self) -> Path:
        """Links to the OCI layouts imported into containerd (what the registry serves)."""
        return self.directory / "images"

    # ------------------------------------------------------------- start
    def plan(self) -> NodeState:
        """Choose names, subnet and ports before anything is created (saved first, so that a
        ``down`` after a failed start knows what to look for)."""
        node_id = "skrn" + hashlib.sha256(str(self.cluster.directory).encode()).hexdigest()[:8]
        return NodeState(
            node_id=node_id,
            bridge=node_id,
            subnet=str(free_subnet(_routes())),
            run_dir=str(RUN_ROOT / node_id),
            cgroup_root=f"/{node_id}",
            registry_port=free_port(),
            kubelet_port=free_port(),
            kubelet_healthz_port=free_port(),
            iptables_rules=[],
            images={},
        )

    def start(self, ca: CertificateAuthority, deadline: float, images: Iterable[tuple[str, Path]] = ()) -> None:
        """Start the node, import the pause image and ``images`` ((reference, layout) pairs of
        :func:`prepare_image`), and wait until the node is Ready. The imports' time is added to
        ``deadline`` (a large image takes a minute to import and unpack).

        Raises:
            NodeError: a tool is missing, not root, or a component did not start in time.
        """
        if os.geteuid() != 0:
            raise NodeError("the real node runs containers and changes the network: run as root")
        missing = missing_tools()
        if missing:
            raise NodeError(f"the real node needs: {', '.join(missing)} (bash scripts/host-tools.sh installs them)")
        self.state = self.plan()
        self.cluster.state_extra()["node"] = vars(self.state)
        self.cluster.state.save()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.layouts.mkdir(exist_ok=True)
        host.record_before(self.state.node_id)
        self._cgroups()
        self._network()
        self._certificates(ca)
        self._start_registry()
        self._mount_containerd_root()
        self._start_containerd(deadline)
        self.import_pause()
        for reference, layout in images:
            deadline += self.import_layout(layout, reference)
        self._bind_kubelet_client()
        self._start_kubelet(ca)
        self._wait_ready(deadline)
        self._advertise_gpus()

    def _save(self) -> None:
        assert self.state is not None
        self.cluster.state_extra()["node"] = vars(self.state)
        self.cluster.state.save()

    def _cgroups(self) -> None:
        """The kubelet's ``cgroupRoot`` in every hierarchy (the kubelet requires that it exists)."""
        assert self.state is not None
        for hierarchy in cgroup_hierarchies():
            (hierarchy / self.state.cgroup_root.lstrip("/")).mkdir(exist_ok=True)

    def _network(self) -> None:
        assert self.state is not None
        state = self.state
        gateway = state.gateway
        prefix = ipaddress.ip_network(state.subnet).prefixlen
        _ip("link", "add", state.bridge, "type", "bridge")
        _ip("addr", "add", f"{gateway}/{prefix}", "dev", state.bridge)
        _ip("link", "set", state.bridge, "up")
        host.write_sysctl(f"net/ipv4/conf/{state.bridge}/route_localnet", "1")
        host.write_sysctl("net/ipv4/ip_forward", "1")
        api_port = self.cluster.state.ports["apiserver"]
        service_ip, service_port = KUBERNETES_SERVICE
        comment = ["-m", "comment", "--comment", f"sky-kueue real node {state.node_id}"]
        rules = [
            # the kubernetes Service -> the API server on 127.0.0.1 (no kube-proxy here)
            ["nat", "PREROUTING", "-i", state.bridge, "-d", f"{service_ip}/32", "-p", "tcp", "--dport",
             str(service_port), *comment, "-j", "DNAT", "--to-destination", f"127.0.0.1:{api_port}"],
            # pods' traffic off the machine leaves with the host's address
            ["nat", "POSTROUTING", "-s", state.subnet, "!", "-o", state.bridge, *comment, "-j", "MASQUERADE"],
        ]  # fmt: skip
        for rule in rules:
            state.iptables_rules.append(rule)
            self._save()
            host.iptables("iptables", "-t", rule[0], "-A", *rule[1:])
        cni = self.directory / "cni"
        (cni / "net.d").mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "0.4.0",
            "name": state.node_id,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": state.bridge,
                    "isGateway": True,
                    "ipMasq": False,  # the node's one MASQUERADE rule above does it
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": state.subnet, "gateway": gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(cni / "ipam"),
                    },
                },
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (cni / "net.d" / "10-sky-kueue.conflist").write_text(json.dumps(conflist, indent=2), encoding="utf-8")

    def _certificates(self, ca: CertificateAuthority) -> None:
        assert self.state is not None
        ca.issue("kubelet-client", f"system:node:{NODE_NAME}", organizations=("system:nodes",), client=True)
        ca.issue(
            "kubelet-serving",
            f"system:node:{NODE_NAME}",
            organizations=("system:nodes",),
            dns_names=(NODE_NAME,),
            ip_addresses=(self.state.gateway,),
            server=True,
        )
        pki = self.cluster.pki
        doc = manifests.kubeconfig(
            server=self.cluster.server,
            ca_pem=ca.pem,
            user=f"system:node:{NODE_NAME}",
            context="kubelet",
            cert_pem=(pki / "kubelet-client.crt").read_bytes(),
            key_pem=(pki / "kubelet-client.key").read_bytes(),
        )
        path = self.directory / "kubelet.kubeconfig"
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        path.chmod(0o600)

    def _start_registry(self) -> None:
        assert self.state is not None
        python_path = os.pathsep.join(filter(None, [_package_root(), os.environ.get("PYTHONPATH")]))
        argv = [sys.executable, "-m", "sky_kueue.realcluster.registry", "--port", str(self.state.registry_port)]
        self.cluster.start_process(
            "node-registry", [*argv, str(self.layouts)], env={**os.environ, "PYTHONPATH": python_path}
        )

    def containerd_config(self, pause_reference: str) -> str:
        """containerd's configuration (version 2, containerd 1.6): every path of its own."""
        assert self.state is not None
        root = self.directory / "containerd"
        run = self.run_dir
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        lines = [
            "version = 2",
            f'root = "{root / "root"}"',
            f'state = "{run / "state"}"',
            # snapshotters and plugins that would touch the host's own paths or kernel modules
            'disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", '
            '"io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", '
            '"io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]',
            "[grpc]",
            f'  address = "{self.socket}"',
            "[ttrpc]",
            f'  address = "{self.socket}.ttrpc"',
            "[metrics]",
            '  address = ""',
            '[plugins."io.containerd.internal.v1.opt"]',
            f'  path = "{root / "opt"}"',
            f"[{cri}]",
            f'  sandbox_image = "{pause_reference}"',
            '  stream_server_address = "127.0.0.1"',
            '  stream_server_port = "0"',
            "  netns_mounts_under_state_dir = true",
            # root here lacks CAP_SYS_RESOURCE: a negative oom_score_adj (the kubelet asks -998 for
            # the pause container) is clamped to containerd's own, as for a rootless containerd
            "  restrict_oom_score_adj = true",
            "  enable_selinux = false",
            f"[{cri}.containerd]",
            '  snapshotter = "overlayfs"',
            '  default_runtime_name = "runc"',
            f"[{cri}.containerd.runtimes.runc]",
            '  runtime_type = "io.containerd.runc.v2"',
            f"[{cri}.containerd.runtimes.runc.options]",
            "  SystemdCgroup = false",
            f'  Root = "{run / "runc"}"',
            f"[{cri}.cni]",
            f'  bin_dir = "{CNI_BIN_DIR}"',
            f'  conf_dir = "{self.directory / "cni" / "net.d"}"',
        ]
        for registry in MIRRORED_REGISTRIES:
            lines += [
                f'[{cri}.registry.mirrors."{registry}"]',
                f'  endpoint = ["http://127.0.0.1:{self.state.registry_port}"]',
            ]
        return "\n".join(lines) + "\n"

    def _mount_containerd_root(self) -> None:
        """containerd's root (content store, unpacked snapshots, pods' writable layers) on a
        tmpfs: ``down`` unmounts it at once, where deleting SkyPilot's unpacked image (40,000
        files, twice) from disk took 80 s here; memory holds only what is imported and written."""
        root = self.directory / "containerd"
        root.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={CONTAINERD_TMPFS_SIZE},mode=0700", "sky-kueue-node", str(root)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise NodeError(f"mounting a tmpfs for containerd at {root}: {done.stderr.strip()}")

    def _start_containerd(self, deadline: float) -> None:
        pause = self.cluster.binaries.pause
        config = self.directory / "containerd.toml"
        config.write_text(self.containerd_config(_pause_reference(pause)), encoding="utf-8")
        self.cluster.start_process("containerd", ["containerd", "--config", str(config)])

        def answers() -> bool | None:
            self.cluster.check_running("containerd")
            return self._ctr("version", check=False).returncode == 0 or None

        self.cluster.wait_for("containerd's socket", answers, deadline, "containerd")

    def _ctr(self, *args: str, check: bool = True, stdin: Any = None) -> subprocess.CompletedProcess[str]:
        argv = ["ctr", "--address", str(self.socket), "--namespace", "k8s.io", *args]
        done = subprocess.run(argv, capture_output=True, text=True, check=False, stdin=stdin)
        if check and done.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)}: {(done.stderr or done.stdout).strip()[-500:]}")
        return done

    # ------------------------------------------------------------- images
    def import_layout(self, layout: Path, what: str) -> float:
        """``ctr images import`` of ``layout`` (a tar stream of it); returns the seconds it took."""
        assert self.state is not None
        started = time.monotonic()
        tar = subprocess.Popen(oci_layout.tar_stream_argv(layout), stdout=subprocess.PIPE)
        try:
            done = self._ctr("images", "import", "--no-unpack=false", "-", check=False, stdin=tar.stdout)
        finally:
            if tar.stdout is not None:
                tar.stdout.close()
            tar.wait()
        if done.returncode != 0:
            raise NodeError(f"importing {what} into containerd: {(done.stderr or done.stdout).strip()[-500:]}")
        link = self.layouts / layout.name
        if not link.exists():
            link.symlink_to(layout)
        seconds = time.monotonic() - started
        self.state.images[what] = round(seconds, 1)
        self._save()
        self.log(f"real node: imported {what} in {seconds:.1f} s")
        return seconds

    def import_pause(self) -> None:
        pause = self.cluster.binaries.pause
        reference = _pause_reference(pause)
        cache = images_cache() / "oci"
        rootfs = cache / f"pause-rootfs-{reference.rsplit(':', 1)[1]}"
        if not (rootfs / "pause").exists():
            rootfs.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(pause, rootfs / "pause")
            (rootfs / "pause").chmod(0o755)
        spec = oci_layout.ImageSpec(references=(reference,), rootfs=rootfs, env={}, entrypoint=("/pause",))
        layout, _ = oci_layout.ensure_layout(spec, cache, rootfs.name.replace("-rootfs", ""))
        self.import_layout(layout, reference)

    def import_image(self, reference: str) -> float:
        """:func:`prepare_image` then ``ctr images import``; returns the import's seconds."""
        return self.import_layout(prepare_image(reference, self.log), reference)

    # ------------------------------------------------------------- kubelet
    def kubelet_configuration(self) -> dict[str, Any]:
        """The kubelet's configuration file (``KubeletConfiguration`` v1beta1); why each field
        differs from the defaults is in :mod:`.node`'s docstring."""
        assert self.state is not None
        pki = self.cluster.pki
        return {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": self.state.gateway,
            "port": self.state.kubelet_port,
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": self.state.kubelet_healthz_port,
            "tlsCertFile": str(pki / "kubelet-serving.crt"),
            "tlsPrivateKeyFile": str(pki / "kubelet-serving.key"),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki / "ca.crt")},
            },
            "authorization": {"mode": "Webhook"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": self.state.cgroup_root,
            "failCgroupV1": False,
            "failSwapOn": False,
            # -999 by default; root here lacks CAP_SYS_RESOURCE, so lowering it is refused
            "oomScoreAdj": 0,
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "podLogsDir": str(self.directory / "pod-logs"),
            "staticPodPath": "",
            "resolvConf": "/etc/resolv.conf",
            "serializeImagePulls": True,
            # the imported images are all there is: the kubelet must never collect them
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "shutdownGracePeriod": "0s",
            "nodeStatusUpdateFrequency": "2s",
            "registerNode": True,
        }

    def _bind_kubelet_client(self) -> None:
        """Let the API server's kubelet client use the kubelet API (exec, logs, port-forward):
        the built-in ``system:kubelet-api-admin`` role, as kubeadm binds it."""
        from kubernetes import client

        rbac = client.RbacAuthorizationV1Api(self.cluster.api_client())
        rbac.create_cluster_role_binding(
            {
                "metadata": {"name": "sky-kueue-apiserver-kubelet-api-admin"},
                "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "system:kubelet-api-admin"},
                "subjects": [{"apiGroup": RBAC_GROUP, "kind": "User", "name": KUBELET_CLIENT_USER}],
            }
        )

    def _start_kubelet(self, ca: CertificateAuthority) -> None:
        assert self.state is not None
        config = self.directory / "kubelet-config.yaml"
        config.write_text(yaml.safe_dump(self.kubelet_configuration(), sort_keys=False), encoding="utf-8")
        (self.directory / "pod-logs").mkdir(exist_ok=True)
        self.cluster.start_process(
            "kubelet",
            [
                str(self.cluster.binaries.kubelet),
                f"--config={config}",
                f"--kubeconfig={self.directory / 'kubelet.kubeconfig'}",
                f"--root-dir={self.directory / 'kubelet'}",
                f"--hostname-override={NODE_NAME}",
                f"--node-ip={self.state.gateway}",
                "--node-labels=sky-kueue.io/real-node=true",
                "--v=2",
            ],
        )

    def _wait_ready(self, deadline: float) -> None:
        core = self.cluster.core()

        def ready() -> bool | None:
            self.cluster.check_running("kubelet")
            self.cluster.check_running("containerd")
            node = core.read_node(NODE_NAME)
            conditions = {c.type: c.status for c in (node.status.conditions or [])}
            return True if conditions.get("Ready") == "True" else None

        self.cluster.wait_for(f"node {NODE_NAME} Ready (kubelet)", ready, deadline, "kubelet")

    def _advertise_gpus(self) -> None:
        """Nothing yet: the node advertises what the machine has (no GPUs)."""

    # ------------------------------------------------------------- down
    def down(self) -> list[str]:
        """Stop everything the node started and undo every change; returns what was left
        that could not be removed (empty when clean)."""
        data = self.cluster.state_extra().get("node")
        if not data:
            return []
        self.state = NodeState(**data)
        state = self.state
        problems: list[str] = []
        procs = self.cluster.state.processes
        took: list[str] = []
        clock = time.monotonic()

        def step(name: str) -> None:
            nonlocal clock
            took.append(f"{name} {time.monotonic() - clock:.1f} s")
            clock = time.monotonic()

        if "kubelet" in procs:
            stop_process(procs["kubelet"], STOP_GRACE_SECONDS)
        step("kubelet")
        if "containerd" in procs and self.socket.exists():
            self._kill_containers()
        step("containers")
        for name in ("containerd", "node-registry"):
            if name in procs:
                stop_process(procs[name], STOP_GRACE_SECONDS)
        step("containerd")
        for pid in self._leftover_pids():
            stop_process(Process(name=f"pid {pid}", pid=pid, log="", argv=[]), 2.0)
        step("leftover processes")
        problems += self._unmount_all()
        for hierarchy in cgroup_hierarchies():
            problems += _remove_cgroup(hierarchy / state.cgroup_root.lstrip("/"))
        for rule in reversed(state.iptables_rules):
            host.iptables("iptables", "-t", rule[0], "-D", *rule[1:], check=False)
        if _ip("link", "show", state.bridge, check=False).returncode == 0:
            _ip("link", "delete", state.bridge, check=False)
        step("mounts, cgroups, network")
        for line in host.restore_after(state.node_id):
            self.log(f"real node: restored {line}")
        shutil.rmtree(self.run_dir, ignore_errors=True)
        # containerd's shims put their sockets in /run/containerd/s whatever the state directory
        # (containerd 1.6 runtime/v2/shim SocketAddress); each removes its own on exit, and the
        # directories go when nothing else is in them
        for empty in (SHIM_SOCKET_DIR, SHIM_SOCKET_DIR.parent, RUN_ROOT):
            with contextlib.suppress(OSError):
                empty.rmdir()
        # rm, not shutil.rmtree: the unpacked images are tens of thousands of files (several
        # times faster), and --one-file-system never descends into a mount left behind
        subprocess.run(["rm", "-rf", "--one-file-system", "--", str(self.directory)], capture_output=True, check=False)
        step("files")
        self.log(f"real node: down ({', '.join(took)})")
        problems += [f"{p} still exists" for p in (self.run_dir, self.directory) if p.exists()]
        return problems

    def _kill_containers(self) -> None:
        """Every task containerd runs for this node, force-deleted (killed; its shim exits)."""
        for task in self._ctr("tasks", "list", "--quiet", check=False).stdout.split():
            self._ctr("tasks", "delete", "--force", task, check=False)

    def _leftover_pids(self) -> list[int]:
        """Shims of this node's containerd (they name its socket) and processes in its cgroups."""
        assert self.state is not None
        found: set[int] = set()
        marker = str(self.socket).encode()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            with contextlib.suppress(OSError):
                if marker in (proc / "cmdline").read_bytes():
                    found.add(int(proc.name))
        for hierarchy in cgroup_hierarchies():
            root = hierarchy / self.state.cgroup_root.lstrip("/")
            if root.is_dir():
                for procs in root.rglob("cgroup.procs"):
                    with contextlib.suppress(OSError):
                        found.update(int(p) for p in procs.read_text().split())
        return sorted(found)

    def _unmount_all(self) -> list[str]:
        left = []
        for base in (self.run_dir, self.directory):
            for point in _mounts_under(base):
                subprocess.run(["umount", "-l", str(point)], capture_output=True, check=False)
            left += [f"mount {p}" for p in _mounts_under(base)]
        return left


def prepare_image(reference: str, log: Log) -> Path:
    """Build (or find) ``reference`` in the image store and export it as an OCI layout (cached),
    named under every reference its recipe gives with a tag; returns the layout.

    Raises:
        NodeError: no recipe maps to ``reference``, or its build failed.
    """
    from sky_kueue.sandbox.containers import images as store_images
    from sky_kueue.sandbox.containers import recipe as recipes
    from sky_kueue.sandbox.containers import recipes_controller, recipes_skypilot  # noqa: F401 - register

    store = store_images.ImageStore()
    try:
        image = store.ensure(reference)
    except store_images.ImageError as err:
        raise NodeError(f"image {reference} for the real node: {err}") from None
    spec = oci_layout.ImageSpec(
        references=_tagged_references(reference, image.recipe),
        rootfs=image.rootfs,
        env=image.env,
        cmd=image.command or (("bash",) if image.recipe.name == recipes.BASE_NAME else ("sleep", "infinity")),
        workdir=image.recipe.workdir,
    )
    started = time.monotonic()
    layout, written = oci_layout.ensure_layout(spec, store.cache / "oci", image.rootfs.name)
    if written:
        log(f"real node: exported {reference} as an OCI layout in {time.monotonic() - started:.1f} s")
        # every edit of the checkout makes a new controller image (about 700 MB); a layout goes
        # with its image when the image store prunes that (never an image another checkout uses)
        for removed in oci_layout.prune_orphans(store.cache / "oci", store.cache):
            log(f"real node: removed the OCI layout {removed.name} (its image is gone)")
    return layout


def _remove_cgroup(path: Path) -> list[str]:
    """``rmdir`` a cgroup and its children, deepest first (a cgroup is removed with rmdir)."""
    if not path.is_dir():
        return []
    for child in sorted((p for p in path.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            child.rmdir()
    try:
        path.rmdir()
    except OSError as err:
        return [f"cgroup {path}: {err.strerror}"]
    return []


def _mounts_under(path: Path) -> list[Path]:
    resolved = str(path.resolve())
    found = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == resolved or point.startswith(resolved.rstrip("/") + "/"):
                found.append(Path(point))
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"ip {' '.join(args)}: {done.stderr.strip() or done.returncode}")
    return done


def _package_root() -> str:
    """The directory holding the ``sky_kueue`` package (for the registry's ``python -m``)."""
    return str(Path(__file__).resolve().parents[2])


def images_cache() -> Path:
    from sky_kueue.sandbox.containers.images import cache_dir

    return cache_dir()


def _tagged_references(reference: str, recipe: Any) -> tuple[str, ...]:
    """The full references an image is imported under: the one asked for, and every reference
    of its recipe that has a tag (a tagless one means any tag, which containerd cannot store)."""
    from sky_kueue.sandbox.containers.recipe import split_tag

    names = [reference, recipe.name, *recipe.references]
    out: list[str] = []
    for name in names:
        bare = name.removeprefix("docker:")
        if split_tag(bare)[1] is None and bare != reference:
            continue
        full = oci_layout.normalize_reference(bare)
        if full not in out:
            out.append(full)
    return tuple(out)

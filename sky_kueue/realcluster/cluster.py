"""Run the real control plane, Kueue and KWOK nodes on 127.0.0.1, and take them down again.

One cluster lives in one state directory: its certificates, etcd's data, kubeconfigs, logs
and ``state.json`` (the processes and ports), so ``down`` from another process finds what
``up`` started. Every process runs in its own session, so ``down`` signals each process group;
it then removes the state directory: no process, port or file is left behind.

The order is what a cluster needs: etcd, the API server, the controller manager and scheduler,
KWOK, Kueue's CRDs and RBAC, Kueue's manager (running under its own ServiceAccount, so its real
RBAC is enforced), Kueue's webhooks (registered once its webhook server answers), nodes. ``up``
returns when a server-side dry-run create of a ResourceFlavor passes Kueue's webhooks and
every node is Ready.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml

from sky_kueue.realcluster import manifests
from sky_kueue.realcluster.build import Binaries
from sky_kueue.realcluster.pki import CertificateAuthority, service_account_keys

#: How long ``up`` waits for the whole cluster to be ready (a warm start takes ~20-40 s here).
UP_TIMEOUT_SECONDS = 180.0
#: How long a stopped process gets between SIGTERM and SIGKILL.
STOP_GRACE_SECONDS = 10.0
#: Poll interval while waiting for a component to answer.
POLL_SECONDS = 0.25
#: Lifetime of the token Kueue's manager runs with (TokenRequest); longer than any test run.
KUEUE_TOKEN_SECONDS = 7 * 24 * 3600
#: The Service IP range; the first address is the ``kubernetes`` Service's.
SERVICE_CIDR = "10.96.0.0/24"
#: Where Kueue's manager reads its metrics and visibility-server certificates when internal
#: cert management is off (``cmd/kueue/main.go``, ``pkg/visibility/server.go``).
KUEUE_FIXED_CERT_DIRS = (Path("/etc/kueue/metrics/certs"), Path("/visibility"))
#: Marks fixed-path certificate files a local cluster wrote (so a user's own are never removed).
OWNED_MARKER = ".sky-kueue-real-cluster"
#: The kubeconfig context name of the admin kubeconfig.
CONTEXT = "sky-kueue-real"
#: The user the API server presents to kubelets (kubeadm's name for it).
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"

T = TypeVar("T")
Log = Callable[[str], None]


class ClusterError(RuntimeError):
    """The cluster could not start (the message names the component and its log file)."""


@dataclass(frozen=True)
class NodeSpec:
    """The fake nodes' shape. The default gives more than the seed's quotas on every
    resource, so Kueue's quota, not node capacity, decides what runs."""

    count: int = 2
    cpu: Decimal = Decimal(16)
    memory: str = "64Gi"
    gpus: int = 4


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(what: str, probe: Callable[[], T | None], deadline: float, log_file: Path | None = None) -> T:
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            result = probe()
        except ClusterError:
            raise  # a component exited: waiting longer cannot help
        except Exception as err:  # noqa: BLE001 - any failure of a probe means "not yet"; the last is reported
            last = err
            result = None
        if result is not None:
            return result
        time.sleep(POLL_SECONDS)
    where = f" (log: {log_file})" if log_file else ""
    reason = f": last error {type(last).__name__}: {last}" if last else ""
    raise ClusterError(f"timed out waiting for {what}{where}{reason}")


@dataclass
class Process:
    name: str
    pid: int
    log: str
    argv: list[str]


@dataclass
class State:
    """What ``up`` started, saved to ``state.json`` for ``down`` and ``status``."""

    directory: Path
    ports: dict[str, int] = field(default_factory=dict)
    processes: dict[str, Process] = field(default_factory=dict)
    ready: bool = False
    #: Files and directories outside ``directory`` that ``up`` created (removed by ``down``).
    created_paths: list[str] = field(default_factory=list)
    #: What optional parts record for ``down`` (the real node: ``node``).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return self.directory / "state.json"

    def save(self) -> None:
        data = {
            "ports": self.ports,
            "ready": self.ready,
            "created_paths": self.created_paths,
            "extra": self.extra,
            "processes": {name: vars(proc) for name, proc in self.processes.items()},
        }
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2), encoding="utf-8")
        tmp.replace(self.path)

    @classmethod
    def load(cls, directory: Path) -> State:
        data = json.loads((directory / "state.json").read_text(encoding="utf-8"))
        state = cls(directory=directory, ports=dict(data["ports"]), ready=bool(data["ready"]))
        state.created_paths = list(data.get("created_paths", []))
        state.extra = dict(data.get("extra", {}))
        state.processes = {name: Process(**proc) for name, proc in data["processes"].items()}
        return state


def is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # a zombie child of ours counts as gone
    with contextlib.suppress(ChildProcessError):
        waited, _ = os.waitpid(pid, os.WNOHANG)
        if waited == pid:
            return False
    return True


def stop_process(proc: Process, grace_seconds: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM the process's group, SIGKILL it after ``grace_seconds``, wait until it is gone."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        deadline = time.monotonic() + (grace_seconds if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            if not is_alive(proc.pid):
                return
            time.sleep(0.05)
    raise ClusterError(f"{proc.name} (pid {proc.pid}) did not exit after SIGKILL")


class RealCluster:
    """One real cluster in ``directory``; see the module docstring."""

    def __init__(
        self,
        directory: Path,
        binaries: Binaries,
        nodes: NodeSpec | None = None,
        log: Log = print,
        *,
        wait_for_pods_ready_seconds: int | None = None,
        real_node: bool = False,
        node_images: tuple[str, ...] = (),
    ) -> None:
        self.directory = directory.resolve()
        #: Whether to start a real node (kubelet, containerd) beside the KWOK nodes (:mod:`.node`).
        self.real_node = real_node
        #: Image-store references the real node imports at start (the pause image always).
        self.node_images = node_images
        #: Kueue's waitForPodsReady timeout (None: off, as Kueue v0.17 defaults).
        self.wait_for_pods_ready_seconds = wait_for_pods_ready_seconds
        self.binaries = binaries
        self.nodes = nodes or NodeSpec()
        self.log = log
        self.state = State(self.directory)
        self._clients: dict[str, Any] = {}
        self._bootstrap: Any = None
        self._node_layouts: list[tuple[str, Path]] = []

    # ----------------------------------------------------------------- paths
    @property
    def pki(self) -> Path:
        return self.directory / "pki"

    @property
    def kubeconfig(self) -> Path:
        """The admin kubeconfig (``system:masters``): the tests' and kubectl's."""
        return self.directory / "admin.kubeconfig"

    @property
    def logs(self) -> Path:
        return self.directory / "logs"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.state.ports['apiserver']}"

    # ----------------------------------------------------------------- up
    def up(self, timeout_seconds: float = UP_TIMEOUT_SECONDS) -> None:
        """Start everything and wait until the cluster is ready; on failure, stop what started.

        Raises:
            ClusterError: a component did not start or become ready in time (the message names
                it and its log file); the state directory is left for inspection only if
                ``SKY_KUEUE_KEEP_FAILED_CLUSTER`` is set.
        """
        if (self.directory / "state.json").exists():
            raise ClusterError(f"a cluster already has state in {self.directory}: run `down` first")
        # the real node's images are built and exported before the clock starts (minutes when
        # the image store has to build them; then cached)
        self._node_layouts = []
        if self.real_node:
            from sky_kueue.realcluster.node import prepare_image

            self._node_layouts = [(ref, prepare_image(ref, self.log)) for ref in self.node_images]
        started = time.monotonic()
        deadline = started + timeout_seconds
        self.directory.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(exist_ok=True)
        try:
            self._up(deadline)
        except BaseException:
            if not os.environ.get("SKY_KUEUE_KEEP_FAILED_CLUSTER"):
                self.down()
            else:
                self._stop_all()
            raise
        self.log(f"real cluster ready in {time.monotonic() - started:.1f} s: KUBECONFIG={self.kubeconfig}")

    def _up(self, deadline: float) -> None:
        ports = self.state.ports
        for name in ("etcd", "etcd_peer", "apiserver", "kueue_webhook", "kueue_health", "kueue_visibility"):
            ports[name] = free_port()
        self.state.save()
        ca = self._certificates()
        self._start_etcd(deadline)
        self._start_apiserver(deadline)
        self._write_kubeconfigs(ca)
        self._start(
            "kube-controller-manager",
            [
                str(self.binaries.kubernetes("kube-controller-manager")),
                f"--kubeconfig={self.directory / 'controller-manager.kubeconfig'}",
                "--secure-port=0",
                "--leader-elect=false",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.pki / 'ca.crt'}",
                "--use-service-account-credentials=true",  # per-controller identities, as kubeadm runs it
                f"--service-cluster-ip-range={SERVICE_CIDR}",
            ],
        )
        self._start(
            "kube-scheduler",
            [
                str(self.binaries.kubernetes("kube-scheduler")),
                f"--kubeconfig={self.directory / 'scheduler.kubeconfig'}",
                "--secure-port=0",
                "--leader-elect=false",
            ],
        )
        self._start_kwok()
        self._install_kueue(ca, deadline)
        self._create_nodes(deadline)
        if self.real_node:
            from sky_kueue.realcluster.node import RealNode

            RealNode(self).start(ca, deadline, self._node_layouts)
        _wait(
            "the default ServiceAccount (kube-controller-manager)",
            lambda: self.core().read_namespaced_service_account("default", "default"),
            deadline,
            self._log_path("kube-controller-manager"),
        )
        self.state.ready = True
        self.state.save()

    def _certificates(self) -> CertificateAuthority:
        ca = CertificateAuthority(self.pki)
        ca.issue(
            "apiserver",
            "kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=("127.0.0.1", SERVICE_CIDR.split("/")[0][:-1] + "1"),
            server=True,
        )
        ca.issue("admin", "kubernetes-admin", organizations=("system:masters",), client=True)
        # the aggregation layer's front proxy (Kueue's visibility API server authenticates
        # requests the API server forwards by this CA, as an extension API server must)
        front = CertificateAuthority(self.pki / "front-proxy", common_name="sky-kueue-front-proxy-ca")
        front.issue("front-proxy-client", "front-proxy-client", client=True)
        ca.issue("controller-manager", "system:kube-controller-manager", client=True)
        ca.issue("scheduler", "system:kube-scheduler", client=True)
        ca.issue("kueue-webhook", "kueue-webhook", dns_names=("localhost",), ip_addresses=("127.0.0.1",), server=True)
        # the API server's identity towards kubelets (exec, logs, port-forward), bound to the
        # built-in system:kubelet-api-admin role rather than put in system:masters
        ca.issue("apiserver-kubelet-client", KUBELET_CLIENT_USER, client=True)
        service_account_keys(self.pki)
        webhook_dir = self.directory / "kueue-certs"
        webhook_dir.mkdir(exist_ok=True)
        (webhook_dir / "tls.crt").write_bytes((self.pki / "kueue-webhook.crt").read_bytes())
        (webhook_dir / "tls.key").write_bytes((self.pki / "kueue-webhook.key").read_bytes())
        return ca

    def _log_path(self, name: str) -> Path:
        return self.logs / f"{name}.log"

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        log_path = self._log_path(name)
        with log_path.open("ab") as log_file:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
                cwd=self.directory,
            )
        proc = Process(name=name, pid=popen.pid, log=str(log_path), argv=argv)
        self.state.processes[name] = proc
        self.state.save()
        return proc

    def start_process(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
        """Start ``name`` in its own session, logged to ``logs/<name>.log``, recorded for ``down``."""
        return self._start(name, argv, env)

    def check_running(self, name: str) -> None:
        """Raise :class:`ClusterError` (with the log's tail) if ``name`` has exited."""
        self._check_running(name)

    def wait_for(self, what: str, probe: Callable[[], T | None], deadline: float, log_name: str) -> T:
        """Poll ``probe`` until it returns something, or raise :class:`ClusterError` at ``deadline``."""
        return _wait(what, probe, deadline, self._log_path(log_name))

    def state_extra(self) -> dict[str, Any]:
        return self.state.extra

    def _check_running(self, name: str) -> None:
        proc = self.state.processes[name]
        if not is_alive(proc.pid):
            tail = "\n".join(Path(proc.log).read_text(errors="replace").splitlines()[-12:])
            raise ClusterError(f"{name} exited during start-up (log: {proc.log}):\n{tail}")

    def _start_etcd(self, deadline: float) -> None:
        ports = self.state.ports
        client = f"http://127.0.0.1:{ports['etcd']}"
        peer = f"http://127.0.0.1:{ports['etcd_peer']}"
        self._start(
            "etcd",
            [
                str(self.binaries.etcd),
                "--name=default",
                f"--data-dir={self.directory / 'etcd-data'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--listen-metrics-urls=",
                "--log-level=warn",
                "--quota-backend-bytes=2147483648",
                "--unsafe-no-fsync",  # a throwaway cluster: durability costs seconds per test
            ],
        )
        self._wait_etcd(deadline)

    def _wait_etcd(self, deadline: float) -> None:
        client = f"http://127.0.0.1:{self.state.ports['etcd']}"

        def healthy() -> bool | None:
            self._check_running("etcd")
            with urllib.request.urlopen(f"{client}/health", timeout=2) as response:
                return True if json.loads(response.read()).get("health") == "true" else None

        _wait("etcd", healthy, deadline, self._log_path("etcd"))

    def _start_apiserver(self, deadline: float) -> None:
        ports = self.state.ports
        pki = self.pki
        self._start(
            "kube-apiserver",
            [
                str(self.binaries.kubernetes("kube-apiserver")),
                f"--etcd-servers=http://127.0.0.1:{ports['etcd']}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                "--profiling=false",
                "--endpoint-reconciler-type=none",
                f"--requestheader-client-ca-file={pki / 'front-proxy' / 'ca.crt'}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki / 'front-proxy' / 'front-proxy-client.crt'}",
                f"--proxy-client-key-file={pki / 'front-proxy' / 'front-proxy-client.key'}",
                # a real node (node.py): kubelets are reached at their InternalIP, their serving
                # certificates checked against the cluster CA; NodeRestriction limits what a
                # kubelet's identity may change to its own Node and pods
                f"--kubelet-client-certificate={pki / 'apiserver-kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'apiserver-kubelet-client.key'}",
                f"--kubelet-certificate-authority={pki / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                "--enable-admission-plugins=NodeRestriction",
            ],
        )

        self._wait_apiserver(deadline)

    def _wait_apiserver(self, deadline: float) -> None:
        def ready() -> bool | None:
            self._check_running("kube-apiserver")
            api = self._bootstrap_client()
            body, status, _ = api.call_api(
                "/readyz", "GET", auth_settings=[], response_type="str", _return_http_data_only=False
            )
            return True if status == 200 and body == "ok" else None

        _wait("kube-apiserver /readyz", ready, deadline, self._log_path("kube-apiserver"))

    def _bootstrap_client(self) -> Any:
        """An admin client built from the certificates, before kubeconfigs are written."""
        from kubernetes import client

        if self._bootstrap is None:
            cfg = client.Configuration()
            cfg.host = self.server
            cfg.ssl_ca_cert = str(self.pki / "ca.crt")
            cfg.cert_file = str(self.pki / "admin.crt")
            cfg.key_file = str(self.pki / "admin.key")
            self._bootstrap = client.ApiClient(cfg)
        return self._bootstrap

    def _write_kubeconfig(self, path: Path, doc: dict[str, Any]) -> None:
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
        path.chmod(0o600)

    def _write_kubeconfigs(self, ca: CertificateAuthority) -> None:
        for name, user in (
            ("admin", "kubernetes-admin"),
            ("controller-manager", "system:kube-controller-manager"),
            ("scheduler", "system:kube-scheduler"),
        ):
            doc = manifests.kubeconfig(
                server=self.server,
                ca_pem=ca.pem,
                user=user,
                context=CONTEXT,
                cert_pem=(self.pki / f"{name}.crt").read_bytes(),
                key_pem=(self.pki / f"{name}.key").read_bytes(),
            )
            self._write_kubeconfig(self.directory / f"{name}.kubeconfig", doc)

    def _start_kwok(self) -> None:
        assets = self.binaries.kwok_assets
        stages = [yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(assets.rglob("*.yaml"))]
        config = self.directory / "kwok.yaml"
        config.write_text(yaml.safe_dump_all(manifests.kwok_documents(stages), sort_keys=False), encoding="utf-8")
        self._start(
            "kwok",
            [str(self.binaries.kwok), f"--kubeconfig={self.kubeconfig}", f"--config={config}"],
        )

    # ----------------------------------------------------------------- clients
    def api_client(self) -> Any:
        """An admin ``kubernetes`` ApiClient for this cluster (cached)."""
        from kubernetes import config as kube_config

        if "admin" not in self._clients:
            self._clients["admin"] = kube_config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._clients["admin"]

    def core(self) -> Any:
        from kubernetes import client

        return client.CoreV1Api(self.api_client())

    def custom(self) -> Any:
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client())

    # ----------------------------------------------------------------- Kueue
    def _kueue_docs(self, relative: str) -> list[dict[str, Any]]:
        root = self.binaries.kueue_assets / relative
        paths = sorted(root.glob("*.yaml")) if root.is_dir() else [root]
        docs: list[dict[str, Any]] = []
        for path in paths:
            docs += [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if isinstance(doc, dict)]
        return docs

    def _install_kueue(self, ca: CertificateAuthority, deadline: float) -> None:
        from kubernetes import client

        api = self.api_client()
        ports = self.state.ports
        extensions = client.ApiextensionsV1Api(api)
        crds = manifests.local_crds(
            self._kueue_docs("config/components/crd/bases"), port=ports["kueue_webhook"], ca_pem=ca.pem
        )
        for crd in crds:
            extensions.create_custom_resource_definition(crd)
        for crd in crds:
            _wait(f"CRD {crd['metadata']['name']} Established", _crd_established(extensions, crd), deadline)
        self.core().create_namespace({"metadata": {"name": manifests.KUEUE_NAMESPACE}})
        rbac_dir = "config/components/rbac"
        kustomization = yaml.safe_load((self.binaries.kueue_assets / rbac_dir / "kustomization.yaml").read_text())
        rbac: list[dict[str, Any]] = []
        for resource in manifests.kustomization_resources(kustomization):
            rbac += self._kueue_docs(f"{rbac_dir}/{resource}")
        rbac += self._kueue_docs("config/components/visibility/role_binding.yaml")
        _apply_rbac(api, manifests.kueue_rbac(rbac))
        token = (
            self.core()
            .create_namespaced_service_account_token(
                manifests.KUEUE_SERVICE_ACCOUNT,
                manifests.KUEUE_NAMESPACE,
                {"spec": {"expirationSeconds": KUEUE_TOKEN_SECONDS}},
            )
            .status.token
        )
        self._write_kubeconfig(
            self.directory / "kueue.kubeconfig",
            manifests.kubeconfig(server=self.server, ca_pem=ca.pem, user="kueue", context=CONTEXT, token=token),
        )
        self._write_kueue_config()
        self._fixed_path_certificates()
        self.start_kueue()
        self.wait_kueue_ready(deadline)
        registration = client.AdmissionregistrationV1Api(api)
        for hook in manifests.local_webhooks(
            self._kueue_docs("config/components/webhook/manifests.yaml"), port=ports["kueue_webhook"], ca_pem=ca.pem
        ):
            if hook["kind"] == "MutatingWebhookConfiguration":
                registration.create_mutating_webhook_configuration(hook)
            else:
                registration.create_validating_webhook_configuration(hook)
        self.wait_webhooks(deadline)

    def _fixed_path_certificates(self) -> None:
        """Give Kueue the certificates it reads from fixed paths when it does not make its own.

        With internal cert management off, Kueue v0.17.0's manager loads its metrics serving
        certificate from ``/etc/kueue/metrics/certs`` and its visibility API server's from
        ``/visibility`` (``cmd/kueue/main.go``, ``pkg/visibility/server.go``; an install mounts
        Secrets there) and exits if either is missing, even with metrics off. Both are served
        on 127.0.0.1 only; the pair is the webhook's (issued for 127.0.0.1 and localhost). A
        file is written only where none exists, marked as ours; the last local cluster's
        ``down`` removes the files and the directories they emptied.
        """
        created: list[Path] = []
        for target in KUEUE_FIXED_CERT_DIRS:
            # what to remove at `down`: the files, then the directories up to (not including)
            # /etc or /, each only if it is empty by then
            ours = [target / "tls.crt", target / "tls.key", target / OWNED_MARKER]
            ours += [target, *(p for p in target.parents if p not in (Path("/"), Path("/etc")))]
            if (target / "tls.crt").exists() and (target / "tls.key").exists():
                if (target / OWNED_MARKER).exists():  # another local cluster's: the last down removes it
                    created += ours
                continue
            try:
                target.mkdir(parents=True, exist_ok=True)
                for name in ("tls.crt", "tls.key"):
                    (target / name).write_bytes((self.directory / "kueue-certs" / name).read_bytes())
                (target / OWNED_MARKER).write_text("written by sky-kueue real-cluster; removed by its down\n")
            except PermissionError:
                raise ClusterError(
                    f"Kueue's manager reads a certificate from {target} at start-up (cmd/kueue/main.go, "
                    "pkg/visibility/server.go): run as root, or create tls.crt and tls.key there"
                ) from None
            created += ours
        self.state.created_paths += [str(path) for path in created]
        self.state.save()

    def _write_kueue_config(self, scheduling: dict[str, Any] | None = None) -> None:
        ports = self.state.ports
        config = manifests.kueue_configuration(
            webhook_port=ports["kueue_webhook"],
            health_port=ports["kueue_health"],
            visibility_port=ports["kueue_visibility"],
            cert_dir=str(self.directory / "kueue-certs"),
            wait_for_pods_ready_seconds=self.wait_for_pods_ready_seconds,
            scheduling=scheduling,
        )
        (self.directory / "kueue-config.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")

    def reconfigure_kueue(self, scheduling: dict[str, Any] | None, timeout_seconds: float = UP_TIMEOUT_SECONDS) -> None:
        """Restart Kueue's manager with ``scheduling`` (e.g. ``fairSharing``) in its Configuration.

        Kueue reads its Configuration only at start (``cmd/kueue/main.go``), so a scenario
        that needs fair sharing needs a restart; the manager releases its leader Lease when
        stopped (``LeaderElectionReleaseOnCancel``, ``pkg/config/config.go``), so the new one
        leads at once. Returns when its webhooks answer again.
        """
        self._write_kueue_config(scheduling)
        self.restart_kueue(timeout_seconds=timeout_seconds)

    def restart_kueue(self, timeout_seconds: float = UP_TIMEOUT_SECONDS) -> None:
        """Stop Kueue's manager and start it again; returns once the new manager serves its
        webhooks and holds the leader Lease (so its scheduler runs)."""
        deadline = time.monotonic() + timeout_seconds
        before = self.wait_kueue_leader(deadline)
        self.stop_kueue()
        self.start_kueue()
        self.wait_kueue_ready(deadline)
        self.wait_webhooks(deadline)
        self.wait_kueue_leader(deadline, previous=before)

    def start_kueue(self) -> None:
        """Start Kueue's manager (again, after :meth:`stop_kueue`), under its ServiceAccount."""
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAMESPACE")}
        self._start(
            "kueue",
            [
                str(self.binaries.kueue),
                f"--config={self.directory / 'kueue-config.yaml'}",
                # a flag, not $KUBECONFIG: the visibility server reads the flag for delegated auth
                f"--kubeconfig={self.directory / 'kueue.kubeconfig'}",
            ],
            env=env,
        )

    def _respawn(self, name: str) -> None:
        """Stop ``name`` and start it again with the same command line (and environment)."""
        if name == "kueue":
            self.stop_kueue()
            self.start_kueue()
            return
        proc = self.state.processes[name]
        stop_process(proc)
        self._start(name, proc.argv)

    def snapshot_etcd(self, target: Path, timeout_seconds: float = UP_TIMEOUT_SECONDS) -> None:
        """Copy etcd's data directory to ``target`` (a file-level backup, taken with etcd and
        the API server stopped for a moment; both come back on the same ports, and Kueue's
        manager is restarted)."""
        import shutil

        deadline = time.monotonic() + timeout_seconds
        stop_process(self.state.processes["kube-apiserver"])
        stop_process(self.state.processes["etcd"])
        shutil.copytree(self.directory / "etcd-data", target)
        self._start("etcd", self.state.processes["etcd"].argv)
        self._wait_etcd(deadline)
        self._start("kube-apiserver", self.state.processes["kube-apiserver"].argv)
        self._wait_apiserver(deadline)
        # Kueue's manager exits when it cannot renew its leader Lease for its renew deadline
        # (10 s), which a slow copy can exceed: start it again rather than find out later
        self._respawn("kueue")
        self.wait_kueue_ready(deadline)
        self.wait_webhooks(deadline)

    def restore_etcd(self, source: Path, timeout_seconds: float = UP_TIMEOUT_SECONDS) -> None:
        """Put etcd's data back to a :meth:`snapshot_etcd` copy, as an admin restores a backup:
        the API server's state (objects and resourceVersions) goes back to the snapshot's, and
        the control plane's controllers (controller manager, scheduler, KWOK, Kueue) are
        restarted, since their caches describe a state that no longer exists."""
        import shutil

        deadline = time.monotonic() + timeout_seconds
        stop_process(self.state.processes["kube-apiserver"])
        stop_process(self.state.processes["etcd"])
        shutil.rmtree(self.directory / "etcd-data")
        shutil.copytree(source, self.directory / "etcd-data")
        self._start("etcd", self.state.processes["etcd"].argv)
        self._wait_etcd(deadline)
        self._start("kube-apiserver", self.state.processes["kube-apiserver"].argv)
        self._wait_apiserver(deadline)
        for name in ("kube-controller-manager", "kube-scheduler", "kwok", "kueue"):
            self._respawn(name)
        self.wait_kueue_ready(deadline)
        self.wait_webhooks(deadline)

    def stop_kueue(self) -> None:
        stop_process(self.state.processes["kueue"])

    def wait_kueue_ready(self, deadline: float) -> None:
        url = f"http://127.0.0.1:{self.state.ports['kueue_health']}/readyz"

        def ready() -> bool | None:
            self._check_running("kueue")
            with urllib.request.urlopen(url, timeout=2) as response:
                return True if response.status == 200 else None

        _wait("Kueue's manager /readyz", ready, deadline, self._log_path("kueue"))

    def wait_webhooks(self, deadline: float) -> None:
        """Until a dry-run create passes Kueue's ResourceFlavor webhooks (the webhook answers)."""
        custom = self.custom()
        body = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "webhook-probe"}}

        def answered() -> bool | None:
            self._check_running("kueue")
            custom.create_cluster_custom_object("kueue.x-k8s.io", "v1beta2", "resourceflavors", body, dry_run="All")
            return True

        _wait("Kueue's webhooks", answered, deadline, self._log_path("kueue"))

    def wait_kueue_leader(self, deadline: float, previous: str | None = None) -> str:
        """Until Kueue's manager holds its leader Lease (a holder other than ``previous``, a
        stopped manager's); returns the holder identity."""
        from kubernetes import client

        coordination = client.CoordinationV1Api(self.api_client())

        def holder() -> str | None:
            self._check_running("kueue")
            lease = coordination.read_namespaced_lease(manifests.KUEUE_LEADER_LEASE, manifests.KUEUE_NAMESPACE)
            found = lease.spec.holder_identity or None
            return found if found != previous else None

        return _wait("Kueue's leader Lease", holder, deadline, self._log_path("kueue"))

    # ----------------------------------------------------------------- nodes
    def _create_nodes(self, deadline: float) -> None:
        core = self.core()
        spec = self.nodes
        names = [f"kwok-node-{index}" for index in range(spec.count)]
        for name in names:
            core.create_node(manifests.fake_node(name, cpu=spec.cpu, memory=spec.memory, gpus=spec.gpus))
        for name in names:
            _wait(f"node {name} Ready (KWOK)", self._node_ready(core, name), deadline, self._log_path("kwok"))

    def _node_ready(self, core: Any, name: str) -> Callable[[], bool | None]:
        def probe() -> bool | None:
            self._check_running("kwok")
            return _condition_true(core.read_node(name), "Ready") or None

        return probe

    # ----------------------------------------------------------------- down
    def _stop_all(self) -> None:
        for proc in reversed(list(self.state.processes.values())):
            stop_process(proc)

    def down(self) -> None:
        """Stop every process and remove the state directory."""
        import shutil

        for api in self._clients.values():
            api.close()
        self._clients.clear()
        if self._bootstrap is not None:
            self._bootstrap.close()
            self._bootstrap = None
        if "node" in self.state.extra:
            from sky_kueue.realcluster.node import RealNode

            left = RealNode(self).down()
            if left:
                self.log(f"real node: left behind: {'; '.join(left)}")
        self._stop_all()
        if self.state.created_paths and _kueue_managers_running(self.binaries.kueue):
            # another local cluster's Kueue reads the same fixed-path files; its own `down`
            # (the last one) removes them
            self.state.created_paths = []
        for created in self.state.created_paths:
            path = Path(created)
            if path.is_dir():
                with contextlib.suppress(OSError):  # a directory someone else has since filled stays
                    path.rmdir()
            else:
                path.unlink(missing_ok=True)
        shutil.rmtree(self.directory, ignore_errors=True)


def _kueue_managers_running(binary: Path) -> bool:
    """Whether any process on this machine runs ``binary`` (another local cluster's Kueue)."""
    target = str(binary.resolve())
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(proc / "exe") == target:
                return True
    return False


def _condition_true(obj: Any, condition_type: str) -> bool:
    status = getattr(obj, "status", None)
    return any(c.type == condition_type and c.status == "True" for c in (status.conditions or [] if status else []))


def _crd_established(extensions: Any, crd: dict[str, Any]) -> Callable[[], bool | None]:
    def probe() -> bool | None:
        return (
            _condition_true(extensions.read_custom_resource_definition(crd["metadata"]["name"]), "Established") or None
        )

    return probe


def _apply_rbac(api: Any, docs: Iterable[dict[str, Any]]) -> None:
    from kubernetes import client

    rbac = client.RbacAuthorizationV1Api(api)
    core = client.CoreV1Api(api)
    for doc in docs:
        kind = doc["kind"]
        namespace = doc["metadata"].get("namespace")
        if kind == "ServiceAccount":
            core.create_namespaced_service_account(namespace, doc)
        elif kind == "ClusterRole":
            rbac.create_cluster_role(doc)
        elif kind == "ClusterRoleBinding":
            rbac.create_cluster_role_binding(doc)
        elif kind == "Role":
            rbac.create_namespaced_role(namespace, doc)
        elif kind == "RoleBinding":
            rbac.create_namespaced_role_binding(namespace, doc)


def load(directory: Path, binaries: Binaries) -> RealCluster:
    """The cluster whose state is in ``directory`` (started by another process)."""
    cluster = RealCluster(directory, binaries)
    cluster.state = State.load(cluster.directory)
    return cluster

"""The real node: a kubelet with containerd runs pods' containers on the real control plane.

What a user's cluster does and KWOK's nodes never do: a container's command runs and its
exit decides the pod's phase, ``kubectl logs`` reads what it printed, exec runs a command in
it through the kubelet (here through the official client's websocket stream), a pod reaches
the API server at the ``kubernetes`` Service's address with its ServiceAccount token, and an
image nobody imported fails to pull. ``down`` leaves nothing behind on the machine.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from sky_kueue.realcluster import host
from sky_kueue.realcluster.cluster import RealCluster
from sky_kueue.realcluster.node import NODE_NAME, RUN_ROOT, cgroup_hierarchies

pytestmark = pytest.mark.real_node

T = TypeVar("T")

BASE_IMAGE = "debian:bookworm"
#: How long a pod may take to run its container (image present; the sandbox starts in ~1 s).
POD_SECONDS = 90.0
NAMESPACE = "default"


def _wait(what: str, probe: Callable[[], T | None], timeout: float = POD_SECONDS) -> T:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last})")


def _pod(name: str, command: list[str], image: str = BASE_IMAGE) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "nodeSelector": {"kubernetes.io/hostname": NODE_NAME},
            "terminationGracePeriodSeconds": 2,
            "containers": [{"name": "main", "image": image, "imagePullPolicy": "IfNotPresent", "command": command}],
        },
    }


def _phase(core: Any, name: str, wanted: str) -> Callable[[], Any]:
    def probe() -> Any:
        pod = core.read_namespaced_pod(name, NAMESPACE)
        if pod.status.phase == "Failed" and wanted != "Failed":
            raise AssertionError(f"pod {name} failed: {pod.status}")
        return pod if pod.status.phase == wanted else None

    return probe


def test_a_pod_runs_echo_to_succeeded_and_its_logs_are_read(real_node_cluster: RealCluster) -> None:
    core = real_node_cluster.core()
    core.create_namespaced_pod(NAMESPACE, _pod("echo-hi", ["sh", "-c", "echo hi"]))
    pod = _wait("echo-hi to succeed", _phase(core, "echo-hi", "Succeeded"))
    status = pod.status.container_statuses[0]
    assert status.state.terminated.exit_code == 0
    assert status.image_id.startswith("docker.io/library/debian@sha256:") or status.image_id.startswith("sha256:")
    assert pod.spec.node_name == NODE_NAME
    assert core.read_namespaced_pod_log("echo-hi", NAMESPACE) == "hi\n"
    # through kubectl too: the second, independent client
    logs = subprocess.run(
        ["kubectl", "--kubeconfig", str(real_node_cluster.kubeconfig), "logs", "echo-hi"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (logs.returncode, logs.stdout) == (0, "hi\n"), logs.stderr


def test_exec_through_the_kubelet_and_the_pod_reaches_the_api_server(real_node_cluster: RealCluster) -> None:
    from kubernetes.stream import stream

    core = real_node_cluster.core()
    core.create_namespaced_pod(NAMESPACE, _pod("sleeper", ["sleep", "infinity"]))
    _wait("sleeper to run", _phase(core, "sleeper", "Running"))
    release = stream(
        core.connect_get_namespaced_pod_exec,
        "sleeper",
        NAMESPACE,
        command=["cat", "/etc/debian_version"],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    assert release.strip().startswith("12."), release
    # the pod's ServiceAccount token, presented at the kubernetes Service's address (no DNS,
    # no kube-proxy: the node translates that one address to the API server)
    script = (
        "import json, os, ssl, urllib.request\n"
        "sa = '/var/run/secrets/kubernetes.io/serviceaccount'\n"
        "ctx = ssl.create_default_context(cafile=sa + '/ca.crt')\n"
        "host = os.environ['KUBERNETES_SERVICE_HOST'] + ':' + os.environ['KUBERNETES_SERVICE_PORT']\n"
        "auth = {'Authorization': 'Bearer ' + open(sa + '/token').read()}\n"
        "req = urllib.request.Request('https://' + host + '/api', headers=auth)\n"
        "print('host', host, 'kind', json.load(urllib.request.urlopen(req, context=ctx, timeout=10))['kind'])\n"
    )
    out = stream(
        core.connect_get_namespaced_pod_exec,
        "sleeper",
        NAMESPACE,
        command=["python3", "-c", script],
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
    )
    # plain words, not JSON: the client's stream() turns a JSON reply into a Python repr
    assert out.strip().splitlines()[-1] == "host 10.96.0.1:443 kind APIVersions", out
    core.delete_namespaced_pod("sleeper", NAMESPACE, grace_period_seconds=0)


def test_an_image_nobody_imported_fails_to_pull(real_node_cluster: RealCluster) -> None:
    core = real_node_cluster.core()
    core.create_namespaced_pod(NAMESPACE, _pod("no-such-image", ["true"], image="registry.k8s.io/no-such-image:1.0"))

    def waiting_reason() -> str | None:
        statuses = core.read_namespaced_pod("no-such-image", NAMESPACE).status.container_statuses or []
        reasons = [s.state.waiting.reason for s in statuses if s.state and s.state.waiting]
        return next((r for r in reasons if r in ("ErrImagePull", "ImagePullBackOff")), None)

    assert _wait("the pull to fail", waiting_reason) in ("ErrImagePull", "ImagePullBackOff")
    core.delete_namespaced_pod("no-such-image", NAMESPACE, grace_period_seconds=0)


def _leftovers(directory: Path, node: dict[str, Any]) -> list[str]:
    """Everything of a real node still on the machine (processes, mounts, cgroups, network)."""
    found = []
    marker = str(directory).encode()
    run_dir = node["run_dir"].encode()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if marker in cmdline or run_dir in cmdline:
                shown = cmdline.replace(b"\0", b" ")[:120]
                found.append(f"process {proc.name}: {shown!r}")
    mounts = Path("/proc/self/mountinfo").read_text()
    found += [
        f"mount {line.split()[4]}" for line in mounts.splitlines() if str(directory) in line or node["run_dir"] in line
    ]
    found += [
        f"cgroup {h}{node['cgroup_root']}"
        for h in cgroup_hierarchies()
        if (h / node["cgroup_root"].lstrip("/")).exists()
    ]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout
    found += [f"interface {node['bridge']}" for line in links.splitlines() if f" {node['bridge']}:" in line]
    rules = subprocess.run(["iptables-save"], capture_output=True, text=True, check=False).stdout
    found += [f"iptables {line}" for line in rules.splitlines() if node["node_id"] in line]
    found += [f"path {p}" for p in (directory, Path(node["run_dir"])) if p.exists()]
    return found


@pytest.mark.slow
def test_down_leaves_no_process_mount_cgroup_interface_or_rule(real_node_cluster: RealCluster) -> None:
    """A second cluster with a real node, a pod running in it, then ``down``."""
    directory = Path(tempfile.mkdtemp(prefix="real-node-down-", dir="/tmp"))
    cluster = RealCluster(directory, real_node_cluster.binaries, real_node=True)
    cluster.up()
    try:
        node = dict(cluster.state.extra["node"])
        core = cluster.core()
        core.create_namespaced_pod(NAMESPACE, _pod("left-running", ["/pause"], image=node_pause(cluster)))
        _wait("a pod running on the second node", _phase(core, "left-running", "Running"))
        assert _leftovers(cluster.directory, node), "the check sees nothing while the node runs"
    finally:
        cluster.down()
    assert _leftovers(cluster.directory, node) == []
    # the first cluster's node still runs: the machine-wide record stays until its down
    assert host.RECORD.exists()
    assert RUN_ROOT.exists()


def node_pause(cluster: RealCluster) -> str:
    """The pause image's reference (the one image a node without imports has)."""
    from sky_kueue.realcluster.node import _pause_reference

    return _pause_reference(cluster.binaries.pause)

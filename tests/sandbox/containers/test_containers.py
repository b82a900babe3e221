"""Pods as containers: their own root, namespaces and address; status as a kubelet reports
it; exec, logs and port-forward reach them; nothing is left behind."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request

import pytest
from kubernetes import client
from kubernetes.stream import portforward

from sky_kueue.sandbox.containers import network as network_module
from sky_kueue.sandbox.containers import node as node_module
from sky_kueue.sandbox.sandbox import Sandbox
from tests.sandbox.containers.conftest import (
    kubectl,
    links,
    mounts_mentioning,
    needs_containers,
    netns_names,
    pod,
    stable_root,
    status,
    wait_for,
)

pytestmark = [pytest.mark.slow, needs_containers]


def _terminated(box: Sandbox, name: str) -> dict[str, object]:
    def done() -> dict[str, object] | None:
        statuses = status(box, name).get("containerStatuses") or [{}]
        return statuses[0].get("state", {}).get("terminated")

    return dict(wait_for(done, what=f"{name} to exit"))


def test_a_pod_that_exits_0_succeeds_and_its_output_is_its_log(box: Sandbox) -> None:
    script = "echo written > /tmp/out && cat /tmp/out && echo to-stderr >&2"
    box.apply(pod("ok", ["sh", "-c", script], restartPolicy="Never"))
    terminated = _terminated(box, "ok")
    assert terminated["exitCode"] == 0 and terminated["reason"] == "Completed"
    wait_for(lambda: status(box, "ok").get("phase") == "Succeeded", what="phase Succeeded")
    logs = kubectl(box, "logs", "ok")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.split() == ["written", "to-stderr"]
    assert kubectl(box, "logs", "ok", "--tail=1").stdout == "to-stderr\n"


def test_a_pod_that_exits_3_fails_with_exit_code_3(box: Sandbox) -> None:
    box.apply(pod("three", ["sh", "-c", "exit 3"], restartPolicy="Never"))
    terminated = _terminated(box, "three")
    assert terminated["exitCode"] == 3 and terminated["reason"] == "Error"
    wait_for(lambda: status(box, "three").get("phase") == "Failed", what="phase Failed")


def test_on_failure_restarts_with_back_off_and_counts_restarts(box: Sandbox) -> None:
    assert box.containers is not None and box.containers.runtime is not None
    box.containers.runtime.restart_backoff_base_seconds = 0.2
    box.apply(pod("flaky", ["sh", "-c", "exit 1"], restartPolicy="OnFailure"))

    def restarted() -> bool:
        statuses = status(box, "flaky").get("containerStatuses") or [{}]
        return int(statuses[0].get("restartCount", 0)) >= 2

    wait_for(restarted, what="two restarts")
    current = status(box, "flaky")
    assert current["phase"] == "Running"
    assert current["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 1


def test_two_pods_listen_on_port_22_each_at_its_own_address(box: Sandbox) -> None:
    serve = ["sh", "-c", "echo $HOSTNAME > /srv-name && cd / && exec python3 -m http.server 22"]
    box.apply(pod("web-a", serve))
    box.apply(pod("web-b", serve))
    addresses = {}
    for name in ("web-a", "web-b"):

        def running(name: str = name) -> bool:
            return status(box, name).get("phase") == "Running"

        wait_for(running, what=f"{name} Running")
        addresses[name] = status(box, name)["podIP"]
    assert addresses["web-a"] != addresses["web-b"]
    for name, address in addresses.items():

        def fetch(address: str = address) -> str | None:
            try:
                with urllib.request.urlopen(f"http://{address}:22/srv-name", timeout=5) as reply:
                    return str(reply.read().decode().strip())
            except OSError:
                return None

        assert wait_for(fetch, what=f"{name}'s server") == name


def test_port_forward_of_the_official_client_reaches_the_container(box: Sandbox) -> None:
    box.apply(pod("forwarded", ["python3", "-m", "http.server", "8080", "--directory", "/etc"]))
    wait_for(lambda: status(box, "forwarded").get("phase") == "Running", what="Running")
    wait_for(lambda: kubectl(box, "exec", "forwarded", "--", "python3", "-c", _CONNECT_8080).returncode == 0)
    core = client.CoreV1Api(box.api_client())
    forward = portforward(core.connect_get_namespaced_pod_portforward, "forwarded", "default", ports="8080")
    conn = forward.socket(8080)
    conn.settimeout(30)
    conn.sendall(b"GET /debian_version HTTP/1.0\r\n\r\n")
    reply = b""
    while chunk := conn.recv(4096):
        reply += chunk
    conn.close()
    assert reply.startswith(b"HTTP/1.0 200") and b"\r\n\r\n12." in reply  # the image's /etc/debian_version


_CONNECT_8080 = "import socket; socket.create_connection(('127.0.0.1', 8080), timeout=1)"


def test_exec_enters_the_containers_hostname_root_and_pid_namespace(box: Sandbox) -> None:
    box.apply(pod("inside", None, image="sky-kueue-test/marker"))
    wait_for(lambda: status(box, "inside").get("phase") == "Running", what="Running")
    assert not pathlib.Path("/sky-kueue-image-marker").exists()
    result = kubectl(
        box, "exec", "inside", "--", "sh", "-c", "hostname; cat /sky-kueue-image-marker; tr '\\0' ' ' < /proc/1/cmdline"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["inside", "from-the-image", "sleep infinity "]
    failing = kubectl(box, "exec", "inside", "--", "sh", "-c", "exit 4")
    assert failing.returncode == 4


def test_an_unknown_image_is_err_image_pull_then_image_pull_back_off(box: Sandbox) -> None:
    box.apply(pod("nowhere", None, image="registry.example/nothing:1"))

    def reason() -> str | None:
        statuses = status(box, "nowhere").get("containerStatuses") or [{}]
        return statuses[0].get("state", {}).get("waiting", {}).get("reason")

    wait_for(lambda: reason() in ("ErrImagePull", "ImagePullBackOff"), what="ErrImagePull")
    wait_for(lambda: reason() == "ImagePullBackOff", what="ImagePullBackOff")
    assert status(box, "nowhere")["phase"] == "Pending"
    reason_path = "jsonpath={.status.containerStatuses[0].state.waiting.reason}"
    assert kubectl(box, "get", "pod", "nowhere", "-o", reason_path).stdout == "ImagePullBackOff"


def test_deleting_a_pod_removes_its_namespace_veth_and_mounts(box: Sandbox) -> None:
    assert box.containers is not None and box.containers.runtime is not None
    runtime = box.containers.runtime
    box.apply(pod("doomed", None))
    wait_for(lambda: status(box, "doomed").get("phase") == "Running", what="Running")
    netns = runtime.netns("default", "doomed")
    record = runtime.pod("default", "doomed")
    assert netns in netns_names() and record is not None
    init_pid = record.containers["main"].init_pid
    assert init_pid is not None and mounts_mentioning(record.directory) == []  # mounts live in the container
    assert kubectl(box, "delete", "pod", "doomed", "--wait=false").returncode == 0
    wait_for(lambda: netns not in netns_names(), what="the pod's netns to go")
    _, veth = box.containers.network.names("default", "doomed", record.uid) if box.containers.network else ("", "")
    wait_for(lambda: veth not in links(), what="the veth to go")
    wait_for(lambda: not pathlib.Path(f"/proc/{init_pid}").exists(), what="the container's PID 1 to exit")
    wait_for(lambda: not record.directory.exists(), what="the pod's directory to go")


def _alive(pid: str) -> bool:
    """The process exists and is not a zombie waiting for init to reap it."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_a_sandbox_stops_and_a_killed_one_is_cleaned_by_the_next_start() -> None:
    root = stable_root("killed")
    script = textwrap.dedent(
        f"""
        import sys, time
        from sky_kueue.sandbox.sandbox import Sandbox
        sb = Sandbox(containers=True, kubelet_root={str(root)!r}, name="killed")
        sb.start()
        sb.apply({pod("victim", None)!r})
        while (sb.store.try_get("pods", "victim", "default").get("status") or {{}}).get("phase") != "Running":
            time.sleep(0.05)
        print(sb.containers.runtime.netns("default", "victim"), sb.containers.network.bridge, flush=True)
        time.sleep(600)
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=os.getcwd())
    try:
        assert child.stdout is not None
        netns, bridge = child.stdout.readline().split()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert netns in netns_names() and bridge in links()  # the kill left them behind
    leftover_pids = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split()
    assert leftover_pids  # its container outlived it
    with Sandbox(containers=True, kubelet_root=root, name="killed") as again:
        assert netns not in netns_names() and bridge not in links()
        wait_for(lambda: not any(_alive(pid) for pid in leftover_pids), what="the old containers to die")
        again.apply(pod("fresh", None))
        wait_for(lambda: status(again, "fresh").get("phase") == "Running", what="a new pod after the cleanup")
        assert again.containers is not None and again.containers.runtime is not None
        fresh_netns = again.containers.runtime.netns("default", "fresh")
        assert fresh_netns in netns_names()
    assert fresh_netns not in netns_names()
    assert not (root / network_module.STATE_FILE).exists()
    assert mounts_mentioning(root) == []
    assert again.containers is None  # stopped: its bridge is gone too


def test_a_sandbox_stopped_while_a_pod_waits_out_its_grace_period_leaves_no_process() -> None:
    """A pod that ignores SIGTERM and has minutes of grace is being deleted when the sandbox
    stops (SkyPilot tearing a cluster down as a run ends): its containers are killed too."""
    script = "trap '' TERM; while true; do sleep 0.1; done"
    with Sandbox(containers=True, kubelet_root=stable_root("grace"), name=f"grace-{os.getpid()}") as sandbox:
        assert sandbox.containers is not None and sandbox.containers.runtime is not None
        runtime = sandbox.containers.runtime
        sandbox.apply(pod("stubborn", ["sh", "-c", script], terminationGracePeriodSeconds=300))
        wait_for(lambda: status(sandbox, "stubborn").get("phase") == "Running", what="Running")
        record = sandbox.containers.runtime.pod("default", "stubborn")
        assert record is not None and record.containers["main"].init_pid is not None
        init_pid = str(record.containers["main"].init_pid)
        sandbox.store.delete("pods", "stubborn", "default")
        wait_for(lambda: runtime.pod("default", "stubborn") is None, what="the deletion to start")
        assert _alive(init_pid)  # SIGTERM ignored: it waits out its 300 s
        stopped = time.monotonic()
    wait_for(lambda: not _alive(init_pid), what="the stubborn container to be killed")
    assert time.monotonic() - stopped < 30


def test_the_proxy_refuses_a_non_registry_host_from_inside_a_pod(box: Sandbox) -> None:
    box.apply(pod("client", None))
    wait_for(lambda: status(box, "client").get("phase") == "Running", what="Running")
    code = "import urllib.request as u; u.urlopen('https://example.com/', timeout=10)"
    result = kubectl(box, "exec", "client", "--", "python3", "-c", code)
    assert result.returncode == 1 and "403 Forbidden" in result.stderr
    assert box.containers is not None and box.containers.proxy is not None
    assert "CONNECT example.com:443" in box.containers.proxy.refused


def test_logs_follow_streams_until_the_container_exits(box: Sandbox) -> None:
    script = "for i in 1 2 3; do echo line-$i; sleep 0.3; done"
    box.apply(pod("talker", ["sh", "-c", script], restartPolicy="Never"))
    wait_for(lambda: status(box, "talker").get("phase") in ("Running", "Succeeded"), what="talker started")
    followed = kubectl(box, "logs", "-f", "talker")
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.split() == ["line-1", "line-2", "line-3"]


def test_deletion_sends_sigterm_first_and_requests_are_reported(box: Sandbox) -> None:
    assert box.containers is not None and box.containers.runtime is not None
    script = "trap 'echo got-term > /dev/termination-log; exit 0' TERM; while true; do sleep 0.1; done"
    spec = pod("polite", ["sh", "-c", script], terminationGracePeriodSeconds=60)
    spec["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "2", "memory": "1Gi"}}
    box.apply(spec)
    wait_for(lambda: status(box, "polite").get("phase") == "Running", what="Running")
    reported = status(box, "polite")["containerStatuses"][0]["resources"]
    assert reported == {"requests": {"cpu": "2", "memory": "1Gi"}}
    record = box.containers.runtime.pod("default", "polite")
    assert record is not None
    started = time.monotonic()
    box.store.delete("pods", "polite", "default")
    wait_for(lambda: not record.directory.exists(), what="the pod to be cleaned up")
    assert time.monotonic() - started < 30  # it exited on SIGTERM, well before its 60 s grace
    assert record.containers["main"].terminated is not None
    assert record.containers["main"].terminated["exitCode"] == 0


def test_config_map_secret_and_empty_dir_volumes_and_run_as_user(box: Sandbox) -> None:
    box.apply(
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "default"},
                "data": {"config.yaml": "mode: rank\n"},
            },
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"token": "c2VjcmV0"},  # "secret"
            },
        ]
    )
    spec = pod("volumed", None)
    spec["spec"]["securityContext"] = {"runAsUser": 65532, "runAsGroup": 65532}
    spec["spec"]["volumes"] = [
        {"name": "config", "configMap": {"name": "settings"}},
        {"name": "creds", "secret": {"secretName": "creds"}},
        {"name": "scratch", "emptyDir": {}},
    ]
    spec["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "config", "mountPath": "/etc/app", "readOnly": True},
        {"name": "creds", "mountPath": "/var/run/creds"},
        {"name": "scratch", "mountPath": "/scratch"},
    ]
    box.apply(spec)
    wait_for(lambda: status(box, "volumed").get("phase") == "Running", what="Running")
    script = "cat /etc/app/config.yaml /var/run/creds/token; echo; touch /scratch/x && echo wrote; id -u; echo $HOME"
    result = kubectl(box, "exec", "volumed", "--", "sh", "-c", script)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["mode: rank", "secret", "wrote", "65532", "/"]
    first = kubectl(box, "exec", "volumed", "--", "awk", "/^Uid:/ {print $2}", "/proc/1/status")
    assert first.stdout.strip() == "65532"  # PID 1 itself runs as the user


def test_kubectl_port_forward_speaks_spdy_in_the_websocket_to_the_pod(box: Sandbox) -> None:
    box.apply(pod("kpf", ["python3", "-m", "http.server", "8080", "--directory", "/etc"]))
    wait_for(lambda: status(box, "kpf").get("phase") == "Running", what="Running")
    wait_for(lambda: kubectl(box, "exec", "kpf", "--", "python3", "-c", _CONNECT_8080).returncode == 0)
    forward = subprocess.Popen(
        ["kubectl", "--kubeconfig", str(box.kubeconfig_path), "port-forward", "pod/kpf", ":8080"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert forward.stdout is not None
        line = forward.stdout.readline()  # "Forwarding from 127.0.0.1:NNNNN -> 8080"
        local_port = int(line.split("127.0.0.1:")[1].split()[0])
        for _ in range(2):  # each connection gets its own pair of streams
            with urllib.request.urlopen(f"http://127.0.0.1:{local_port}/debian_version", timeout=10) as reply:
                assert reply.read().decode().startswith("12.")
    finally:
        forward.terminate()
        forward.wait(10)


def test_a_second_sandbox_on_the_same_root_is_refused_and_the_first_keeps_running(box: Sandbox) -> None:
    assert box.containers is not None
    second = Sandbox(containers=True, kubelet_root=box.containers.root, name="second")
    with pytest.raises(node_module.ContainersUnavailable, match="already runs"):
        second.start()
    box.apply(pod("still-served", None))
    wait_for(lambda: status(box, "still-served").get("phase") == "Running", what="the first sandbox to serve")


def test_a_missing_config_map_is_create_container_config_error_until_it_exists(box: Sandbox) -> None:
    spec = pod("waits-for-config", ["sh", "-c", "cat /etc/late/value; sleep infinity"])
    spec["spec"]["volumes"] = [{"name": "late", "configMap": {"name": "late-config"}}]
    spec["spec"]["containers"][0]["volumeMounts"] = [{"name": "late", "mountPath": "/etc/late"}]
    box.apply(spec)

    def reason() -> str | None:
        statuses = status(box, "waits-for-config").get("containerStatuses") or [{}]
        return statuses[0].get("state", {}).get("waiting", {}).get("reason")

    wait_for(lambda: reason() == "CreateContainerConfigError", what="CreateContainerConfigError")
    box.apply(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "late-config", "namespace": "default"},
            "data": {"value": "arrived"},
        }
    )
    wait_for(lambda: status(box, "waits-for-config").get("phase") == "Running", what="Running once it exists")
    wait_for(lambda: kubectl(box, "logs", "waits-for-config").stdout == "arrived", what="the file in the container")


def test_sandbox_up_containers_serves_pods_and_sigterm_leaves_nothing(tmp_path: pathlib.Path) -> None:
    kubeconfig = tmp_path / "kc"
    name = f"pytest-cli-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}"  # stable: a killed run is cleaned by the next
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sky_kueue.cli.main",
            "sandbox",
            "up",
            "--containers",
            "--name",
            name,
            "--kubeconfig",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert up.stdout is not None
        assert "listening on" in up.stdout.readline()
        run = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "run",
                "hello",
                "--image=debian:bookworm",
                "--restart=Never",
                "--command",
                "--",
                "sh",
                "-c",
                "echo hi from $(hostname)",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr

        def logs() -> str:
            done = subprocess.run(
                ["kubectl", "--kubeconfig", str(kubeconfig), "logs", "hello"], capture_output=True, text=True
            )
            return done.stdout

        assert wait_for(logs, what="the pod's output") == "hi from hello\n"
        root = (node_module.DEFAULT_STATE_ROOT / name).expanduser()
        state = network_module.NetworkState.load(root / network_module.STATE_FILE)
        assert state.bridge is not None
        assert state.bridge in links() and state.namespaces and set(state.namespaces) <= netns_names()
    finally:
        up.send_signal(signal.SIGTERM)
        output, _ = up.communicate(timeout=60)
    assert up.returncode == 0, output
    assert mounts_mentioning(root) == []
    assert not (root / network_module.STATE_FILE).exists()
    assert not set(state.namespaces) & netns_names() and f"{state.bridge}:" not in links()

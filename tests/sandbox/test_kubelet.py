"""The sandbox's local kubelet: ``kubectl exec`` and the official client's ``stream`` run
commands for a pod as local processes, in the pod's own directory and environment."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.stream import stream

from sky_kueue.sandbox import seed
from sky_kueue.sandbox.kubelet import portforward
from sky_kueue.sandbox.kubelet.exec_session import SUBPROTOCOLS, exit_status
from sky_kueue.sandbox.kubelet.websocket import accept_key, choose_subprotocol, unmask
from sky_kueue.sandbox.sandbox import Sandbox

KUBECTL_TIMEOUT_SECONDS = 30


def _pod(name: str, env: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    container = {"name": "main", "image": "x", "env": env or []}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container]},
    }


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    env: list[dict[str, Any]] = [
        {"name": "GREETING", "value": "hello"},
        {"name": "MY_POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    ]
    with Sandbox(kubelet=True, run_emulator=False) as sandbox:
        sandbox.apply(seed.seed_nodes())
        sandbox.apply([_pod("worker", env)])
        sandbox.step()  # the pod has no queue: it is bound and Running at once
        yield sandbox


def kubectl(box: Sandbox, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(box.kubeconfig_path), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
        check=False,
    )


def test_kubectl_exec_streams_stdout_stderr_and_the_exit_code(box: Sandbox) -> None:
    result = kubectl(box, "exec", "worker", "--", "bash", "-c", 'echo "$GREETING $MY_POD"; echo oops >&2; exit 3')
    assert result.returncode == 3
    assert result.stdout == "hello worker\n"
    assert "oops" in result.stderr and "command terminated with exit code 3" in result.stderr


def test_kubectl_exec_passes_stdin_and_runs_in_the_pods_own_home(box: Sandbox) -> None:
    assert box.kubelet is not None
    home = box.kubelet.workspace("default", "worker")
    script = 'cat > note.txt; echo "$HOME"; pwd'
    result = kubectl(box, "exec", "-i", "worker", "--", "bash", "-c", script, stdin="a\nb\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(home), str(home)]
    assert (home / "note.txt").read_text() == "a\nb\n"


def test_the_official_clients_stream_runs_commands_too(box: Sandbox) -> None:
    core = client.CoreV1Api(box.api_client())
    output = stream(
        core.connect_get_namespaced_pod_exec,
        "worker",
        "default",
        command=["bash", "-c", "printf '%s' \"$GREETING\""],
        stdout=True,
        stderr=True,
        stdin=False,
        tty=False,
    )
    assert output == "hello"


def test_exec_refuses_what_a_kubelet_would_refuse(box: Sandbox) -> None:
    missing = kubectl(box, "exec", "nobody", "--", "true")
    assert missing.returncode != 0 and 'pods "nobody" not found' in missing.stderr
    wrong = kubectl(box, "exec", "worker", "-c", "sidecar", "--", "true")
    assert wrong.returncode != 0 and "container sidecar is not valid for pod worker" in wrong.stderr
    no_binary = kubectl(box, "exec", "worker", "--", "/no/such/binary")
    assert no_binary.returncode != 0


def test_logs_answer_with_the_pods_log_which_is_empty_without_a_main_process(box: Sandbox) -> None:
    result = kubectl(box, "logs", "worker")
    assert (result.returncode, result.stdout) == (0, "")


def test_without_the_kubelet_exec_is_not_served() -> None:
    with Sandbox(run_emulator=False) as plain:
        plain.apply(seed.seed_nodes())
        plain.apply([_pod("solo")])
        plain.step()
        result = kubectl(plain, "exec", "solo", "--", "true")
    assert result.returncode != 0 and "pods/exec" in result.stderr


def test_protocol_pieces() -> None:
    # RFC 6455 §1.3's worked example.
    assert accept_key("dGhlIHNhbXBsZSBub25jZQ==") == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
    assert unmask(unmask(b"payload!", b"\x01\x02\x03\x04"), b"\x01\x02\x03\x04") == b"payload!"
    assert choose_subprotocol("v4.channel.k8s.io, v5.channel.k8s.io", SUBPROTOCOLS) == "v5.channel.k8s.io"
    assert choose_subprotocol("channel.k8s.io", SUBPROTOCOLS) is None
    assert choose_subprotocol(None, SUBPROTOCOLS) is None
    assert choose_subprotocol("portforward.k8s.io, v4.channel.k8s.io", portforward.SUBPROTOCOLS) == "v4.channel.k8s.io"
    assert exit_status(0)["status"] == "Success"
    assert exit_status(2)["details"]["causes"] == [{"reason": "ExitCode", "message": "2"}]


def test_a_pods_processes_die_with_the_pod_and_with_the_sandbox() -> None:
    import threading
    import time

    with Sandbox(kubelet=True, run_emulator=False) as sandbox:
        sandbox.apply(seed.seed_nodes())
        sandbox.apply([_pod("sleeper"), _pod("other")])
        sandbox.step()
        kubelet = sandbox.kubelet
        assert kubelet is not None
        runs = [
            threading.Thread(target=kubectl, args=(sandbox, "exec", name, "--", "sleep", "600"), daemon=True)
            for name in ("sleeper", "other")
        ]
        for run in runs:
            run.start()
        deadline = time.monotonic() + KUBECTL_TIMEOUT_SECONDS
        while time.monotonic() < deadline and not (
            kubelet.processes("default", "sleeper") and kubelet.processes("default", "other")
        ):
            time.sleep(0.05)
        (sleeper,) = kubelet.processes("default", "sleeper")
        (other,) = kubelet.processes("default", "other")

        client.CoreV1Api(sandbox.api_client()).delete_namespaced_pod("sleeper", "default")
        assert sleeper.wait(KUBECTL_TIMEOUT_SECONDS) != 0
        assert other.poll() is None  # another pod's process is untouched
    assert other.wait(KUBECTL_TIMEOUT_SECONDS) != 0  # stopping the sandbox kills the rest

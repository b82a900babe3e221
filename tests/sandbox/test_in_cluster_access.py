"""Pods reach the sandbox as in-cluster clients: HTTPS, the CA in ``ca.crt``, a pod-bound token.

The official client's own in-cluster loader (``InClusterConfigLoader``, what
``load_incluster_config`` runs, pointed at the files the kubelet would mount) configures the
client; the request log says which user each request was served as.
"""

from __future__ import annotations

import pathlib
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException
from kubernetes.config.incluster_config import InClusterConfigLoader

from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.workloads import in_cluster
from sky_kueue.sandbox.workloads.service_accounts import CA_FILE, NAMESPACE_FILE, TOKEN_FILE

NAMESPACE = "default"
ACCOUNT = "robot"


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(run_emulator=False) as running:
        yield running


@pytest.fixture
def access(sandbox: Sandbox) -> Iterator[in_cluster.InClusterAccess]:
    served = in_cluster.serve(sandbox.server)
    yield served
    served.close()


def _pod(sandbox: Sandbox, name: str = "worker", **spec: Any) -> dict[str, Any]:
    return sandbox.store.create(
        "pods",
        {
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "main", "image": "debian:bookworm"}], **spec},
        },
    )


def _mount(files: dict[str, bytes], root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Write the pod's files under ``root`` (the kubelet's mount, relocated for the host)."""
    placed = {}
    for path, content in files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        placed[path] = target
    return placed


def _in_cluster_client(access: in_cluster.InClusterAccess, placed: dict[str, pathlib.Path]) -> client.CoreV1Api:
    configuration = client.Configuration()
    InClusterConfigLoader(
        token_filename=str(placed[TOKEN_FILE]),
        cert_filename=str(placed[CA_FILE]),
        environ=access.environment(),
    ).load_and_set(configuration)
    configuration.retries = False
    assert configuration.host == f"https://{access.host}:{access.port}"
    return client.CoreV1Api(client.ApiClient(configuration))


def test_the_official_in_cluster_loader_talks_https_as_the_pods_service_account(
    sandbox: Sandbox, access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    sandbox.store.create("serviceaccounts", {"metadata": {"name": ACCOUNT, "namespace": NAMESPACE}})
    pod = _pod(sandbox, serviceAccountName=ACCOUNT)
    placed = _mount(access.pod_files(pod), tmp_path)
    assert placed[NAMESPACE_FILE].read_text() == NAMESPACE
    core = _in_cluster_client(access, placed)

    names = [p.metadata.name for p in core.list_namespaced_pod(NAMESPACE).items]
    assert names == ["worker"]
    [record] = [r for r in sandbox.requests.matching(verb="list") if r.path == f"/api/v1/namespaces/{NAMESPACE}/pods"]
    assert record.user == f"system:serviceaccount:{NAMESPACE}:{ACCOUNT}"
    assert record.status == 200


def test_the_token_dies_with_its_pod_and_unknown_tokens_are_refused(
    sandbox: Sandbox, access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    pod = _pod(sandbox, terminationGracePeriodSeconds=0)
    assert pod["spec"]["serviceAccountName"] == "default"  # admission's default
    placed = _mount(access.pod_files(pod), tmp_path)
    core = _in_cluster_client(access, placed)
    assert core.read_namespace(NAMESPACE).metadata.name == NAMESPACE
    assert sandbox.requests.records()[-1].user == "system:serviceaccount:default:default"

    sandbox.store.delete("pods", "worker", NAMESPACE)
    with pytest.raises(ApiException) as refused:
        core.read_namespace(NAMESPACE)
    assert refused.value.status == 401

    placed[TOKEN_FILE].write_text("not-a-token-the-sandbox-issued")
    with pytest.raises(ApiException) as unknown:
        _in_cluster_client(access, placed).read_namespace(NAMESPACE)
    assert unknown.value.status == 401


def test_the_certificate_is_only_trusted_with_the_sandboxs_ca(
    access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    url = f"https://{access.host}:{access.port}/version"
    with pytest.raises(urllib.error.URLError) as untrusted:
        urllib.request.urlopen(url, context=ssl.create_default_context(), timeout=5)
    assert isinstance(untrusted.value.reason, ssl.SSLCertVerificationError)
    ca = tmp_path / "ca.crt"
    ca.write_bytes(access.certificate.ca_pem)
    with urllib.request.urlopen(url, context=ssl.create_default_context(cafile=str(ca)), timeout=5) as answer:
        assert answer.status == 200


def test_no_files_when_the_pod_or_its_account_opts_out(sandbox: Sandbox, access: in_cluster.InClusterAccess) -> None:
    sandbox.store.create(
        "serviceaccounts",
        {"metadata": {"name": "quiet", "namespace": NAMESPACE}, "automountServiceAccountToken": False},
    )
    assert access.pod_files(_pod(sandbox, "a", automountServiceAccountToken=False)) == {}
    assert access.pod_files(_pod(sandbox, "b", serviceAccountName="quiet")) == {}
    assert set(access.pod_files(_pod(sandbox, "c", serviceAccountName="quiet", automountServiceAccountToken=True))) == {
        TOKEN_FILE,
        CA_FILE,
        NAMESPACE_FILE,
    }


def test_the_plain_listener_still_serves_clients_without_credentials(
    sandbox: Sandbox, access: in_cluster.InClusterAccess
) -> None:
    core = client.CoreV1Api(sandbox.api_client())
    assert core.read_namespace(NAMESPACE).metadata.name == NAMESPACE
    assert sandbox.requests.records()[-1].user == ""


def test_a_watch_over_https_ends_when_the_client_goes(
    sandbox: Sandbox, access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    """The TLS listener serves watches (the controller's reflectors), bounded by timeoutSeconds."""
    pod = _pod(sandbox)
    core = _in_cluster_client(access, _mount(access.pod_files(pod), tmp_path))
    events = [
        event["type"]
        for event in watch.Watch().stream(core.list_namespaced_pod, NAMESPACE, timeout_seconds=1, _request_timeout=5)
    ]
    assert events == ["ADDED"]


def test_addresses_named_later_are_in_the_certificate(
    access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    """The gateway is known only once the pod network exists: the certificate is reissued."""
    ca = tmp_path / "ca.crt"
    ca.write_bytes(access.certificate.ca_pem)
    trusting = ssl.create_default_context(cafile=str(ca))

    def handshake(name: str) -> None:
        with (
            socket.create_connection((access.host, access.port), timeout=5) as raw,
            trusting.wrap_socket(raw, server_hostname=name),
        ):
            pass

    handshake(in_cluster.LOOPBACK)
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake("10.213.0.1")
    access.add_addresses(["10.213.0.1"])
    handshake("10.213.0.1")
    assert access.environment()["KUBERNETES_SERVICE_PORT"] == str(access.port)


def test_the_token_outlives_its_pod_by_the_termination_grace_period(
    sandbox: Sandbox, access: in_cluster.InClusterAccess, tmp_path: pathlib.Path
) -> None:
    """kube-apiserver keeps a deleted pod (and its token) until its containers have stopped:
    a controller releases its Lease with it during the grace period."""
    pod = _pod(sandbox, terminationGracePeriodSeconds=1)
    core = _in_cluster_client(access, _mount(access.pod_files(pod), tmp_path))
    sandbox.store.delete("pods", "worker", NAMESPACE)
    assert core.read_namespace(NAMESPACE).metadata.name == NAMESPACE  # still terminating
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            core.read_namespace(NAMESPACE)
        except ApiException as refused:
            assert refused.status == 401
            return
        time.sleep(0.1)
    raise AssertionError("the token was still accepted 5 s after a 1 s grace period")

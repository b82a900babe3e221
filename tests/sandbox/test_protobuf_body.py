"""Protobuf request bodies: the decoder on hand-built wire bytes, the server's answers, and the
real kubectl's typed ``create`` commands (which send protobuf) read back with the official client.

kubectl must be installed (``/usr/bin/kubectl`` here); a missing kubectl fails these tests.
"""

from __future__ import annotations

import base64
import json
import pathlib
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from sky_kueue.sandbox.apiserver import ApiServer, protobuf_body
from sky_kueue.sandbox.apiserver.errors import ApiError
from sky_kueue.sandbox.apiserver.protobuf_body import ProtobufBodyError
from tests.sandbox import raw_http

KUBECTL_TIMEOUT_SECONDS = 20
PROTOBUF_HEADERS = {"Content-Type": protobuf_body.PROTOBUF_MEDIA_TYPE, "Accept": "application/json"}

# ---- a minimal encoder, so the tests state the wire bytes they send -------------------------


def varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64: two's complement over 64 bits, ten bytes
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def tag(number: int, wire: int) -> bytes:
    return varint(number << 3 | wire)


def vfield(number: int, value: int) -> bytes:
    return tag(number, 0) + varint(value)


def lfield(number: int, payload: bytes | str) -> bytes:
    data = payload.encode() if isinstance(payload, str) else payload
    return tag(number, 2) + varint(len(data)) + data


def entry(number: int, key: str, value: bytes | str) -> bytes:
    """A map entry: a length-delimited message with key 1 and value 2."""
    return lfield(number, lfield(1, key) + lfield(2, value))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = lfield(1, api_version) + lfield(2, kind)
    return protobuf_body.ENVELOPE_MAGIC + lfield(1, type_meta) + lfield(2, raw) + lfield(3, "") + lfield(4, "")


def object_meta(name: str, namespace: str = "", *extra: bytes) -> bytes:
    # Empty non-pointer strings are on the wire, as go-to-protobuf writes them.
    return lfield(1, name) + lfield(2, "") + lfield(3, namespace) + lfield(5, "") + lfield(6, "") + b"".join(extra)


# ---- the decoder ----------------------------------------------------------------------------


def test_a_configmap_decodes_like_its_json() -> None:
    meta = object_meta("settings", "team-a", entry(11, "app", "web"), entry(12, "note", "x"), lfield(14, "f1"))
    raw = (
        lfield(1, meta)
        + entry(2, "a", "1")
        + entry(2, "b", "two")
        + entry(3, "blob", b"\x00\x01\xfe")
        + vfield(4, 0)  # immutable: a pointer, so false is kept
    )

    decoded = protobuf_body.decode(envelope("v1", "ConfigMap", raw))

    assert decoded == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "settings",
            "namespace": "team-a",
            "labels": {"app": "web"},
            "annotations": {"note": "x"},
            "finalizers": ["f1"],
        },
        "data": {"a": "1", "b": "two"},
        "binaryData": {"blob": base64.b64encode(b"\x00\x01\xfe").decode()},
        "immutable": False,
    }


@pytest.mark.parametrize(
    ("unknown", "number"),
    [
        (vfield(90, 7), 90),  # varint
        (tag(91, 1) + (12345).to_bytes(8, "little"), 91),  # fixed64
        (tag(92, 5) + (6789).to_bytes(4, "little"), 92),  # fixed32
        (lfield(93, b"\x00\xff opaque"), 93),  # length-delimited
    ],
)
def test_a_field_without_a_table_entry_is_refused_not_dropped(unknown: bytes, number: int) -> None:
    raw = lfield(1, object_meta("settings", "team-a")) + entry(2, "a", "1") + unknown

    with pytest.raises(ApiError) as refused:
        protobuf_body.decode(envelope("v1", "ConfigMap", raw))

    assert refused.value.code == 415
    assert f"field {number} of ConfigMap is not among the fields the sandbox decodes" in str(refused.value)
    assert "send this object as JSON" in str(refused.value)


def test_an_unknown_field_inside_metadata_names_its_path() -> None:
    raw = lfield(1, object_meta("settings", "team-a", vfield(90, 1)))

    with pytest.raises(ApiError, match=r"field 90 of ConfigMap\.metadata is not among"):
        protobuf_body.decode(envelope("v1", "ConfigMap", raw))


def test_secret_bytes_become_base64_as_json_carries_them() -> None:
    raw = lfield(1, object_meta("creds", "ns")) + entry(2, "password", b"s3cr\xe9t") + entry(4, "user", "admin")
    raw += lfield(3, "Opaque")

    decoded = protobuf_body.decode(envelope("v1", "Secret", raw))

    assert decoded["data"] == {"password": base64.b64encode(b"s3cr\xe9t").decode()}
    assert decoded["stringData"] == {"user": "admin"}
    assert decoded["type"] == "Opaque"


def test_delete_options_keep_set_zero_values_and_any_api_version() -> None:
    preconditions = lfield(1, "uid-1") + lfield(2, "42")
    raw = vfield(1, 0) + lfield(2, preconditions) + vfield(3, 0) + lfield(4, "Foreground") + lfield(5, "All")

    decoded = protobuf_body.decode(envelope("apps/v1", "DeleteOptions", raw))

    assert decoded == {
        "apiVersion": "apps/v1",
        "kind": "DeleteOptions",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
        "orphanDependents": False,
        "propagationPolicy": "Foreground",
        "dryRun": ["All"],
    }


def test_negative_integers_are_sign_extended_varints() -> None:
    raw = vfield(1, -5)
    assert len(varint(-5)) == protobuf_body.MAX_VARINT_BYTES

    assert protobuf_body.decode(envelope("v1", "DeleteOptions", raw))["gracePeriodSeconds"] == -5


def test_a_deployment_with_quantities_env_and_int_or_string() -> None:
    container = (
        lfield(1, "web")
        + lfield(2, "nginx:1")
        + lfield(3, "sleep")
        + lfield(3, "10")
        + lfield(4, "--verbose")
        + lfield(6, vfield(3, 80) + lfield(4, "TCP"))
        + lfield(7, lfield(1, "MODE") + lfield(2, "fast"))
        + lfield(8, entry(1, "cpu", lfield(1, "2")) + entry(2, "memory", lfield(1, "1Gi")))
        + vfield(16, 0)  # stdin: a plain bool, so false is dropped
    )
    template = lfield(1, object_meta("", "", entry(11, "app", "web"))) + lfield(2, lfield(2, container))
    rolling = lfield(1, vfield(1, 0) + vfield(2, 1)) + lfield(2, vfield(1, 1) + lfield(3, "25%"))
    spec = (
        vfield(1, 3)
        + lfield(2, entry(1, "app", "web"))
        + lfield(3, template)
        + lfield(4, lfield(1, "RollingUpdate") + lfield(2, rolling))
        + vfield(5, 0)
    )
    created = lfield(8, vfield(1, 1_700_000_000))  # metav1.Time seconds

    decoded = protobuf_body.decode(
        envelope("apps/v1", "Deployment", lfield(1, object_meta("web", "ns", created)) + lfield(2, spec))
    )

    assert decoded["metadata"] == {"name": "web", "namespace": "ns", "creationTimestamp": "2023-11-14T22:13:20Z"}
    assert decoded["spec"] == {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx:1",
                        "command": ["sleep", "10"],
                        "args": ["--verbose"],
                        "ports": [{"containerPort": 80, "protocol": "TCP"}],
                        "env": [{"name": "MODE", "value": "fast"}],
                        "resources": {"limits": {"cpu": "2"}, "requests": {"memory": "1Gi"}},
                    }
                ]
            },
        },
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}},
    }


def test_an_empty_creation_timestamp_is_dropped() -> None:
    decoded = protobuf_body.decode(envelope("v1", "Namespace", lfield(1, object_meta("x", "", lfield(8, b"")))))

    assert decoded == {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty body"),
        (b'{"kind":"Namespace"}', "does not start with the protobuf envelope's magic bytes"),
        (
            protobuf_body.ENVELOPE_MAGIC + tag(2, 2) + varint(50) + b"short",
            "truncated field 2: 50 bytes declared, 5 present at byte 2 of runtime.Unknown",
        ),
        (protobuf_body.ENVELOPE_MAGIC + tag(4, 2) + b"\x80\x80", "truncated varint at byte 3 of runtime.Unknown"),
        (protobuf_body.ENVELOPE_MAGIC + tag(7, 0) + b"\xff" * 11, "varint longer than 10 bytes"),
        (protobuf_body.ENVELOPE_MAGIC + tag(7, 1) + b"\x01\x02", "truncated 64-bit field 7"),
        (protobuf_body.ENVELOPE_MAGIC + tag(7, 3), "unsupported wire type 3 (field 7)"),
        (protobuf_body.ENVELOPE_MAGIC + b"\x00", "field number 0"),
        (envelope("v1", "Namespace", lfield(1, lfield(1, b"\xff\xfe"))), "Namespace.metadata.name is not valid UTF-8"),
        (envelope("v1", "Namespace", lfield(1, vfield(1, 3))), "Namespace.metadata.name has wire type 0, expected 2"),
        (
            envelope("v1", "ConfigMap", lfield(1, lfield(1, "cm")) + tag(2, 2) + varint(9) + b"\x0a"),
            "truncated field 2",
        ),
        (
            protobuf_body.ENVELOPE_MAGIC + lfield(1, lfield(2, "Namespace")) + lfield(2, b"") + lfield(3, "gzip"),
            "unsupported contentEncoding 'gzip'",
        ),
    ],
)
def test_malformed_bodies_raise_a_precise_error(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufBodyError) as raised:
        protobuf_body.decode(body)

    assert message in str(raised.value)


def test_a_kind_without_a_table_is_415_naming_the_decoded_kinds() -> None:
    with pytest.raises(ApiError) as raised:
        protobuf_body.decode(envelope("v1", "ResourceQuota", lfield(1, object_meta("q"))))

    assert raised.value.code == 415
    assert raised.value.reason.value == "UnsupportedMediaType"
    assert "unknown format ('application/vnd.kubernetes.protobuf')" in raised.value.message
    assert (
        "decodes protobuf bodies only for the kinds ClusterRole, ClusterRoleBinding, ConfigMap, DeleteOptions, "
        "Deployment, Job, Namespace, Pod, PriorityClass, Role, RoleBinding, Secret, Service, ServiceAccount"
    ) in raised.value.message
    assert "not v1/ResourceQuota" in raised.value.message


def test_every_table_a_field_or_kind_names_exists() -> None:
    named = {field.message for table in protobuf_body.TABLES.values() for field in table.values() if field.message}
    named |= set(protobuf_body.OBJECT_KINDS.values()) | {protobuf_body.DELETE_OPTIONS_KIND}

    assert named - set(protobuf_body.TABLES) == set()
    for table in protobuf_body.TABLES.values():
        for field in table.values():
            assert bool(field.message) == (field.kind is protobuf_body.FieldKind.MESSAGE), field


# ---- the server's answers -------------------------------------------------------------------


def test_the_server_creates_from_a_protobuf_body(api_client: client.ApiClient, core: client.CoreV1Api) -> None:
    body = envelope("v1", "ConfigMap", lfield(1, object_meta("cm", "default")) + entry(2, "k", "v"))

    response = raw_http.send(
        api_client, "POST", "/api/v1/namespaces/default/configmaps", body=body, headers=PROTOBUF_HEADERS
    )

    assert response.status == 201, response.data
    assert response.json()["data"] == {"k": "v"}
    assert core.read_namespaced_config_map("cm", "default").data == {"k": "v"}


def test_a_truncated_body_is_a_400_status_and_the_server_keeps_serving(
    api_client: client.ApiClient, core: client.CoreV1Api
) -> None:
    body = envelope("v1", "ConfigMap", lfield(1, object_meta("cm", "default")))[:-6]

    response = raw_http.send(
        api_client, "POST", "/api/v1/namespaces/default/configmaps", body=body, headers=PROTOBUF_HEADERS
    )

    assert response.status == 400
    status = response.json()
    assert status["kind"] == "Status" and status["reason"] == "BadRequest"
    assert status["message"].startswith("the request body is not valid application/vnd.kubernetes.protobuf: truncated")
    assert "Traceback" not in status["message"]
    assert core.list_namespaced_config_map("default").items == []


def test_an_undecodable_kind_is_415(api_client: client.ApiClient) -> None:
    body = envelope("apps/v1", "StatefulSet", lfield(1, object_meta("s", "default")))

    response = raw_http.send(
        api_client, "POST", "/apis/apps/v1/namespaces/default/deployments", body=body, headers=PROTOBUF_HEADERS
    )

    assert response.status == 415
    assert "not apps/v1/StatefulSet" in response.json()["message"]


def test_protobuf_delete_options_are_honoured(api_client: client.ApiClient, core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="cm")))
    path = "/api/v1/namespaces/default/configmaps/cm"
    wrong_uid = envelope("v1", "DeleteOptions", lfield(2, lfield(1, "not-the-uid")))

    refused = raw_http.send(api_client, "DELETE", path, body=wrong_uid, headers=PROTOBUF_HEADERS)
    dry_run = raw_http.send(
        api_client, "DELETE", path, body=envelope("v1", "DeleteOptions", lfield(5, "All")), headers=PROTOBUF_HEADERS
    )

    assert refused.status == 409, refused.data
    assert "Precondition failed" in refused.json()["message"]
    assert dry_run.status == 200, dry_run.data
    assert core.read_namespaced_config_map("cm", "default").metadata.name == "cm"


# ---- the real kubectl -----------------------------------------------------------------------

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def kubectl(server: ApiServer, tmp_path: pathlib.Path) -> Kubectl:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.fail("kubectl is not installed: install it (Debian: kubernetes-client) to run these tests")
    kubeconfig = server.write_kubeconfig(tmp_path / "kubeconfig")
    command = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache")]

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*command, *args], input=stdin, capture_output=True, text=True, timeout=KUBECTL_TIMEOUT_SECONDS, check=False
        )
        assert result.returncode == 0, f"kubectl {' '.join(args)} failed: {result.stderr}"
        return result

    return run


@pytest.fixture
def protobuf_bodies(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """Every protobuf body the server decodes, in order (proves kubectl really sent protobuf)."""
    seen: list[bytes] = []
    original = protobuf_body.decode

    def recording(body: bytes) -> dict[str, Any]:
        seen.append(body)
        return original(body)

    monkeypatch.setattr(protobuf_body, "decode", recording)
    return seen


def _kind(body: bytes) -> str:
    return protobuf_body.read_envelope(body).kind


def test_kubectl_creates_namespace_configmap_secret_and_serviceaccount(
    kubectl: Kubectl, core: client.CoreV1Api, protobuf_bodies: list[bytes]
) -> None:
    kubectl("create", "namespace", "x1")
    kubectl("create", "configmap", "cm1", "-n", "x1", "--from-literal=a=b", "--from-literal=c=d")
    kubectl("create", "secret", "generic", "s1", "-n", "x1", "--from-literal=user=admin")
    kubectl("create", "serviceaccount", "sa1", "-n", "x1")

    assert [_kind(body) for body in protobuf_bodies] == ["Namespace", "ConfigMap", "Secret", "ServiceAccount"]
    assert core.read_namespace("x1").metadata.name == "x1"
    assert core.read_namespaced_config_map("cm1", "x1").data == {"a": "b", "c": "d"}
    secret = core.read_namespaced_secret("s1", "x1")
    assert secret.data == {"user": base64.b64encode(b"admin").decode()}
    assert core.read_namespaced_service_account("sa1", "x1").metadata.namespace == "x1"


def test_kubectl_creates_a_deployment_and_a_job(
    kubectl: Kubectl, api_client: client.ApiClient, protobuf_bodies: list[bytes]
) -> None:
    kubectl("create", "deployment", "web", "--image=nginx:1", "--replicas=2", "--port=80", "--", "sleep", "10")
    kubectl("create", "job", "once", "--image=busybox", "--", "echo", "hi")

    assert [_kind(body) for body in protobuf_bodies] == ["Deployment", "Job"]
    deployment = client.AppsV1Api(api_client).read_namespaced_deployment("web", "default")
    assert deployment.spec.replicas == 2
    assert deployment.spec.selector.match_labels == {"app": "web"}
    container = deployment.spec.template.spec.containers[0]
    assert (container.image, container.command, container.ports[0].container_port) == ("nginx:1", ["sleep", "10"], 80)
    job = client.BatchV1Api(api_client).read_namespaced_job("once", "default")
    assert job.spec.template.spec.restart_policy == "Never"
    assert job.spec.template.spec.containers[0].command == ["echo", "hi"]


def test_kubectl_creates_rbac_bindings_and_priority_classes(
    kubectl: Kubectl, api_client: client.ApiClient, protobuf_bodies: list[bytes]
) -> None:
    kubectl("create", "role", "reader", "--verb=get", "--verb=list", "--resource=pods")
    kubectl("create", "rolebinding", "read", "--role=reader", "--serviceaccount=default:robot")
    kubectl("create", "priorityclass", "low", "--value=0")

    assert [_kind(body) for body in protobuf_bodies] == ["Role", "RoleBinding", "PriorityClass"]
    rbac = client.RbacAuthorizationV1Api(api_client)
    assert rbac.read_namespaced_role("reader", "default").rules[0].verbs == ["get", "list"]
    binding = rbac.read_namespaced_role_binding("read", "default")
    assert (binding.role_ref.kind, binding.role_ref.name) == ("Role", "reader")
    assert (binding.subjects[0].kind, binding.subjects[0].name) == ("ServiceAccount", "robot")
    assert client.SchedulingV1Api(api_client).read_priority_class("low").value == 0


@pytest.mark.slow
def test_kubectl_deletes_a_configmap_and_a_pod(kubectl: Kubectl, core: client.CoreV1Api) -> None:
    kubectl("create", "configmap", "cm1", "--from-literal=a=b")
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p1", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    kubectl("delete", "configmap", "cm1")
    kubectl("delete", "pod", "p1", "--grace-period=0", "--force")

    assert core.list_namespaced_config_map("default").items == []
    assert core.list_namespaced_pod("default").items == []


#: kubectl commands whose protobuf body must decode to exactly what ``--dry-run=client -o json``
#: prints for the same command (after dropping the null creationTimestamp and empty status).
EQUIVALENCE_COMMANDS = [
    ["create", "namespace", "x1"],
    ["create", "configmap", "cm1", "-n", "x1", "--from-literal=a=b", "--from-file=blob"],
    ["create", "secret", "generic", "s1", "-n", "x1", "--from-literal=user=admin", "--type=Opaque"],
    ["create", "secret", "docker-registry", "s2", "--docker-server=r", "--docker-username=u", "--docker-password=p"],
    ["create", "serviceaccount", "sa1", "-n", "x1"],
    ["create", "deployment", "d1", "-n", "x1", "--image=a:1", "--image=b", "--replicas=2", "--port=80"],
    ["create", "job", "j1", "-n", "x1", "--image=busybox", "--", "echo", "hi"],
    ["create", "service", "nodeport", "svc1", "-n", "x1", "--tcp=80:8080", "--tcp=81:http", "--node-port=30001"],
    ["create", "role", "r1", "-n", "x1", "--verb=get", "--resource=pods", "--resource=deployments.apps"],
    ["create", "clusterrole", "cr1", "--verb=get", "--non-resource-url=/logs/*"],
    ["create", "clusterrole", "cr2", "--aggregation-rule=a=b"],
    ["create", "rolebinding", "rb1", "-n", "x1", "--role=r1", "--user=u1", "--group=g1", "--serviceaccount=x1:sa1"],
    ["create", "clusterrolebinding", "crb1", "--clusterrole=cr1", "--user=u1"],
    [
        "create",
        "priorityclass",
        "pc1",
        "--value=10",
        "--description=d",
        "--global-default",
        "--preemption-policy=Never",
    ],
]


def _without_nulls_and_status(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls_and_status(v) for k, v in value.items() if v is not None and k != "status"}
    if isinstance(value, list):
        return [_without_nulls_and_status(item) for item in value]
    return value


@pytest.mark.slow
def test_kubectl_bodies_decode_to_the_json_kubectl_prints(
    kubectl: Kubectl, protobuf_bodies: list[bytes], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "blob").write_bytes(bytes(range(256)))
    monkeypatch.chdir(tmp_path)
    for command in EQUIVALENCE_COMMANDS:
        printed = json.loads(kubectl(command[0], "--dry-run=client", "-o", "json", *command[1:]).stdout)
        protobuf_bodies.clear()
        kubectl(*command)

        assert len(protobuf_bodies) == 1, command
        decoded = protobuf_body.read_envelope(protobuf_bodies[0])
        assert decoded.kind == printed["kind"]
        assert _without_nulls_and_status(protobuf_body.decode(protobuf_bodies[0])) == _without_nulls_and_status(
            printed
        ), command

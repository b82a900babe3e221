"""The real cluster's pure parts: the pins file and how Kueue's manifests are adjusted to run
Kueue's webhook server on this machine (no cluster needed)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from sky_kueue.realcluster import manifests, versions


def test_the_shipped_pins_parse_and_map_kubernetes_to_its_staging_tag() -> None:
    pins = versions.load_pins()
    assert pins.kubernetes.startswith("v1.") and pins.kubernetes_staging == "v0." + pins.kubernetes[3:]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("KUEUE_VERSION=v0.17.0\n", "missing KUBERNETES_VERSION, ETCD_VERSION, KWOK_VERSION"),
        ("KUBERNETES_VERSION=latest\nKUEUE_VERSION=v0.17.0\nETCD_VERSION=v3.6.5\nKWOK_VERSION=v0.8.0\n", "latest"),
        ("just words\n", "expected KEY=VALUE"),
    ],
)
def test_a_bad_pins_file_is_one_precise_error(text: str, message: str) -> None:
    with pytest.raises(versions.PinsError, match=message):
        versions.parse_pins(text, "pins.env")


def webhook_config() -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "mutating-webhook-configuration"},
        "webhooks": [
            {
                "name": "mpod.kb.io",
                "clientConfig": {
                    "service": {"name": "webhook-service", "namespace": "system", "path": "/mutate--v1-pod"}
                },
            },
            {
                "name": "mworkload.kb.io",
                "clientConfig": {"service": {"name": "webhook-service", "namespace": "system", "path": "/mutate-w"}},
            },
        ],
    }


def test_webhooks_point_at_the_local_server_with_the_cluster_ca() -> None:
    (hook,) = manifests.local_webhooks([webhook_config()], port=9443, ca_pem=b"PEM")
    pod, workload = hook["webhooks"]
    assert hook["metadata"]["name"] == "kueue-mutating-webhook-configuration"
    assert pod["clientConfig"] == {
        "url": "https://127.0.0.1:9443/mutate--v1-pod",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    # the pod webhook stays off kube-system and kueue-system, as Kueue's kustomization has it
    assert pod["namespaceSelector"]["matchExpressions"][0]["values"] == ["kube-system", "kueue-system"]
    assert "namespaceSelector" not in workload


def test_only_the_converted_crds_get_the_conversion_webhook() -> None:
    crds = [
        {"kind": "CustomResourceDefinition", "metadata": {"name": name}, "spec": {}}
        for name in ("workloads.kueue.x-k8s.io", "resourceflavors.kueue.x-k8s.io")
    ]
    workloads, flavors = manifests.local_crds(crds, port=1, ca_pem=b"x")
    assert workloads["spec"]["conversion"]["webhook"]["clientConfig"]["url"] == "https://127.0.0.1:1/convert"
    assert "conversion" not in flavors["spec"]


def test_rbac_is_installed_as_kueues_kustomization_names_it() -> None:
    docs: list[dict[str, Any]] = [
        {"kind": "ServiceAccount", "metadata": {"name": "controller-manager", "namespace": "system"}},
        {"kind": "ClusterRole", "metadata": {"name": "manager-role"}},
        {
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "manager-rolebinding"},
            "roleRef": {"kind": "ClusterRole", "name": "manager-role"},
            "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}],
        },
        {
            "kind": "RoleBinding",
            "metadata": {"name": "visibility-server-auth-reader", "namespace": "kube-system"},
            "roleRef": {"kind": "Role", "name": "extension-apiserver-authentication-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "controller-manager", "namespace": "system"}],
        },
    ]
    sa, role, binding, reader = manifests.kueue_rbac(docs)
    assert sa["metadata"] == {"name": "kueue-controller-manager", "namespace": "kueue-system"}
    assert role["metadata"]["name"] == "kueue-manager-role"
    assert binding["roleRef"]["name"] == "kueue-manager-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kueue-controller-manager", "namespace": "kueue-system"}
    ]
    # a built-in role keeps its name; a binding written for kube-system stays there
    assert reader["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    assert reader["metadata"]["namespace"] == "kube-system"


def test_rbac_without_kueues_service_account_is_refused() -> None:
    with pytest.raises(ValueError, match="kueue-controller-manager"):
        manifests.kueue_rbac([{"kind": "ClusterRole", "metadata": {"name": "manager-role"}}])


def test_kueues_configuration_listens_on_loopback_only() -> None:
    config = manifests.kueue_configuration(webhook_port=1, health_port=2, visibility_port=3, cert_dir="/c")
    assert config["webhook"]["host"] == "127.0.0.1"
    assert config["health"]["healthProbeBindAddress"] == "127.0.0.1:2"
    assert config["visibilityServer"] == {"bindAddress": "127.0.0.1", "bindPort": 3}
    assert config["metrics"]["bindAddress"] == "0"
    assert "pod" in config["integrations"]["frameworks"] and "waitForPodsReady" not in config

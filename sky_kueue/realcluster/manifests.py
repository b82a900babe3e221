"""The objects and configuration files of the real cluster, as plain dicts (pure, no I/O).

Kueue's own manifests (CRDs, RBAC, webhook configurations) are read from its module by the
caller and adjusted here the way Kueue's kustomization adjusts them for an in-cluster install
(``config/default``: namespace ``kueue-system``, names prefixed ``kueue-``), except that the
webhook server runs on this machine: every ``clientConfig.service`` becomes a ``url`` on
127.0.0.1 with the cluster CA as ``caBundle``, and the conversion webhook of the CRDs Kueue
converts (``config/components/crd/patches/webhook_in_*.yaml``) points at the same server.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterable
from decimal import Decimal
from typing import Any

Doc = dict[str, Any]

#: Kueue's namespace, as its default install (``config/default/kustomization.yaml``) names it.
KUEUE_NAMESPACE = "kueue-system"
#: The prefix Kueue's kustomization gives every object it installs.
KUEUE_NAME_PREFIX = "kueue-"
#: Kueue's ServiceAccount (``config/components/rbac/service_account.yaml`` after the prefix).
KUEUE_SERVICE_ACCOUNT = "kueue-controller-manager"
#: The CRDs Kueue serves in two versions and converts with its webhook
#: (``config/components/crd/kustomization.yaml`` enables the patch for exactly these).
CONVERTED_CRDS = frozenset(
    {
        "localqueues.kueue.x-k8s.io",
        "clusterqueues.kueue.x-k8s.io",
        "cohorts.kueue.x-k8s.io",
        "workloads.kueue.x-k8s.io",
        "multikueueclusters.kueue.x-k8s.io",
    }
)
#: Kueue's leader-election Lease name (``controller_manager_config.yaml``).
KUEUE_LEADER_LEASE = "c1f6bfd2.kueue.x-k8s.io"
#: The integrations enabled: SkyPilot's pods (``pod``) and ``batch/job``, Kueue's first
#: integration; the rest need CRDs (Ray, JobSet, Kubeflow) this cluster does not install, and
#: Kueue refuses to start an integration whose CRD is missing only after waiting for it.
KUEUE_FRAMEWORKS = ("pod", "batch/job")
#: The annotation KWOK's docs put on the fake nodes it manages.
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
#: Seconds between KWOK's node lease renewals; the node lifecycle controller's default grace
#: period is 40 s, so a lease of 40 s renewed by KWOK keeps nodes Ready.
NODE_LEASE_SECONDS = 40
#: Workers per KWOK controller (node leases, pod and node stages, pods-on-node sync).
KWOK_PARALLELISM = 4


def kueue_configuration(
    *,
    webhook_port: int,
    health_port: int,
    visibility_port: int,
    cert_dir: str,
    wait_for_pods_ready_seconds: int | None = None,
    scheduling: Doc | None = None,
) -> Doc:
    """Kueue's manager configuration as a user's install would have it, on 127.0.0.1.

    What differs from the shipped ``controller_manager_config.yaml``: every listener on
    loopback (webhook, health probes, visibility API), metrics off (port 0: the tests read
    objects, not Kueue's metrics), certificates from ``cert_dir`` instead of Kueue's internal
    cert manager (which needs a Service and Secret in the cluster), and the integrations of
    :data:`KUEUE_FRAMEWORKS`. ``waitForPodsReady`` is left unset, as the release defaults,
    unless ``wait_for_pods_ready_seconds`` turns it on with that timeout (Kueue's other
    waitForPodsReady settings at their defaults). ``scheduling`` adds top-level fields that
    change scheduling (``fairSharing``, ``admissionFairSharing``), as the live oracle needs for
    its fair-sharing scenarios.
    """
    config: Doc = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": KUEUE_NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": cert_dir},
        "leaderElection": {
            "leaderElect": True,
            "resourceName": KUEUE_LEADER_LEASE,
            "resourceNamespace": KUEUE_NAMESPACE,
        },
        "internalCertManagement": {"enable": False},
        "visibilityServer": {"bindAddress": "127.0.0.1", "bindPort": visibility_port},
        "clientConnection": {"qps": 50, "burst": 100},
        "integrations": {"frameworks": list(KUEUE_FRAMEWORKS)},
        **(scheduling or {}),
    }
    if wait_for_pods_ready_seconds is not None:
        config["waitForPodsReady"] = {"timeout": f"{wait_for_pods_ready_seconds}s"}
    return config


#: Webhooks Kueue's kustomization keeps off its own and the system namespace
#: (``config/components/webhook/kustomization.yaml``), so a broken webhook cannot stop them.
SYSTEM_SCOPED_WEBHOOKS = frozenset(
    {"mpod.kb.io", "mdeployment.kb.io", "mstatefulset.kb.io", "vpod.kb.io", "vdeployment.kb.io", "vstatefulset.kb.io"}
)
_NOT_SYSTEM_NAMESPACES = {
    "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", KUEUE_NAMESPACE]}
    ]
}


def webhook_url(port: int, path: str) -> str:
    return f"https://127.0.0.1:{port}{path}"


def local_webhooks(docs: Iterable[Doc], *, port: int, ca_pem: bytes) -> list[Doc]:
    """Kueue's webhook configurations with every service reference turned into a local URL."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    out: list[Doc] = []
    for doc in docs:
        if doc.get("kind") not in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            continue
        doc = copy.deepcopy(doc)
        doc["metadata"]["name"] = KUEUE_NAME_PREFIX + doc["metadata"]["name"]
        for hook in doc.get("webhooks", []):
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": webhook_url(port, service.get("path", "/")), "caBundle": bundle}
            if hook["name"] in SYSTEM_SCOPED_WEBHOOKS:
                hook["namespaceSelector"] = copy.deepcopy(_NOT_SYSTEM_NAMESPACES)
        out.append(doc)
    return out


def local_crds(docs: Iterable[Doc], *, port: int, ca_pem: bytes) -> list[Doc]:
    """Kueue's CRDs, with the conversion webhook on the CRDs Kueue converts."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    out: list[Doc] = []
    for doc in docs:
        if doc.get("kind") != "CustomResourceDefinition":
            continue
        doc = copy.deepcopy(doc)
        if doc["metadata"]["name"] in CONVERTED_CRDS:
            doc["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": webhook_url(port, "/convert"), "caBundle": bundle},
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(doc)
    return out


_RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount")


def kueue_rbac(docs: Iterable[Doc]) -> list[Doc]:
    """Kueue's RBAC as its kustomization installs it: namespace ``kueue-system``, ``kueue-`` prefix.

    ``docs`` are the objects of ``config/components/rbac/kustomization.yaml``'s resources and
    the visibility server's binding (``config/components/visibility/role_binding.yaml``). As
    the kustomization does: every name gets the prefix, an object in the placeholder namespace
    ``system`` moves to ``kueue-system`` while one written for ``kube-system`` stays, a
    ``roleRef`` is prefixed when it names one of these roles (not a built-in one such as
    ``extension-apiserver-authentication-reader``), and ServiceAccount subjects follow.
    """
    docs = [copy.deepcopy(doc) for doc in docs if doc.get("kind") in _RBAC_KINDS]
    defined = {doc["metadata"]["name"] for doc in docs if doc["kind"] in ("ClusterRole", "Role")}
    for doc in docs:
        meta = doc["metadata"]
        meta["name"] = KUEUE_NAME_PREFIX + meta["name"]
        if doc["kind"] in ("Role", "RoleBinding", "ServiceAccount") and meta.get("namespace") in (None, "system"):
            meta["namespace"] = KUEUE_NAMESPACE
        if "roleRef" in doc and doc["roleRef"]["name"] in defined:
            doc["roleRef"]["name"] = KUEUE_NAME_PREFIX + doc["roleRef"]["name"]
        for subject in doc.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["name"] = KUEUE_NAME_PREFIX + subject["name"]
                subject["namespace"] = KUEUE_NAMESPACE
    if not any(doc["kind"] == "ServiceAccount" and doc["metadata"]["name"] == KUEUE_SERVICE_ACCOUNT for doc in docs):
        raise ValueError(f"Kueue's RBAC manifests define no ServiceAccount {KUEUE_SERVICE_ACCOUNT}")
    return docs


def kustomization_resources(kustomization: Doc) -> list[str]:
    """The resource files a kustomization.yaml lists (what ``kubectl apply -k`` would read)."""
    return [str(item) for item in kustomization.get("resources", [])]


#: KWOK stage of ours: a pod being deleted keeps running until its grace period ends, then
#: its containers are killed (exit 137, phase Failed), as a kubelet does with a container
#: that ignores SIGTERM (SkyPilot's pods trap it). Kueue's pod finalizer then keeps the pod
#: until Kueue has seen it terminal; KWOK's own ``pod-delete`` stage removes it after that.
POD_TERMINATE_AT_GRACE_END: Doc = {
    "apiVersion": "kwok.x-k8s.io/v1alpha1",
    "kind": "Stage",
    "metadata": {"name": "sky-kueue-pod-terminate-at-grace-end"},
    "spec": {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {
            "matchExpressions": [
                {"key": ".metadata.deletionTimestamp", "operator": "Exists"},
                {"key": ".status.phase", "operator": "In", "values": ["Pending", "Running"]},
                {"key": ".spec.nodeName", "operator": "Exists"},
            ]
        },
        "delay": {
            "durationMilliseconds": 0,
            "durationFrom": {"expressionFrom": ".metadata.deletionTimestamp"},
        },
        "next": {
            "statusTemplate": "\n".join(
                [
                    "{{ $now := Now }}",
                    "phase: Failed",
                    "conditions:",
                    "- lastTransitionTime: {{ $now | Quote }}",
                    '  status: "False"',
                    "  type: Ready",
                    "  reason: PodFailed",
                    "- lastTransitionTime: {{ $now | Quote }}",
                    '  status: "False"',
                    "  type: ContainersReady",
                    "  reason: PodFailed",
                    "containerStatuses:",
                    "{{ range .spec.containers }}",
                    "- image: {{ .image | Quote }}",
                    "  name: {{ .name | Quote }}",
                    "  ready: false",
                    "  restartCount: 0",
                    "  state:",
                    "    terminated:",
                    "      exitCode: 137",
                    "      reason: Error",
                    "      finishedAt: {{ $now | Quote }}",
                    "{{ end }}",
                ]
            )
        },
    },
}


#: A pod with this label never turns Ready on a KWOK node (as a pod whose image never pulls):
#: for Kueue's waitForPodsReady path. KWOK's own ``pod-ready`` stage is told to skip it.
NEVER_READY_LABEL = "kwok.sky-kueue.io/never-ready"


def kwok_documents(upstream_stages: Iterable[Doc], *, cidr: str = "10.244.0.0/16") -> list[Doc]:
    """KWOK's configuration file: its options and the node and pod stages it plays."""
    stages = [copy.deepcopy(stage) for stage in upstream_stages]
    for stage in stages:
        if stage["metadata"]["name"] == "pod-ready":
            stage["spec"]["selector"]["matchExpressions"].append(
                {"key": f'.metadata.labels["{NEVER_READY_LABEL}"]', "operator": "DoesNotExist"}
            )
    options: Doc = {
        "apiVersion": "config.kwok.x-k8s.io/v1alpha1",
        "kind": "KwokConfiguration",
        "options": {
            "cidr": cidr,
            "nodeIP": "10.0.0.1",
            # only the fake nodes (a real node beside them is its kubelet's, node.py)
            "manageNodesWithAnnotationSelector": f"{KWOK_NODE_ANNOTATION}=fake",
            "nodeLeaseDurationSeconds": NODE_LEASE_SECONDS,
            # a configuration file's options are not defaulted like the flags': set every
            # parallelism KWOK v0.8.0 checks (pkg/kwok/controllers)
            "nodeLeaseParallelism": KWOK_PARALLELISM,
            "podPlayStageParallelism": KWOK_PARALLELISM,
            "nodePlayStageParallelism": KWOK_PARALLELISM,
            "podsOnNodeSyncParallelism": KWOK_PARALLELISM,
        },
    }
    return [options, *stages, copy.deepcopy(POD_TERMINATE_AT_GRACE_END)]


#: The node label SkyPilot's Kubernetes cloud reads a GPU node's accelerator from (its own
#: labeler's key, ``sky/provision/kubernetes/utils.py`` ``SkyPilotLabelFormatter``).
ACCELERATOR_LABEL = "skypilot.co/accelerator"


def fake_node(name: str, *, cpu: Decimal, memory: str, gpus: int, gpu_product: str = "a100", pods: int = 110) -> Doc:
    """A Node object for KWOK to run: capacity as given, ``nvidia.com/gpu`` included, and GPU
    nodes labelled with their accelerator so SkyPilot places accelerator tasks on them."""
    capacity = {"cpu": str(cpu), "memory": memory, "pods": str(pods)}
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "type": "kwok",
    }
    if gpus:
        capacity["nvidia.com/gpu"] = str(gpus)
        labels[ACCELERATOR_LABEL] = gpu_product
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_NODE_ANNOTATION: "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": labels,
        },
        "spec": {},
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def kubeconfig(
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    context: str,
    cert_pem: bytes | None = None,
    key_pem: bytes | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> Doc:
    """A kubeconfig with one cluster, one user (client certificate or token) and one context."""
    user_entry: Doc = {}
    if cert_pem is not None and key_pem is not None:
        user_entry["client-certificate-data"] = base64.b64encode(cert_pem).decode("ascii")
        user_entry["client-key-data"] = base64.b64encode(key_pem).decode("ascii")
    if token is not None:
        user_entry["token"] = token
    ctx: Doc = {"cluster": context, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": server, "certificate-authority-data": base64.b64encode(ca_pem).decode("ascii")},
            }
        ],
        "users": [{"name": user, "user": user_entry}],
        "contexts": [{"name": context, "context": ctx}],
        "current-context": context,
    }

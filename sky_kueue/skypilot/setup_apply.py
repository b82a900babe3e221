"""Apply rendered team setup objects to a cluster, idempotently, through the kubernetes client.

``sky-kueue setup --apply`` creates what is missing and replaces the spec (and, for
Namespaces and WorkloadPriorityClasses, the labels and value; for the controller's Roles and
RoleBindings, the rules and subjects) of what differs; running it
twice changes nothing the second time. It talks to the API server only through the
official ``kubernetes`` client, and reports failures (unreachable server, named by its URL;
Kueue not installed; RBAC) as one line.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.errors import explain

#: Seconds to wait for the API server on connect and on each read.
REQUEST_TIMEOUT_SECONDS = (5, 30)
KUEUE_GROUP = kueue_api.KUEUE_GROUP
_PLURALS = {
    "ResourceFlavor": "resourceflavors",
    "WorkloadPriorityClass": "workloadpriorityclasses",
    "Cohort": "cohorts",
    "ClusterQueue": "clusterqueues",
    "LocalQueue": "localqueues",
}
#: Top-level fields that carry an object's desired state, per kind.
_DESIRED_FIELDS = {
    "WorkloadPriorityClass": ("value", "description"),
    "Role": ("rules",),
    "RoleBinding": ("roleRef", "subjects"),
}
#: The RBAC kinds setup renders (the controller's Role in each team namespace).
_RBAC_KINDS = ("Role", "RoleBinding")


class ApplyError(RuntimeError):
    """The setup could not be applied; the message is one line a user can act on."""


class ClusterApplyError(ApplyError):
    """The cluster refused or could not be reached (not the kubeconfig): ``setup --apply``
    exits 1 for it, as every command does when the cluster cannot be read (docs/exit-codes.md)."""


class Change(str, enum.Enum):
    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Applied:
    kind: str
    name: str
    namespace: str | None
    change: Change


def _desired(obj: Mapping[str, Any]) -> dict[str, Any]:
    fields = _DESIRED_FIELDS.get(str(obj.get("kind")), ("spec",))
    return {f: obj.get(f) for f in fields if f in obj}


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def apply_objects(api_client: Any, objects: Iterable[Mapping[str, Any]]) -> list[Applied]:
    """Create or update each object; returns what happened to each.

    Raises:
        ClusterApplyError: on any API failure (the first one), naming the object (and the
            API server's URL when it cannot be reached).
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    core = client.CoreV1Api(api_client)
    custom = client.CustomObjectsApi(api_client)
    rbac = client.RbacAuthorizationV1Api(api_client)
    results: list[Applied] = []
    for obj in objects:
        kind = str(obj.get("kind"))
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        namespace = meta.get("namespace")
        where = f"{kind} {namespace + '/' if namespace else ''}{name}"
        try:
            if kind == "Namespace":
                results.append(_apply_namespace(core, obj, name))
            elif kind in _PLURALS:
                results.append(_apply_custom(custom, obj, kind, name, namespace))
            elif kind in _RBAC_KINDS and namespace:
                results.append(_apply_rbac(rbac, obj, kind, name, str(namespace)))
            else:
                raise ApplyError(f"{where}: kind {kind!r} is not part of a team setup")
        except ApiException as exc:
            if exc.status == 404 and kind in _PLURALS:
                raise ClusterApplyError(f"{where}: Kueue is not installed (the {kind} API is not served)") from exc
            if exc.status == 403:
                raise ClusterApplyError(f"{where}: forbidden by RBAC: {exc.reason}") from exc
            raise ClusterApplyError(f"{where}: the API server answered {exc.status} {exc.reason}") from exc
        except HTTPError as exc:
            unreachable = explain(exc, host=str(api_client.configuration.host), what=f"apply {where}")
            raise ClusterApplyError(f"{where}: {unreachable}") from exc
    return results


def _apply_namespace(core: Any, obj: Mapping[str, Any], name: str) -> Applied:
    from kubernetes.client.exceptions import ApiException

    try:
        current = core.read_namespace(name, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    except ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespace(dict(obj), _request_timeout=REQUEST_TIMEOUT_SECONDS)
        return Applied("Namespace", name, None, Change.CREATED)
    wanted = _labels(obj)
    have = dict(current.metadata.labels or {})
    if all(have.get(k) == v for k, v in wanted.items()):
        return Applied("Namespace", name, None, Change.UNCHANGED)
    core.patch_namespace(name, {"metadata": {"labels": wanted}}, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    return Applied("Namespace", name, None, Change.UPDATED)


def _apply_custom(custom: Any, obj: Mapping[str, Any], kind: str, name: str, namespace: str | None) -> Applied:
    from kubernetes.client.exceptions import ApiException

    version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    plural = _PLURALS[kind]
    args = (KUEUE_GROUP, version, namespace, plural) if namespace else (KUEUE_GROUP, version, plural)
    try:
        if namespace:
            current = custom.get_namespaced_custom_object(*args, name, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        else:
            current = custom.get_cluster_custom_object(*args, name, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    except ApiException as exc:
        if exc.status != 404:
            raise
        current = None
    if current is None:
        if namespace:
            custom.create_namespaced_custom_object(*args, dict(obj), _request_timeout=REQUEST_TIMEOUT_SECONDS)
        else:
            custom.create_cluster_custom_object(*args, dict(obj), _request_timeout=REQUEST_TIMEOUT_SECONDS)
        return Applied(kind, name, namespace, Change.CREATED)
    desired = _desired(obj)
    if all(current.get(k) == v for k, v in desired.items()):
        return Applied(kind, name, namespace, Change.UNCHANGED)
    replacement = dict(current)
    replacement.update(desired)
    if namespace:
        custom.replace_namespaced_custom_object(*args, name, replacement, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    else:
        custom.replace_cluster_custom_object(*args, name, replacement, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    return Applied(kind, name, namespace, Change.UPDATED)


def _apply_rbac(rbac: Any, obj: Mapping[str, Any], kind: str, name: str, namespace: str) -> Applied:
    """A Role or RoleBinding: created, or its rules (roleRef and subjects) replaced.

    A RoleBinding's roleRef is immutable: a different one is answered 422 by the API server,
    reported as one line (delete the binding, then apply again)."""
    from kubernetes.client.exceptions import ApiException

    read, create, replace = (
        (rbac.read_namespaced_role, rbac.create_namespaced_role, rbac.replace_namespaced_role)
        if kind == "Role"
        else (
            rbac.read_namespaced_role_binding,
            rbac.create_namespaced_role_binding,
            rbac.replace_namespaced_role_binding,
        )
    )
    try:
        current = rbac.api_client.sanitize_for_serialization(
            read(name, namespace, _request_timeout=REQUEST_TIMEOUT_SECONDS)
        )
    except ApiException as exc:
        if exc.status != 404:
            raise
        create(namespace, dict(obj), _request_timeout=REQUEST_TIMEOUT_SECONDS)
        return Applied(kind, name, namespace, Change.CREATED)
    desired = _desired(obj)
    if all(current.get(k) == v for k, v in desired.items()):
        return Applied(kind, name, namespace, Change.UNCHANGED)
    replacement = dict(current)
    replacement.update(desired)
    replace(name, namespace, replacement, _request_timeout=REQUEST_TIMEOUT_SECONDS)
    return Applied(kind, name, namespace, Change.UPDATED)


def api_client_for(kubeconfig: str | None, context: str | None = None) -> Any:
    """An ``ApiClient`` for a kubeconfig (and context), with an explicit retry policy.

    ``kubeconfig`` may be several files joined by ``os.pathsep`` (``$KUBECONFIG``, merged as
    kubectl merges them), or None inside a pod (the in-cluster ServiceAccount).

    Raises:
        ApplyError: the kubeconfig cannot be read or the context does not exist.
    """
    from kubernetes import client
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException
    from urllib3.util.retry import Retry

    try:
        if kubeconfig is None:
            configuration = client.Configuration()
            kube_config.load_incluster_config(client_configuration=configuration)
            api_client = client.ApiClient(configuration)
        else:
            api_client = kube_config.new_client_from_config(config_file=kubeconfig, context=context)
    except (ConfigException, OSError) as exc:
        raise ApplyError(f"{kubeconfig}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from exc
    api_client.configuration.retries = Retry(total=3, backoff_factor=0.2, status_forcelist=(502, 503, 504))
    return api_client

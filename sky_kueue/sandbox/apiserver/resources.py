"""The table of resources the server serves, and how each version maps to storage.

Why a table: everything that differs between resources — scope, short names, whether a
status subresource isolates ``status``, whether it is a custom resource (no strategic merge,
``resourceVersion`` mandatory on PUT), which API versions serve it and how they convert, the
columns ``kubectl get`` prints — is data. The store, the router, discovery and table printing
read this one table, so adding a resource is one entry here.

Each resource has one store under its group and plural, whatever version a client uses.
Objects are kept in the storage version; a :class:`VersionConverter` turns a request body
into storage form and a stored object into the version the client asked for (``apiVersion``
rewritten on the way out).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol

from sky_kueue.sandbox.apiserver import conversion, errors

Obj = dict[str, Any]

#: The verbs every resource supports (and discovery advertises).
STANDARD_VERBS: tuple[str, ...] = (
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
)
#: Verbs of a status subresource.
STATUS_VERBS: tuple[str, ...] = ("get", "patch", "update")
STATUS_SUBRESOURCE = "status"


class VersionConverter(Protocol):
    """Converts objects between a served version and the storage version."""

    def to_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        """A new object in storage form from ``obj`` written in ``version``."""
        ...

    def from_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        """``obj`` (storage form) as seen in ``version``; may return ``obj`` itself (read-only)."""
        ...


class IdentityConverter:
    """For resources served under a single version: only ``apiVersion`` is set."""

    def __init__(self, group: str) -> None:
        self._group = group

    def _api_version(self, version: str) -> str:
        return f"{self._group}/{version}" if self._group else version

    def to_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        converted = dict(obj)
        converted["apiVersion"] = self._api_version(version)
        converted["kind"] = kind
        return converted

    def from_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        return obj


class KueueConverter:
    """Kueue's v1beta1 <-> v1beta2 conversion (see :mod:`.conversion`)."""

    def to_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        converted = conversion.to_storage(obj, kind, version)
        converted["kind"] = kind
        return converted

    def from_storage(self, obj: Obj, kind: str, version: str) -> Obj:
        return conversion.from_storage(obj, kind, version)


@dataclasses.dataclass(frozen=True)
class PrinterColumn:
    """A column of ``kubectl get`` output (a CRD ``additionalPrinterColumns`` entry)."""

    name: str
    json_path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


AGE_COLUMN = PrinterColumn("Age", ".metadata.creationTimestamp", "date", description="Time since creation")


@dataclasses.dataclass(frozen=True)
class GroupResource:
    """The identity of a store: API group ("" for core) and plural resource name."""

    group: str
    resource: str

    def __str__(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


@dataclasses.dataclass(frozen=True)
class ResourceType:
    """One served resource.

    Attributes:
        versions: served versions, the preferred one first.
        custom: custom-resource semantics: PUT needs ``metadata.resourceVersion`` and
            strategic merge patches are refused (415).
        status_subresource: ``/status`` exists; the main resource ignores ``status`` changes
            and the subresource ignores everything else.
        reset_status_on_create: ``status`` given on create is replaced by ``initial_status``
            (true for all kinds here but nodes).
        printer_columns: per version; a version absent from the mapping uses
            ``default_printer_columns``.
    """

    group: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    versions: tuple[str, ...]
    storage_version: str
    converter: VersionConverter
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    custom: bool = False
    status_subresource: bool = False
    reset_status_on_create: bool = True
    initial_status: Mapping[str, Any] | None = None
    default_printer_columns: tuple[PrinterColumn, ...] = (AGE_COLUMN,)
    printer_columns: Mapping[str, tuple[PrinterColumn, ...]] = dataclasses.field(default_factory=dict)

    @property
    def key(self) -> GroupResource:
        return GroupResource(self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def preferred_version(self) -> str:
        return self.versions[0]

    def api_version(self, version: str | None = None) -> str:
        chosen = version or self.storage_version
        return f"{self.group}/{chosen}" if self.group else chosen

    def columns(self, version: str) -> tuple[PrinterColumn, ...]:
        return self.printer_columns.get(version, self.default_printer_columns)

    @property
    def subresources(self) -> tuple[str, ...]:
        return (STATUS_SUBRESOURCE,) if self.status_subresource else ()

    def to_storage(self, obj: Obj, version: str) -> Obj:
        return self.converter.to_storage(obj, self.kind, version)

    def from_storage(self, obj: Obj, version: str) -> Obj:
        return self.converter.from_storage(obj, self.kind, version)


class ResourceRegistry:
    """All served resources, looked up by URL parts or by the names kubectl accepts."""

    def __init__(self, resources: Iterable[ResourceType] = ()) -> None:
        self._by_key: dict[GroupResource, ResourceType] = {}
        for resource in resources:
            self.register(resource)

    def register(self, resource: ResourceType) -> None:
        """Adds a resource; replaces one with the same group and plural."""
        self._by_key[resource.key] = resource

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(self._by_key.values())

    def for_url(self, group: str, version: str, plural: str) -> ResourceType:
        """The resource at ``/apis/<group>/<version>/<plural>``.

        Raises:
            ApiError: 404 if no such resource is served under that version.
        """
        resource = self._by_key.get(GroupResource(group, plural))
        if resource is None or version not in resource.versions:
            raise errors.ApiError(
                404,
                errors.Reason.NOT_FOUND,
                f"the server could not find the requested resource ({plural}.{group or 'core'}/{version})",
            )
        return resource

    def resolve(self, ref: ResourceType | GroupResource | str) -> ResourceType:
        """Finds a resource by object, by key, or by a kubectl-style name.

        Accepted names: plural, singular, kind or short name, optionally qualified by group
        (``workloads.kueue.x-k8s.io``, ``jobs.batch``, ``cq``, ``Workload``).

        Raises:
            KeyError: if nothing matches or the name is ambiguous.
        """
        if isinstance(ref, ResourceType):
            return ref
        if isinstance(ref, GroupResource):
            return self._by_key[ref]
        name, _, group = ref.partition(".")
        candidates = [
            resource
            for resource in self._by_key.values()
            if (not group or resource.group == group)
            and name in (resource.plural, resource.singular, resource.kind, *resource.short_names)
        ]
        if len(candidates) != 1:
            raise KeyError(f"resource {ref!r} is {'ambiguous' if candidates else 'not served'}")
        return candidates[0]

    def groups(self) -> dict[str, list[str]]:
        """Group name -> served versions (preferred first), core group under ``""``."""
        result: dict[str, list[str]] = {}
        for resource in self._by_key.values():
            versions = result.setdefault(resource.group, [])
            for version in resource.versions:
                if version not in versions:
                    versions.append(version)
        return result

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self._by_key.values() if r.group == group and version in r.versions]


def _core(kind: str, plural: str, **options: Any) -> ResourceType:
    return ResourceType(
        group="",
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        versions=("v1",),
        storage_version="v1",
        converter=IdentityConverter(""),
        **options,
    )


def _builtin(group: str, version: str, kind: str, plural: str, **options: Any) -> ResourceType:
    return ResourceType(
        group=group,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        versions=(version,),
        storage_version=version,
        converter=IdentityConverter(group),
        **options,
    )


_KUEUE_CONVERTER = KueueConverter()


def _kueue(kind: str, plural: str, **options: Any) -> ResourceType:
    return ResourceType(
        group=conversion.KUEUE_GROUP,
        kind=kind,
        plural=plural,
        singular=kind.lower(),
        versions=(conversion.STORAGE_VERSION, conversion.LEGACY_VERSION),
        storage_version=conversion.STORAGE_VERSION,
        converter=_KUEUE_CONVERTER,
        custom=True,
        **options,
    )


def _columns(*columns: PrinterColumn) -> tuple[PrinterColumn, ...]:
    return columns


def _cluster_queue_columns(cohort_field: str) -> tuple[PrinterColumn, ...]:
    return _columns(
        PrinterColumn("Cohort", f".spec.{cohort_field}", description="Cohort that this ClusterQueue belongs to"),
        PrinterColumn("Strategy", ".spec.queueingStrategy", priority=1),
        PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer"),
        PrinterColumn("Admitted Workloads", ".status.admittedWorkloads", "integer", priority=1),
    )


#: sky-kueue's own resource: the controller's per-job history (``configs/controller/jobhistory-crd.yaml``;
#: the printer columns here must equal the manifest's, which a test checks).
SKY_KUEUE_GROUP = "sky-kueue.io"
SKY_KUEUE_VERSION = "v1alpha1"


def job_history_resource() -> ResourceType:
    """The ``jobhistories.sky-kueue.io`` custom resource, served like the CRD declares it.

    No status subresource (the store writes record and summary in one request), custom
    semantics (PUT requires ``metadata.resourceVersion``; a stale one is a 409).
    """
    return ResourceType(
        group=SKY_KUEUE_GROUP,
        kind="JobHistory",
        plural="jobhistories",
        singular="jobhistory",
        namespaced=True,
        versions=(SKY_KUEUE_VERSION,),
        storage_version=SKY_KUEUE_VERSION,
        converter=IdentityConverter(SKY_KUEUE_GROUP),
        short_names=("jh",),
        custom=True,
        reset_status_on_create=False,
        default_printer_columns=_columns(
            PrinterColumn("Job", ".spec.job", description="The job's key"),
            PrinterColumn("Preemptions", ".status.preemptions", "integer", description="Preemptions recorded"),
            PrinterColumn("Boost", ".status.boost", "integer", description="Priority boost last actuated"),
            PrinterColumn("Phase", ".status.phase", description="Waiting, running or finished"),
            AGE_COLUMN,
        ),
    )


def default_resources() -> list[ResourceType]:
    """The resources a sandbox serves: core kinds SkyPilot and Kueue touch, and Kueue's CRDs."""
    return [
        _core(
            "Namespace",
            "namespaces",
            namespaced=False,
            short_names=("ns",),
            status_subresource=True,
            initial_status={"phase": "Active"},
            default_printer_columns=_columns(PrinterColumn("Status", ".status.phase"), AGE_COLUMN),
        ),
        _core(
            "Pod",
            "pods",
            namespaced=True,
            short_names=("po",),
            categories=("all",),
            status_subresource=True,
            initial_status={"phase": "Pending"},
            default_printer_columns=_columns(
                PrinterColumn("Status", ".status.phase"),
                AGE_COLUMN,
                PrinterColumn("Node", ".spec.nodeName", priority=1),
            ),
        ),
        _core(
            "Event",
            "events",
            namespaced=True,
            short_names=("ev",),
            default_printer_columns=_columns(
                PrinterColumn("Type", ".type"),
                PrinterColumn("Reason", ".reason"),
                PrinterColumn("Object", ".involvedObject.name"),
                PrinterColumn("Message", ".message"),
            ),
        ),
        _core("ConfigMap", "configmaps", namespaced=True, short_names=("cm",)),
        _core("Secret", "secrets", namespaced=True),
        _core("ServiceAccount", "serviceaccounts", namespaced=True, short_names=("sa",)),
        _core(
            "Service",
            "services",
            namespaced=True,
            short_names=("svc",),
            categories=("all",),
            status_subresource=True,
        ),
        _core(
            "Node",
            "nodes",
            namespaced=False,
            short_names=("no",),
            status_subresource=True,
            reset_status_on_create=False,
        ),
        _core("PersistentVolume", "persistentvolumes", namespaced=False, short_names=("pv",), status_subresource=True),
        _core(
            "PersistentVolumeClaim",
            "persistentvolumeclaims",
            namespaced=True,
            short_names=("pvc",),
            status_subresource=True,
        ),
        # What SkyPilot's Kubernetes provisioner reads or writes around a pod
        # (sky/provision/kubernetes/config.py, instance.py, utils.py): RBAC for its service
        # account, RuntimeClasses (the nvidia check), DaemonSets/Deployments, storage classes
        # and ingresses. Stored and served like any object; nothing acts on them.
        *(
            _builtin("rbac.authorization.k8s.io", "v1", kind, plural, namespaced=namespaced)
            for kind, plural, namespaced in (
                ("Role", "roles", True),
                ("RoleBinding", "rolebindings", True),
                ("ClusterRole", "clusterroles", False),
                ("ClusterRoleBinding", "clusterrolebindings", False),
            )
        ),
        _builtin("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", namespaced=False),
        _builtin(
            "apps", "v1", "DaemonSet", "daemonsets", namespaced=True, short_names=("ds",), status_subresource=True
        ),
        _builtin(
            "apps",
            "v1",
            "Deployment",
            "deployments",
            namespaced=True,
            short_names=("deploy",),
            categories=("all",),
            status_subresource=True,
            default_printer_columns=_columns(
                PrinterColumn("Ready", ".status.readyReplicas", "integer"),
                PrinterColumn("Up-to-date", ".status.updatedReplicas", "integer"),
                PrinterColumn("Available", ".status.availableReplicas", "integer"),
                AGE_COLUMN,
            ),
        ),
        # The Deployment's ReplicaSets (sky_kueue/sandbox/workloads/deployments.py reconciles
        # both into pods, as kube-controller-manager's deployment and replicaset controllers do).
        _builtin(
            "apps",
            "v1",
            "ReplicaSet",
            "replicasets",
            namespaced=True,
            short_names=("rs",),
            categories=("all",),
            status_subresource=True,
            default_printer_columns=_columns(
                PrinterColumn("Desired", ".spec.replicas", "integer"),
                PrinterColumn("Current", ".status.replicas", "integer"),
                PrinterColumn("Ready", ".status.readyReplicas", "integer"),
                AGE_COLUMN,
            ),
        ),
        # CRDs are stored so `kubectl apply` of a CRD manifest (configs/controller) succeeds; the
        # kinds they declare that the sandbox knows (JobHistory, Kueue's) are served built in,
        # the CRD's own schema is not applied. Reported Established, as the apiserver does once
        # the names are accepted.
        _builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            namespaced=False,
            short_names=("crd", "crds"),
            status_subresource=True,
            initial_status={
                "conditions": [{"type": "Established", "status": "True", "reason": "InitialNamesAccepted"}]
            },
        ),
        _builtin("storage.k8s.io", "v1", "StorageClass", "storageclasses", namespaced=False, short_names=("sc",)),
        _builtin(
            "networking.k8s.io",
            "v1",
            "Ingress",
            "ingresses",
            namespaced=True,
            short_names=("ing",),
            status_subresource=True,
        ),
        _builtin("networking.k8s.io", "v1", "IngressClass", "ingressclasses", namespaced=False),
        _builtin(
            "batch",
            "v1",
            "Job",
            "jobs",
            namespaced=True,
            categories=("all",),
            status_subresource=True,
            initial_status={},
        ),
        _builtin(
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            namespaced=True,
            default_printer_columns=_columns(PrinterColumn("Holder", ".spec.holderIdentity"), AGE_COLUMN),
        ),
        _builtin(
            "scheduling.k8s.io",
            "v1",
            "PriorityClass",
            "priorityclasses",
            namespaced=False,
            short_names=("pc",),
            default_printer_columns=_columns(PrinterColumn("Value", ".value", "integer"), AGE_COLUMN),
        ),
        _kueue(
            "Workload",
            "workloads",
            namespaced=True,
            short_names=("kwl", "kueueworkload", "kueueworkloads"),
            status_subresource=True,
            default_printer_columns=_columns(
                PrinterColumn("Queue", ".spec.queueName"),
                PrinterColumn("Reserved in", ".status.admission.clusterQueue"),
                PrinterColumn("Admitted", ".status.conditions[?(@.type=='Admitted')].status"),
                PrinterColumn("Finished", ".status.conditions[?(@.type=='Finished')].status"),
                AGE_COLUMN,
            ),
        ),
        _kueue(
            "ClusterQueue",
            "clusterqueues",
            namespaced=False,
            short_names=("cq",),
            status_subresource=True,
            default_printer_columns=_cluster_queue_columns("cohortName"),
            printer_columns={conversion.LEGACY_VERSION: _cluster_queue_columns("cohort")},
        ),
        _kueue(
            "LocalQueue",
            "localqueues",
            namespaced=True,
            short_names=("queue", "queues", "lq"),
            status_subresource=True,
            default_printer_columns=_columns(
                PrinterColumn("ClusterQueue", ".spec.clusterQueue"),
                PrinterColumn("Pending Workloads", ".status.pendingWorkloads", "integer"),
                PrinterColumn("Admitted Workloads", ".status.admittedWorkloads", "integer"),
            ),
        ),
        _kueue("Cohort", "cohorts", namespaced=False, short_names=("co",), status_subresource=True),
        _kueue("ResourceFlavor", "resourceflavors", namespaced=False, short_names=("flavor", "flavors", "rf")),
        _kueue(
            "WorkloadPriorityClass",
            "workloadpriorityclasses",
            namespaced=False,
            short_names=("wpc",),
            default_printer_columns=_columns(PrinterColumn("Value", ".value", "integer")),
        ),
        _kueue(
            "AdmissionCheck",
            "admissionchecks",
            namespaced=False,
            short_names=("ac",),
            status_subresource=True,
        ),
        job_history_resource(),
    ]

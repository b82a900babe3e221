"""The kinds of objects the mirror keeps, and how each is addressed on the API server.

Why a table: every reflector does the same list-then-watch dance; what differs per kind
(API group, plural, whether it is namespaced, a label selector, whether the mirror is useless
without it) is data. Kueue's kinds are served under the version discovery picked
(:mod:`sky_kueue.mirror.discovery`); Namespaces and Pods are core ``v1``.

Which pods: only those of SkyPilot pod groups (label ``parent=skypilot`` plus Kueue's
``kueue.x-k8s.io/pod-group-name``). They carry the SkyPilot identity of a Workload (managed-job
id and name, cluster, user; SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``) that Kueue does not copy onto
the Workload,
and nothing else about a cluster's pods matters here, so the rest are not even listed.

``required`` kinds are the ones without which the mirror cannot describe Kueue's state: if
the user may not list them, the mirror reports that as an error rather than a silently
partial picture. Pods and Namespaces are optional: without Namespaces the model cannot check
ClusterQueue namespace selectors and without Pods there is no SkyPilot identity, but queues and
workloads still make sense (the mirror then records a warning).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from sky_kueue.kueue import api as kueue_api

KUEUE_GROUP = kueue_api.KUEUE_GROUP
#: Served Kueue versions, preferred first (v1beta2 is the storage version; Kueue
#: ``apis/kueue/v1beta1/*_conversion.go``).
KUEUE_VERSIONS: tuple[str, ...] = ("v1beta2", "v1beta1")
CORE_VERSION = "v1"

#: Kueue's pod-group label (SkyPilot sets it when a LocalQueue is configured).
POD_GROUP_NAME_KEY = kueue_api.POD_GROUP_NAME_KEY
#: Label SkyPilot puts on every pod it creates (SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``).
SKYPILOT_PARENT_SELECTOR = "parent=skypilot"
#: Label selector of the pods the mirror keeps: members of SkyPilot pod groups.
SKYPILOT_POD_GROUP_SELECTOR = f"{SKYPILOT_PARENT_SELECTOR},{POD_GROUP_NAME_KEY}"


class KindName(str, enum.Enum):
    """The mirrored kinds; the value is the Kubernetes ``kind``."""

    WORKLOAD = "Workload"
    CLUSTER_QUEUE = "ClusterQueue"
    LOCAL_QUEUE = "LocalQueue"
    COHORT = "Cohort"
    RESOURCE_FLAVOR = "ResourceFlavor"
    WORKLOAD_PRIORITY_CLASS = "WorkloadPriorityClass"
    NAMESPACE = "Namespace"
    POD = "Pod"


@dataclass(frozen=True)
class Kind:
    """How one kind is listed and watched.

    Attributes:
        name: the kind.
        group: API group (``""`` for core).
        plural: resource name in URLs.
        namespaced: whether objects live in namespaces (listed across all of them).
        required: listing it is necessary for a meaningful mirror (see module docstring).
        label_selector: server-side filter, or None for every object.
    """

    name: KindName
    group: str
    plural: str
    namespaced: bool
    required: bool
    label_selector: str | None = None

    @property
    def is_kueue(self) -> bool:
        return self.group == KUEUE_GROUP

    def resource_name(self, version: str) -> str:
        """``plural.group/version`` for messages (``workloads.kueue.x-k8s.io/v1beta2``)."""
        if not self.group:
            return f"{self.plural} ({version})"
        return f"{self.plural}.{self.group}/{version}"


WORKLOADS = Kind(KindName.WORKLOAD, KUEUE_GROUP, "workloads", namespaced=True, required=True)
CLUSTER_QUEUES = Kind(KindName.CLUSTER_QUEUE, KUEUE_GROUP, "clusterqueues", namespaced=False, required=True)
LOCAL_QUEUES = Kind(KindName.LOCAL_QUEUE, KUEUE_GROUP, "localqueues", namespaced=True, required=True)
#: Optional: Cohort objects exist only when an admin gives a cohort its own quota or parent,
#: and older Kueue releases served them only as v1alpha1.
COHORTS = Kind(KindName.COHORT, KUEUE_GROUP, "cohorts", namespaced=False, required=False)
RESOURCE_FLAVORS = Kind(KindName.RESOURCE_FLAVOR, KUEUE_GROUP, "resourceflavors", namespaced=False, required=True)
PRIORITY_CLASSES = Kind(
    KindName.WORKLOAD_PRIORITY_CLASS, KUEUE_GROUP, "workloadpriorityclasses", namespaced=False, required=True
)
NAMESPACES = Kind(KindName.NAMESPACE, "", "namespaces", namespaced=False, required=False)
PODS = Kind(KindName.POD, "", "pods", namespaced=True, required=False, label_selector=SKYPILOT_POD_GROUP_SELECTOR)

#: Everything the mirror keeps, in the order a snapshot lists them.
ALL_KINDS: tuple[Kind, ...] = (
    NAMESPACES,
    RESOURCE_FLAVORS,
    PRIORITY_CLASSES,
    COHORTS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    WORKLOADS,
    PODS,
)
#: The kinds a model snapshot needs (no pods).
MODEL_KINDS: tuple[Kind, ...] = tuple(kind for kind in ALL_KINDS if kind is not PODS)

"""Names from Kueue's API (group, versions, conditions, annotations, labels), defined once.

Every part of sky-kueue that names Kueue's API - the model's parser, the mirror, the
controller, the SkyPilot integration, the sandbox - takes the strings from here, each with
the Kueue source it comes from (``apis/kueue/v1beta2/*_types.go`` in kubernetes-sigs/kueue),
so a Kueue upgrade that renames something is a one-line change. Pure constants; no I/O.
"""

from __future__ import annotations

KUEUE_GROUP = "kueue.x-k8s.io"
#: The label the API server sets on every Namespace to its name, which a ClusterQueue's
#: ``namespaceSelector`` can match.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
#: The visibility API (pending-workload positions), ``apis/visibility/v1beta1``.
VISIBILITY_GROUP = f"visibility.{KUEUE_GROUP}"
#: Served Workload versions, preferred first (v1beta2 is the storage version since Kueue
#: v0.15; v1beta1 is still served, deprecated, and converted by the webhook).
WORKLOAD_VERSIONS = ("v1beta2", "v1beta1")
WORKLOAD_PLURAL = "workloads"

# Workload condition types (apis/kueue/v1beta2/workload_types.go).
CONDITION_QUOTA_RESERVED = "QuotaReserved"
CONDITION_ADMITTED = "Admitted"
CONDITION_FINISHED = "Finished"
CONDITION_EVICTED = "Evicted"
CONDITION_PREEMPTED = "Preempted"
CONDITION_REQUEUED = "Requeued"

#: ``priorityClassSource`` of a Workload whose class is a WorkloadPriorityClass (v1beta1).
WORKLOAD_PRIORITY_CLASS_SOURCE = f"{KUEUE_GROUP}/workloadpriorityclass"
#: The ``apiVersion`` of Kueue objects in the deprecated, still served v1beta1.
API_VERSION_V1BETA1 = f"{KUEUE_GROUP}/v1beta1"

#: Evicted reason of a preemption (``kueue.WorkloadEvictedByPreemption``).
EVICTED_BY_PREEMPTION = "Preempted"
#: Prefix Kueue puts on the message of an Evicted/Preempted condition reset to False on
#: readmission: "Previously: Preempted to accommodate ...".
PREVIOUSLY_PREFIX = "Previously: "

#: Pod condition Kueue sets before deleting an evicted pod-group member; its reason is
#: ``WorkloadEvictedDueTo<EvictedReason>`` and its message the eviction message.
POD_CONDITION_TERMINATION_TARGET = "TerminationTarget"
POD_TERMINATION_REASON_PREFIX = "WorkloadEvictedDueTo"

#: KEP-7990: effective priority = ``spec.priority`` + int32(annotation), only while the
#: alpha ``PriorityBoost`` feature gate is on (default off); ignored otherwise.
PRIORITY_BOOST_ANNOTATION = "kueue.x-k8s.io/priority-boost"
PRIORITY_BOOST_FEATURE_GATE = "PriorityBoost"
#: Label selecting a WorkloadPriorityClass on a job or on every pod of a group.
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
#: Label naming the LocalQueue of a job or pod.
QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"

# Pod groups (pkg/controller/jobs/pod/pod_controller.go, constants/constants.go).
#: Pod-group membership: a label, or (beta ``WorkloadIdentifierAnnotations``) an annotation
#: of the same key, which then takes precedence.
POD_GROUP_NAME_KEY = "kueue.x-k8s.io/pod-group-name"
#: Annotation Kueue sets on the Workload of a pod group.
IS_GROUP_WORKLOAD_ANNOTATION = "kueue.x-k8s.io/is-group-workload"
#: Pod annotation: "false" makes a group unretriable (SkyPilot sets it).
RETRIABLE_IN_GROUP_ANNOTATION = "kueue.x-k8s.io/retriable-in-group"
#: Pod annotation: how many pods the group has.
POD_GROUP_TOTAL_COUNT_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
#: Kueue's scheduling gate on pods it has not admitted yet (``pod_webhook.go``).
ADMISSION_GATE = "kueue.x-k8s.io/admission"

INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

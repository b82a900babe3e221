"""Who a pod group belongs to in SkyPilot's terms, read from its pods.

Why from pods: Kueue names a pod group's Workload after the group (Kueue
``pkg/controller/jobs/pod/pod_controller.go`` (pod groups, ``retriable-in-group``)) and copies
pod labels onto it only for keys an admin lists in ``integrations.labelKeysToCopy``; the
SkyPilot facts live on the pods (SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``): annotations
``skypilot-managed-job-id`` and ``skypilot-managed-job-name`` (managed jobs), labels
``skypilot-cluster-name`` (and the deprecated ``skypilot-cluster``) and ``skypilot-user``
(sanitized; the raw user name is the annotation of the same key), and Kueue's
``kueue.x-k8s.io/pod-group-name``. The Workload of group ``g`` in namespace ``ns`` is
``ns/g``.

A preempted SkyPilot group's pods are deleted before its Workload finishes and is
garbage-collected, so the store keeps the last identity of a group until its Workload is gone.

Two views of the same facts, read by one function (:func:`_facts`):

* :class:`SkyPilotIdentity`: what the mirror shows per pod group (``sky-kueue queue``).
* :class:`JobIdentity`: the durable key the controller's history is stored under. When Kueue
  preempts a SkyPilot pod group, the Workload ends ``Finished`` and is garbage-collected;
  SkyPilot's relaunch creates a *new* Workload (new UID, fresh ``schedulingStats``) under
  the same name, so everything aging needs is keyed by the job, not the Workload:
  ``managed-job/<id>`` when the pods carry ``skypilot-managed-job-id``, else
  ``pod-group/<namespace>/<name>`` (the pod-group name equals the Workload name and
  SkyPilot's ``cluster_name_on_cloud``, stable across recoveries). When both are known the
  history store links the pod-group key to the managed-job key, so history recorded before
  the pods were seen is not split.

A managed-job id alone does not name a job: ids are allocated per SkyPilot API server (two
servers both have a job 17), and anyone who can create pods can write the annotation. So a
managed-job history is *bound to its owner* (:class:`JobOwner`): the namespace (the one fact
Kubernetes RBAC vouches for), the team (the ``sky-kueue.io/team`` pod label the admin policy
writes) and the SkyPilot user. The first owner seen for ``managed-job/<id>`` holds that key;
a pod group of another owner claiming the same id gets a history of its own under
:meth:`JobIdentity.owned_key` (``managed-job/<id>/<namespace>/<team>/<user>``) and never reads
or writes the first one. SkyPilot 0.14.1 puts no API-server identity on pods, so two jobs of
the same owner with the same id from two API servers remain one job.

Pure functions over plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import quote

from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.kinds import POD_GROUP_NAME_KEY

MANAGED_JOB_ID_ANNOTATION = "skypilot-managed-job-id"
MANAGED_JOB_NAME_ANNOTATION = "skypilot-managed-job-name"
CLUSTER_NAME_LABEL = "skypilot-cluster-name"
#: Deprecated spelling of :data:`CLUSTER_NAME_LABEL`, still set by SkyPilot 0.14.1.
LEGACY_CLUSTER_LABEL = "skypilot-cluster"
#: Pod label (sanitized) and annotation (raw) naming the SkyPilot user.
USER_KEY = "skypilot-user"
#: Pod label naming the team a job was placed for; the admin policy writes it on every pod it
#: places (``sky_kueue.skypilot.labels.TEAM_LABEL``, the same key; the mirror does not import
#: the SkyPilot side).
TEAM_LABEL = "sky-kueue.io/team"
#: Pod label ``parent: skypilot`` marks every SkyPilot pod.
PARENT_LABEL = "parent"
PARENT_LABEL_VALUE = "skypilot"
#: Workload annotation Kueue sets on pod-group Workloads.
IS_GROUP_WORKLOAD_ANNOTATION = kueue_api.IS_GROUP_WORKLOAD_ANNOTATION
MANAGED_JOB_KEY_PREFIX = "managed-job/"
POD_GROUP_KEY_PREFIX = "pod-group/"

#: Annotation prefixes worth keeping on mirrored pods (everything else is dropped to save memory):
#: SkyPilot's identity, Kueue's pod-group keys, and the expected run time the admin policy
#: writes on a task's pods (``sky-kueue.io/expected-runtime-seconds``/``-source``), which
#: Kueue does not copy onto the Workload and the ETA reads back from the pods.
KEPT_ANNOTATION_PREFIXES: tuple[str, ...] = ("skypilot-", f"{kueue_api.KUEUE_GROUP}/", "sky-kueue.io/expected-runtime")

#: Annotation the resubmission controller puts on a relaunch it holds out of Kueue
#: (``spec.active: false``) until it would not borrow, with the reason users read
#: (``sky_kueue.controller.hold``); ``sky-kueue queue`` shows such a Workload as ``held``.
HOLD_ANNOTATION = "sky-kueue.io/hold"
#: Annotation the controller's band policies write with each ``spec.priority`` they set:
#: ``waiting`` or ``admitted`` (``sky_kueue.controller.actuators.plan_band_patch``).
BAND_LEVEL_ANNOTATION = "sky-kueue.io/band-level"
WAITING_BAND_LEVEL = "waiting"
ADMITTED_BAND_LEVEL = "admitted"
#: Annotation recording which aging step (episode key) set the Workload's priority
#: (``sky_kueue.controller.actuators.plan_kueue_patch``).
AGING_STEP_ANNOTATION = "sky-kueue.io/aging-step"


@dataclass(frozen=True)
class SkyPilotIdentity:
    """The SkyPilot job behind a pod group; any field may be unknown (None)."""

    pod_group: str
    namespace: str
    managed_job_id: str | None = None
    managed_job_name: str | None = None
    cluster: str | None = None
    user: str | None = None

    @property
    def key(self) -> str:
        """``namespace/pod-group``: the key of the group's Workload."""
        return f"{self.namespace}/{self.pod_group}"

    def display(self) -> str:
        """A short label for tables: ``job-name (#id)``, else the cluster name."""
        if self.managed_job_id or self.managed_job_name:
            name = self.managed_job_name or "job"
            return f"{name} (#{self.managed_job_id})" if self.managed_job_id else name
        return self.cluster or ""

    def to_json(self) -> dict[str, Any]:
        return {
            "podGroup": self.pod_group,
            "namespace": self.namespace,
            "managedJobId": self.managed_job_id,
            "managedJobName": self.managed_job_name,
            "cluster": self.cluster,
            "user": self.user,
        }


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def pod_group_of(pod: Mapping[str, Any]) -> str | None:
    """The pod's Kueue pod-group name (the annotation, when present, takes precedence)."""
    meta = _meta(pod)
    annotations = meta.get("annotations") or {}
    labels = meta.get("labels") or {}
    value = annotations.get(POD_GROUP_NAME_KEY) or labels.get(POD_GROUP_NAME_KEY)
    return str(value) if value else None


@dataclass(frozen=True)
class _Facts:
    """The SkyPilot facts of a set of objects (pods of one group, and maybe its Workload)."""

    namespace: str
    pod_group: str | None
    managed_job_id: str | None
    managed_job_name: str | None
    cluster: str | None
    user: str | None
    team: str | None
    skypilot_owned: bool


def _string_map(obj: Mapping[str, Any], field_name: str) -> Mapping[str, Any]:
    value = _meta(obj).get(field_name)
    return value if isinstance(value, Mapping) else {}


def _first(objs: Sequence[Mapping[str, Any]], field_name: str, key: str) -> str | None:
    for obj in objs:
        value = _string_map(obj, field_name).get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _is_skypilot(obj: Mapping[str, Any]) -> bool:
    labels, annotations = _string_map(obj, "labels"), _string_map(obj, "annotations")
    return (
        labels.get(PARENT_LABEL) == PARENT_LABEL_VALUE
        or CLUSTER_NAME_LABEL in labels
        or LEGACY_CLUSTER_LABEL in labels
        or MANAGED_JOB_ID_ANNOTATION in annotations
        or MANAGED_JOB_ID_ANNOTATION in labels
    )


def _facts(pods: Iterable[Mapping[str, Any]], workload: Mapping[str, Any] | None = None) -> _Facts:
    """What the pods (in name order) and then the Workload say; the first value of each fact wins."""
    ordered = sorted(pods, key=lambda p: str(_meta(p).get("name", "")))
    sources: list[Mapping[str, Any]] = [*ordered, *([workload] if workload is not None else [])]
    namespace = next((str(_meta(o)["namespace"]) for o in sources if _meta(o).get("namespace")), "")
    group = _first(ordered, "annotations", POD_GROUP_NAME_KEY) or _first(ordered, "labels", POD_GROUP_NAME_KEY)
    return _Facts(
        namespace=namespace,
        pod_group=group,
        managed_job_id=_first(sources, "annotations", MANAGED_JOB_ID_ANNOTATION)
        or _first(sources, "labels", MANAGED_JOB_ID_ANNOTATION),
        managed_job_name=_first(sources, "annotations", MANAGED_JOB_NAME_ANNOTATION),
        cluster=_first(sources, "labels", CLUSTER_NAME_LABEL) or _first(sources, "labels", LEGACY_CLUSTER_LABEL),
        user=_first(sources, "annotations", USER_KEY) or _first(sources, "labels", USER_KEY),
        team=_first(sources, "labels", TEAM_LABEL),
        skypilot_owned=any(_is_skypilot(obj) for obj in sources),
    )


def identity_from_pods(namespace: str, pod_group: str, pods: Iterable[Mapping[str, Any]]) -> SkyPilotIdentity:
    """Merge what the pods of one group say (the first non-empty value of each fact wins)."""
    facts = _facts(pods)
    return SkyPilotIdentity(
        pod_group=pod_group,
        namespace=namespace,
        managed_job_id=facts.managed_job_id,
        managed_job_name=facts.managed_job_name,
        cluster=facts.cluster,
        user=facts.user,
    )


def identity_from_workload(workload: Mapping[str, Any]) -> SkyPilotIdentity | None:
    """What a Workload itself says (labels copied by ``labelKeysToCopy``, or annotations)."""
    meta = _meta(workload)
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    merged = {**labels, **annotations}
    facts = (
        merged.get(MANAGED_JOB_ID_ANNOTATION),
        merged.get(MANAGED_JOB_NAME_ANNOTATION),
        merged.get(CLUSTER_NAME_LABEL) or merged.get(LEGACY_CLUSTER_LABEL),
        merged.get(USER_KEY),
    )
    if not any(facts):
        return None
    return SkyPilotIdentity(
        pod_group=str(meta.get("name", "")),
        namespace=str(meta.get("namespace", "")),
        managed_job_id=str(facts[0]) if facts[0] else None,
        managed_job_name=str(facts[1]) if facts[1] else None,
        cluster=str(facts[2]) if facts[2] else None,
        user=str(facts[3]) if facts[3] else None,
    )


class IdentitySource(str, Enum):
    """Which fact the job key was derived from."""

    MANAGED_JOB = "managed-job"
    POD_GROUP = "pod-group"


def _comparable_user(user: str) -> str:
    """A user name as both of SkyPilot's spellings give it: the ``skypilot-user`` label is the
    name with the characters a label value may not hold removed (``alice@example.com`` ->
    ``aliceexamplecom``; ``get_cleaned_username`` in SkyPilot 0.14.1 ``sky/utils/common_utils.py``),
    the annotation is the raw name. Lower-case letters and digits are what both keep."""
    return "".join(c for c in user.lower() if c.isascii() and c.isalnum())


@dataclass(frozen=True)
class JobOwner:
    """Whose job a history is: namespace, team and SkyPilot user (team and user may be unknown)."""

    namespace: str
    team: str | None = None
    user: str | None = None

    def conflict(self, claimant: JobOwner) -> str | None:
        """Why ``claimant`` is not this owner (None: it may be).

        The namespace must be equal (an empty one is unknown: a record linked to a pod group
        before the job itself was seen). A team or user recorded here must be equal to the
        claimant's when the claimant states one; a fact the claimant does not state is no
        contradiction (a Workload seen without its pods may lack the team label), and a fact
        not recorded here (a history written before teams were recorded) is filled in by the
        first claimant in the same namespace.
        """
        if self.namespace and claimant.namespace != self.namespace:
            return f"namespace {claimant.namespace!r} is not {self.namespace!r}"
        if self.team is not None and claimant.team is not None and claimant.team != self.team:
            return f"team {claimant.team!r} is not {self.team!r}"
        if (
            self.user is not None
            and claimant.user is not None
            and _comparable_user(claimant.user) != _comparable_user(self.user)
        ):
            return f"user {claimant.user!r} is not {self.user!r}"
        return None


@dataclass(frozen=True)
class JobIdentity:
    """A SkyPilot job as seen through its Kueue Workload and pods (the controller's key).

    Only ``namespace``, ``pod_group`` and ``managed_job_id`` take part in equality; the
    other fields are informational and may be missing on some observations.
    """

    namespace: str
    pod_group: str | None = None
    managed_job_id: str | None = None
    managed_job_name: str | None = field(default=None, compare=False)
    user: str | None = field(default=None, compare=False)
    cluster_name: str | None = field(default=None, compare=False)
    #: The ``sky-kueue.io/team`` pod label (the team the admin policy placed the job for).
    team: str | None = field(default=None, compare=False)
    #: True when a SkyPilot marker (label, annotation) was seen on a pod or the Workload.
    skypilot_owned: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if self.pod_group is None and self.managed_job_id is None:
            raise ValueError("a job identity needs a managed-job id or a pod-group name")

    @property
    def source(self) -> IdentitySource:
        return IdentitySource.MANAGED_JOB if self.managed_job_id else IdentitySource.POD_GROUP

    @property
    def key(self) -> str:
        """The durable key history is stored under (see the module docstring)."""
        if self.managed_job_id:
            return managed_job_key(self.managed_job_id)
        assert self.pod_group is not None
        return pod_group_key(self.namespace, self.pod_group)

    @property
    def owner(self) -> JobOwner:
        return JobOwner(self.namespace, self.team, self.user)

    @property
    def owned_key(self) -> str:
        """The key of this owner's history of the job when another owner holds :attr:`key`."""
        if not self.managed_job_id:
            return self.key
        return owned_managed_job_key(self.managed_job_id, self.owner)

    @property
    def pod_group_key(self) -> str | None:
        """The pod-group key, which the store keeps as an alias of :attr:`key`."""
        return pod_group_key(self.namespace, self.pod_group) if self.pod_group else None


def managed_job_key(job_id: str) -> str:
    return f"{MANAGED_JOB_KEY_PREFIX}{job_id}"


def owned_managed_job_key(job_id: str, owner: JobOwner) -> str:
    """``managed-job/<id>/<namespace>/<team>/<user>``, each part percent-encoded (an unknown
    part is empty; the user as both SkyPilot spellings of it compare), so no owner's key is another's."""
    parts = (owner.namespace, owner.team or "", _comparable_user(owner.user) if owner.user else "")
    return "/".join([managed_job_key(job_id), *(quote(p, safe="") for p in parts)])


def pod_group_key(namespace: str, name: str) -> str:
    return f"{POD_GROUP_KEY_PREFIX}{namespace}/{name}"


def identify_job(workload: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]] = ()) -> JobIdentity | None:
    """The job identity of a Workload, from its group's pods and the Workload itself.

    The Workload's own labels and annotations count too (Kueue copies pod labels listed in
    ``integrations.labelKeysToCopy``). Without pods, a pod-group Workload (annotation
    ``kueue.x-k8s.io/is-group-workload: "true"``) is identified by its name.

    Returns:
        The identity, or None when neither a managed-job id nor a pod-group name is known
        (e.g. a batch/v1 Job's Workload: not ours to age).
    """
    facts = _facts(pods, workload)
    group = facts.pod_group
    is_group = workload is not None and (
        _string_map(workload, "annotations").get(IS_GROUP_WORKLOAD_ANNOTATION) == "true"
    )
    if group is None and workload is not None and is_group:
        name = _meta(workload).get("name")
        group = name if isinstance(name, str) and name else None
    if facts.managed_job_id is None and group is None:
        return None
    return JobIdentity(
        namespace=facts.namespace,
        pod_group=group,
        managed_job_id=facts.managed_job_id,
        managed_job_name=facts.managed_job_name,
        user=facts.user,
        cluster_name=facts.cluster,
        team=facts.team,
        skypilot_owned=facts.skypilot_owned,
    )


def trim_pod(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a pod the mirror keeps: identity, group, phase, scheduling gates and Kueue's
    pod conditions.

    A full pod is ~10 KB of JSON; this is a few hundred bytes.
    """
    meta = _meta(pod)
    raw_status = pod.get("status")
    status: Mapping[str, Any] = raw_status if isinstance(raw_status, dict) else {}
    kept_meta: dict[str, Any] = {
        key: meta[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "labels")
        if key in meta
    }
    annotations = meta.get("annotations") or {}
    kept_annotations = {k: v for k, v in annotations.items() if str(k).startswith(KEPT_ANNOTATION_PREFIXES)}
    if kept_annotations:
        kept_meta["annotations"] = kept_annotations
    conditions = [
        c for c in status.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "TerminationTarget"
    ]
    kept_status: dict[str, Any] = {"phase": status.get("phase")}
    if conditions:
        kept_status["conditions"] = conditions
    trimmed: dict[str, Any] = {
        "apiVersion": pod.get("apiVersion", "v1"),
        "kind": "Pod",
        "metadata": kept_meta,
        "status": kept_status,
    }
    raw_spec = pod.get("spec")
    gates = raw_spec.get("schedulingGates") if isinstance(raw_spec, dict) else None
    if gates:
        trimmed["spec"] = {"schedulingGates": gates}  # the relaunch race: pods Kueue holds back
    return trimmed

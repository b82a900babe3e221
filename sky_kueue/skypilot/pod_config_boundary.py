"""What a task's own ``kubernetes.pod_config`` may set, and what only the policy, Kueue and
SkyPilot may.

Why: SkyPilot 0.14.1 merges a task's ``config:`` override of ``kubernetes.pod_config`` (and
of ``kubernetes.custom_metadata``, and of both under ``kubernetes.context_configs.<ctx>``)
into every pod it creates, after its own template (``combine_pod_config_fields`` and
``combine_metadata_fields`` in ``sky/provision/kubernetes/utils.py``; a context scope is
merged over the general one, ``get_cloud_config_value_from_dict`` in
``sky/utils/config_utils.py``). The policy writes three pod labels there and used to pass
everything else through, so a task could carry its own ``spec.priorityClassName``, Kueue
pod-group labels, a forged ``skypilot-managed-job-id`` annotation or ``hostNetwork: true``.

Two lists decide, path by path (lists are walked item by item; a reason names the field,
e.g. ``kubernetes.pod_config.spec.priorityClassName``):

* :data:`OWNED_FIELDS` and the reserved label/annotation keys (:func:`reserved_key_owner`):
  never a task's, whatever the config says. Priority, scheduling and the resource requests
  are Kueue's and the policy's; host namespaces, privileged settings and the service account
  are the cluster admin's (SkyPilot's own config); the keys SkyPilot, Kueue and sky-kueue put
  on pods are theirs.
* The team's allow-list (``teams.<team>.pod_config_allowed``, default
  :data:`DEFAULT_POD_CONFIG_ALLOWED`): the fields a task may set; anything else is refused.

The keys the policy itself writes in the general ``pod_config`` (:data:`POLICY_WRITTEN_LABELS`,
:data:`POLICY_WRITTEN_ANNOTATIONS`) pass: the decision reads them as what the task asks for
and checks them (someone else's queue, a class the team may not use, a team the user is not
in), and applying the policy twice must give the same task. Anywhere else (a context scope,
``custom_metadata``, which SkyPilot merges after them) they are refused like other reserved keys.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

from sky_kueue.kueue import api as kueue_api
from sky_kueue.skypilot import labels

#: A field path below ``pod_config`` with list positions left out, e.g. ``("spec", "hostNetwork")``.
FieldPath = tuple[str, ...]

#: Segment of an allow-list entry that matches any key.
ANY_KEY = "*"

#: What a task may set in ``pod_config`` unless its team's config says otherwise: its own
#: labels and annotations, environment and volumes for the containers, image pull secrets.
#: Scheduling hints (``spec.tolerations``, ``spec.nodeSelector``, ``spec.affinity``) are left
#: to the admin to allow per team: they choose nodes, which Kueue's ResourceFlavors own.
DEFAULT_POD_CONFIG_ALLOWED: tuple[str, ...] = (
    "metadata.labels",
    "metadata.annotations",
    "spec.containers.name",
    "spec.containers.env",
    "spec.containers.envFrom",
    "spec.containers.volumeMounts",
    "spec.volumes",
    "spec.imagePullSecrets",
)

_PRIORITY = (
    "Kueue and sky-kueue decide pod priority from the team's WorkloadPriorityClass, "
    "which resources.priority_class chooses"
)
_SCHEDULING = "Kueue decides when and where the pods start (the team's LocalQueue and its ResourceFlavors)"
_RESOURCES = (
    "the team's limits and Kueue's quota count resources.cpus, resources.memory and "
    "resources.accelerators; set those instead"
)
_HOST = "host namespaces are granted by the cluster admin in SkyPilot's own config"
_PRIVILEGED = "privileged settings are granted by the cluster admin in SkyPilot's own config"
_IDENTITY = "SkyPilot sets the pods' service account (kubernetes.remote_identity in its config)"
_POD_IDENTITY = "SkyPilot names and places its pods; sky-kueue sets the namespace (the team's)"
_CONTAINERS = ("containers", "initContainers", "ephemeralContainers")
_ESCALATING_SECURITY = ("privileged", "allowPrivilegeEscalation", "capabilities", "procMount")


@dataclass(frozen=True)
class OwnedField:
    """A pod field no task may set.

    Attributes:
        path: the field (``*`` matches any key).
        reason: who owns it and, where there is one, what the task sets instead.
    """

    path: FieldPath
    reason: str


#: Fields below ``pod_config`` that no allow-list can open to a task.
OWNED_FIELDS: tuple[OwnedField, ...] = (
    OwnedField(("metadata", "name"), _POD_IDENTITY),
    OwnedField(("metadata", "generateName"), _POD_IDENTITY),
    OwnedField(("metadata", "namespace"), _POD_IDENTITY),
    OwnedField(("metadata", "ownerReferences"), _POD_IDENTITY),
    OwnedField(("metadata", "finalizers"), _POD_IDENTITY),
    OwnedField(("spec", "priorityClassName"), _PRIORITY),
    OwnedField(("spec", "priority"), _PRIORITY),
    OwnedField(("spec", "preemptionPolicy"), _PRIORITY),
    OwnedField(("spec", "schedulerName"), _SCHEDULING),
    OwnedField(("spec", "nodeName"), _SCHEDULING),
    OwnedField(("spec", "schedulingGates"), _SCHEDULING),
    OwnedField(("spec", "resources"), _RESOURCES),
    OwnedField(("spec", "overhead"), _RESOURCES),
    *(OwnedField(("spec", c, "resources"), _RESOURCES) for c in _CONTAINERS),
    OwnedField(("spec", "hostNetwork"), _HOST),
    OwnedField(("spec", "hostPID"), _HOST),
    OwnedField(("spec", "hostIPC"), _HOST),
    OwnedField(("spec", "hostUsers"), _HOST),
    OwnedField(("spec", "securityContext"), _PRIVILEGED),
    *(OwnedField(("spec", c, "securityContext", s), _PRIVILEGED) for c in _CONTAINERS for s in _ESCALATING_SECURITY),
    OwnedField(("spec", "volumes", "hostPath"), _PRIVILEGED),
    OwnedField(("spec", "serviceAccountName"), _IDENTITY),
    OwnedField(("spec", "serviceAccount"), _IDENTITY),
    OwnedField(("spec", "automountServiceAccountToken"), _IDENTITY),
)

#: Pod labels the policy writes itself (``rewrite``) and the decision reads back and checks.
POLICY_WRITTEN_LABELS = frozenset(
    {labels.KUEUE_QUEUE_LABEL, labels.KUEUE_PRIORITY_CLASS_LABEL, labels.TEAM_LABEL, labels.BURST_LABEL}
)
#: Pod annotations the policy writes itself (the run-time estimate, read back by the decision).
POLICY_WRITTEN_ANNOTATIONS = frozenset({labels.RUNTIME_SECONDS_ANNOTATION, labels.RUNTIME_SOURCE_ANNOTATION})

_METADATA_MAPS = frozenset({("metadata", "labels"), ("metadata", "annotations")})
_KUEUE_DOMAIN = kueue_api.KUEUE_GROUP
_SKY_KUEUE_PREFIX = "sky-kueue.io/"
#: Keys SkyPilot 0.14.1 puts on its pods: ``sky/templates/kubernetes-ray.yml.j2`` (``parent``,
#: ``skypilot-cluster``, ``skypilot-user``, ``skypilot-workspace``, ...),
#: ``sky/provision/constants.py`` and ``sky/provision/kubernetes/constants.py`` (``ray-*``,
#: ``skypilot-*``) and ``sky/jobs/controller.py`` ``_add_k8s_annotations``
#: (``skypilot-managed-job-id``, ``skypilot-managed-job-name``).
_SKYPILOT_PREFIXES = ("skypilot-", "skypilot.co/", "ray-")
_SKYPILOT_KEYS = frozenset({"parent"})
#: One segment of an allow-list entry: a Kubernetes field name, or ``*``.
_SEGMENT_RE = re.compile(r"^([A-Za-z][A-Za-z0-9]*|\*)$")
_PLAIN_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
#: Distinct (allow-list, field path) pairs whose answers are kept; a pod_config has a few dozen
#: distinct paths (list items share theirs) and a config a handful of allow-lists.
PATH_CACHE_ENTRIES = 4096


@dataclass(frozen=True)
class FieldProblem:
    """A field a task may not set.

    Attributes:
        field: where, from the task's config (e.g. ``kubernetes.pod_config.spec.hostNetwork``).
        reason: for an owned field, who owns it; empty otherwise.
        owned: True when no config could allow it (an attempt to set what others own);
            False when the team's allow-list does not name it.
    """

    field: str
    reason: str
    owned: bool


def reserved_key_owner(key: str) -> str | None:
    """Who owns a pod label or annotation key, or None when it is free for a task."""
    prefix, slash, _ = key.rpartition("/")
    if slash and (prefix == _KUEUE_DOMAIN or prefix.endswith("." + _KUEUE_DOMAIN)):
        return "Kueue"
    if key.startswith(_SKY_KUEUE_PREFIX):
        return "sky-kueue"
    if key in _SKYPILOT_KEYS or key.startswith(_SKYPILOT_PREFIXES):
        return "SkyPilot"
    return None


@functools.lru_cache(maxsize=PATH_CACHE_ENTRIES)
def owned_field(path: FieldPath) -> OwnedField | None:
    """The owned field ``path`` is (or lies below), if any."""
    return next((o for o in OWNED_FIELDS if _matches(o.path, path)), None)


@functools.lru_cache(maxsize=PATH_CACHE_ENTRIES)
def _owned_below(path: FieldPath) -> bool:
    """Whether an owned field, or a label or annotation map (whose reserved keys are owned),
    lies below ``path``, so that an allowed subtree must still be walked."""
    return any(_leads_to(o.path, path) for o in OWNED_FIELDS) or any(_leads_to(m, path) for m in _METADATA_MAPS)


@functools.lru_cache(maxsize=PATH_CACHE_ENTRIES)
def _standing(allowed: tuple[FieldPath, ...], path: FieldPath) -> tuple[bool, bool]:
    """Whether ``allowed`` covers ``path``, and whether it allows something below it."""
    return any(_matches(p, path) for p in allowed), any(_leads_to(p, path) for p in allowed)


def parse_allowed(entry: str) -> FieldPath:
    """An allow-list entry (``spec.tolerations``) as a path, checked.

    Raises:
        ValueError: the entry is not a dotted path of field names below ``metadata`` or
            ``spec``, goes below a label or annotation map, or names an owned field.
    """
    path = tuple(entry.split("."))
    if not all(_SEGMENT_RE.match(p) for p in path) or path[0] not in ("metadata", "spec"):
        raise ValueError(
            f"{entry!r} is not a pod_config field path (field names joined by '.', starting with "
            "metadata or spec, '*' for any key; e.g. spec.tolerations)"
        )
    if len(path) > 2 and path[:2] in _METADATA_MAPS:
        raise ValueError(
            f"{entry!r}: allow {'.'.join(path[:2])} as a whole "
            "(keys owned by Kueue, SkyPilot and sky-kueue stay refused)"
        )
    owned = owned_field(path)
    if owned is not None:
        raise ValueError(f"{entry!r} is never a task's to set ({owned.reason})")
    return path


def overrides_problem(overrides: Mapping[str, object], allowed: tuple[FieldPath, ...]) -> FieldProblem | None:
    """The first field a task's config override (``_cluster_config_overrides``) may not set.

    Args:
        overrides: the candidate's config override.
        allowed: the team's allow-list (:func:`parse_allowed` paths).

    Returns:
        The problem, or None when every pod field it sets is allowed.
    """
    kubernetes = overrides.get("kubernetes")
    if not isinstance(kubernetes, Mapping):
        return None
    scopes: list[tuple[str, Mapping[str, object], bool]] = [("kubernetes", kubernetes, True)]
    contexts = kubernetes.get("context_configs")
    if isinstance(contexts, Mapping):
        scopes.extend(
            (f"kubernetes.context_configs.{name}", scope, False)
            for name, scope in contexts.items()
            if isinstance(scope, Mapping)
        )
    for where, scope, general in scopes:
        if "pod_config" in scope:
            problem = _Walk(f"{where}.pod_config", allowed, general).root(scope["pod_config"], ())
            if problem is not None:
                return problem
        if "custom_metadata" in scope:
            # SkyPilot merges custom_metadata into the pods' metadata (after pod_config).
            problem = _Walk(f"{where}.custom_metadata", allowed, False).root(scope["custom_metadata"], ("metadata",))
            if problem is not None:
                return problem
    return None


def _matches(pattern: FieldPath, path: FieldPath) -> bool:
    """Whether ``path`` is ``pattern`` or lies below it."""
    return len(path) >= len(pattern) and all(p in (ANY_KEY, k) for p, k in zip(pattern, path, strict=False))


def _leads_to(pattern: FieldPath, path: FieldPath) -> bool:
    """Whether ``pattern`` lies below ``path`` (so some of ``path``'s content may be allowed)."""
    return len(pattern) > len(path) and _matches(pattern[: len(path)], path)


class _Walk:
    """One walk over a pod_config (or custom_metadata) value, stopping at the first problem."""

    def __init__(self, where: str, allowed: tuple[FieldPath, ...], policy_written: bool) -> None:
        self.where = where
        self.allowed = allowed
        self.policy_written = policy_written

    def root(self, value: object, virtual: FieldPath) -> FieldProblem | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            return FieldProblem(self.where, "", owned=False)
        return self._mapping(value, virtual, (), covered=False)

    def _mapping(
        self, value: Mapping[object, object], path: FieldPath, shown: tuple[str, ...], covered: bool
    ) -> FieldProblem | None:
        if path in _METADATA_MAPS:
            return self._metadata(value, path, shown, covered)
        for raw_key, child in value.items():
            key = str(raw_key)
            child_path = (*path, key)
            child_shown = (*shown, _segment(key))
            owned = owned_field(child_path)
            if owned is not None:
                return FieldProblem(self._name(child_shown), owned.reason, owned=True)
            covers, leads = _standing(self.allowed, child_path)
            child_covered = covered or covers
            if not child_covered and not leads:
                # Name the owned field inside, if any: it says more than "not allowed".
                return self._owned_inside(child, child_path, child_shown) or self._not_allowed(child_shown)
            if child_covered and child_path not in _METADATA_MAPS and not _owned_below(child_path):
                continue  # all of it is the task's to set
            problem = self._value(child, child_path, child_shown, child_covered)
            if problem is not None:
                return problem
        return None

    def _value(self, value: object, path: FieldPath, shown: tuple[str, ...], covered: bool) -> FieldProblem | None:
        if isinstance(value, Mapping):
            return self._mapping(value, path, shown, covered)
        if isinstance(value, list):
            for index, item in enumerate(value):
                problem = self._value(item, path, (*shown[:-1], f"{shown[-1]}[{index}]"), covered)
                if problem is not None:
                    return problem
            return None
        return None if covered else self._not_allowed(shown)

    def _metadata(
        self, value: Mapping[object, object], path: FieldPath, shown: tuple[str, ...], covered: bool
    ) -> FieldProblem | None:
        written = POLICY_WRITTEN_LABELS if path[-1] == "labels" else POLICY_WRITTEN_ANNOTATIONS
        for raw_key in value:
            key = str(raw_key)
            key_shown = (*shown, _segment(key))
            if self.policy_written and key in written:
                continue  # the decision reads and checks it; rewrite writes it again
            owner = reserved_key_owner(key)
            if owner is not None:
                return FieldProblem(
                    self._name(key_shown),
                    f"{owner} owns this {path[-1][:-1]}"
                    + (
                        ""
                        if owner != "sky-kueue"
                        else "; sky-kueue.io/team and sky-kueue.io/burst go in resources.labels"
                    ),
                    owned=True,
                )
            if not covered:
                return self._not_allowed(key_shown)
        return None

    def _owned_inside(self, value: object, path: FieldPath, shown: tuple[str, ...]) -> FieldProblem | None:
        """The first owned field at or below ``path`` in ``value``, if any."""
        if isinstance(value, list):
            for index, item in enumerate(value):
                found = self._owned_inside(item, path, (*shown[:-1], f"{shown[-1]}[{index}]"))
                if found is not None:
                    return found
            return None
        if not isinstance(value, Mapping):
            return None
        for raw_key, child in value.items():
            key = str(raw_key)
            child_path, child_shown = (*path, key), (*shown, _segment(key))
            owned = owned_field(child_path)
            if owned is not None:
                return FieldProblem(self._name(child_shown), owned.reason, owned=True)
            found = self._owned_inside(child, child_path, child_shown)
            if found is not None:
                return found
        return None

    def _not_allowed(self, shown: tuple[str, ...]) -> FieldProblem:
        return FieldProblem(self._name(shown), "", owned=False)

    def _name(self, shown: tuple[str, ...]) -> str:
        return self.where + "".join(s if s.startswith("[") else f".{s}" for s in shown)


def _segment(key: str) -> str:
    """A key as shown in a field name: a key that is not a plain word (a label key with ``.``
    or ``/``) is shown in brackets, ``metadata.labels['kueue.x-k8s.io/pod-group-name']``."""
    return key if _PLAIN_KEY_RE.match(key) else f"[{key!r}]"

"""Read Kueue objects from ``kubectl get -o yaml`` documents, in v1beta1 or v1beta2.

Both API versions are normalised into :mod:`sky_kueue.kueue.objects`, applying the same
conversions Kueue's conversion webhook applies (``apis/kueue/v1beta1/*_conversion.go``):
``spec.cohort`` becomes the cohort name, ``priorityClassName``/``priorityClassSource`` and
``priorityClassRef`` mean the same thing, and the deprecated fungibility aliases ``Borrow``
and ``Preempt`` become ``MayStopSearch``. CRD defaults are applied where a field is missing.

A snapshot file may announce the Kueue manager configuration in its first comment lines
(``# kueue-config: fairSharing``, ``# kueue-config: admissionFairSharing ...``,
``# cycle-cap: N``); :func:`parse_header` reads them.

Every problem is reported as a :class:`ModelError` whose message names the object and the
field, so the CLI can print one precise line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue import objects as o
from sky_kueue.kueue import quantity, resources, schema, timestamps, validation
from sky_kueue.kueue.errors import ModelError

KUEUE_GROUP = kueue_api.KUEUE_GROUP
KUEUE_VERSIONS = ("v1beta1", "v1beta2")
KUEUE_KINDS = (
    "ResourceFlavor",
    "WorkloadPriorityClass",
    "Cohort",
    "ClusterQueue",
    "LocalQueue",
    "Workload",
    "AdmissionCheck",
)


def _where(kind: str, meta: Mapping[str, Any]) -> str:
    name = meta.get("name", "<unnamed>")
    ns = meta.get("namespace")
    return f"{kind} {ns}/{name}" if ns else f"{kind} {name}"


def _parse_time(value: object, where: str, path: str) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    if not isinstance(value, str):
        raise ModelError(f"{where}: {path}: expected an RFC 3339 timestamp, got {value!r}")
    try:
        return timestamps.parse(value)
    except ValueError as exc:
        raise ModelError(f"{where}: {path}: invalid timestamp {value!r}") from exc


def _amount(resource: str, value: object, where: str, path: str) -> int:
    try:
        return quantity.parse_amount(resource, value)
    except quantity.QuantityError as exc:
        raise ModelError(f"{where}: {path}: {exc}") from exc


def _decimal(value: object, where: str, path: str) -> Decimal:
    try:
        return quantity.parse_quantity(value)
    except quantity.QuantityError as exc:
        raise ModelError(f"{where}: {path}: {exc}") from exc


def _mapping(value: object, where: str, path: str) -> Mapping[str, Any]:
    if type(value) is dict:
        return value
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ModelError(f"{where}: {path}: expected a mapping, got {type(value).__name__}")
    return value


def _list(value: object, where: str, path: str) -> list[Any]:
    if type(value) is list:
        return value
    if value is None:
        return []
    if not isinstance(value, list):
        raise ModelError(f"{where}: {path}: expected a list, got {type(value).__name__}")
    return value


def _enum(enum_type: Any, value: object, default: Any, where: str, path: str) -> Any:
    if value is None or value == "":
        return default
    try:
        return enum_type(value)
    except ValueError as exc:
        allowed = ", ".join(m.value for m in enum_type)
        raise ModelError(f"{where}: {path}: unsupported value {value!r} (allowed: {allowed})") from exc


def _int(value: object, where: str, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ModelError(f"{where}: {path}: expected an integer, got {value!r}")
    try:
        return int(value)
    except ValueError as exc:
        raise ModelError(f"{where}: {path}: expected an integer, got {value!r}") from exc


# --- ResourceFlavor -------------------------------------------------------------------


def _tolerations(items: Iterable[Any], where: str, path: str) -> tuple[o.Toleration, ...]:
    result = []
    for i, item in enumerate(items):
        t = _mapping(item, where, f"{path}[{i}]")
        result.append(
            o.Toleration(
                key=str(t.get("key", "")),
                operator=str(t.get("operator", "Equal")),
                value=str(t.get("value", "")),
                effect=str(t.get("effect", "")),
            )
        )
    return tuple(result)


def parse_resource_flavor(doc: Mapping[str, Any]) -> o.ResourceFlavor:
    meta = _mapping(doc.get("metadata"), "ResourceFlavor", "metadata")
    where = _where("ResourceFlavor", meta)
    spec = _mapping(doc.get("spec"), where, "spec")
    taints = []
    for i, item in enumerate(_list(spec.get("nodeTaints"), where, "spec.nodeTaints")):
        t = _mapping(item, where, f"spec.nodeTaints[{i}]")
        taints.append(
            o.Taint(key=str(t.get("key", "")), value=str(t.get("value", "")), effect=str(t.get("effect", "")))
        )
    return o.ResourceFlavor(
        name=str(meta.get("name", "")),
        node_labels={str(k): str(v) for k, v in _mapping(spec.get("nodeLabels"), where, "spec.nodeLabels").items()},
        node_taints=tuple(taints),
        tolerations=_tolerations(_list(spec.get("tolerations"), where, "spec.tolerations"), where, "spec.tolerations"),
    )


# --- quotas ---------------------------------------------------------------------------


def _resource_groups(value: object, where: str) -> tuple[o.ResourceGroup, ...]:
    groups = []
    for gi, item in enumerate(_list(value, where, "spec.resourceGroups")):
        gpath = f"spec.resourceGroups[{gi}]"
        group = _mapping(item, where, gpath)
        covered = tuple(str(r) for r in _list(group.get("coveredResources"), where, f"{gpath}.coveredResources"))
        flavors = []
        for fi, fitem in enumerate(_list(group.get("flavors"), where, f"{gpath}.flavors")):
            fpath = f"{gpath}.flavors[{fi}]"
            flavor = _mapping(fitem, where, fpath)
            quotas: dict[str, o.ResourceQuota] = {}
            for ri, ritem in enumerate(_list(flavor.get("resources"), where, f"{fpath}.resources")):
                rpath = f"{fpath}.resources[{ri}]"
                res = _mapping(ritem, where, rpath)
                rname = str(res.get("name", ""))
                if rname in quotas:
                    raise ModelError(f"{where}: {rpath}.name: duplicate resource {rname!r}")
                borrowing = res.get("borrowingLimit")
                lending = res.get("lendingLimit")
                quotas[rname] = o.ResourceQuota(
                    nominal=_amount(rname, res.get("nominalQuota", 0), where, f"{rpath}.nominalQuota"),
                    borrowing_limit=None
                    if borrowing is None
                    else _amount(rname, borrowing, where, f"{rpath}.borrowingLimit"),
                    lending_limit=None if lending is None else _amount(rname, lending, where, f"{rpath}.lendingLimit"),
                )
            flavors.append(o.FlavorQuotas(name=str(flavor.get("name", "")), resources=quotas))
        groups.append(o.ResourceGroup(covered_resources=covered, flavors=tuple(flavors)))
    return tuple(groups)


def _label_selector(value: object, where: str, path: str) -> o.LabelSelector | None:
    if value is None:
        return None
    sel = _mapping(value, where, path)
    reqs = []
    for i, item in enumerate(_list(sel.get("matchExpressions"), where, f"{path}.matchExpressions")):
        expr = _mapping(item, where, f"{path}.matchExpressions[{i}]")
        operator = str(expr.get("operator", ""))
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise ModelError(f"{where}: {path}.matchExpressions[{i}].operator: unsupported operator {operator!r}")
        values = tuple(str(v) for v in _list(expr.get("values"), where, f"{path}.matchExpressions[{i}].values"))
        reqs.append(o.LabelSelectorRequirement(key=str(expr.get("key", "")), operator=operator, values=values))
    return o.LabelSelector(
        match_labels={
            str(k): str(v) for k, v in _mapping(sel.get("matchLabels"), where, f"{path}.matchLabels").items()
        },
        match_expressions=tuple(reqs),
    )


_FUNGIBILITY_ALIASES = {"Borrow": "MayStopSearch", "Preempt": "MayStopSearch"}


def parse_cluster_queue(doc: Mapping[str, Any]) -> o.ClusterQueue:
    meta = _mapping(doc.get("metadata"), "ClusterQueue", "metadata")
    where = _where("ClusterQueue", meta)
    spec = _mapping(doc.get("spec"), where, "spec")
    cohort = spec.get("cohortName", spec.get("cohort"))
    preemption = _mapping(spec.get("preemption"), where, "spec.preemption")
    bwc = _mapping(preemption.get("borrowWithinCohort"), where, "spec.preemption.borrowWithinCohort")
    threshold = bwc.get("maxPriorityThreshold")
    fung = _mapping(spec.get("flavorFungibility"), where, "spec.flavorFungibility")
    when_borrow = _FUNGIBILITY_ALIASES.get(str(fung.get("whenCanBorrow")), fung.get("whenCanBorrow"))
    when_preempt = _FUNGIBILITY_ALIASES.get(str(fung.get("whenCanPreempt")), fung.get("whenCanPreempt"))
    fair = _mapping(spec.get("fairSharing"), where, "spec.fairSharing")
    scope = _mapping(spec.get("admissionScope"), where, "spec.admissionScope")
    checks: list[str] = [str(c) for c in _list(spec.get("admissionChecks"), where, "spec.admissionChecks")]
    strategy = _mapping(spec.get("admissionChecksStrategy"), where, "spec.admissionChecksStrategy")
    for i, rule in enumerate(
        _list(strategy.get("admissionChecks"), where, "spec.admissionChecksStrategy.admissionChecks")
    ):
        checks.append(str(_mapping(rule, where, f"spec.admissionChecksStrategy.admissionChecks[{i}]").get("name", "")))
    return o.ClusterQueue(
        name=str(meta.get("name", "")),
        cohort=str(cohort) if cohort else None,
        namespace_selector=_label_selector(spec.get("namespaceSelector"), where, "spec.namespaceSelector"),
        resource_groups=_resource_groups(spec.get("resourceGroups"), where),
        queueing_strategy=_enum(
            o.QueueingStrategy,
            spec.get("queueingStrategy"),
            o.QueueingStrategy.BEST_EFFORT_FIFO,
            where,
            "spec.queueingStrategy",
        ),
        preemption=o.Preemption(
            within_cluster_queue=_enum(
                o.PreemptionPolicy,
                preemption.get("withinClusterQueue"),
                o.PreemptionPolicy.NEVER,
                where,
                "spec.preemption.withinClusterQueue",
            ),
            reclaim_within_cohort=_enum(
                o.PreemptionPolicy,
                preemption.get("reclaimWithinCohort"),
                o.PreemptionPolicy.NEVER,
                where,
                "spec.preemption.reclaimWithinCohort",
            ),
            borrow_within_cohort=_enum(
                o.BorrowWithinCohortPolicy,
                bwc.get("policy"),
                o.BorrowWithinCohortPolicy.NEVER,
                where,
                "spec.preemption.borrowWithinCohort.policy",
            ),
            max_priority_threshold=None
            if threshold is None
            else _int(threshold, where, "spec.preemption.borrowWithinCohort.maxPriorityThreshold"),
        ),
        flavor_fungibility=o.FlavorFungibility(
            when_can_borrow=_enum(
                o.FungibilityPolicy,
                when_borrow,
                o.FungibilityPolicy.MAY_STOP_SEARCH,
                where,
                "spec.flavorFungibility.whenCanBorrow",
            ),
            when_can_preempt=_enum(
                o.FungibilityPolicy,
                when_preempt,
                o.FungibilityPolicy.TRY_NEXT_FLAVOR,
                where,
                "spec.flavorFungibility.whenCanPreempt",
            ),
            preference=_enum(
                o.FungibilityPreference, fung.get("preference"), None, where, "spec.flavorFungibility.preference"
            ),
        ),
        fair_weight=_decimal(fair.get("weight", 1), where, "spec.fairSharing.weight"),
        admission_fair_sharing=scope.get("admissionMode") == "UsageBasedAdmissionFairSharing",
        stop_policy=_enum(o.StopPolicy, spec.get("stopPolicy"), o.StopPolicy.NONE, where, "spec.stopPolicy"),
        admission_checks=tuple(checks),
    )


def parse_cohort(doc: Mapping[str, Any]) -> o.Cohort:
    meta = _mapping(doc.get("metadata"), "Cohort", "metadata")
    where = _where("Cohort", meta)
    spec = _mapping(doc.get("spec"), where, "spec")
    parent = spec.get("parentName", spec.get("parent"))
    fair = _mapping(spec.get("fairSharing"), where, "spec.fairSharing")
    return o.Cohort(
        name=str(meta.get("name", "")),
        parent=str(parent) if parent else None,
        resource_groups=_resource_groups(spec.get("resourceGroups"), where),
        fair_weight=_decimal(fair.get("weight", 1), where, "spec.fairSharing.weight"),
    )


def parse_local_queue(doc: Mapping[str, Any]) -> o.LocalQueue:
    meta = _mapping(doc.get("metadata"), "LocalQueue", "metadata")
    where = _where("LocalQueue", meta)
    spec = _mapping(doc.get("spec"), where, "spec")
    status = _mapping(doc.get("status"), where, "status")
    fs_status = _mapping(status.get("fairSharing"), where, "status.fairSharing")
    afs = _mapping(fs_status.get("admissionFairSharingStatus"), where, "status.fairSharing.admissionFairSharingStatus")
    consumed = _mapping(
        afs.get("consumedResources"), where, "status.fairSharing.admissionFairSharingStatus.consumedResources"
    )
    fair = _mapping(spec.get("fairSharing"), where, "spec.fairSharing")
    return o.LocalQueue(
        namespace=str(meta.get("namespace", "")),
        name=str(meta.get("name", "")),
        cluster_queue=str(spec.get("clusterQueue", "")),
        fair_weight=_decimal(fair.get("weight", 1), where, "spec.fairSharing.weight"),
        consumed_resources={
            str(r): _decimal(v, where, f"status.fairSharing.admissionFairSharingStatus.consumedResources.{r}")
            for r, v in consumed.items()
        },
    )


def parse_priority_class(doc: Mapping[str, Any]) -> o.WorkloadPriorityClass:
    meta = _mapping(doc.get("metadata"), "WorkloadPriorityClass", "metadata")
    where = _where("WorkloadPriorityClass", meta)
    if "value" not in doc:
        raise ModelError(f"{where}: value: required")
    return o.WorkloadPriorityClass(
        name=str(meta.get("name", "")),
        value=_int(doc.get("value"), where, "value"),
        description=str(doc.get("description", "")),
    )


def parse_namespace(doc: Mapping[str, Any]) -> o.Namespace:
    meta = _mapping(doc.get("metadata"), "Namespace", "metadata")
    where = _where("Namespace", meta)
    name = str(meta.get("name", ""))
    labels = {str(k): str(v) for k, v in _mapping(meta.get("labels"), where, "metadata.labels").items()}
    labels.setdefault("kubernetes.io/metadata.name", name)
    return o.Namespace(name=name, labels=labels)


# --- Workload -------------------------------------------------------------------------


def _conditions(value: object, where: str) -> tuple[o.Condition, ...]:
    result = []
    for i, item in enumerate(_list(value, where, "status.conditions")):
        cond = item if type(item) is dict else _mapping(item, where, f"status.conditions[{i}]")
        ltt = cond.get("lastTransitionTime")
        result.append(
            o.Condition(
                type=str(cond.get("type", "")),
                status=str(cond.get("status", "")),
                reason=str(cond.get("reason", "")),
                message=str(cond.get("message", "")),
                last_transition_time=None
                if ltt is None
                else _parse_time(ltt, where, f"status.conditions[{i}].lastTransitionTime"),
            )
        )
    return tuple(result)


def _admission(value: object, where: str) -> o.Admission | None:
    if value is None:
        return None
    adm = _mapping(value, where, "status.admission")
    assignments = []
    for i, item in enumerate(_list(adm.get("podSetAssignments"), where, "status.admission.podSetAssignments")):
        psa = item if type(item) is dict else _mapping(item, where, f"status.admission.podSetAssignments[{i}]")
        usage_value = psa.get("resourceUsage")
        if type(usage_value) is not dict:
            usage_value = _mapping(usage_value, where, f"status.admission.podSetAssignments[{i}].resourceUsage")
        usage = resources.parse_amounts(usage_value, where, f"status.admission.podSetAssignments[{i}].resourceUsage")
        count = psa.get("count", -1)
        if type(count) is not int:
            count = _int(count, where, f"status.admission.podSetAssignments[{i}].count")
        flavors = psa.get("flavors")
        if type(flavors) is not dict:
            flavors = _mapping(flavors, where, f"status.admission.podSetAssignments[{i}].flavors")
        assignments.append(
            o.PodSetAssignment(
                name=str(psa.get("name", "")),
                count=count,
                flavors={str(r): str(f) for r, f in flavors.items()},
                resource_usage=usage,
            )
        )
    return o.Admission(cluster_queue=str(adm.get("clusterQueue", "")), pod_set_assignments=tuple(assignments))


def parse_workload(doc: Mapping[str, Any], priority_classes: Mapping[str, o.WorkloadPriorityClass]) -> o.Workload:
    """Parse a Workload; a missing ``spec.priority`` is filled from its WorkloadPriorityClass.

    This is what Kueue's WorkloadPriorityClass controller does
    (``pkg/controller/core/workloadpriorityclass_controller.go``); it acts only when a class is
    created or changed, so a ``spec.priority`` already present wins.
    """
    meta = _mapping(doc.get("metadata"), "Workload", "metadata")
    where = _where("Workload", meta)
    spec = _mapping(doc.get("spec"), where, "spec")
    status = _mapping(doc.get("status"), where, "status")
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace", ""))
    if not namespace:
        raise ModelError(f"{where}: metadata.namespace: required")
    created = meta.get("creationTimestamp")
    if created is None:
        raise ModelError(f"{where}: metadata.creationTimestamp: required (the queue is ordered by it)")
    pod_sets = []
    for i, item in enumerate(_list(spec.get("podSets"), where, "spec.podSets")):
        path = f"spec.podSets[{i}]"
        pod_sets.append(
            resources.parse_pod_set(item if type(item) is dict else _mapping(item, where, path), where, path)
        )
    class_name = spec.get("priorityClassName")
    class_source = spec.get("priorityClassSource")
    ref = spec.get("priorityClassRef")
    if ref is not None:
        ref_map = _mapping(ref, where, "spec.priorityClassRef")
        class_name = ref_map.get("name")
        group = str(ref_map.get("group", ""))
        class_source = o.WORKLOAD_PRIORITY_CLASS_SOURCE if group == KUEUE_GROUP else o.POD_PRIORITY_CLASS_SOURCE
    priority_value = spec.get("priority")
    if priority_value is None:
        priority = 0
    elif type(priority_value) is int:
        priority = priority_value
    else:
        priority = _int(priority_value, where, "spec.priority")
    if (
        priority_value is None
        and class_name
        and class_source == o.WORKLOAD_PRIORITY_CLASS_SOURCE
        and str(class_name) in priority_classes
    ):
        # Kueue's WorkloadPriorityClass controller fills spec.priority from the class; once
        # set, spec.priority is authoritative (it stays mutable, e.g. for priority aging).
        priority = priority_classes[str(class_name)].value
    active = spec.get("active", True)
    return o.Workload(
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or f"uid-{namespace}.{name}"),
        creation_timestamp=_parse_time(created, where, "metadata.creationTimestamp"),
        queue_name=str(spec.get("queueName", "")),
        pod_sets=tuple(pod_sets),
        priority=priority,
        priority_class_name=str(class_name) if class_name else None,
        priority_class_source=str(class_source) if class_source else None,
        active=bool(active),
        admission=_admission(status.get("admission"), where),
        conditions=_conditions(status.get("conditions"), where),
        labels=_str_map(meta.get("labels"), where, "metadata.labels"),
        annotations=_str_map(meta.get("annotations"), where, "metadata.annotations"),
    )


def _str_map(value: object, where: str, path: str) -> dict[str, str]:
    """A mapping of strings (labels, annotations), keys and values as text."""
    if value is None:
        return {}
    return {str(k): str(v) for k, v in _mapping(value, where, path).items()}


# --- header ---------------------------------------------------------------------------

#: Longest duration accepted (Go's time.Duration is int64 nanoseconds: about 292 years).
MAX_DURATION_SECONDS = Decimal(2**63 - 1) / Decimal(10**9)
_DURATION_RE = re.compile(r"([0-9]{1,30}(?:\.[0-9]{1,30})?)(ns|us|µs|ms|s|m|h)")
_DURATION_UNITS_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}


def parse_duration_seconds(text: str) -> Decimal:
    """Parse a Go duration (``5m``, ``1h30m``, ``90s``) into seconds.

    Raises:
        ModelError: if ``text`` is not a Go duration.
    """
    pos = 0
    total = Decimal(0)
    if not text:
        raise ModelError(f"invalid duration {text!r}")
    while pos < len(text):
        match = _DURATION_RE.match(text, pos)
        if not match:
            raise ModelError(f"invalid duration {text!r}")
        total += Decimal(match.group(1)) * _DURATION_UNITS_SECONDS[match.group(2)]
        pos = match.end()
        if total > MAX_DURATION_SECONDS:
            raise ModelError(f"invalid duration {text[:40]!r}: longer than {MAX_DURATION_SECONDS} seconds")
    return total


#: How much of a snapshot's text is split first when reading its header (see _leading_lines).
_HEADER_PREFIX_CHARS = 65_536


def _leading_lines(text: str) -> Iterator[str]:
    """``text.splitlines()``, lazily: the header is a few lines at the top of megabytes.

    The first lines come from splitting a prefix (all but its last line, which the prefix
    may cut); only a reader that goes on past them gets the rest, from the whole split.
    """
    if len(text) <= _HEADER_PREFIX_CHARS:
        yield from text.splitlines()
        return
    lines = text[:_HEADER_PREFIX_CHARS].splitlines()
    yield from lines[:-1]
    yield from text.splitlines()[len(lines) - 1 :]


def parse_header(text: str) -> o.KueueConfig:
    """Read the ``# kueue-config:`` and ``# cycle-cap:`` comment lines of a snapshot.

    Raises:
        ModelError: on an unknown setting or a malformed value.
    """
    fair: o.FairSharingConfig | None = None
    afs: o.AdmissionFairSharingConfig | None = None
    cap = o.DEFAULT_CYCLE_CAP_CYCLES
    for line in _leading_lines(text):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            break
        body = stripped[1:].strip()
        if body.startswith("kueue-config:"):
            words = body[len("kueue-config:") :].split()
            if not words:
                raise ModelError("header '# kueue-config:' names no setting")
            mode, params = words[0], words[1:]
            if mode == "fairSharing":
                fair = o.FairSharingConfig()
            elif mode == "admissionFairSharing":
                afs = _parse_afs(params)
            else:
                raise ModelError(
                    f"header '# kueue-config: {mode}': unknown setting (fairSharing, admissionFairSharing)"
                )
        elif body.startswith("cycle-cap:"):
            value = body[len("cycle-cap:") :].strip()
            try:
                cap = int(value)
            except ValueError as exc:
                raise ModelError(f"header '# cycle-cap: {value}': expected a whole number") from exc
            if cap < 1:
                raise ModelError(f"header '# cycle-cap: {value}': must be at least 1")
    return o.KueueConfig(fair_sharing=fair, admission_fair_sharing=afs, cycle_cap=cap)


def _parse_afs(params: list[str]) -> o.AdmissionFairSharingConfig:
    values: dict[str, str] = {}
    for param in params:
        key, sep, value = param.partition("=")
        if not sep:
            raise ModelError(f"admissionFairSharing parameter {param!r}: expected key=value")
        values[key] = value
    unknown = set(values) - {"usageHalfLifeTime", "usageSamplingInterval", "resourceWeights"}
    if unknown:
        raise ModelError(f"admissionFairSharing: unknown parameter(s) {', '.join(sorted(unknown))}")
    weights: dict[str, Decimal] = {}
    if values.get("resourceWeights"):
        for item in values["resourceWeights"].split(","):
            res, sep, weight = item.partition(":")
            if not sep:
                raise ModelError(f"admissionFairSharing resourceWeights {item!r}: expected resource:weight")
            try:
                weight_value = quantity.parse_quantity(weight)
            except quantity.QuantityError as exc:
                raise ModelError(f"admissionFairSharing resourceWeights {item!r}: invalid weight") from exc
            if weight_value < 0:
                raise ModelError(f"admissionFairSharing resourceWeights {item!r}: must be 0 or more")
            weights[res] = weight_value
    return o.AdmissionFairSharingConfig(
        usage_half_life_seconds=parse_duration_seconds(values.get("usageHalfLifeTime", "0s")),
        usage_sampling_interval_seconds=parse_duration_seconds(values.get("usageSamplingInterval", "5m")),
        resource_weights=weights,
    )


# --- documents ------------------------------------------------------------------------


def flatten_documents(docs: Iterable[Any]) -> list[Mapping[str, Any]]:
    """Expand ``kind: List`` (and ``*List``) documents; drop empty YAML documents."""
    result: list[Mapping[str, Any]] = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, Mapping):
            raise ModelError(f"expected a Kubernetes object (a mapping), got {type(doc).__name__}")
        kind = str(doc.get("kind", ""))
        if kind == "List" or (kind.endswith("List") and "items" in doc):
            result.extend(flatten_documents(_list(doc.get("items"), kind, "items")))
        else:
            result.append(doc)
    return result


#: A document's first reading (:func:`parse_object`): its kind, the model object (None for a
#: Workload, read once the priority classes are known, and for an AdmissionCheck, not modelled)
#: and the ``where`` its errors name.
ParsedObject = tuple[str, object | None, str]


def parse_object(doc: Mapping[str, Any]) -> ParsedObject:
    """The first reading of one document (already flattened): identity, kind, API version and
    schema checked, every kind but Workload parsed.

    :func:`parse_documents` reads every document this way first, in order, and Workloads only
    after (a Workload's missing ``spec.priority`` comes from its WorkloadPriorityClass). It is
    a function of the document alone, so a caller that parses one slowly changing set of
    documents again and again may keep its result while the document is unchanged and
    rebuild the state with :func:`add_object` (the controller's mirror cache does).

    Raises:
        ModelError: on an unknown kind or API version, or an invalid field.
    """
    kind = str(doc.get("kind", ""))
    api_version = str(doc.get("apiVersion", ""))
    meta = _mapping(doc.get("metadata"), kind or "object", "metadata")
    where = _where(kind or "object", meta)
    if not meta.get("name"):
        raise ModelError(f"{where}: metadata.name: required")
    if kind == "Namespace":
        if api_version != "v1":
            raise ModelError(f"{where}: apiVersion {api_version!r}: expected v1")
        schema.check_document(kind, doc, where)
        return kind, parse_namespace(doc), where
    if kind not in KUEUE_KINDS:
        raise ModelError(
            f"{where}: unknown kind {kind!r} (expected Namespace or a Kueue kind: {', '.join(KUEUE_KINDS)})"
        )
    group, _, version = api_version.partition("/")
    if group != KUEUE_GROUP or version not in KUEUE_VERSIONS:
        raise ModelError(
            f"{where}: apiVersion {api_version!r}: expected {KUEUE_GROUP}/v1beta2 or {KUEUE_GROUP}/v1beta1"
        )
    schema.check_document(kind, doc, where)
    if kind == "ResourceFlavor":
        return kind, parse_resource_flavor(doc), where
    if kind == "WorkloadPriorityClass":
        return kind, parse_priority_class(doc), where
    if kind == "Cohort":
        return kind, parse_cohort(doc), where
    if kind == "ClusterQueue":
        return kind, parse_cluster_queue(doc), where
    if kind == "LocalQueue":
        return kind, parse_local_queue(doc), where
    # A Workload is read later (parse_workload); AdmissionCheck objects are accepted but not modelled.
    return kind, None, where


def add_object(state: o.ClusterState, parsed: ParsedObject) -> None:
    """Add a document's first reading to ``state`` (a Workload or an AdmissionCheck adds nothing).

    Raises:
        ModelError: an object of that kind and name is in ``state`` already.
    """
    _kind, obj, where = parsed
    if isinstance(obj, o.Namespace):
        _unique(state.namespaces, obj.name, where)
        state.namespaces[obj.name] = obj
    elif isinstance(obj, o.ResourceFlavor):
        _unique(state.resource_flavors, obj.name, where)
        state.resource_flavors[obj.name] = obj
    elif isinstance(obj, o.WorkloadPriorityClass):
        _unique(state.priority_classes, obj.name, where)
        state.priority_classes[obj.name] = obj
    elif isinstance(obj, o.Cohort):
        _unique(state.cohorts, obj.name, where)
        state.cohorts[obj.name] = obj
    elif isinstance(obj, o.ClusterQueue):
        _unique(state.cluster_queues, obj.name, where)
        state.cluster_queues[obj.name] = obj
    elif isinstance(obj, o.LocalQueue):
        _unique(state.local_queues, obj.key, where)
        state.local_queues[obj.key] = obj


def check_cohort_depth(state: o.ClusterState) -> None:
    """Raise the first Cohort deeper than Kueue allows, once every Cohort is in ``state``.

    Checked here, at the boundary, because every later walk of the tree is per level.

    Raises:
        ModelError: a Cohort is too deep.
    """
    depth_errors = validation.cohort_depth_errors(state)
    if depth_errors:
        raise ModelError(depth_errors[0])


def add_workload(state: o.ClusterState, wl: o.Workload, doc: Mapping[str, Any]) -> None:
    """Add ``wl`` (parsed from ``doc`` with ``state``'s priority classes) to ``state``.

    Raises:
        ModelError: a Workload of that namespace and name is in ``state`` already.
    """
    key = wl.key
    if key in state.workloads:
        _unique(state.workloads, key, _where("Workload", _mapping(doc.get("metadata"), "Workload", "metadata")))
    state.workloads[key] = wl


def parse_documents(docs: Iterable[Any], config: o.KueueConfig | None = None) -> o.ClusterState:
    """Build a :class:`ClusterState` from Kubernetes object mappings.

    Raises:
        ModelError: on an unknown kind or API version, or an invalid field.
    """
    state = o.ClusterState(config=config or o.KueueConfig())
    workload_docs: list[Mapping[str, Any]] = []
    for doc in flatten_documents(docs):
        parsed = parse_object(doc)
        if parsed[0] == "Workload":
            workload_docs.append(doc)
        else:
            add_object(state, parsed)
    check_cohort_depth(state)
    for doc in workload_docs:
        add_workload(state, parse_workload(doc, state.priority_classes), doc)
    return state


def _unique(existing: Mapping[str, Any], key: str, where: str) -> None:
    if key in existing:
        raise ModelError(f"{where}: defined more than once")

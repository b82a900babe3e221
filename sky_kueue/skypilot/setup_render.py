"""Render a :class:`~sky_kueue.skypilot.setup_spec.TeamsSpec` into Kueue objects and a
matching sky-kueue plugin config.

Pure: every function returns plain dicts (Kubernetes manifests, ``kueue.x-k8s.io/v1beta1``),
in the order they must be applied (Namespaces, ResourceFlavors, WorkloadPriorityClasses,
ClusterQueues, LocalQueues), so the renderer is tested without a cluster and the same
output can be written to files or applied by a client.

Resource groups: flavors that cover the same set of resources form one group (in spec
order). A ClusterQueue gets every group in which it names a quota or limit, with ``"0"`` for
resources it names none for, because Kueue requires each flavor of a group to list every
covered resource.

The controller's writes (aging patches, relaunch-race deletions, Events) and its reads of pods
are granted per team namespace by :func:`render_controller_rbac`, not cluster-wide
(configs/controller/rbac.yaml keeps only the reads that need cluster scope): the namespaces
setup creates are the only ones the controller may change anything in, or read a pod in (a
pod's spec holds its environment, secrets included).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue.api import NAMESPACE_NAME_LABEL
from sky_kueue.skypilot.setup_lane import RenderedLane, add_lanes
from sky_kueue.skypilot.setup_spec import QueueSpec, TeamSpec, TeamsSpec

KUEUE_API_VERSION = kueue_api.API_VERSION_V1BETA1
ZERO_QUANTITY = "0"
RBAC_API_VERSION = "rbac.authorization.k8s.io/v1"
#: The controller's ServiceAccount as configs/controller installs it (namespace, name).
CONTROLLER_SERVICE_ACCOUNT = ("sky-kueue-system", "sky-kueue-controller")
#: Name of the Role (and its RoleBinding) rendered in each team namespace.
CONTROLLER_TEAM_ROLE = "sky-kueue-controller"
#: What the controller does in a team namespace, and why (the calls are in
#: sky_kueue/controller/kube_actuator.py, kube_events.py and session.py):
#:   workloads patch   aging (spec.priority or the priority-boost annotation) and safe relaunch
#:                     (spec.active false/true on a held relaunch)
#:   workloads delete  the relaunch race: a finished Workload holding a relaunch's new pods
#:   events create     an Event on a Workload it acted on (PreemptionRecorded, Aged, ...)
#:   events patch      the same reason on the same Workload within 10 minutes: count + 1
#:   pods list, watch  SkyPilot's pods of the team (one watch per team namespace): the job
#:                     identity, Kueue's TerminationTarget, the gated pods of a relaunch
CONTROLLER_TEAM_RULES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (kueue_api.KUEUE_GROUP, "workloads", ("patch", "delete")),
    ("", "events", ("create", "patch")),
    ("", "pods", ("list", "watch")),
)


def team_names(spec: TeamsSpec, team: str) -> tuple[str, str, str]:
    """(namespace, LocalQueue, ClusterQueue) of a team, with the defaults applied."""
    settings = spec.teams[team]
    return (
        settings.namespace or team,
        settings.local_queue or f"{team}-lq",
        settings.cluster_queue or f"{team}-cq",
    )


def render_objects(spec: TeamsSpec) -> list[dict[str, Any]]:
    """Every Kueue object (and Namespace) of the setup, in apply order (with the relaunch lanes
    of ``spec.lane``, :mod:`sky_kueue.skypilot.setup_lane`).

    Raises:
        LaneSetupError: the lane cannot be carved as the spec asks.
    """
    objects, _ = render_objects_and_lanes(spec)
    return objects


def render_objects_and_lanes(spec: TeamsSpec) -> tuple[list[dict[str, Any]], tuple[RenderedLane, ...]]:
    """:func:`render_objects` and the lanes it carved (none without ``spec.lane``).

    Raises:
        LaneSetupError: the lane cannot be carved as the spec asks.
    """
    objects = _render_queues(spec)
    return add_lanes(spec, objects, {team: team_names(spec, team) for team in spec.teams})


def _render_queues(spec: TeamsSpec) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = []
    for team in spec.teams:
        namespace, _, _ = team_names(spec, team)
        labels = {NAMESPACE_NAME_LABEL: namespace, **spec.teams[team].namespace_labels}
        objects.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": labels}})
    for name, flavor in spec.flavors.items():
        flavor_spec: dict[str, Any] = {"nodeLabels": dict(flavor.node_labels)} if flavor.node_labels else {}
        objects.append(_kueue("ResourceFlavor", name, spec=flavor_spec))
    classes = [(n, c.value, c.description) for n, c in spec.priority_classes.items()]
    classes += [(s.name, s.value, s.description) for s in spec.ladder_steps()]
    for name, value, description in classes:
        wpc = _kueue("WorkloadPriorityClass", name)
        wpc["value"] = value
        if description:
            wpc["description"] = description
        objects.append(wpc)
    for team, settings in spec.teams.items():
        namespace, _, cq_name = team_names(spec, team)
        selector = settings.namespace_selector or spec.defaults.namespace_selector
        objects.append(_cluster_queue(spec, cq_name, settings, namespace if selector == "own" else None))
    for name, lender in spec.lenders.items():
        all_namespaces = spec.defaults.namespace_selector == "all"
        objects.append(_cluster_queue(spec, name, lender, None if all_namespaces else ""))
    for team in spec.teams:
        namespace, lq_name, cq_name = team_names(spec, team)
        objects.append(_kueue("LocalQueue", lq_name, namespace=namespace, spec={"clusterQueue": cq_name}))
    return objects


def render_controller_rbac(
    spec: TeamsSpec, service_account: tuple[str, str] = CONTROLLER_SERVICE_ACCOUNT
) -> list[dict[str, Any]]:
    """A Role and a RoleBinding to the controller's ServiceAccount in each team namespace
    (apply them after the Namespaces): the only places the controller may write, or read pods."""
    account_namespace, account_name = service_account
    labels = {"app.kubernetes.io/name": "sky-kueue", "app.kubernetes.io/component": "controller"}
    objects: list[dict[str, Any]] = []
    namespaces = dict.fromkeys(team_names(spec, team)[0] for team in spec.teams)  # teams may share one
    for namespace in namespaces:
        # Fresh dicts per object: YAML would otherwise write shared ones as anchors and aliases.
        rules = [{"apiGroups": [g], "resources": [r], "verbs": list(v)} for g, r, v in CONTROLLER_TEAM_RULES]
        objects.append(
            {
                "apiVersion": RBAC_API_VERSION,
                "kind": "Role",
                "metadata": {"name": CONTROLLER_TEAM_ROLE, "namespace": namespace, "labels": dict(labels)},
                "rules": rules,
            }
        )
        objects.append(
            {
                "apiVersion": RBAC_API_VERSION,
                "kind": "RoleBinding",
                "metadata": {"name": CONTROLLER_TEAM_ROLE, "namespace": namespace, "labels": dict(labels)},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": CONTROLLER_TEAM_ROLE},
                "subjects": [{"kind": "ServiceAccount", "name": account_name, "namespace": account_namespace}],
            }
        )
    return objects


def render_plugin_config(spec: TeamsSpec) -> dict[str, Any]:
    """A sky-kueue plugin config matching the rendered setup, with each team's users and
    workspaces as the spec names them (``sky-kueue setup`` refuses teams that name none), and
    for each lane team its ``lane``: the LocalQueue, k, and the lane's ClusterQueue and quota as
    rendered (what the recovery strategy's fit check and ``check-config --cluster`` read).

    Raises:
        LaneSetupError: the lane cannot be carved as the spec asks.
    """
    lanes = render_objects_and_lanes(spec)[1] if spec.lane is not None else ()
    values = spec.all_class_values()
    ladder_only = {s.name for s in spec.ladder_steps()}
    base_classes = sorted((n for n in values if n not in ladder_only), key=lambda n: values[n])
    teams: dict[str, Any] = {}
    for team, settings in spec.teams.items():
        namespace, lq_name, _ = team_names(spec, team)
        allowed = list(settings.priority_classes) or base_classes
        default = settings.default_priority_class or min(allowed, key=lambda n: values[n])
        members: dict[str, Any] = {"users": list(settings.users)}
        if settings.workspaces:
            members["workspaces"] = list(settings.workspaces)
        teams[team] = {
            **members,
            "namespace": namespace,
            "local_queue": lq_name,
            "priority_classes": {"allowed": allowed, "default": default},
        }
    for lane in lanes:
        assert spec.lane is not None
        for team in lane.teams:
            teams[team]["lane"] = {
                "local_queue": spec.lane.local_queue,
                "after_preemptions": spec.lane.after_preemptions,
                "cluster_queue": lane.cluster_queue,
                "quotas": lane.quota_strings(),
            }
    config: dict[str, Any] = {"version": 1}
    if spec.context:
        config["kubernetes"] = {"contexts": [spec.context]}
    config["priority_classes"] = dict(sorted(values.items(), key=lambda item: item[1], reverse=True))
    config["teams"] = teams
    if spec.aging is not None:
        ladder = [step if isinstance(step, str) else step.name for step in spec.aging.ladder]
        config["aging"] = {"enabled": True, "strategy": spec.aging.strategy, "ladder": ladder, "parameters": {}}
    return config


def _kueue(kind: str, name: str, namespace: str | None = None, spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    obj: dict[str, Any] = {"apiVersion": KUEUE_API_VERSION, "kind": kind, "metadata": metadata}
    if spec is not None:
        obj["spec"] = dict(spec)
    return obj


def _cluster_queue(
    spec: TeamsSpec, name: str, queue: QueueSpec | TeamSpec, own_namespace: str | None
) -> dict[str, Any]:
    """A ClusterQueue; ``own_namespace`` None selects every namespace, "" selects none."""
    defaults = spec.defaults
    if own_namespace is None:
        selector: dict[str, Any] | None = {}
    elif own_namespace:
        selector = {"matchLabels": {NAMESPACE_NAME_LABEL: own_namespace}}
    else:
        selector = None
    body: dict[str, Any] = {"cohort": spec.cohort}
    if selector is not None:
        body["namespaceSelector"] = selector
    body["queueingStrategy"] = queue.queueing_strategy or defaults.queueing_strategy
    body["flavorFungibility"] = dict(queue.flavor_fungibility or defaults.flavor_fungibility)
    body["preemption"] = dict(queue.preemption or defaults.preemption)
    body["resourceGroups"] = _resource_groups(spec, queue)
    return _kueue("ClusterQueue", name, spec=body)


def _resource_groups(spec: TeamsSpec, queue: QueueSpec) -> list[dict[str, Any]]:
    groups: list[tuple[tuple[str, ...], list[str]]] = []
    for flavor, flavor_spec in spec.flavors.items():
        for covered, flavors in groups:
            if set(covered) == set(flavor_spec.resources):
                flavors.append(flavor)
                break
        else:
            groups.append((flavor_spec.resources, [flavor]))
    named = set(queue.quotas) | set(queue.borrowing_limits) | set(queue.lending_limits)
    rendered: list[dict[str, Any]] = []
    for covered, flavors in groups:
        if not named & set(covered):
            continue
        flavor_entries = []
        for index, flavor in enumerate(flavors):
            resources = []
            for resource in covered:
                entry: dict[str, Any] = {"name": resource}
                nominal = _value_for(queue.quotas.get(resource), flavor, index)
                entry["nominalQuota"] = nominal if nominal is not None else ZERO_QUANTITY
                for key, source in (("borrowingLimit", queue.borrowing_limits), ("lendingLimit", queue.lending_limits)):
                    limit = _value_for(source.get(resource), flavor, index)
                    if limit is not None:
                        entry[key] = limit
                resources.append(entry)
            flavor_entries.append({"name": flavor, "resources": resources})
        rendered.append({"coveredResources": list(covered), "flavors": flavor_entries})
    return rendered


def _value_for(value: str | dict[str, str] | None, flavor: str, index: int) -> str | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value.get(flavor)
    return value if index == 0 else None

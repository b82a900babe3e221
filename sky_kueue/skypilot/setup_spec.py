"""The compact team spec (``teams.yaml``) that ``sky-kueue setup`` renders into Kueue objects.

Why a spec of its own: a Kueue setup for N teams is N Namespaces, N LocalQueues, N
ClusterQueues that must agree on flavors, resource groups and a cohort, plus the
WorkloadPriorityClasses of every team and of the aging ladder - hundreds of lines in which
a single mismatch (a resource missing from one flavor, a LocalQueue pointing at a typo)
makes Kueue reject or silently ignore work. The spec states each fact once; the renderer
(``setup_render``) derives the rest, and the Kueue model's validator checks the result.

Quantities are Kubernetes quantity strings (``"10"``, ``"500m"``, ``"64Gi"``). Preemption
and flavor-fungibility blocks are Kueue's own (camelCase) and passed through unchanged.
"""

from __future__ import annotations

import itertools
import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from sky_kueue.sim.lane import DEFAULT_LANE_AFTER_PREEMPTIONS, LANE_LOCAL_QUEUE, LaneSettings
from sky_kueue.skypilot.config import LANE_STRATEGY, DnsLabel, DnsSubdomain, ResourceName

_QUANTITY_RE = re.compile(r"^[+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|[munkMGTPE]i?|Ki|k)?$")


def _quantity(value: str) -> str:
    if not _QUANTITY_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '10', '500m', '64Gi')")
    return value


def _stringify(value: object) -> object:
    return str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


#: A Kubernetes quantity; YAML numbers are accepted and kept as their text.
Quantity = Annotated[str, BeforeValidator(_stringify), AfterValidator(_quantity)]

#: Per-resource quotas: a quantity (for the first flavor covering the resource) or a
#: mapping flavor -> quantity.
Quotas = dict[ResourceName, Quantity | dict[DnsSubdomain, Quantity]]

#: Kueue's defaults in the seed scenarios, used when a spec says nothing.
DEFAULT_FLAVOR_FUNGIBILITY: dict[str, Any] = {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
DEFAULT_PREEMPTION: dict[str, Any] = {
    "reclaimWithinCohort": "Any",
    "borrowWithinCohort": {"policy": "LowerPriority", "maxPriorityThreshold": 100},
    "withinClusterQueue": "Never",
}


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FlavorSpec(_Spec):
    """A ResourceFlavor and the resources it provides.

    Attributes:
        resources: the resources this flavor covers; flavors covering the same set form one
            resource group, in spec order.
        node_labels: ``spec.nodeLabels`` of the flavor.
    """

    resources: tuple[ResourceName, ...] = Field(min_length=1)
    node_labels: dict[str, str] = Field(default_factory=dict)


class PriorityClassSpec(_Spec):
    """A WorkloadPriorityClass.

    Attributes:
        value: its priority value.
        description: free text.
    """

    value: int
    description: str = ""


class LadderStep(_Spec):
    """A WorkloadPriorityClass created for the aging ladder."""

    name: DnsSubdomain
    value: int
    description: str = "sky-kueue aging step"


class AgingSpec(_Spec):
    """The aging ladder: class names from lowest to highest; new classes are defined inline.

    Attributes:
        ladder: each entry is an existing class name or a new class (name, value).
        strategy: recovery strategy written into the rendered plugin config.
    """

    ladder: tuple[DnsSubdomain | LadderStep, ...] = Field(min_length=2)
    strategy: str | None = "KUEUE_AGING"


class QueueDefaults(_Spec):
    """Settings every ClusterQueue gets unless it overrides them."""

    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "BestEffortFIFO"
    preemption: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_PREEMPTION))
    flavor_fungibility: dict[str, Any] = Field(default_factory=lambda: dict(DEFAULT_FLAVOR_FUNGIBILITY))
    namespace_selector: Literal["own", "all"] = "own"


class QueueSpec(_Spec):
    """Quota settings shared by team and lender ClusterQueues (None = the defaults)."""

    quotas: Quotas = Field(default_factory=dict)
    borrowing_limits: Quotas = Field(default_factory=dict)
    lending_limits: Quotas = Field(default_factory=dict)
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] | None = None
    preemption: dict[str, Any] | None = None
    flavor_fungibility: dict[str, Any] | None = None


class TeamSpec(QueueSpec):
    """One team: its namespace, queues and quotas.

    Attributes:
        namespace: default: the team name.
        namespace_labels: extra labels of the Namespace.
        local_queue: default ``<team>-lq``.
        cluster_queue: default ``<team>-cq``.
        namespace_selector: ``own`` selects only the team's namespace, ``all`` every one.
        users: SkyPilot users (names or ids) written into the rendered plugin config; no
            default: ``sky-kueue setup`` refuses a team without users or workspaces unless it
            is told to open it (``--open-teams``), because ``"*"`` lets anyone use the queue.
        workspaces: SkyPilot workspaces whose requests belong to the team.
        priority_classes: allowed classes for the plugin config (default: all non-ladder).
        default_priority_class: default class for the plugin config (default: the lowest).
    """

    namespace: DnsLabel | None = None
    namespace_labels: dict[str, str] = Field(default_factory=dict)
    local_queue: DnsSubdomain | None = None
    cluster_queue: DnsSubdomain | None = None
    namespace_selector: Literal["own", "all"] | None = None
    users: tuple[str, ...] = ()
    workspaces: tuple[str, ...] = ()
    priority_classes: tuple[DnsSubdomain, ...] = ()
    default_priority_class: DnsSubdomain | None = None


#: The lane's LocalQueue in each lane team's namespace, and the preemptions after which a
#: relaunch goes there: the simulator's defaults, so a measured lane is rendered as measured.
DEFAULT_LANE_LOCAL_QUEUE = LANE_LOCAL_QUEUE


class LaneSpec(_Spec):
    """The relaunch lane (issue 39): a ClusterQueue of nominal quota carved from the cohort that
    only relaunches of a job preempted ``after_preemptions`` times enter.

    The names are the simulator's (``sky-kueue simulate --lane-gpus/--lane-after/--lane-scope/
    --lane-donor``, :class:`sky_kueue.sim.lane.LaneSettings`), so the size a lane sweep
    recommends is written here as it was measured; ``setup_lane`` renders the objects.

    Attributes:
        scope: ``team``: one lane per team, carved from the team's own ClusterQueue (the team
            pays for its guarantee); ``cohort``: one lane shared by every lane team's
            relaunches, carved from ``donor``.
        gpus: the lane's GPUs (``gpu_resource``), carved from the donor's flavor that holds its
            GPU quota; every other resource the donor has moves in proportion (nominal x gpus /
            the donor's GPUs, rounded down), as the simulator carves it.
        quotas: instead of ``gpus``: the lane's nominal quota per resource (as ``teams.<t>.quotas``),
            carved from the donor's quota of the same flavor.
        after_preemptions: k; the bound the lane gives is "no job preempted more than k times"
            (docs/anti-starvation.md says where it does not hold).
        teams: the teams that get a lane (or share it); default every team.
        donor: ``cohort`` scope: the team or lender whose ClusterQueue gives the quota (default:
            the one with the most nominal GPUs, ties by ClusterQueue name, as the simulator).
        queueing_strategy: StrictFIFO (default) makes the lane first come, first served by
            (aged) priority: a later relaunch never overtakes the head that does not fit yet.
        reclaim_within_cohort: how a relaunch takes back the lane's lent quota: ``Any`` (default)
            from whoever borrows it, ``LowerPriority`` only from borrowers of lower priority
            (it waits for the others; ``sky-kueue simulate --lane-reclaim`` measures both).
        local_queue: the lane's LocalQueue name in each lane team's namespace.
        gpu_resource: the extended resource ``gpus`` counts.
    """

    scope: Literal["team", "cohort"] = "team"
    gpus: int | None = None
    quotas: Quotas = Field(default_factory=dict)
    after_preemptions: int = DEFAULT_LANE_AFTER_PREEMPTIONS
    teams: tuple[DnsLabel, ...] = ()
    donor: DnsSubdomain | None = None
    queueing_strategy: Literal["BestEffortFIFO", "StrictFIFO"] = "StrictFIFO"
    reclaim_within_cohort: Literal["Any", "LowerPriority"] = "Any"
    local_queue: DnsSubdomain = DEFAULT_LANE_LOCAL_QUEUE
    gpu_resource: ResourceName = "nvidia.com/gpu"

    @model_validator(mode="after")
    def _one_size(self) -> LaneSpec:
        # The simulator's own checks (gpus and after_preemptions at least 1), with its words.
        LaneSettings(gpus=1 if self.gpus is None else self.gpus, after_preemptions=self.after_preemptions)
        if (self.gpus is None) == (not self.quotas):
            raise ValueError("give the lane's size as gpus: N or as quotas: {resource: quantity}, not both")
        if self.donor is not None and self.scope != "cohort":
            raise ValueError("donor: only a cohort lane has a donor (a team lane is carved from its own team)")
        return self


class TeamsSpec(_Spec):
    """The whole ``teams.yaml``.

    Attributes:
        cohort: the cohort every ClusterQueue joins (so idle quota is shared).
        flavors: ResourceFlavors by name.
        priority_classes: WorkloadPriorityClasses by name.
        aging: the aging ladder (optional).
        defaults: settings for every ClusterQueue.
        lenders: ClusterQueues without a team that only contribute quota to the cohort.
        teams: the teams by name.
        context: Kubernetes context for the rendered plugin config.
        lane: the relaunch lane (optional; needs ``aging`` with the ``KUEUE_AGING`` strategy).
    """

    cohort: DnsSubdomain
    flavors: dict[DnsSubdomain, FlavorSpec] = Field(min_length=1)
    priority_classes: dict[DnsSubdomain, PriorityClassSpec] = Field(min_length=1)
    aging: AgingSpec | None = None
    defaults: QueueDefaults = QueueDefaults()
    lenders: dict[DnsSubdomain, QueueSpec] = Field(default_factory=dict)
    teams: dict[DnsLabel, TeamSpec] = Field(min_length=1)
    context: str | None = None
    lane: LaneSpec | None = None

    @model_validator(mode="after")
    def _check_references(self) -> TeamsSpec:
        groups: dict[frozenset[str], str] = {}
        for flavor, spec in self.flavors.items():
            key = frozenset(spec.resources)
            for other_key, other in groups.items():
                if other_key != key and other_key & key:
                    raise ValueError(f"flavors {other!r} and {flavor!r} overlap without covering the same resources")
            groups.setdefault(key, flavor)
        covered: dict[str, list[str]] = {}
        for flavor, spec in self.flavors.items():
            for resource in spec.resources:
                covered.setdefault(resource, []).append(flavor)
        queues: dict[str, QueueSpec] = {
            **{f"lenders.{name}": q for name, q in self.lenders.items()},
            **{f"teams.{name}": q for name, q in self.teams.items()},
        }
        if self.lane is not None:
            queues["lane"] = QueueSpec(quotas=self.lane.quotas)
        for queue_name, queue in queues.items():
            for field_name in ("quotas", "borrowing_limits", "lending_limits"):
                for resource, value in getattr(queue, field_name).items():
                    if resource not in covered:
                        raise ValueError(f"{queue_name}.{field_name}: no flavor provides {resource!r}")
                    if isinstance(value, dict):
                        for flavor in value:
                            if flavor not in covered[resource]:
                                raise ValueError(
                                    f"{queue_name}.{field_name}.{resource}: flavor {flavor!r} does not provide it"
                                )
        for team_name, team in self.teams.items():
            for cls in (
                *team.priority_classes,
                *([team.default_priority_class] if team.default_priority_class else []),
            ):
                if cls not in self.all_class_values():
                    raise ValueError(f"teams.{team_name}: unknown priority class {cls!r}")
        if self.aging is not None:
            values = []
            for step in self.aging.ladder:
                name = step if isinstance(step, str) else step.name
                if name not in self.all_class_values():
                    raise ValueError(f"aging.ladder: unknown priority class {name!r}")
                values.append(self.all_class_values()[name])
            if any(b <= a for a, b in itertools.pairwise(values)):
                raise ValueError(f"aging.ladder: values must strictly increase, got {values}")
        if self.lane is not None:
            self._check_lane(self.lane, covered)
        return self

    def _check_lane(self, lane: LaneSpec, covered: dict[str, list[str]]) -> None:
        if self.aging is None or self.aging.strategy != LANE_STRATEGY:
            raise ValueError(
                f"lane: needs aging with strategy {LANE_STRATEGY} (that recovery strategy moves a relaunch "
                "into the lane; without it no relaunch ever enters)"
            )
        for team in lane.teams:
            if team not in self.teams:
                raise ValueError(f"lane.teams: unknown team {team!r}; teams: {', '.join(self.teams)}")
        if lane.donor is not None and lane.donor not in self.teams and lane.donor not in self.lenders:
            known = ", ".join([*self.teams, *self.lenders])
            raise ValueError(f"lane.donor: {lane.donor!r} is neither a team nor a lender ({known})")
        if lane.gpus is not None and lane.gpu_resource not in covered:
            raise ValueError(f"lane.gpus: no flavor provides {lane.gpu_resource!r} (lane.gpu_resource)")

    def lane_teams(self) -> tuple[str, ...]:
        """The teams that get a relaunch lane (or share one); none without ``lane``."""
        if self.lane is None:
            return ()
        return self.lane.teams or tuple(self.teams)

    def teams_without_members(self) -> tuple[str, ...]:
        """Teams that name neither users nor workspaces: the rendered policy would map nobody to them."""
        return tuple(name for name, team in self.teams.items() if not team.users and not team.workspaces)

    def ladder_steps(self) -> tuple[LadderStep, ...]:
        """The classes the aging ladder defines itself."""
        if self.aging is None:
            return ()
        return tuple(step for step in self.aging.ladder if isinstance(step, LadderStep))

    def all_class_values(self) -> dict[str, int]:
        """Every WorkloadPriorityClass the setup creates, name -> value."""
        values = {name: spec.value for name, spec in self.priority_classes.items()}
        if self.aging is not None:
            values.update({step.name: step.value for step in self.aging.ladder if isinstance(step, LadderStep)})
        return values

"""The sky-kueue plugin configuration (``sky-kueue.yaml``): schema, loading and errors.

Why pydantic: SkyPilot already depends on it, and a typed, frozen model gives every other
module (policy, policy server, controller, setup) one validated object instead of ad-hoc
dict lookups. Why a second, hand-written pass: pydantic validates one field at a time, but
most mistakes an admin makes are cross-references (a default priority class that is not in
the allowed list, a team context that is not declared, two teams sharing a LocalQueue).
Those are checked after parsing so that each problem still points at the exact key.

Errors are one line: ``FILE:LINE: key.path: reason`` (see :class:`ConfigError`), because
the policy server and the CLI print them to users who can act on them without a traceback.

The ``aging`` section is deliberately thin: it carries what the controller needs (on/off,
the SkyPilot recovery-strategy name, the ladder of priority classes and free-form
parameters); the controller owns what the parameters mean.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
)

from sky_kueue.controller.predicted_burst import (
    DEFAULT_CLOUD_STARTUP_SECONDS,
    DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS,
    DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS,
    PredictedBurstSettings,
)
from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.kueue import quantity, schema
from sky_kueue.kueue.api import INT32_MAX
from sky_kueue.skypilot import pod_config_boundary

#: Environment variable naming the plugin config file for the in-process admin policy.
CONFIG_ENV_VAR = "SKY_KUEUE_CONFIG"

#: Where the in-process admin policy looks when :data:`CONFIG_ENV_VAR` is unset.
DEFAULT_CONFIG_PATH = "~/.sky/sky-kueue.yaml"

#: SkyPilot 0.14.1's own default for ``kubernetes.kueue.admission_timeout``
#: (``_QUEUE_ADMISSION_TIMEOUT_SECONDS``); we write it explicitly so the value is visible.
DEFAULT_ADMISSION_TIMEOUT_SECONDS = 24 * 3600

#: ``kubernetes.kueue.admission_timeout`` value meaning "wait in the queue forever".
ADMISSION_TIMEOUT_FOREVER = -1

#: The longest safe-relaunch hold (the rule's own default,
#: ``sky_kueue.controller.aging.safe_relaunch.DEFAULT_SAFE_MAX_HOLD_SECONDS``; not imported, so
#: reading the config never loads the Kueue model).
DEFAULT_SAFE_MAX_HOLD_SECONDS = 1_800

#: Kubernetes name limits (DNS-1123 label / subdomain).
DNS_LABEL_MAX_CHARS = 63
DNS_SUBDOMAIN_MAX_CHARS = 253

#: Admin-policy request names the policy may be told to label. ``validate`` is deliberately
#: absent (its mutations are discarded). ``jobs.launch_cluster`` is absent because it is not a
#: choice: the policy always checks it (``decision`` rule 2), since any client can produce it.
LABELABLE_REQUEST_NAMES = frozenset(
    {"launch", "exec", "jobs.launch", "serve.up", "serve.update", "serve.launch_replica", "jobs.pool_apply"}
)

#: Users entry that makes a team open to every user (and to requests without a user).
ANY_USER = "*"

#: Prefix of a users entry that names a SkyPilot user by id (``id:<user id>``): the user hash
#: SkyPilot's API server passes the policy (``sky/models.py`` ``User.id``), which is the
#: authenticated user's when the server authenticates (``prepare_request`` in
#: ``sky/server/requests/executor.py``) and which ``sky api info`` prints.
USER_ID_PREFIX = "id:"

#: ``policy.identify_users_by`` values: ``name`` matches users entries against the user name
#: (or id) SkyPilot passes; ``id`` only against the id (``id:<user id>`` entries).
IdentifyUsersBy = Literal["name", "id"]
IDENTIFY_BY_NAME: IdentifyUsersBy = "name"
IDENTIFY_BY_ID: IdentifyUsersBy = "id"

_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_RECOVERY_STRATEGY_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
_INFRA_RE = re.compile(r"^[a-z][a-z0-9]*(/[A-Za-z0-9_.-]+){0,2}$")
_KUBERNETES_CLOUDS = frozenset({"k8s", "kubernetes", "ssh"})
_RESOURCE_NAME_RE = re.compile(r"^([a-z0-9.-]+/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")
#: A SkyPilot user id: ``is_valid_user_hash`` in ``sky/utils/common_utils.py``, lowercased as
#: ``sky/models.py`` ``User`` stores it (8 hex digits for a client's hash, ``sa-...`` for a
#: service account).
_USER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")


def _dns_label(value: str) -> str:
    if len(value) > DNS_LABEL_MAX_CHARS or not _DNS_LABEL_RE.match(value):
        raise ValueError(
            f"{value!r} is not a valid Kubernetes name (lowercase letters, digits and '-', "
            f"at most {DNS_LABEL_MAX_CHARS} characters)"
        )
    return value


def _dns_subdomain(value: str) -> str:
    if len(value) > DNS_SUBDOMAIN_MAX_CHARS or not _DNS_SUBDOMAIN_RE.match(value):
        raise ValueError(f"{value!r} is not a valid Kubernetes object name (lowercase letters, digits, '-' and '.')")
    return value


def _recovery_strategy(value: str) -> str:
    if not _RECOVERY_STRATEGY_RE.match(value):
        raise ValueError(f"{value!r} is not a SkyPilot recovery strategy name (e.g. KUEUE_AGING)")
    return value


def _burst_infra(value: str) -> str:
    """A public cloud, or one named Kubernetes context (``k8s/<context>``): a cloud Kubernetes
    cluster or another Kueue cluster the team may relaunch on. A bare ``kubernetes`` would let
    SkyPilot pick any context, the team's own queue included, so the context is required."""
    cloud, _, context = value.partition("/")
    if cloud in _KUBERNETES_CLOUDS:
        if cloud == "ssh" or not context.strip():
            raise ValueError(f"{value!r}: a Kubernetes burst target names its context (e.g. 'k8s/my-gke-cluster')")
        return value
    if not _INFRA_RE.match(value):
        raise ValueError(f"{value!r} is not a SkyPilot infra string (e.g. 'aws', 'gcp/us-central1' or 'k8s/CONTEXT')")
    return value


def burst_context(infra: str) -> str | None:
    """The kubeconfig context a Kubernetes burst target names (``k8s/<context>``), else None."""
    cloud, _, context = infra.partition("/")
    return context if cloud in _KUBERNETES_CLOUDS and cloud != "ssh" and context else None


def _users_entry(value: str) -> str:
    if not value.strip() or value != value.strip():
        raise ValueError(f"{value!r} is not a user: give a SkyPilot user name, 'id:<user id>' or '*'")
    if value.startswith(USER_ID_PREFIX):
        user_id = value.removeprefix(USER_ID_PREFIX)
        if not _USER_ID_RE.match(user_id):
            raise ValueError(
                f"{value!r} does not name a SkyPilot user id (lowercase letters, digits and '-' after 'id:', "
                "e.g. 'id:ab12cd34'; `sky api info` prints yours)"
            )
    return value


def _pod_config_field(value: str) -> str:
    pod_config_boundary.parse_allowed(value)  # ValueError: one line naming the entry
    return value


def _resource_name(value: str) -> str:
    if not _RESOURCE_NAME_RE.match(value):
        raise ValueError(f"{value!r} is not a Kubernetes resource name (e.g. nvidia.com/gpu)")
    return value


def _lane_quantity(value: object) -> str:
    text = str(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
    if not isinstance(text, str):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. '8', '500m', '64Gi')")
    try:
        amount = quantity.parse_quantity(text)
    except quantity.QuantityError as exc:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. '8', '500m', '64Gi')") from exc
    if amount < 0:
        raise ValueError(f"{text!r}: a quota is never negative")
    return text


def _admission_timeout(value: int) -> int:
    if value != ADMISSION_TIMEOUT_FOREVER and value < 1:
        raise ValueError(f"must be a positive number of seconds or {ADMISSION_TIMEOUT_FOREVER} (forever)")
    return value


DnsLabel = Annotated[str, AfterValidator(_dns_label)]
DnsSubdomain = Annotated[str, AfterValidator(_dns_subdomain)]
RecoveryStrategy = Annotated[str, AfterValidator(_recovery_strategy)]
BurstInfra = Annotated[str, AfterValidator(_burst_infra)]
ResourceName = Annotated[str, AfterValidator(_resource_name)]
UsersEntry = Annotated[str, AfterValidator(_users_entry)]
PodConfigField = Annotated[str, AfterValidator(_pod_config_field)]
#: A non-negative Kubernetes quantity, kept as its text (compared as a Decimal).
LaneQuantity = Annotated[str, BeforeValidator(_lane_quantity)]
#: Highest price per GPU-hour accepted (a typo such as 30000 for 3.0000 is caught).
MAX_PRICE_PER_GPU_HOUR_USD = Decimal(10_000)
#: A price per GPU-hour in US dollars: a finite, non-negative decimal (0 for a free cluster).
GpuHourPrice = Annotated[Decimal, Field(ge=0, le=MAX_PRICE_PER_GPU_HOUR_USD, allow_inf_nan=False)]
#: Kubernetes' priorities (and Kueue's priority values) are 32-bit; counts of seconds and
#: GPUs are bounded the same way so no later arithmetic (timedelta, float) can overflow.
Int32 = schema.Int32
BoundedCount = schema.NonNegativeInt32
BoundedPositive = Annotated[int, Field(gt=0, le=INT32_MAX)]
AdmissionTimeoutSeconds = Annotated[int, Field(le=INT32_MAX), AfterValidator(_admission_timeout)]


class _Section(BaseModel):
    """Base of every section: unknown keys are errors (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class KubernetesSettings(_Section):
    """Which Kubernetes clusters sky-kueue manages.

    Attributes:
        contexts: kubeconfig context names of the Kueue-managed clusters. Empty means "any
            context" (e.g. in-cluster); tasks are then not pinned to a context.
        default_context: context for teams that name none; defaults to the only context.
        gpu_resource: extended resource that SkyPilot accelerators map to on the cluster.
        route_unpinned_tasks: treat tasks that name no cloud as Kubernetes tasks (and pin them
            to the team's context); otherwise such tasks pass through unlabeled.
    """

    contexts: tuple[str, ...] = ()
    default_context: str | None = None
    gpu_resource: ResourceName = "nvidia.com/gpu"
    route_unpinned_tasks: bool = True


class PrioritySelection(_Section):
    """The WorkloadPriorityClasses a team may request.

    Attributes:
        allowed: class names a task of this team may ask for (``resources.priority_class``).
        default: class used when the task asks for none; must be in ``allowed``.
    """

    allowed: tuple[DnsSubdomain, ...] = Field(min_length=1)
    default: DnsSubdomain


class TeamLimits(_Section):
    """Per-job limits, summed over all nodes of the task. ``None`` means unlimited.

    Attributes:
        max_gpus: most accelerators one job may request.
        max_cpus: most CPUs one job may request.
    """

    max_gpus: BoundedCount | None = None
    max_cpus: Decimal | None = Field(default=None, ge=0, le=2**63 - 1)


class BurstSettings(_Section):
    """Cloud burst: how long a job may wait in Kueue before SkyPilot tries the team's burst targets.

    Attributes:
        max_queue_wait_seconds: the longest acceptable wait for admission; becomes
            ``kubernetes.kueue.admission_timeout`` when the job is given a cloud fallback.
        clouds: SkyPilot infra strings tried, in order, after the Kubernetes context: public
            clouds, or ``k8s/<context>`` for a Kubernetes cluster outside the team's Kueue
            clusters (a cloud Kubernetes cluster, another on-prem cluster).
        opt_in: when true, only tasks labeled ``sky-kueue.io/burst: "true"`` burst; when
            false, every task of the team may burst unless labeled ``"false"``.
        price_per_gpu_hour_usd: what one GPU-hour costs on a burst target (an entry of
            ``clouds``), in US dollars; the controller's predicted burst spend
            (``sky_kueue_controller_burst_predicted_cost_usd_total``) is the job's GPUs x its
            expected run time x the price of the first target. A target without a price is
            counted as unpriced, never guessed.
        cloud_startup_seconds: burst decision to the job running on a target (a fresh node,
            SkyPilot's runtime, the image pull); the predicted-wait gate's start-up.
        predicted_wait_margin_seconds: a job due a burst by its preemptions bursts only when
            the predicted on-prem wait exceeds ``cloud_startup_seconds`` plus this
            (:mod:`sky_kueue.controller.predicted_burst`); 0 compares with the start-up alone.
        predicted_wait_gate: whether that gate applies at all. False switches it off for the
            team: a job preempted ``burst_after_preemptions`` times bursts on the count alone,
            in the controller and in the ``KUEUE_AGING`` strategy, as before the gate existed
            (for a team whose cloud start-up is short, or while the gate's predictions are
            distrusted); ``cloud_startup_seconds`` and ``predicted_wait_margin_seconds`` are
            then unused.
        predicted_wait_gate_max_stays: how many of a job's due preemptions (since its last
            successful run) the gate may answer "stay"; at the next one the job bursts whatever
            the prediction (reason ``predicted-wait-gate-max-stays``). Why: the gate compares
            the wait for any admission, so a job it keeps may be admitted into borrowed quota
            and reclaimed again; without a bound that repeats. ``null``: unbounded.
    """

    max_queue_wait_seconds: BoundedPositive
    clouds: tuple[BurstInfra, ...] = Field(min_length=1)
    opt_in: bool = False
    price_per_gpu_hour_usd: dict[str, GpuHourPrice] = Field(default_factory=dict)
    cloud_startup_seconds: BoundedPositive = int(DEFAULT_CLOUD_STARTUP_SECONDS)
    predicted_wait_margin_seconds: Annotated[int, Field(ge=0, le=INT32_MAX)] = int(
        DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS
    )
    predicted_wait_gate: bool = True
    predicted_wait_gate_max_stays: Annotated[int, Field(ge=0, le=INT32_MAX, strict=True)] | None = (
        DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS
    )

    def predicted_burst(self) -> PredictedBurstSettings:
        """The team's thresholds for :func:`sky_kueue.controller.predicted_burst.decide_predicted_burst`."""
        return PredictedBurstSettings(
            cloud_startup_seconds=float(self.cloud_startup_seconds),
            margin_seconds=float(self.predicted_wait_margin_seconds),
            max_stays=self.predicted_wait_gate_max_stays,
        )


class TeamClusterConfig(_Section):
    """One Kubernetes cluster a team may run on (an entry of ``teams.<team>.clusters``).

    Why per cluster: each cluster runs its own Kueue, so the team's namespace, LocalQueue and
    usable WorkloadPriorityClasses are facts of that cluster; by default they are the team's
    own (the same names everywhere, what ``sky-kueue setup`` renders on every cluster).

    Attributes:
        context: kubeconfig context of the cluster.
        namespace: the team's namespace there (default: the team's ``namespace``).
        local_queue: the team's LocalQueue there (default: the team's ``local_queue``).
        allowed_priority_classes: classes the team may use there (default: the team's allowed
            classes); a task whose class is not listed is not placed on this cluster.
    """

    context: str = Field(min_length=1)
    namespace: DnsLabel | None = None
    local_queue: DnsSubdomain | None = None
    allowed_priority_classes: tuple[DnsSubdomain, ...] | None = None


@dataclass(frozen=True)
class TeamCluster:
    """A team's queue on one cluster, with every default resolved.

    Attributes:
        context: kubeconfig context (None: the discovered default, e.g. the current context).
        namespace: the team's namespace on that cluster.
        local_queue: the team's LocalQueue on that cluster.
        allowed_priority_classes: classes the team may use on that cluster.
    """

    context: str | None
    namespace: str
    local_queue: str
    allowed_priority_classes: tuple[str, ...]


#: The recovery strategy that moves a relaunch into its lane (``controller/skypilot_plugin.py``
#: ``STRATEGY_NAME``; not imported: reading the config never imports SkyPilot).
LANE_STRATEGY = "KUEUE_AGING"


class LaneConfig(_Section):
    """The team's relaunch lane (``sky-kueue setup`` renders it from ``teams.yaml``'s ``lane``).

    After ``after_preemptions`` (k) preemptions of a job, counted in its history, the
    ``KUEUE_AGING`` recovery strategy sends its relaunch to ``local_queue`` in the team's
    namespace instead of the team's own queue; the lane ClusterQueue behind it admits within
    its nominal quota only, so no reclaim and no in-queue preemption takes the relaunch there
    (docs/anti-starvation.md, "The relaunch lane"). No task may name the lane's queue itself:
    the admin policy refuses it (``decision``, ``LANE_QUEUE``).

    Attributes:
        local_queue: the lane's LocalQueue in the team's namespace (on each of its clusters).
        after_preemptions: k.
        cluster_queue: the lane's ClusterQueue, as rendered (``check-config --cluster`` checks
            the LocalQueue points at it).
        quotas: the lane's nominal quota as rendered, ``{resource: {flavor: quantity}}``: a
            relaunch asking for more of a resource than any flavor has could never be admitted
            there, so it stays in the team's queue (a *misfit*); ``check-config --cluster``
            compares the cluster's ClusterQueue with it. Empty: every relaunch is sent.
    """

    local_queue: DnsSubdomain
    after_preemptions: BoundedPositive
    cluster_queue: DnsSubdomain | None = None
    quotas: dict[ResourceName, dict[DnsSubdomain, LaneQuantity]] = Field(default_factory=dict)

    def capacity(self) -> dict[str, int]:
        """The most of each resource one flavor of the lane holds (Kueue's integer amounts:
        CPU in millicores): what a relaunch must fit to be sent there."""
        return {
            resource: max(quantity.parse_amount(resource, value) for value in flavors.values())
            for resource, flavors in self.quotas.items()
            if flavors
        }


class TeamConfig(_Section):
    """One team: who belongs to it and where its work is queued.

    Attributes:
        users: SkyPilot users allowed to submit as this team: a user name, ``id:<user id>``
            (SkyPilot's user hash, what an API server with authentication vouches for; see
            ``policy.identify_users_by``), or ``"*"`` for everyone, including requests that
            carry no user (client-side policy).
        workspaces: SkyPilot workspaces whose requests belong to this team.
        namespace: Kubernetes namespace of the team's pods (holds its LocalQueue).
        local_queue: the team's Kueue LocalQueue in ``namespace``.
        context: Kubernetes context of the team's cluster (default: ``kubernetes.default_context``).
        clusters: several clusters the team may run on, each with its context (and optionally
            its own namespace, LocalQueue and allowed classes); the policy places each task on
            the one where Kueue is predicted to admit it soonest. Exclusive with ``context``.
        priority_classes: allowed and default WorkloadPriorityClasses.
        limits: per-job resource limits.
        admission_timeout_seconds: ``kubernetes.kueue.admission_timeout`` written for jobs
            that stay on Kubernetes only (``-1`` = wait forever).
        burst: cloud-burst settings; absent means the team never bursts.
        safe_after_preemptions: after this many preemptions of a job, the resubmission
            controller holds its relaunch (``spec.active: false``) until Kueue would admit it
            without borrowing (``sky_kueue.controller.aging.safe_relaunch``); absent: never held.
        safe_max_hold_seconds: the longest such hold; then the relaunch goes to Kueue as
            without the rule. A team with ``burst`` bursts instead when the predicted wait for
            nominal quota exceeds ``burst.max_queue_wait_seconds``.
        safe_hold_only_when_predicted: hold only when the model predicts nominal quota within
            the hold left (run times from the ``sky-kueue.io/expected-runtime-seconds``
            annotation); false: hold also when the wait is unknown.
        pod_config_allowed: the fields a task of this team may set in its own
            ``kubernetes.pod_config`` (dotted paths such as ``spec.tolerations``; ``*`` matches
            any key); anything else is rejected. Fields Kueue, SkyPilot or sky-kueue own
            (``pod_config_boundary.OWNED_FIELDS``, their label and annotation keys) are refused
            whatever the list says, and naming one here is a config error.
        lane: the team's relaunch lane (:class:`LaneConfig`); absent: relaunches stay in the
            team's queue.
    """

    users: tuple[UsersEntry, ...] = ()
    workspaces: tuple[str, ...] = ()
    namespace: DnsLabel
    local_queue: DnsSubdomain
    context: str | None = None
    clusters: tuple[TeamClusterConfig, ...] = ()
    priority_classes: PrioritySelection
    limits: TeamLimits = TeamLimits()
    admission_timeout_seconds: AdmissionTimeoutSeconds = DEFAULT_ADMISSION_TIMEOUT_SECONDS
    burst: BurstSettings | None = None
    safe_after_preemptions: BoundedPositive | None = None
    safe_max_hold_seconds: BoundedPositive = DEFAULT_SAFE_MAX_HOLD_SECONDS
    safe_hold_only_when_predicted: bool = True
    pod_config_allowed: tuple[PodConfigField, ...] = pod_config_boundary.DEFAULT_POD_CONFIG_ALLOWED
    lane: LaneConfig | None = None

    def allowed_pod_fields(self) -> tuple[pod_config_boundary.FieldPath, ...]:
        """``pod_config_allowed`` as field paths."""
        return tuple(pod_config_boundary.parse_allowed(entry) for entry in self.pod_config_allowed)


class AgingSettings(_Section):
    """Priority aging of preempted jobs; the controller owns the semantics.

    Attributes:
        enabled: turn aging on.
        strategy: SkyPilot job-recovery strategy the policy writes into
            ``resources.job_recovery.strategy`` of every labeled job (registered by the
            controller's SkyPilot plugin); ``None`` leaves ``job_recovery`` alone.
        ladder: WorkloadPriorityClasses from lowest to highest that a job climbs.
        parameters: the aging tunables (``sky_kueue.controller.aging.AgingSettings``
            declares and validates them; :func:`validate_config` reports a bad one).
    """

    enabled: bool = False
    strategy: RecoveryStrategy | None = None
    ladder: tuple[DnsSubdomain, ...] = ()
    parameters: dict[str, Any] = Field(default_factory=dict)


class PolicySettings(_Section):
    """How the admin policy behaves.

    Attributes:
        labeled_requests: admin-policy request names whose tasks get Kueue labels. Other
            requests pass through unchanged.
        identify_users_by: how ``teams.<team>.users`` entries match the user SkyPilot passes.
            ``name`` (default): by user name, or by id for ``id:`` entries; right only where
            SkyPilot's API server does not authenticate users, and there the name and id are
            whatever the client sends, so anyone can claim any name. ``id``: only ``id:<user
            id>`` entries (and ``"*"``) count, for an API server that authenticates users
            (basic auth, SSO, service-account tokens): the id is then the authenticated user's,
            while names are display names SkyPilot does not keep unique.
    """

    labeled_requests: tuple[str, ...] = ("launch", "jobs.launch")
    identify_users_by: IdentifyUsersBy = IDENTIFY_BY_NAME


class ClusterSettings(_Section):
    """Where the policy learns the cluster's Kueue state.

    Attributes:
        kubeconfig: a kubeconfig of the Kueue-managed clusters; the policy keeps a
            watch-based mirror of each cluster's Kueue objects and validates and predicts
            against the live state (falling back to ``manifests``, then to this config, when
            it is unreachable). When unset and ``discover`` is true, found as kubectl finds
            it: ``$KUBECONFIG`` (a list), else ``~/.kube/config``, else in-cluster credentials.
        discover: look for a kubeconfig as kubectl does when ``kubeconfig`` is unset.
        context: the kubeconfig context (default: the kubeconfig's current one).
        kueue_config: the cluster's Kueue scheduling mode, as for ``sky-kueue predict
            --kueue-config`` (``fairSharing``, ``admissionFairSharing ...``); classical when unset.
        manifests: Kueue manifest files (relative to this config file) that the policy
            validates against when no live cluster view is available.
    """

    kubeconfig: str | None = None
    discover: bool = True
    context: str | None = None
    kueue_config: str | None = None
    manifests: tuple[str, ...] = ()


class PluginConfig(_Section):
    """The whole ``sky-kueue.yaml``.

    Attributes:
        version: schema version (1).
        kubernetes: managed clusters.
        priority_classes: WorkloadPriorityClasses on the cluster, name -> value. Used when
            no live view is available and to order the aging ladder.
        teams: team name -> team settings.
        aging: priority aging (shared with the controller).
        policy: admin-policy behaviour.
        cluster: offline cluster description.
    """

    version: Literal[1] = 1
    kubernetes: KubernetesSettings = KubernetesSettings()
    priority_classes: dict[DnsSubdomain, Int32] = Field(default_factory=dict)
    teams: dict[DnsLabel, TeamConfig] = Field(min_length=1)
    aging: AgingSettings = AgingSettings()
    policy: PolicySettings = PolicySettings()
    cluster: ClusterSettings = ClusterSettings()

    def aging_ladder(self) -> list[tuple[str, int]]:
        """The aging ladder as (class name, value) pairs, lowest first.

        Raises:
            KeyError: a ladder class is not in ``priority_classes`` (cannot happen for a
                config that passed :func:`validate_config` with aging enabled).
        """
        return [(name, self.priority_classes[name]) for name in self.aging.ladder]

    def team_clusters(self, team: TeamConfig, discovered: tuple[str, ...] = ()) -> tuple[TeamCluster, ...]:
        """Every cluster the team may run on, in the order the admin listed them.

        Args:
            team: the team.
            discovered: contexts found outside this config (SkyPilot's
                ``kubernetes.allowed_contexts``), used only when neither the team nor
                ``kubernetes`` names a context.

        A team that names no context runs on the one context the config implies (its
        ``default_context``, or the only entry of ``contexts``), else on every entry of
        ``kubernetes.contexts``, else on every discovered context, else on the default one.

        Returns:
            One entry per cluster; a single entry with context None means "the default
            context" (as before several clusters existed).
        """
        allowed = tuple(team.priority_classes.allowed)
        if team.clusters:
            return tuple(
                TeamCluster(
                    context=c.context,
                    namespace=c.namespace or team.namespace,
                    local_queue=c.local_queue or team.local_queue,
                    allowed_priority_classes=c.allowed_priority_classes or allowed,
                )
                for c in team.clusters
            )
        context = self.context_for(team)
        pool = self.kubernetes.contexts or discovered
        if context is None and pool:
            return tuple(TeamCluster(ctx, team.namespace, team.local_queue, allowed) for ctx in pool)
        return (TeamCluster(context, team.namespace, team.local_queue, allowed),)

    def context_for(self, team: TeamConfig) -> str | None:
        """The Kubernetes context a team's tasks are pinned to, or None for "any"."""
        if team.context is not None:
            return team.context
        if self.kubernetes.default_context is not None:
            return self.kubernetes.default_context
        if len(self.kubernetes.contexts) == 1:
            return self.kubernetes.contexts[0]
        return None


class ConfigError(Exception):
    """A plugin config that cannot be used, located as precisely as possible.

    Attributes:
        source: the file (or "<memory>").
        key_path: dotted path of the offending key ("" for the whole file).
        reason: what is wrong and, where possible, what would be right.
        line: 1-based line of the key in the file, when known.
    """

    def __init__(self, source: str, key_path: str, reason: str, line: int | None = None) -> None:
        self.source = source
        self.key_path = key_path
        self.reason = reason
        self.line = line
        super().__init__(str(self))

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        key = f" {self.key_path}:" if self.key_path else ""
        return f"{where}:{key} {self.reason}"


def resolve_config_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where the plugin config is: the explicit path, else ``$SKY_KUEUE_CONFIG``, else the default."""
    chosen = explicit if explicit is not None else os.environ.get(CONFIG_ENV_VAR, DEFAULT_CONFIG_PATH)
    return Path(os.path.expanduser(os.fspath(chosen)))


def load_config(path: str | os.PathLike[str]) -> PluginConfig:
    """Read, validate and cross-check a plugin config file.

    Args:
        path: the YAML file.

    Returns:
        The validated config; ``cluster.manifests`` are made absolute (relative to the file).

    Raises:
        ConfigError: the file cannot be read, is not YAML, or fails validation.
    """
    source = os.fspath(path)
    try:
        text = files.read_text(source, "YAML config file")
    except InputError as exc:
        raise ConfigError(source, "", f"cannot read the config file: {exc.reason}") from None
    config = parse_config(text, source)
    base = Path(source).resolve().parent
    manifests = tuple(str((base / m).resolve()) for m in config.cluster.manifests)
    kubeconfig = config.cluster.kubeconfig
    if kubeconfig is not None:
        kubeconfig = str((base / os.path.expanduser(kubeconfig)).resolve())
    cluster = config.cluster.model_copy(update={"manifests": manifests, "kubeconfig": kubeconfig})
    return config.model_copy(update={"cluster": cluster})


def parse_config(text: str, source: str = "<memory>") -> PluginConfig:
    """Validate a plugin config given as YAML text.

    Args:
        text: the YAML document.
        source: name used in error messages.

    Returns:
        The validated config.

    Raises:
        ConfigError: the text is not YAML or fails validation.
    """
    try:
        data = yaml_reader.load_one(text, source)
    except InputError as exc:
        raise ConfigError(source, "", exc.problem, exc.line) from None
    if not isinstance(data, dict):
        raise ConfigError(source, "", "the config must be a YAML mapping with a 'teams' key")
    return validate_config(data, source, text)


def validate_config(data: dict[str, Any], source: str = "<memory>", text: str | None = None) -> PluginConfig:
    """Validate an already-parsed config mapping.

    Args:
        data: the mapping.
        source: name used in error messages.
        text: the YAML text ``data`` came from, used to report line numbers.

    Returns:
        The validated config.

    Raises:
        ConfigError: the first problem found (the message counts the others).
    """
    try:
        config = PluginConfig.model_validate(data)
    except ValidationError as exc:
        raise error_from_validation(exc, source, text) from None
    issues = reference_issues(config)
    if issues:
        path, reason = issues[0]
        if len(issues) > 1:
            reason += f" (and {len(issues) - 1} more problem{'s' if len(issues) > 2 else ''})"
        raise ConfigError(source, ".".join(path), reason, _line_of(text, path))
    return config


def error_from_validation(exc: ValidationError, source: str, text: str | None = None) -> ConfigError:
    """A one-line :class:`ConfigError` for the first problem of a pydantic validation error.

    Args:
        exc: the validation error.
        source: file name for the message.
        text: the YAML text, to find the line of the key.
    """
    errors = exc.errors(include_url=False)
    first = errors[0]
    path = tuple(str(p) for p in first["loc"] if p != "[key]")
    reason = _friendly_reason(first)
    if len(errors) > 1:
        reason += f" (and {len(errors) - 1} more problem{'s' if len(errors) > 2 else ''})"
    return ConfigError(source, ".".join(path), reason, _line_of(text, path))


def reference_issues(config: PluginConfig) -> list[tuple[tuple[str, ...], str]]:
    """Cross-reference problems of a schema-valid config, as (key path, reason) pairs."""
    issues: list[tuple[tuple[str, ...], str]] = []
    contexts = config.kubernetes.contexts
    catalog = config.priority_classes
    default_ctx = config.kubernetes.default_context
    if default_ctx is not None and contexts and default_ctx not in contexts:
        issues.append(
            (
                ("kubernetes", "default_context"),
                f"{default_ctx!r} is not in kubernetes.contexts {list(contexts)}",
            )
        )
    queue_owner: dict[tuple[str | None, str, str], str] = {}
    for name, team in config.teams.items():
        base = ("teams", name)
        if team.context is not None and contexts and team.context not in contexts:
            issues.append(((*base, "context"), f"{team.context!r} is not in kubernetes.contexts {list(contexts)}"))
        issues.extend(_cluster_issues(name, team, contexts))
        own = {c.context for c in config.team_clusters(team)} | set(contexts)
        for index, infra in enumerate(team.burst.clouds if team.burst else ()):
            context = burst_context(infra)
            if context is not None and context in own:
                issues.append(
                    (
                        (*base, "burst", "clouds", str(index)),
                        f"{infra!r} is one of the team's Kueue clusters; a burst target is a cluster outside them",
                    )
                )
        if team.burst is not None:
            for cloud in team.burst.price_per_gpu_hour_usd:
                if cloud not in team.burst.clouds:
                    issues.append(
                        (
                            (*base, "burst", "price_per_gpu_hour_usd", cloud),
                            f"{cloud!r} is not one of the team's burst.clouds {list(team.burst.clouds)}",
                        )
                    )
        selection = team.priority_classes
        if selection.default not in selection.allowed:
            issues.append(
                (
                    (*base, "priority_classes", "default"),
                    f"{selection.default!r} is not in the team's allowed classes {list(selection.allowed)}",
                )
            )
        if catalog:
            for index, cls in enumerate(selection.allowed):
                if cls not in catalog:
                    issues.append(
                        (
                            (*base, "priority_classes", "allowed", str(index)),
                            f"{cls!r} is not declared in priority_classes {sorted(catalog)}",
                        )
                    )
        for cluster in config.team_clusters(team):
            # A queue is a team's share of one cluster: the same namespace/queue on two
            # clusters is two queues; a team without a context shares every cluster.
            owner = next(
                (
                    other
                    for (ctx, ns, q), other in queue_owner.items()
                    if (ns, q) == (cluster.namespace, cluster.local_queue)
                    and other != name
                    and (ctx is None or cluster.context is None or ctx == cluster.context)
                ),
                None,
            )
            if owner is not None:
                where = f" on context {cluster.context!r}" if cluster.context else ""
                issues.append(
                    (
                        (*base, "local_queue"),
                        f"LocalQueue {cluster.namespace}/{cluster.local_queue}{where} already belongs to team "
                        f"{owner!r}; each team needs its own queue",
                    )
                )
                break
            queue_owner.setdefault((cluster.context, cluster.namespace, cluster.local_queue), name)
    if config.policy.identify_users_by == IDENTIFY_BY_ID:
        for name, team in config.teams.items():
            for index, entry in enumerate(team.users):
                if entry != ANY_USER and not entry.startswith(USER_ID_PREFIX):
                    issues.append(
                        (
                            ("teams", name, "users", str(index)),
                            f"{entry!r} is a user name, but policy.identify_users_by is 'id': name the user as "
                            "'id:<user id>' (`sky api info` prints it); names are not identities",
                        )
                    )
    for index, request_name in enumerate(config.policy.labeled_requests):
        if request_name not in LABELABLE_REQUEST_NAMES:
            issues.append(
                (
                    ("policy", "labeled_requests", str(index)),
                    f"{request_name!r} cannot be labeled; choose from {sorted(LABELABLE_REQUEST_NAMES)}",
                )
            )
    issues.extend(_aging_issues(config))
    issues.extend(_lane_issues(config))
    return issues


def _lane_issues(config: PluginConfig) -> list[tuple[tuple[str, ...], str]]:
    """A lane needs the strategy that moves relaunches into it, and a queue of its own."""
    issues: list[tuple[tuple[str, ...], str]] = []
    regular = {(c.namespace, c.local_queue): n for n, t in config.teams.items() for c in config.team_clusters(t)}
    for name, team in config.teams.items():
        lane = team.lane
        if lane is None:
            continue
        where = ("teams", name, "lane")
        if team.safe_after_preemptions is not None:
            issues.append(
                (
                    where,
                    "a team has a relaunch lane or safe_after_preemptions, not both: the hold would take a relaunch "
                    "out of its lane's first-come order, and the simulator measured neither with the other",
                )
            )
        if not config.aging.enabled or config.aging.strategy != LANE_STRATEGY:
            issues.append(
                (
                    where,
                    f"a relaunch lane needs aging.enabled: true and aging.strategy: {LANE_STRATEGY} (that recovery "
                    "strategy moves a preempted job's relaunch into the lane; without it none ever enters)",
                )
            )
        for cluster in config.team_clusters(team):
            owner = regular.get((cluster.namespace, lane.local_queue))
            if owner is not None:
                whose = "the team's own queue" if owner == name else f"team {owner!r}'s queue"
                issues.append(
                    (
                        (*where, "local_queue"),
                        f"LocalQueue {cluster.namespace}/{lane.local_queue} is {whose}; the lane needs a LocalQueue "
                        "of its own (sky-kueue setup names it 'relaunch')",
                    )
                )
                break
    return issues


def _cluster_issues(name: str, team: TeamConfig, contexts: tuple[str, ...]) -> list[tuple[tuple[str, ...], str]]:
    """Problems of ``teams.<name>.clusters``: context declared, listed once, classes allowed."""
    issues: list[tuple[tuple[str, ...], str]] = []
    base = ("teams", name, "clusters")
    if team.clusters and team.context is not None:
        issues.append(((*base,), "set either context or clusters, not both (clusters lists every context)"))
    seen: set[str] = set()
    for index, cluster in enumerate(team.clusters):
        where = (*base, str(index))
        if contexts and cluster.context not in contexts:
            issues.append(((*where, "context"), f"{cluster.context!r} is not in kubernetes.contexts {list(contexts)}"))
        if cluster.context in seen:
            issues.append(((*where, "context"), f"context {cluster.context!r} is listed twice for team {name!r}"))
        seen.add(cluster.context)
        for cls in cluster.allowed_priority_classes or ():
            if cls not in team.priority_classes.allowed:
                issues.append(
                    (
                        (*where, "allowed_priority_classes"),
                        f"{cls!r} is not among the team's allowed classes {list(team.priority_classes.allowed)}",
                    )
                )
    return issues


def _aging_issues(config: PluginConfig) -> list[tuple[tuple[str, ...], str]]:
    # The tunables are declared once, by the controller (a pydantic dataclass).
    from sky_kueue.controller.aging import AgingSettings as AgingTunables
    from sky_kueue.controller.aging import SettingsError

    aging = config.aging
    issues: list[tuple[tuple[str, ...], str]] = []
    ladder = [(name, config.priority_classes[name]) for name in aging.ladder if name in config.priority_classes]
    try:
        AgingTunables.from_plugin_section(aging.parameters, ladder, where="")
    except SettingsError as err:  # ".<key>: <what>" or ": <what>", below aging.parameters
        key, _, reason = str(err).partition(": ")
        issues.append((("aging", "parameters", *filter(None, key.split("."))), reason))
    if not aging.enabled:
        return issues
    if len(aging.ladder) < 2:
        issues.append((("aging", "ladder"), "an enabled aging ladder needs at least two priority classes"))
        return issues
    if len(set(aging.ladder)) != len(aging.ladder):
        issues.append((("aging", "ladder"), "the ladder lists a priority class twice"))
    catalog = config.priority_classes
    if not catalog:
        issues.append((("priority_classes",), "aging needs priority_classes to know the ladder's values"))
        return issues
    for index, cls in enumerate(aging.ladder):
        if cls not in catalog:
            issues.append(
                (
                    ("aging", "ladder", str(index)),
                    f"{cls!r} is not declared in priority_classes {sorted(catalog)}",
                )
            )
    values = [catalog[c] for c in aging.ladder if c in catalog]
    if len(values) == len(aging.ladder) and any(b <= a for a, b in itertools.pairwise(values)):
        issues.append((("aging", "ladder"), f"classes must be ordered by strictly increasing value, got {values}"))
    return issues


def _friendly_reason(error: Any) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (check the spelling)"
    if kind == "missing":
        return "required key is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ")


def _line_of(text: str | None, path: tuple[str, ...]) -> int | None:
    """1-based line of the deepest existing node on ``path`` in the YAML text, if any."""
    if text is None:
        return None
    try:
        node = yaml.compose(text)
    except yaml.YAMLError:
        return None
    line: int | None = None
    for part in path:
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if getattr(k, "value", None) == part), None)
            if match is None:
                break
            line = match[0].start_mark.line + 1
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and part.isdigit() and int(part) < len(node.value):
            node = node.value[int(part)]
            line = node.start_mark.line + 1
        else:
            break
    return line

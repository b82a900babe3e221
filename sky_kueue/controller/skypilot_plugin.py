"""The SkyPilot-level actuator: a SkyPilot 0.14.1 server plugin with the ``KUEUE_AGING``
recovery strategy and a ``KUEUE_PREEMPTED`` failure source.

Why in SkyPilot as well as in Kueue: the Kueue-level actuators raise a relaunched Workload
after Kueue created it, so a relaunch that finds free capacity may be admitted (and later
preempted again) at its old priority before the controller's patch lands. A recovery
strategy acts *before* the relaunch: it relabels the task so that every pod of the new group
carries the aged ``kueue.x-k8s.io/priority-class``, and Kueue creates the Workload with that
class's priority (SkyPilot 0.14.1 ``sky/jobs/recovery_strategy.py``). Kueue reads the label from the first
pod of a group, so it goes into ``kubernetes.pod_config`` for all of them; the jobs
controller's priority refresh (``_refresh_priority_from_persisted_dag``) copies only
``priority``/``priority_class`` and leaves the label alone.

The mechanism, as SkyPilot 0.14.1 provides it (``sky/server/plugins.py``):

* ``~/.sky/plugins.yaml`` (or ``$SKYPILOT_SERVER_PLUGINS_CONFIG``) names
  :class:`KueueAgingPlugin` (``configs/plugins.yaml``); SkyPilot's loader instantiates it
  with the ``parameters`` (``config``: the sky-kueue.yaml; ``state``: the controller's
  ``--state``, a file or ``kubernetes[:NAMESPACE]``, optional; ``kubeconfig`` and ``context``
  for a Kubernetes state) and calls :meth:`KueueAgingPlugin.install` in every process context: the
  API server validates strategy names against the registry after plugins load, and the jobs
  controller runs the strategy.
* ``install`` registers :class:`KueueAgingStrategyExecutor` in
  ``registry.JOBS_RECOVERY_STRATEGY_REGISTRY`` under ``KUEUE_AGING`` (the admin policy writes
  ``job_recovery: {strategy: KUEUE_AGING}``; ``aging.strategy`` in sky-kueue.yaml). It
  subclasses ``EAGER_NEXT_REGION`` (SkyPilot's default), so recovery itself is unchanged.
* In the jobs-controller context it registers ``ExternalFailureSource`` callbacks that
  report ``KUEUE_PREEMPTED`` with the preemptor for a cluster whose Workload was preempted;
  SkyPilot attaches them to the job's RECOVERING event (``jobs/controller.py``). Queries by
  cluster hash (SkyPilot's status refresh) get nothing, so the plugin never changes how
  SkyPilot judges a cluster's health.

**Bursting a relaunch** (``burst_after_preemptions`` in ``aging.parameters``): when the job
was preempted that often since its last successful run, or the controller already marked it
for a cloud burst (for a team with a ``burst:`` section, whose predicted-wait gate applies,
only the controller's mark counts: the controller asks the predictor when it sees the
preemption, before SkyPilot relaunches; ``burst.predicted_wait_gate: false`` switches the gate
off for the team, and the count bursts it again), the strategy drops the task's Kubernetes
candidates before the relaunch, so SkyPilot launches it on the team's burst targets (the
candidates the admin policy added from ``teams.<t>.burst``: public clouds, or a
``k8s/<context>`` outside the team's Kueue clusters, which only a burst may use). A task
with no such candidate (its team may not burst, or it opted out) relaunches unchanged.
Measured in the simulator (README, "Does aging end starvation?"): bursting at the first
preemption is what ends repeated preemption.

**The relaunch lane** (``teams.<t>.lane``, :mod:`sky_kueue.controller.lane_route`): once the
job's history counts ``lane.after_preemptions`` preemptions (the controller's history, across
every Workload and cluster of the job; without it the strategy's own recoveries), the strategy
queues the relaunch in the team's lane LocalQueue: it rewrites the ``kueue.x-k8s.io/queue-name``
pod label and SkyPilot's queue setting of every Kubernetes candidate whose request fits the
lane's quota (a candidate that does not fit keeps its team's queue). The relaunch creates new
pods, so Kueue creates a new Workload in the lane's queue; the admin policy never lets a task
name that queue itself.

What the aged class is: the aging policy (``aging.parameters`` of sky-kueue.yaml) applied to
the job's history in the controller's state, read-only (a SQLite file in WAL mode is safe
while the controller writes; JobHistory objects are read with get/list). Without a readable
state (the plugin runs where the state is not shared) the strategy counts its own recoveries
as preemptions of unknown origin, which is all 0.14.1 tells it. The highest class on the
ladder not above base + boost wins; no class above the job's own and nothing lowers it.
Any failure here is logged and the recovery proceeds unchanged: aging must never stand in
the way of a relaunch.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Protocol

from sky.jobs import recovery_strategy
from sky.server import plugins as sky_plugins
from sky.utils import registry as sky_registry
from sky.utils.plugin_extensions import ExternalFailureSource

from sky_kueue import __version__
from sky_kueue.controller import aging
from sky_kueue.controller.actuators import choose_priority_class, skypilot_config_overrides
from sky_kueue.controller.aging import AgingSettings, PriorityClassRung
from sky_kueue.controller.aging.band import BandPolicy
from sky_kueue.controller.burst import is_burst_target, relaunch_burst
from sky_kueue.controller.config_file import ConfigFileError, ControllerConfig, load_controller_config
from sky_kueue.controller.history import HistoryStore, JobHistory, PreemptionRecord, StoreError, TransitionCause
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.lane_route import Route, RouteKind, lane_config_overrides, route
from sky_kueue.controller.state_spec import StateKind, StateSpec, parse_state_spec, resolve_namespace
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import managed_job_key
from sky_kueue.mirror.preemption_message import parse_preemptor
from sky_kueue.skypilot.demand import DemandError, pod_requests
from sky_kueue.skypilot.labels import TEAM_LABEL

log = logging.getLogger(__name__)

#: The recovery strategy's name in ``job_recovery.strategy``.
STRATEGY_NAME = "KUEUE_AGING"
#: The failure code reported through ``ExternalFailureSource``.
FAILURE_MODE = "KUEUE_PREEMPTED"


def _labels_of(resources: Any) -> dict[str, Any]:
    overrides = getattr(resources, "cluster_config_overrides", None) or {}
    pod_config = (overrides.get("kubernetes") or {}).get("pod_config") or {}
    labels = (pod_config.get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, dict) else {}


def current_class(task: Any) -> str | None:
    """The ``kueue.x-k8s.io/priority-class`` the task's pods would carry, if any."""
    for resources in task.resources:
        value = _labels_of(resources).get(kueue_api.PRIORITY_CLASS_LABEL)
        if isinstance(value, str) and value:
            return value
    return None


def team_of(task: Any) -> str | None:
    """The ``sky-kueue.io/team`` the admin policy put on the task's pods, if any."""
    for resources in task.resources:
        value = _labels_of(resources).get(TEAM_LABEL)
        if isinstance(value, str) and value:
            return value
    return None


def _team_of(history: JobHistory) -> str | None:
    return None if history.identity is None else history.identity.team


def _queue_of(resources: Any) -> str | None:
    value = _labels_of(resources).get(kueue_api.QUEUE_NAME_LABEL)
    return value if isinstance(value, str) and value else None


def candidate_requests(resources: Any, num_nodes: int, gpu_resource: str) -> dict[str, int]:
    """What a Kubernetes candidate's Workload asks for in total (every node's pod), as the admin
    policy sizes it (:func:`sky_kueue.skypilot.demand.pod_requests`).

    Raises:
        DemandError: its cpus, memory or accelerators cannot be read.
    """
    per_pod = pod_requests(resources.to_yaml_config(), gpu_resource)
    return {resource: value * max(num_nodes, 1) for resource, value in per_pod.items()}


def _has_quota_queue(resources: Any) -> bool:
    overrides = getattr(resources, "cluster_config_overrides", None) or {}
    return bool(((overrides.get("kubernetes") or {}).get("quota") or {}).get("queue"))


def relabel(task: Any, rung: PriorityClassRung) -> None:
    """Puts ``rung``'s class on every pod of the task's next launch (all resource candidates)."""
    relabelled = [r.copy(_cluster_config_overrides=skypilot_config_overrides(rung)) for r in task.resources]
    task.set_resources(type(task.resources)(relabelled))


#: :attr:`Recovery.history_source` when the controller's history of the job was read.
CONTROLLER_HISTORY = "controller history"


@dataclass
class Recovery:
    """One recovery of one managed job, as the strategy sees it: the job's history is read
    once, on first use, for both the relabel and the burst decision.

    Without a readable controller state the history counts the strategy's own recoveries as
    preemptions of unknown origin, which is all SkyPilot 0.14.1 tells it.
    """

    source: AgingSource
    job_id: int | str
    #: Recoveries of this job seen by this executor, this one included.
    count: int
    #: The task's ``sky-kueue.io/team`` label: only a history of this team's job is read.
    team: str | None = None

    @functools.cached_property
    def at(self) -> float:
        return float(self.source.now())

    @functools.cached_property
    def _read(self) -> tuple[JobHistory, str]:
        history = self.source.history(self.job_id, self.team)
        if history is not None:
            return history, CONTROLLER_HISTORY
        history = JobHistory(managed_job_key(str(self.job_id)))
        for index in range(self.count):
            history = history.with_preemption(
                PreemptionRecord(EpisodeKey(f"recovery-{self.job_id}", index + 1), self.at, f"recovery {index + 1}")
            )
        return history, f"{self.count} recoveries counted by the strategy (no controller history)"

    @property
    def history(self) -> JobHistory:
        return self._read[0]

    @property
    def history_source(self) -> str:
        """Where :attr:`history` came from, for the log line."""
        return self._read[1]

    @property
    def recorded(self) -> bool:
        """Whether :attr:`history` is the controller's record of Kueue's preemptions (else the
        strategy's own count, in which every failed launch looks like a preemption)."""
        return self._read[1] == CONTROLLER_HISTORY


class AgingSource:
    """The settings and job histories the strategy and the failure source read."""

    def __init__(
        self,
        config_path: str | None,
        state_path: str | None,
        clock: Any = time.time,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        """
        Args:
            config_path: sky-kueue.yaml (None: ``$SKY_KUEUE_CONFIG`` or the default).
            state_path: the controller's ``--state``: ``sqlite:PATH`` or a bare path (None:
                ``$SKY_KUEUE_STATE`` or the default file), or ``kubernetes[:NAMESPACE]`` for
                the JobHistory objects of an in-cluster controller.
            kubeconfig, context: the cluster of a ``kubernetes`` state, found as kubectl
                finds it when None (``$KUBECONFIG``, ``~/.kube/config``, in-cluster).
        """
        self._config_path = config_path
        self._clock = clock
        self._config: ControllerConfig | None = None
        self._lock = threading.Lock()
        self._cleared: set[str] = set()
        self._kubeconfig = kubeconfig
        self._context = context
        self._kube_store: HistoryStore | None = None
        self._state: StateSpec | None
        try:
            self._state = parse_state_spec(state_path, option="state")
        except ValueError as err:
            log.warning("sky-kueue: plugin parameter %s; reading no controller history", err)
            self._state = None

    @contextlib.contextmanager
    def _store(self) -> Iterator[HistoryStore | None]:
        """The controller's history store, read-only (None: no state to read).

        A SQLite file is opened per use (WAL: safe while the controller writes); the
        Kubernetes store is connected once and kept.

        Raises:
            StoreError: the store cannot be read.
        """
        spec = self._state
        if spec is None:
            yield None
            return
        if spec.kind is StateKind.SQLITE:
            assert spec.path is not None
            if not spec.path.is_file():
                yield None
                return
            from sky_kueue.controller.sqlite_store import SqliteHistoryStore

            with SqliteHistoryStore(spec.path, read_only=True) as store:
                yield store
            return
        with self._lock:
            if self._kube_store is None:
                from sky_kueue.controller.kube_store import KubernetesHistoryStore
                from sky_kueue.mirror.connection import connect
                from sky_kueue.mirror.errors import KubeconfigError

                try:
                    connection = connect(self._kubeconfig, self._context)
                except KubeconfigError as err:
                    raise StoreError(f"state {spec}: {err}") from None
                self._kube_store = KubernetesHistoryStore(connection.api_client, resolve_namespace(spec))
            kube_store = self._kube_store
        yield kube_store

    def now(self) -> float:
        return float(self._clock())

    def config(self) -> ControllerConfig:
        """The validated sky-kueue.yaml (loaded once).

        Raises:
            ConfigFileError: the file is missing or invalid.
        """
        with self._lock:
            if self._config is None:
                from sky_kueue.skypilot.config import resolve_config_path

                self._config = load_controller_config(resolve_config_path(self._config_path))
            return self._config

    def history(self, job_id: int | str, team: str | None = None) -> JobHistory | None:
        """The controller's history of managed job ``job_id`` for ``team``; None without a
        readable state or without a history of that team's job.

        Why the team: the controller keys a job's history by its id for the first owner seen
        and gives a pod group of another owner claiming the same id a history of its own
        (``managed-job/<id>/<namespace>/<team>/<user>``, :mod:`sky_kueue.mirror.identity`). If
        the first claim was the forged one, ``managed-job/<id>`` is not this job's: with the
        task's ``sky-kueue.io/team`` label, the relaunch reads only a history of its own team.
        """
        key = managed_job_key(str(job_id))
        try:
            with self._store() as store:
                if store is None:
                    return None
                found = store.load(key)
                if team is None or found is None or _team_of(found) in (None, team):
                    return found
                for job in store.jobs():
                    if job.key.startswith(f"{key}/"):
                        other = store.load(job.key)
                        if other is not None and _team_of(other) == team:
                            return other
                log.warning(
                    "sky-kueue: the controller's history of managed job %s belongs to team %s, not %s; "
                    "relaunching without it",
                    job_id,
                    _team_of(found),
                    team,
                )
                return None
        except StoreError as err:
            log.warning("sky-kueue: cannot read the controller's state %s: %s", self._state, err)
            return None

    def aged_class(self, recovery: Recovery, task: Any) -> tuple[PriorityClassRung | None, str]:
        """The class the relaunch should carry, and why (None: leave the task as it is).

        Raises:
            ConfigFileError: the config is missing or invalid.
        """
        return self.aged_class_for(recovery, current_class(task))

    def aged_class_for(self, recovery: Recovery, label: str | None) -> tuple[PriorityClassRung | None, str]:
        """:meth:`aged_class` for a task whose pods carry the class ``label`` (the admin policy,
        which recomputes a relaunch's rung from the class the job was submitted with, uses this).

        Raises:
            ConfigFileError: the config is missing or invalid.
        """
        config = self.config()
        settings: AgingSettings = config.aging
        ladder = settings.priority_class_ladder
        if not config.enabled or not ladder:
            return None, "aging is disabled or has no ladder"
        policy = aging.get_policy(settings.policy)
        if isinstance(policy, BandPolicy):
            return None, f"policy {policy.name} keeps jobs inside their class (the controller sets band levels)"
        by_name = {r.name: r for r in ladder}
        history, source, now = recovery.history, recovery.history_source, recovery.at
        base = history.base_priority
        if base is None:
            known = config.priority_classes.get(label or "", ladder[0].value)
            base = by_name[label].value if label in by_name else known
            history = replace(history, base_priority=base)
        decision = policy.decide(history, settings, now)
        rung = choose_priority_class(ladder, base, decision.boost)
        current = by_name.get(label or "")
        if rung is None or rung.value <= base or (current is not None and current.value >= rung.value):
            return None, f"boost {decision.boost} from {source} reaches no higher class than {label or base}"
        return rung, f"boost {decision.boost} from {source}: {label or base} -> {rung.name} ({rung.value})"

    def lane_route(self, recovery: Recovery, team: str | None, requests: dict[str, int]) -> Route:
        """Where the relaunch of a candidate asking for ``requests`` goes: the team's lane or queue.

        Raises:
            ConfigFileError: the config is missing or invalid.
        """
        config = self.config()
        identity = recovery.history.identity
        owner = team or (None if identity is None else identity.team)
        return route(config.lanes.for_team(owner), recovery.history.preemption_count, requests)

    def burst_verdict(self, recovery: Recovery, team: str | None = None) -> tuple[bool, str]:
        """Whether the relaunch should go to a cloud, and why.

        Args:
            recovery: the recovery being prepared.
            team: the task's ``sky-kueue.io/team`` label (:func:`team_of`), which names the
                job's team when the controller's history does not.

        Raises:
            ConfigFileError: the config is missing or invalid.
        """
        config = self.config()
        if not config.enabled or config.aging.burst_after_preemptions is None:
            return False, "aging is disabled or burst_after_preemptions is not set"
        identity = recovery.history.identity
        # The job's team's predicted-wait gate: then only the controller's mark bursts it (the
        # strategy has no predictor). A team with the gate off (burst.predicted_wait_gate:
        # false) has none: the count bursts it. Without the controller's history the team is the
        # task's team label; without that too, any team's gate applies (unknown wait: stay; the
        # admission timeout still bursts).
        gate = config.burst_gates.for_namespace(None if identity is None else identity.namespace, team=team)
        return relaunch_burst(recovery.history, config.aging, recovery.at, source=recovery.history_source, gate=gate)

    def _active_preemptions(self, cluster_name: str) -> list[tuple[str, PreemptionRecord]]:
        """Preemptions of the cluster's job not followed by a readmission, not yet cleared."""
        on_cloud = _name_on_cloud(cluster_name)
        try:
            with self._store() as store:
                if store is None:
                    return []
                for job in store.jobs():
                    group = job.pod_group or ""
                    if group not in (cluster_name, on_cloud) and not group.startswith(f"{cluster_name}-"):
                        continue
                    history = store.load(job.key)
                    if history is None or not history.preemptions:
                        continue
                    last = max(history.preemptions, key=lambda p: p.at)
                    readmitted = any(
                        t.cause is TransitionCause.ADMITTED and t.at > last.at for t in history.transitions
                    )
                    if readmitted or last.key.token in self._cleared:
                        return []
                    return [(job.key, last)]
        except StoreError as err:
            log.warning("sky-kueue: cannot read the controller's state %s: %s", self._state, err)
        return []

    def get_failures(self, cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        """``ExternalFailureSource`` getter: the cluster's pending Kueue preemption, if any."""
        if not cluster_name:
            return []  # hash queries come from SkyPilot's status refresh: never influence it
        return [_failure(record, cluster_hash) for _, record in self._active_preemptions(cluster_name)]

    def clear_failures(self, cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        """``ExternalFailureSource`` clearer: forget the reported preemption (in this process)."""
        if not cluster_name:
            return []
        active = self._active_preemptions(cluster_name)
        with self._lock:
            self._cleared.update(record.key.token for _, record in active)
        return [_failure(record, cluster_hash) for _, record in active]


def _failure(record: PreemptionRecord, cluster_hash: str | None) -> dict[str, Any]:
    """One ``KUEUE_PREEMPTED`` failure, naming the preemptor as far as Kueue's message does."""
    preemptor = parse_preemptor(record.message)
    who = record.preemptor_uid or "an unknown workload"
    where = f" in {preemptor.path}" if preemptor is not None and preemptor.path else ""
    cls = "" if record.preemptor_priority is None else f", class priority {record.preemptor_priority}"
    return {
        "cluster_hash": cluster_hash,
        "failure_mode": FAILURE_MODE,
        "failure_reason": (
            f"Preempted by Kueue ({record.reason}): Workload {record.workload_name} made room for "
            f"Workload UID {who}{where}{cls}"
        ),
        "cleared_at": None,
    }


def _name_on_cloud(cluster_name: str) -> str | None:
    """SkyPilot's ``cluster_name_on_cloud`` for a cluster it knows (the Kueue pod-group name)."""
    try:
        from sky import global_user_state

        handle = global_user_state.get_handle_from_cluster_name(cluster_name)
    except (ImportError, RuntimeError, ValueError, OSError) as err:
        log.debug("sky-kueue: no SkyPilot record of cluster %s: %s", cluster_name, err)
        return None
    name = getattr(handle, "cluster_name_on_cloud", None)
    return name if isinstance(name, str) else None


def cloud_candidates(candidates: Sequence[Any], burst_contexts: frozenset[str] = frozenset()) -> list[Any]:
    """The resource candidates a burst may use: a named cloud other than Kubernetes (SSH node
    pools are Kubernetes to SkyPilot and stay out), or Kubernetes on one of ``burst_contexts``
    (SkyPilot's region of a Kubernetes candidate is its context).

    A candidate without a cloud is not one: SkyPilot's optimizer may place it on Kubernetes.
    """
    from sky import clouds

    def where(r: Any) -> tuple[str | None, str | None]:
        if r.cloud is None:
            return None, None
        if isinstance(r.cloud, clouds.Kubernetes):
            # SSH subclasses Kubernetes; only Kubernetes proper names a burst context.
            return ("kubernetes" if type(r.cloud) is clouds.Kubernetes else "ssh"), r.region
        return str(r.cloud).lower(), r.region

    return [r for r in candidates if _burst_target(*where(r), burst_contexts)]


def _burst_target(cloud: str | None, region: str | None, burst_contexts: frozenset[str]) -> bool:
    if cloud == "ssh":
        return False
    return is_burst_target(cloud, region, burst_contexts)


class KueueAgingStrategyExecutor(recovery_strategy.EagerFailoverStrategyExecutor):
    """``EAGER_NEXT_REGION`` that relabels the relaunch with the aged class, or bursts it to a cloud."""

    #: Set by :meth:`KueueAgingPlugin.install`; the executor is built by SkyPilot, not by us.
    source: ClassVar[AgingSource | None] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.recoveries = 0
        self._recovering = False

    def _cleanup_cluster(self) -> None:
        """SkyPilot's teardown between two attempts; outside :meth:`recover`, a launch retry.

        Why here: a job Kueue preempts before SkyPilot saw it RUNNING (while its pods set up) is
        not recovered: SkyPilot 0.14.1's launch loop tears the cluster down and launches again
        (``StrategyExecutor._launch`` in ``sky/jobs/recovery_strategy.py``, with
        ``max_retry=None`` for the first launch), and ``recover`` is never called. That retry is a
        relaunch too, so it gets the same relabel, lane and burst, but only from the controller's
        record of Kueue's preemptions (:attr:`Recovery.recorded`): the launch loop also retries
        failures that are no preemption (no capacity, a failed submission), which the
        strategy's own count could not tell apart.
        """
        super()._cleanup_cluster()
        if not self._recovering:
            self.prepare_relaunch(launch_retry=True)

    def prepare_relaunch(self, *, launch_retry: bool = False) -> None:
        """Relabels the coming relaunch, or sends it to the team's clouds; never raises.

        ``launch_retry``: SkyPilot is retrying the launch, not recovering (:meth:`_cleanup_cluster`);
        only the controller's history may then change the relaunch.
        """
        source = type(self).source
        if source is None:
            log.warning("sky-kueue: %s used without the plugin installed; relaunching unchanged", STRATEGY_NAME)
            return
        recovery = Recovery(source, self.job_id, self.recoveries, team_of(self.dag.tasks[0]))
        if launch_retry and not recovery.recorded:
            log.info(
                "sky-kueue: job %s: SkyPilot retries its launch; without the controller's history (%s) "
                "it relaunches unchanged",
                self.job_id,
                recovery.history_source,
            )
            return
        self.relabel_for_recovery(recovery)
        self.move_to_lane_for_recovery(recovery)
        self.burst_for_recovery(recovery)

    def relabel_for_recovery(self, recovery: Recovery) -> PriorityClassRung | None:
        """Relabels ``self.dag.tasks[0]`` for the coming relaunch; never raises."""
        task = self.dag.tasks[0]
        try:
            rung, why = recovery.source.aged_class(recovery, task)
        except ConfigFileError as err:
            log.warning("sky-kueue: not aging job %s: %s", self.job_id, err)
            return None
        if rung is None:
            log.info("sky-kueue: job %s relaunches unchanged: %s", self.job_id, why)
            return None
        relabel(task, rung)
        log.info("sky-kueue: job %s relaunches as %s: %s", self.job_id, rung.name, why)
        return rung

    def move_to_lane_for_recovery(self, recovery: Recovery) -> bool:
        """Queues the relaunch of ``self.dag.tasks[0]`` in its team's relaunch lane when the job's
        history says it is due (module docstring); returns whether any candidate moved; never raises.

        Only candidates carrying the policy's queue label (the Kubernetes ones) are considered,
        each on its own request: one that could never be admitted in the lane keeps its queue.
        """
        task = self.dag.tasks[0]
        team = team_of(task)
        moved: list[Any] = []
        routes: list[Route] = []
        try:
            gpu_resource = recovery.source.config().gpu_resource
            for resources in task.resources:
                if _queue_of(resources) is None:
                    moved.append(resources)
                    continue
                try:
                    requests = candidate_requests(resources, int(task.num_nodes or 1), gpu_resource)
                except DemandError as err:
                    log.warning("sky-kueue: job %s: cannot size a candidate for the lane (%s)", self.job_id, err)
                    moved.append(resources)
                    continue
                where = recovery.source.lane_route(recovery, team, requests)
                routes.append(where)
                if where.to_lane and where.lane is not None and _queue_of(resources) != where.lane.local_queue:
                    overrides = lane_config_overrides(where.lane.local_queue, quota_queue=_has_quota_queue(resources))
                    moved.append(resources.copy(_cluster_config_overrides=overrides))
                else:
                    moved.append(resources)
        except ConfigFileError as err:
            log.warning("sky-kueue: not moving job %s to a relaunch lane: %s", self.job_id, err)
            return False
        entered = [r for r in routes if r.to_lane]
        if not routes or routes[0].kind is RouteKind.NO_LANE:
            return False
        if not entered:
            log.info("sky-kueue: job %s relaunches in its team's queue: %s", self.job_id, routes[0].reason)
            return False
        task.set_resources(type(task.resources)(moved))
        lane = entered[0].lane
        assert lane is not None
        log.info(
            "sky-kueue: job %s relaunches in relaunch lane %s (ClusterQueue %s): %s (history: %s)",
            self.job_id,
            lane.local_queue,
            lane.cluster_queue or "?",
            entered[0].reason,
            recovery.history_source,
        )
        return True

    def burst_for_recovery(self, recovery: Recovery) -> bool:
        """Keeps only the cloud candidates of ``self.dag.tasks[0]`` when the job should burst.

        Returns whether the task was changed; never raises. Once changed, the job stays on
        the clouds for its later recoveries (the burst verdict is per job, as in the controller).
        """
        task = self.dag.tasks[0]
        try:
            burst, why = recovery.source.burst_verdict(recovery, team_of(task))
        except ConfigFileError as err:
            log.warning("sky-kueue: not bursting job %s: %s", self.job_id, err)
            return False
        if not burst:
            return False
        candidates = list(task.resources)
        clouds = cloud_candidates(candidates, recovery.source.config().burst_contexts)
        if not clouds:
            log.info(
                "sky-kueue: job %s should burst (%s) but has no cloud candidate; relaunching on Kubernetes",
                self.job_id,
                why,
            )
            return False
        if len(clouds) == len(candidates):
            return False
        task.set_resources(type(task.resources)(clouds))
        log.info(
            "sky-kueue: job %s relaunches on %s: %s",
            self.job_id,
            ", ".join(str(r.cloud) for r in clouds),
            why,
        )
        return True

    async def recover(self) -> float:
        self.recoveries += 1
        self._recovering = True
        try:
            await asyncio.to_thread(self.prepare_relaunch)
            result: float = await super().recover()
        finally:
            self._recovering = False
        return result


class FailureFunc(Protocol):
    """The shape of SkyPilot's ``GetClusterFailuresFunc``/``ClearClusterFailuresFunc``."""

    def __call__(self, cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]: ...


def chain_failure_sources(first: FailureFunc | None, second: FailureFunc) -> FailureFunc:
    """One ``ExternalFailureSource`` function that reports what both sources report.

    Why: SkyPilot 0.14.1 keeps a single registered source (``register`` replaces the previous
    one, ``sky/utils/plugin_extensions/external_failure_source.py``); a plugin that simply
    registered would silence another plugin's failures. A failing earlier source is logged and
    does not hide ours.
    """

    def both(cluster_hash: str | None = None, cluster_name: str | None = None) -> list[dict[str, Any]]:
        if first is None:
            return second(cluster_hash, cluster_name)
        try:
            earlier = list(first(cluster_hash, cluster_name) or [])
        except Exception as exc:  # noqa: BLE001 - another plugin's bug must not hide Kueue preemptions
            log.warning(
                "an earlier external failure source failed (%s: %s); reporting sky-kueue's only",
                type(exc).__name__,
                exc,
            )
            earlier = []
        return earlier + second(cluster_hash, cluster_name)

    return both


def register_failure_source(source: AgingSource) -> None:
    """Registers the ``KUEUE_PREEMPTED`` source, chained after any source already registered.

    Idempotent: installing the plugin twice in one process does not report a failure twice.
    """
    current_get = ExternalFailureSource._get_func
    current_clear = ExternalFailureSource._clear_func
    if getattr(current_get, _SKY_KUEUE_MARK, False):
        return
    get = chain_failure_sources(current_get, source.get_failures)
    clear = chain_failure_sources(current_clear, source.clear_failures)
    setattr(get, _SKY_KUEUE_MARK, True)
    ExternalFailureSource.register(get, clear)


#: Attribute set on the registered getter, so a second install sees it is already chained.
_SKY_KUEUE_MARK = "_sky_kueue_chained"


def register_strategy() -> None:
    """Registers ``KUEUE_AGING`` once per process (SkyPilot may load plugins twice)."""
    registry = sky_registry.JOBS_RECOVERY_STRATEGY_REGISTRY
    if STRATEGY_NAME.lower() not in registry:
        registry.type_register(name=STRATEGY_NAME)(KueueAgingStrategyExecutor)


class KueueAgingPlugin(sky_plugins.BasePlugin):
    """sky-kueue's SkyPilot server plugin (``configs/plugins.yaml``)."""

    load_contexts = sky_plugins.ALL_PLUGIN_CONTEXTS

    def __init__(
        self,
        config: str | None = None,
        state: str | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        self.source = AgingSource(
            os.path.expanduser(config) if config else None,
            state,
            kubeconfig=os.path.expanduser(kubeconfig) if kubeconfig else None,
            context=context,
        )

    @property
    def name(self) -> str:
        return "sky-kueue-aging"

    @property
    def version(self) -> str:
        return __version__

    def install(self, extension_context: sky_plugins.ExtensionContext) -> None:
        register_strategy()
        KueueAgingStrategyExecutor.source = self.source
        if extension_context.context is sky_plugins.PluginContext.CONTROLLER:
            register_failure_source(self.source)


__all__: Sequence[str] = (
    "FAILURE_MODE",
    "STRATEGY_NAME",
    "AgingSource",
    "KueueAgingPlugin",
    "KueueAgingStrategyExecutor",
    "Recovery",
    "chain_failure_sources",
    "cloud_candidates",
    "register_failure_source",
    "register_strategy",
)

"""The only place where the SkyPilot front door calls the Kueue model (``sky_kueue.kueue``).

Why one adapter: the model is pure and knows nothing about SkyPilot; the policy only needs
the few answers of :class:`~sky_kueue.skypilot.view.ClusterView`. Keeping every model call
here means a change in the model's API touches one file, and the policy keeps working
(with fewer checks) if the model cannot answer: each answer degrades to "unknown", never to
an exception that would reject a user's task.

The model is asked about a *state*: Kueue objects parsed by
``sky_kueue.kueue.parse.parse_documents`` from manifests (``cluster.manifests`` in the
plugin config, or a mirror snapshot). Predictions add a hypothetical Workload
(:func:`hypothetical_workload`) to a copy of that state and run
``sky_kueue.kueue.predictor.predict`` until it settles.

Wiring status: written against the model as it stands in this repository
(``parse_documents``, ``objects.ClusterState``, ``tree.build_tree`` /
``tree.potential_available``, ``scheduler.inactive_cluster_queues``, ``predictor.predict``
and its ``VerdictKind``). A live cluster feeds the same functions through
:func:`view_from_documents` once the mirror can hand out its objects as documents.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.kueue import api as kueue_api
from sky_kueue.kueue.api import NAMESPACE_NAME_LABEL
from sky_kueue.skypilot import background_logs, cluster_discovery, runtime_annotations, runtime_estimate
from sky_kueue.skypilot.config import PluginConfig
from sky_kueue.skypilot.config_view import ConfigClusterView
from sky_kueue.skypilot.demand import CPU, WorkloadDemand
from sky_kueue.skypilot.verdict import AdmissionOutcome, AdmissionVerdict
from sky_kueue.skypilot.view import (
    CapacityFacts,
    ClusterView,
    ContextHealth,
    ContextView,
    ContextViews,
    QueueFacts,
    SharedView,
    Shortfall,
)

logger = logging.getLogger(__name__)

#: Name of the hypothetical Workload used for predictions (never created on a cluster).
PROBE_WORKLOAD_NAME = "sky-kueue-probe"

#: Pod-set name SkyPilot pod groups get in our probe (one role: head and workers alike).
PROBE_POD_SET_NAME = "main"

#: Substring of Kueue's pending message when a request exceeds a ClusterQueue's potential
#: capacity (``flavorassigner``: "request > maximum capacity").
NEVER_FITS_MARKER = "maximum capacity"
#: QuotaReserved=False reasons that no amount of waiting changes (``flavorassigner``).
NEVER_FITS_REASONS = frozenset({"ExceedsMaxQuota", "NoMatchingFlavor"})


_WORKLOAD_API_VERSION = kueue_api.API_VERSION_V1BETA1
_WORKLOAD_PRIORITY_CLASS_SOURCE = kueue_api.WORKLOAD_PRIORITY_CLASS_SOURCE


class ModelUnavailable(RuntimeError):
    """The Kueue model cannot be used (not importable, or it rejected the documents)."""


class ManifestError(ValueError):
    """A Kueue manifest file that cannot be read; the message is one line."""


def load_manifests(paths: Iterable[str]) -> list[dict[str, Any]]:
    """Read every YAML document of the given files.

    Raises:
        ManifestError: a file cannot be read or is not YAML.
    """
    documents: list[dict[str, Any]] = []
    for path in paths:
        try:
            text = files.read_text(path, "YAML manifest")
        except InputError as exc:
            raise ManifestError(f"{path}: cannot read: {exc.reason}") from None
        try:
            loaded = yaml_reader.load_all(text, str(path))
        except InputError as exc:
            raise ManifestError(str(exc)) from None
        documents.extend(doc for doc in loaded if isinstance(doc, dict))
    return documents


def view_from_documents(documents: Sequence[Mapping[str, Any]], source: str) -> ModelClusterView:
    """A model-backed view over Kueue objects given as Kubernetes documents.

    Args:
        documents: Namespaces and Kueue objects (Workloads included, for predictions).
        source: where they come from, for messages.

    Raises:
        ModelUnavailable: the model cannot be imported.
        ManifestError: the model rejects the documents (an invalid Kueue object).
    """
    try:
        from sky_kueue.kueue import errors as model_errors
        from sky_kueue.kueue import parse as model_parse
    except ImportError as exc:
        raise ModelUnavailable(f"the Kueue model is not available ({exc})") from None
    try:
        state = model_parse.parse_documents(list(documents))
    except model_errors.ModelError as exc:
        raise ManifestError(f"{source}: {exc}") from None
    return ModelClusterView(state=state, source=source)


#: Seconds the policy waits for a new live mirror's first sync before falling back.
LIVE_SYNC_TIMEOUT_SECONDS = 10.0
#: After a failed connection, how long the live view answers from the offline view before
#: it tries to connect again (a policy started while the cluster was down connects later).
LIVE_RECONNECT_INTERVAL_SECONDS = 30.0
#: How long one snapshot of the mirror serves policy calls: the calls of one decision read
#: one state, and no decision sees a state older than this.
LIVE_STATE_MAX_AGE_SECONDS = 1.0
_live_mirrors: dict[tuple[str | None, str | None], Any] = {}
_live_lock = threading.Lock()


def _live_mirror(kubeconfig: str | None, context: str | None, wait_seconds: float) -> Any:
    """The process's mirror of (kubeconfig, context), started on first use.

    Raises:
        MirrorError: the cluster cannot be reached (or has no Kueue, or RBAC refuses).
    """
    from sky_kueue.mirror import Mirror

    key = (kubeconfig, context)
    background_logs.install()
    with _live_lock:
        mirror = _live_mirrors.get(key)
        if mirror is None:
            with background_logs.quiet():
                mirror = Mirror.connect(kubeconfig, context).start()
            _live_mirrors[key] = mirror
    if wait_seconds > 0 and not mirror.synced:
        from sky_kueue.mirror import MirrorError

        try:
            mirror.wait_synced(timeout_seconds=wait_seconds)
        except MirrorError as exc:
            logger.warning("sky-kueue: the live cluster is not synced yet (%s)", exc)
    return mirror


def _drop_live_mirror(kubeconfig: str | None, context: str | None, mirror: Any) -> None:
    """Stop ``mirror`` and forget it, so the next use connects afresh.

    Why: a mirror of a cluster that went away retries forever in its reflector threads; the
    live view instead retries one connection every :data:`LIVE_RECONNECT_INTERVAL_SECONDS`.
    """
    with _live_lock:
        if _live_mirrors.get((kubeconfig, context)) is mirror:
            del _live_mirrors[(kubeconfig, context)]
    mirror.stop()


class LiveClusterView:
    """The Kueue model over the live cluster as it is *now*, through the queue mirror.

    Why not one snapshot: the policy server and SkyPilot's API server live for weeks; a view
    taken at startup (or when the config file last changed) would keep accepting work for a
    LocalQueue deleted since, and one started while the cluster was down would never use it.
    Each answer reads the mirror's current state (one snapshot serves calls for
    :data:`LIVE_STATE_MAX_AGE_SECONDS`); while the mirror is not connected or not synced, the
    answers come from ``fallback`` and :attr:`source` says so; a failed connection is retried
    every :data:`LIVE_RECONNECT_INTERVAL_SECONDS`. The mirror's reflectors reconnect and
    relist on their own (``sky_kueue.mirror.reflector``).
    """

    def __init__(
        self,
        config: PluginConfig,
        fallback: ClusterView,
        clock: Callable[[], float] = time.monotonic,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
    ) -> None:
        self._settings = config.cluster
        self._kubeconfig = kubeconfig if kubeconfig is not None else config.cluster.kubeconfig
        self._context = context if context is not None else config.cluster.context
        self._fallback = fallback
        self._clock = clock
        self._lock = threading.Lock()
        self._mirror: Any = None
        self._next_attempt = 0.0
        self._errors_seen = 0
        #: The outage already reported (one warning per cluster per outage).
        self._down_reported = False
        self._snapshot: tuple[float, ContextView] | None = None
        self._label = f"the live cluster ({self._context or 'current context'})"
        #: When (``clock``) the view last reflected the cluster; first: when it was made.
        self._current_at = clock()

    @property
    def source(self) -> str:
        return self.status().view.source

    def status(self) -> ContextView:
        """This view with how current it is (for placement over several clusters)."""
        now = self._clock()
        with self._lock:
            if self._snapshot is not None and now - self._snapshot[0] < LIVE_STATE_MAX_AGE_SECONDS:
                return self._snapshot[1]
            current = self._refresh(now)
            self._snapshot = (now, current)
            if current.health is ContextHealth.READY:
                self._current_at = now
                if self._down_reported:
                    logger.info("sky-kueue: %s answers again", self._label)
                    self._down_reported = False
            return current

    def staleness_seconds(self) -> float:
        """Seconds since the view last reflected the cluster (0 while it does); reads nothing."""
        now = self._clock()
        with self._lock:
            snapshot = self._snapshot
            if snapshot is not None and snapshot[1].health is ContextHealth.READY:
                return 0.0
            return max(0.0, now - self._current_at)

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        return self.status().view.local_queue(namespace, name)

    def priority_classes(self) -> Mapping[str, int] | None:
        return self.status().view.priority_classes()

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        return self.status().view.capacity(queue, demand)

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        return self.status().view.predict(queue, demand, priority_class)

    def _refresh(self, now: float) -> ContextView:
        from sky_kueue.kueue import errors as model_errors
        from sky_kueue.kueue import parse as model_parse
        from sky_kueue.mirror import MirrorError

        settings = self._settings
        unreachable = ContextHealth.UNREACHABLE
        if self._mirror is None:
            if now < self._next_attempt:
                return ContextView(
                    self._offline("not connected; retrying"), unreachable, "cannot be reached (retrying)"
                )
            first = self._next_attempt == 0.0
            try:
                self._mirror = _live_mirror(
                    self._kubeconfig, self._context, LIVE_SYNC_TIMEOUT_SECONDS if first else 0.0
                )
            except MirrorError as exc:
                self._next_attempt = now + LIVE_RECONNECT_INTERVAL_SECONDS
                self._report_down(str(exc))
                return ContextView(self._offline("unreachable"), unreachable, f"cannot be reached: {exc}")
        if not self._mirror.synced:
            detail = f"its mirror did not sync within {LIVE_SYNC_TIMEOUT_SECONDS:.0f}s"
            return ContextView(self._offline("syncing"), ContextHealth.NOT_SYNCED, detail)
        if self._mirror.error_count > self._errors_seen:
            # The watches failed since we last looked: the copy may be the last words of a
            # cluster that is gone. One cheap request tells a dropped stream from a dead server.
            problem = _probe(self._mirror)
            if problem is not None:
                _drop_live_mirror(self._kubeconfig, self._context, self._mirror)
                self._mirror = None
                self._errors_seen = 0
                self._next_attempt = now + LIVE_RECONNECT_INTERVAL_SECONDS
                self._report_down(problem)
                return ContextView(self._offline("unreachable"), unreachable, f"cannot be reached: {problem}")
            self._errors_seen = self._mirror.error_count
        try:
            kueue_config = (
                model_parse.parse_header(f"# kueue-config: {settings.kueue_config}") if settings.kueue_config else None
            )
            state = _state_with_pod_runtimes(self._mirror, kueue_config)
        except model_errors.ModelError as exc:
            logger.warning("sky-kueue: the live cluster state is not usable (%s); using the offline view", exc)
            return ContextView(
                self._offline("state not usable"), ContextHealth.NOT_SYNCED, f"its state is not usable ({exc})"
            )
        return ContextView(ModelClusterView(state=state, source=self._label))

    def _report_down(self, problem: str) -> None:
        """One warning per outage (see :mod:`sky_kueue.skypilot.background_logs`); repeats at debug."""
        level = logging.DEBUG if self._down_reported else logging.WARNING
        self._down_reported = True
        logger.log(
            level,
            "sky-kueue: %s cannot be reached (%s); placing without it, retrying every %.0fs",
            self._label,
            problem,
            LIVE_RECONNECT_INTERVAL_SECONDS,
        )

    def _offline(self, why: str) -> ClusterView:
        return _Relabelled(self._fallback, f"{self._fallback.source} ({self._label} {why})")


def _state_with_pod_runtimes(mirror: Any, kueue_config: Any) -> Any:
    """The mirror's cluster state, each Workload given its pods' run-time annotations
    (:mod:`sky_kueue.skypilot.runtime_annotations`).

    Raises:
        ModelError: an object the model cannot read.
    """
    from sky_kueue.mirror import export
    from sky_kueue.mirror.kinds import KindName

    documents = runtime_annotations.with_pod_runtimes(mirror.documents(), mirror.store.items(KindName.POD))
    return export.cluster_state([dict(d) for d in documents], config=kueue_config, now=mirror.clock.now())


#: Seconds (connect, read) of the reachability probe of a mirror whose watches failed.
PROBE_TIMEOUT: tuple[int, int] = (2, 2)


def _probe(mirror: Any) -> str | None:
    """None if the mirror's API server answers ``/version``, else why not (one line)."""
    from kubernetes import client

    try:
        with background_logs.quiet():
            client.VersionApi(mirror.connection.api_client).get_code(_request_timeout=PROBE_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable now"
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"{mirror.connection.host}: {text[:120]}"
    return None


class LiveContextViews:
    """One :class:`LiveClusterView` per kubeconfig context, made on first use.

    Why per context: each cluster runs its own Kueue; the mirrors are shared per
    (kubeconfig, context) by the process (:func:`_live_mirror`), so a policy server and the
    launch CLI hold one watch set per cluster however many teams use it.

    A single-cluster plugin config (no team lists ``clusters``, at most one context in
    ``kubernetes.contexts``) keeps its meaning: its context is watched as ``cluster.context``
    (default: the kubeconfig's current one), whatever name SkyPilot knows the cluster by.
    In-cluster credentials reach only the cluster the process runs in, so every context
    maps to it.
    """

    def __init__(
        self,
        config: PluginConfig,
        kubeconfig: str | None,
        fallback: ClusterView,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._config = config
        self._kubeconfig = kubeconfig
        self._fallback = fallback
        self._clock = clock
        self._lock = threading.Lock()
        self._views: dict[str | None, LiveClusterView] = {}
        single = not any(team.clusters for team in config.teams.values()) and len(config.kubernetes.contexts) <= 1
        self._legacy_contexts = (
            {*config.kubernetes.contexts, config.kubernetes.default_context} - {None} if single else set()
        )
        self._in_cluster = kubeconfig is None

    def mirrored_context(self, context: str | None) -> str | None:
        """The kubeconfig context watched for ``context`` (None: the current one)."""
        if self._in_cluster:
            return None
        if context is None or context in self._legacy_contexts:
            return self._config.cluster.context
        return context

    def view(self, context: str | None) -> LiveClusterView:
        """The live view of ``context`` (None: the kubeconfig's current context)."""
        key = self.mirrored_context(context)
        with self._lock:
            view = self._views.get(key)
            if view is None:
                view = LiveClusterView(
                    self._config, self._fallback, self._clock, kubeconfig=self._kubeconfig, context=key
                )
                self._views[key] = view
        return view

    def lookup(self, context: str | None) -> ContextView:
        return self.view(context).status()

    def staleness(self) -> dict[str, float]:
        """:meth:`LiveClusterView.staleness_seconds` of every context used so far ("" : the current one)."""
        with self._lock:
            views = dict(self._views)
        return {key or "": view.staleness_seconds() for key, view in views.items()}

    def warm(self, contexts: Iterable[str | None]) -> None:
        """Connect to every context at once, so first syncs overlap instead of adding up."""
        views = list({id(v): v for v in (self.view(c) for c in contexts)}.values())
        if len(views) < 2:
            return
        threads = [threading.Thread(target=v.status, daemon=True) for v in views]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(LIVE_SYNC_TIMEOUT_SECONDS + WARM_SLACK_SECONDS)


#: Extra seconds :meth:`LiveContextViews.warm` allows beyond the sync timeout (connecting).
WARM_SLACK_SECONDS = 5.0


@dataclass(frozen=True)
class _Relabelled:
    """A view with another ``source`` (so messages say the live cluster was not used)."""

    inner: ClusterView
    source: str

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        return self.inner.local_queue(namespace, name)

    def priority_classes(self) -> Mapping[str, int] | None:
        return self.inner.priority_classes()

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        return self.inner.capacity(queue, demand)

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        return self.inner.predict(queue, demand, priority_class)


def close_live_mirrors() -> None:
    """Stop every live mirror this process opened (tests, shutdown)."""
    with _live_lock:
        mirrors = list(_live_mirrors.values())
        _live_mirrors.clear()
    for mirror in mirrors:
        mirror.stop()


def build_view(config: PluginConfig) -> ClusterView:
    """The best view the config allows: the live cluster (followed as it changes, falling
    back while it cannot be read), else the model over ``cluster.manifests``, else the
    plugin config alone.

    Raises:
        ManifestError: a manifest file cannot be read or holds an invalid Kueue object.
    """
    offline = _offline_view(config)
    if config.cluster.kubeconfig is not None:
        return LiveClusterView(config, offline)
    return offline


def build_views(
    config: PluginConfig,
    environ: Mapping[str, str] | None = None,
    exists: Callable[[str], bool] = os.path.exists,
) -> ContextViews:
    """A view per context: the live clusters found as kubectl finds them (falling back while
    one cannot be read), else one offline view (manifests, else the plugin config) for all.

    Args:
        config: the plugin config.
        environ: the environment (default: the process's).
        exists: file-existence check (tests).

    Raises:
        ManifestError: a manifest file cannot be read or holds an invalid Kueue object.
    """
    offline = _offline_view(config)
    found = None
    if config.cluster.kubeconfig is not None or config.cluster.discover:
        found = cluster_discovery.find_kubeconfig(
            config.cluster.kubeconfig, os.environ if environ is None else environ, exists
        )
    if found is None:
        return SharedView(offline)
    return LiveContextViews(config, found.path, offline)


def _offline_view(config: PluginConfig) -> ClusterView:
    if not config.cluster.manifests:
        return ConfigClusterView(config)
    documents = load_manifests(config.cluster.manifests)
    names = ", ".join(Path(p).name for p in config.cluster.manifests)
    try:
        return view_from_documents(documents, f"the Kueue manifests ({names})")
    except ModelUnavailable as exc:
        logger.warning("sky-kueue: %s; validating against the plugin config only", exc)
        return ConfigClusterView(config)


def hypothetical_workload(
    namespace: str,
    local_queue: str,
    priority_class: str,
    demand: WorkloadDemand,
    created_at: datetime,
    name: str = PROBE_WORKLOAD_NAME,
) -> dict[str, Any]:
    """The Workload Kueue would create for a SkyPilot pod group, as a v1beta1 document.

    SkyPilot's pods share one shape, so Kueue builds one pod set of ``num_nodes`` pods
    (SkyPilot 0.14.1 ``sky/templates/kubernetes-ray.yml.j2``); the Workload takes its priority from the
    ``kueue.x-k8s.io/priority-class`` pod label.
    """
    requests = {resource: _quantity(resource, amount) for resource, amount in sorted(demand.per_pod.items())}
    return {
        "apiVersion": _WORKLOAD_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}.{name}",
            "creationTimestamp": created_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": {
            "queueName": local_queue,
            "priorityClassName": priority_class,
            "priorityClassSource": _WORKLOAD_PRIORITY_CLASS_SOURCE,
            "podSets": [
                {
                    "name": PROBE_POD_SET_NAME,
                    "count": demand.pod_count,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "resources": {"requests": requests}}],
                        }
                    },
                }
            ],
        },
    }


@dataclass(frozen=True)
class ModelClusterView:
    """Answers from the Kueue model over one cluster state.

    Attributes:
        state: a ``sky_kueue.kueue.objects.ClusterState``.
        source: where the state comes from, for messages.
    """

    state: Any
    source: str

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        """See :class:`~sky_kueue.skypilot.view.ClusterView`."""
        from sky_kueue.kueue import scheduler as model_scheduler

        lq = self.state.local_queues.get(f"{namespace}/{name}")
        if lq is None:
            return None
        cq = self.state.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            return QueueFacts(namespace, name, lq.cluster_queue, cluster_queue_exists=False)
        ns = self.state.namespaces.get(namespace)
        ns_labels = dict(ns.labels) if ns is not None else {NAMESPACE_NAME_LABEL: namespace}
        selector = cq.namespace_selector
        return QueueFacts(
            namespace=namespace,
            name=name,
            cluster_queue=cq.name,
            cluster_queue_exists=True,
            cluster_queue_active=cq.name not in model_scheduler.inactive_cluster_queues(self.state),
            selects_namespace=selector is not None and selector.matches(ns_labels),
        )

    def priority_classes(self) -> Mapping[str, int] | None:
        """See :class:`~sky_kueue.skypilot.view.ClusterView`."""
        return {name: pc.value for name, pc in self.state.priority_classes.items()}

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        """Coverage by the ClusterQueue's resource groups and Kueue's ``Potential(CQ, fr)``.

        A resource group fits when one of its flavors can hold every requested resource of
        the group (Kueue assigns one flavor per group).
        """
        from sky_kueue.kueue import scheduler as model_scheduler
        from sky_kueue.kueue import tree as model_tree

        cq = self.state.cluster_queues.get(queue.cluster_queue or "")
        if cq is None:
            return CapacityFacts(known=False)
        shape = model_tree.build_tree(self.state, model_scheduler.inactive_cluster_queues(self.state))
        node = shape.cqs[cq.name]
        uncovered: list[str] = []
        exceeding: list[Shortfall] = []
        by_group: dict[int, list[str]] = {}
        for resource in demand.resources:
            group = cq.group_for(resource)
            if group is None:
                uncovered.append(resource)
            else:
                by_group.setdefault(cq.resource_groups.index(group), []).append(resource)
        for index, resources in by_group.items():
            group = cq.resource_groups[index]
            potentials = {
                flavor: {r: model_tree.potential_available(node, (flavor, r)) for r in resources}
                for flavor in group.flavor_names
            }
            if any(all(demand.total(r) <= p[r] for r in resources) for p in potentials.values()):
                continue
            for resource in resources:
                best = max(p[resource] for p in potentials.values())
                if demand.total(resource) > best:
                    exceeding.append(Shortfall(resource, demand.total(resource), best))
            if not any(s.resource in resources for s in exceeding):
                first = resources[0]
                exceeding.append(Shortfall(first, demand.total(first), max(p[first] for p in potentials.values())))
        return CapacityFacts(known=True, uncovered=tuple(uncovered), exceeding=tuple(exceeding))

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        """Add the task as the newest pending Workload and let the model settle the state."""
        from sky_kueue.kueue import errors as model_errors
        from sky_kueue.kueue import parse as model_parse
        from sky_kueue.kueue import predictor as model_predictor

        now = self.state.now or model_predictor.DEFAULT_NOW
        existing = [wl.creation_timestamp for wl in self.state.workloads.values()]
        created = max([now, *existing])
        doc = hypothetical_workload(queue.namespace, queue.name, priority_class, demand, created)
        state = copy.copy(self.state)
        state.workloads = dict(self.state.workloads)
        try:
            probe = model_parse.parse_workload(doc, state.priority_classes)
            state.workloads[probe.key] = probe
            prediction = model_predictor.predict(state)
        except model_errors.ModelError as exc:
            return AdmissionVerdict(AdmissionOutcome.UNKNOWN, f"the Kueue model could not predict: {exc}")
        verdict = prediction.verdicts.get(probe.key)
        if verdict is None:
            return AdmissionVerdict(AdmissionOutcome.UNKNOWN, "the Kueue model returned no verdict")
        translated = _translate(verdict, model_predictor.VerdictKind)
        if translated.preempts:
            victims = [state.workloads[key] for key in translated.preempts if key in state.workloads]
            if victims:
                translated = dataclasses.replace(translated, preempted_priority=max(wl.priority for wl in victims))
        if translated.outcome is AdmissionOutcome.WAIT:
            from sky_kueue.kueue import eta as model_eta

            estimate = model_eta.estimate(state, [probe.key], model_eta.runtime_from_annotation())[probe.key]
            if estimate.seconds is not None:
                translated = dataclasses.replace(
                    translated,
                    expected_wait_seconds=int(estimate.seconds),
                    expected_wait_basis=runtime_estimate.describe_basis(estimate.runtime_sources),
                )
        return translated


def _translate(verdict: Any, kinds: Any) -> AdmissionVerdict:
    victims = tuple(victim for victim, _reason in verdict.victims)
    if verdict.kind is kinds.ADMITTED:
        return AdmissionVerdict(AdmissionOutcome.ADMIT_NOW, f"admitted by ClusterQueue {verdict.cluster_queue}")
    if verdict.kind is kinds.ADMITTED_AFTER_PREEMPTION:
        return AdmissionVerdict(
            AdmissionOutcome.ADMIT_AFTER_PREEMPTION,
            f"admitted by ClusterQueue {verdict.cluster_queue} after preempting {', '.join(victims)}",
            preempts=victims,
        )
    message = verdict.message or verdict.reason or "waiting for quota"
    never = verdict.reason in NEVER_FITS_REASONS or NEVER_FITS_MARKER in message
    if verdict.kind is kinds.PENDING and never:
        return AdmissionVerdict(AdmissionOutcome.NEVER_FITS, message)
    return AdmissionVerdict(AdmissionOutcome.WAIT, message)


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == CPU else str(amount)

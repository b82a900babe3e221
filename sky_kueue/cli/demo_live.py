"""The live demo: two sandbox clusters, SkyPilot-like jobs, and the resubmission controller.

What runs, all on this machine with no cluster and no root: two sandbox API servers on
127.0.0.1 with their Kueue emulation (the exact scheduling model), merged in one kubeconfig
as kubectl merges them, each its own context:

* ``sky-kueue-sandbox``, the on-prem Kueue cluster: the seed setup (team-a and team-b sharing
  the ``team-ab`` cohort) and the real controller
  (:class:`sky_kueue.controller.manager.Controller`) talking to it over HTTP through the
  official client: leader election, watches, history in a temporary SQLite file,
  ``spec.priority`` (or ``priority-boost``) patches;
* ``sky-kueue-burst``, team-b's burst target, standing in for a cloud Kubernetes cluster or
  another on-prem Kueue cluster (the same seed setup, nothing else running on it).

The settings are ``configs/sky-kueue-demo.yaml`` with the changes each run names
(:mod:`sky_kueue.cli.demo_config`), loaded by the product's loaders.

What plays SkyPilot: each job is a pod group shaped as SkyPilot 0.14.1 shapes it (labels
``kueue.x-k8s.io/queue-name``, ``pod-group-name``, ``priority-class``, ``skypilot-cluster-name``;
annotations ``retriable-in-group: "false"``, ``skypilot-managed-job-id``), created through the
context of the cluster it runs on. A preempted job is relaunched the way SkyPilot's jobs
controller does it: after a recovery delay, and only once the old Workload is gone, a new pod
group with the same name (SkyPilot 0.14.1 ``sky/jobs/recovery_strategy.py``). Where it goes is
what the ``KUEUE_AGING`` recovery strategy decides just before the relaunch
(:mod:`sky_kueue.controller.skypilot_plugin`): :func:`sky_kueue.controller.burst.relaunch_burst`
on the job's history in the controller's state file, with the predicted-wait gate of the job's
team (``teams.<t>.burst``, :mod:`sky_kueue.controller.burst_gate`), and, when it says burst,
only the task's candidates that :func:`sky_kueue.controller.burst.is_burst_target` accepts (the
task's candidates are what the admin policy writes for a team that may burst: its Kueue
context, then its burst targets). With the gate, production's decision is the controller's: it
runs the Kueue model on its mirror when it records the preemption and marks the job for a burst
only when the predicted on-prem wait of its relaunch exceeds the cloud start-up plus the margin
(600 + 300 s by default); the demo's controller is built with the gates, as ``controller run``
builds it. The predictor needs run times: each job declares its own as a user does
(``sky-kueue.io/expected-runtime``), and its pods carry the annotations the admin policy writes
for it (:meth:`DemoJob.runtime_annotations`). How long a job really runs is its
``sandbox.sky-kueue.io/run-seconds`` annotation (the same figure): the emulation marks its pods
Succeeded and its Workload Finished that long after admission, on the cluster clock. A deleted
pod stays for its grace period (:data:`POD_GRACE_SECONDS`), as SkyPilot's pods do on a real
cluster, so the preempted Workload is still there when the controller judges its relaunch.

Time: the cluster clock (shared by both clusters) is stepped (``TICK_SECONDS`` of cluster
time per step) as fast as the controller keeps up; after every step the demo waits until the
controller has handled every change (its caches equal the on-prem cluster's objects and its
queue is empty). That makes the timeline deterministic and the whole demo take seconds.

Two scenarios:

* **seed**: team-b's dev job borrows cohort CPU; team-a's prod job (7 CPU, 2 GPUs, 120 s)
  reclaims it; the gate predicts a 120-s on-prem wait for the relaunch, under 900 s, so team-b
  is relaunched on-prem and finishes there.
* **starvation**: team-a queues a sweep of prod jobs (1,200 s of work, one at a time), then prod
  keeps returning; three runs (:data:`sky_kueue.cli.demo_config.RUNS`). Without aging each
  returning prod job preempts team-b again (a borrowing victim at priority <= 100 is fair game
  for ``borrowWithinCohort``), so the dev job never completes; the boost lifts its relaunch
  above that threshold; with ``rank`` and the burst settings the gate predicts the sweep's 1,200-s wait and the
  relaunch goes to the burst target.

The sandbox is imported inside :meth:`_Run.run` only: this is a sandbox demo, and production
code never imports the sandbox.
"""

from __future__ import annotations

import dataclasses
import datetime
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sky_kueue.cli import demo_config
from sky_kueue.cli.demo_config import BURST_CONTEXT, ONPREM_CONTEXT, RunSpec
from sky_kueue.cli.demo_cost import cost_json, explain_level
from sky_kueue.controller.burst import is_burst_target, relaunch_burst
from sky_kueue.controller.burst_cost import BurstPricing
from sky_kueue.controller.config_file import ControllerConfig
from sky_kueue.controller.detection import DetectionKind
from sky_kueue.controller.engine import FactKind
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind, outcome_applied
from sky_kueue.controller.history import JobHistory
from sky_kueue.controller.metric_teams import load_metric_teams
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import managed_job_key
from sky_kueue.mirror.kinds import SKYPILOT_POD_GROUP_SELECTOR
from sky_kueue.skypilot import labels
from sky_kueue.skypilot.runtime_estimate import estimate_runtime
from sky_kueue.skypilot.task_yaml import parse_infra

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from sky_kueue.controller.manager import Controller
    from sky_kueue.sandbox.sandbox import Sandbox

#: Cluster seconds per emulation step.
TICK_SECONDS = 10
#: SkyPilot notices a preemption and relaunches after this long (its status poll is ~15 s),
#: and not before the preempted pods are gone (:data:`POD_GRACE_SECONDS`).
RELAUNCH_DELAY_SECONDS = 20
#: A deleted pod of the demo's jobs stays this long (cluster seconds): SkyPilot's pods ignore
#: SIGTERM, so the kubelet kills them at the end of Kubernetes' default grace period. Until
#: then the preempted Workload stays too, as on a real cluster, and the controller's gate can
#: project its relaunch (the sandbox alone removes a deleted pod at once).
POD_GRACE_SECONDS = 30
#: The finalizer standing for the kubelet's grace period (the demo removes it when it is over).
GRACE_FINALIZER = "sandbox.sky-kueue.io/grace-period"
#: Emulation steps per tick at most (a preemption and the preemptor's admission take two).
MAX_STEPS_PER_TICK = 4
#: Real seconds to wait for the controller to catch up after a step.
SETTLE_TIMEOUT_SECONDS = 30.0
#: SkyPilot's 8-hex user hash in ``cluster_name_on_cloud``.
USER_HASH = "fcd1e5cf"
#: Where the demo's cluster clock starts.
EPOCH = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
#: How long a run of the starvation scenario lasts (cluster seconds).
STARVATION_HORIZON_SECONDS = 2_400
#: The starvation scenario's dev job: how long it must run uninterrupted to finish.
DEV_RUN_SECONDS = 600
#: Each prod job's run (7 CPU + 2 GPUs: team-a's 2 GPUs run one prod job at a time).
PROD_RUN_SECONDS = 300
#: team-a's sweep: this many prod jobs queued at once, at :data:`PROD_SWEEP_AT_SECONDS`.
#: Four of 300 s keep the cohort's CPU busy for 1,200 s, which the predictor sees queued
#: when the dev job is preempted: above the gate's 600 s start-up + 300 s margin.
PROD_SWEEP_SIZE = 4
PROD_SWEEP_AT_SECONDS = 60
#: Prod keeps returning after the sweep: one more job at each of these times.
PROD_RETURNS_AT_SECONDS = (1_500, 1_980)
#: The seed scenario ends when every job finished, or at this time.
SEED_HORIZON_SECONDS = 900
#: The dev job's managed-job id in both scenarios.
DEV_JOB_ID = "1"

WORKLOADS = f"workloads.{kueue_api.KUEUE_GROUP}"
#: How the controller's reconcile notes start the predicted-wait gate's verdict that keeps a job
#: in Kueue (:meth:`sky_kueue.controller.engine.AgingEngine._burst`).
GATE_NOTE = "burst gate: "


class TimelineKind(str, Enum):
    """What a line of the demo's timeline says happened."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"
    PREEMPTED = "preempted"
    RESUBMITTED = "resubmitted"
    AGED = "aged"
    #: The controller's predicted-wait gate kept a job due a burst in Kueue.
    KEPT = "kept"
    BURST = "burst"
    FINISHED = "finished"


EVENT_TYPES = tuple(kind.value for kind in TimelineKind)


@dataclass(frozen=True)
class DemoJob:
    """A SkyPilot managed job as the demo submits it."""

    job_id: str
    task: str
    team: str
    priority_class: str
    cpu: str
    run_seconds: int
    submit_at: int
    gpus: str | None = None

    @property
    def expected_runtime(self) -> str:
        """The run time the user declares on the task (``sky-kueue.io/expected-runtime``): the
        demo's jobs run exactly as long as declared."""
        return f"{self.run_seconds}s"

    def runtime_annotations(self) -> dict[str, str]:
        """What the admin policy writes on the task's pods for :attr:`expected_runtime`
        (:func:`sky_kueue.skypilot.runtime_estimate.estimate_runtime`, as the policy calls it):
        the run times the controller's predictor reads."""
        estimate = estimate_runtime([self.expected_runtime], self.task, [self.namespace], [])
        return {
            labels.RUNTIME_SECONDS_ANNOTATION: str(estimate.seconds),
            labels.RUNTIME_SOURCE_ANNOTATION: estimate.source,
        }

    @property
    def namespace(self) -> str:
        return self.team

    @property
    def queue(self) -> str:
        return f"{self.team}-lq"

    @property
    def group(self) -> str:
        """SkyPilot's ``cluster_name_on_cloud``: ``<task>-<job id>-<user hash>``."""
        return f"{self.task}-{self.job_id}-{USER_HASH}"

    @property
    def workload(self) -> str:
        return f"{self.namespace}/{self.group}"

    @property
    def key(self) -> str:
        return managed_job_key(self.job_id)

    def pod(self) -> dict[str, Any]:
        """The head pod of the group, as SkyPilot 0.14.1 would create it."""
        requests = {"cpu": self.cpu}
        limits: dict[str, str] = {}
        if self.gpus:
            requests["nvidia.com/gpu"] = self.gpus
            limits["nvidia.com/gpu"] = self.gpus
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{self.group}-head",
                "namespace": self.namespace,
                "finalizers": [GRACE_FINALIZER],
                "labels": {
                    "parent": "skypilot",
                    "skypilot-cluster-name": self.group,
                    "skypilot-user": "demo",
                    kueue_api.QUEUE_NAME_LABEL: self.queue,
                    kueue_api.POD_GROUP_NAME_KEY: self.group,
                    kueue_api.PRIORITY_CLASS_LABEL: self.priority_class,
                },
                "annotations": {
                    kueue_api.POD_GROUP_TOTAL_COUNT_ANNOTATION: "1",
                    kueue_api.RETRIABLE_IN_GROUP_ANNOTATION: "false",
                    "skypilot-managed-job-id": self.job_id,
                    "skypilot-managed-job-name": self.task,
                    "sandbox.sky-kueue.io/run-seconds": str(self.run_seconds),
                    **self.runtime_annotations(),
                },
            },
            "spec": {
                "terminationGracePeriodSeconds": POD_GRACE_SECONDS,
                "containers": [
                    {
                        "name": "ray-node",
                        "image": "rayproject/ray",
                        "resources": {"requests": requests, "limits": limits},
                    }
                ],
            },
        }


def seed_jobs() -> list[DemoJob]:
    """team-b's dev job borrows 5 cohort CPUs; team-a's prod job (7 CPUs, 2 GPUs) arrives a minute later."""
    return [
        DemoJob(DEV_JOB_ID, "dev", "team-b", "dev-priority", "5", run_seconds=300, submit_at=0),
        DemoJob("2", "train", "team-a", "prod-priority", "7", run_seconds=120, submit_at=60, gpus="2"),
    ]


def starvation_jobs() -> list[DemoJob]:
    """team-b's dev job needs 600 s; team-a queues a sweep of prod jobs (300 s each, one at a
    time), then prod keeps returning (:data:`PROD_RETURNS_AT_SECONDS`)."""
    jobs = [DemoJob(DEV_JOB_ID, "dev", "team-b", "dev-priority", "5", run_seconds=DEV_RUN_SECONDS, submit_at=0)]
    times = (PROD_SWEEP_AT_SECONDS,) * PROD_SWEEP_SIZE + PROD_RETURNS_AT_SECONDS
    for index, at in enumerate(times):
        jobs.append(DemoJob(str(index + 2), "train", "team-a", "prod-priority", "7", PROD_RUN_SECONDS, at, gpus="2"))
    return jobs


def starvation_scenario() -> str:
    """The starvation scenario in one sentence (the summary table's title)."""
    returns = " and ".join(f"t={at}" for at in PROD_RETURNS_AT_SECONDS)
    return (
        f"team-b's dev job needs {DEV_RUN_SECONDS} s of cohort CPU; at t={PROD_SWEEP_AT_SECONDS} team-a queues "
        f"{PROD_SWEEP_SIZE} prod jobs ({PROD_RUN_SECONDS} s each, one at a time on its 2 GPUs), and prod "
        f"returns at {returns}"
    )


@dataclass(frozen=True)
class TimelineEvent:
    t: int
    type: TimelineKind
    workload: str
    job: str
    priority: int
    detail: str
    cluster: str

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "type": self.type.value}


@dataclass
class Attempt:
    """One launch of a job's pod group on one cluster, and how it ended."""

    cluster: str
    submitted_at: int
    admitted_at: int | None = None
    ended_at: int | None = None
    outcome: str = "pending"

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class RelaunchChoice:
    """Where the recovery strategy sent one relaunch, and why."""

    t: int
    cluster: str
    burst: bool
    why: str

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class JobState:
    job: DemoJob
    #: The task's resource candidates as (cloud, region) pairs; a region of Kubernetes is a context.
    candidates: list[tuple[str | None, str | None]]
    submitted: bool = False
    relaunch_at: int | None = None
    preemptions: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    relaunches: list[RelaunchChoice] = field(default_factory=list)
    finished_at: int | None = None
    priority: int = 0
    burst: str | None = None
    #: The on-prem wait the controller predicted when it marked the job for a burst (None: unknown).
    burst_wait: float | None = None
    #: The controller's predicted-wait gate verdict that kept the job in Kueue after its latest
    #: preemption (None: none).
    kept: str | None = None
    #: The preemption count :attr:`kept` was given at.
    kept_after: int | None = None

    @property
    def cluster(self) -> str:
        return self.attempts[-1].cluster if self.attempts else ONPREM_CONTEXT


@dataclass(frozen=True)
class RunResult:
    events: list[TimelineEvent]
    jobs: dict[str, dict[str, Any]]
    mechanism: str
    policy: str
    end: int
    spec: RunSpec
    config: ControllerConfig
    #: team-b's burst targets and prices in the run's config (None: team-b never bursts).
    burst_pricing: BurstPricing | None = None


def task_candidates(burst_targets: Sequence[str]) -> list[tuple[str | None, str | None]]:
    """The dev task's candidates as the admin policy writes them for team-b: its Kueue context,
    then its burst targets (``teams.team-b.burst.clouds``)."""
    infras = [f"k8s/{ONPREM_CONTEXT}", *burst_targets]
    return [(i.cloud, i.region) for i in (parse_infra({"infra": s}) for s in infras)]


class _Run:
    """One scenario on two fresh sandboxes with a fresh controller."""

    def __init__(
        self,
        jobs: Sequence[DemoJob],
        spec: RunSpec,
        horizon: int,
        *,
        priority_boost: bool,
        stop_when_done: bool,
    ) -> None:
        self.job_list = list(jobs)
        self.by_workload = {j.workload: j for j in jobs}
        self.spec = spec
        self.horizon = horizon
        self.priority_boost = priority_boost
        self.stop_when_done = stop_when_done
        self.t = 0
        self.events: list[TimelineEvent] = []
        self._lock = threading.Lock()
        self._uids: dict[str, str] = {}
        self._class_values: dict[str, int] = {}
        self.jobs: dict[str, JobState] = {}
        self.config: ControllerConfig | None = None
        self._state_path: Path | None = None
        self._clock: Any = None
        self.burst_pricing: BurstPricing | None = None

    # --- recording ------------------------------------------------------------------

    def _add(self, type_: TimelineKind, job: DemoJob, priority: int, detail: str, cluster: str) -> None:
        with self._lock:
            self.events.append(TimelineEvent(self.t, type_, job.workload, job.key, priority, detail, cluster))

    def observe(self, event: ControllerEvent) -> None:
        """Controller observer: preemptions it detected, aging patches it applied, bursts."""
        outcome, detection = event.outcome, event.detection
        if event.kind is not ControllerEventKind.RECONCILED or outcome is None or detection is None:
            return
        job = self.by_workload.get(f"{detection.workload.namespace}/{detection.workload.name}")
        if job is None:
            return
        state = self.jobs[job.key]
        effective = detection.workload.priority + (detection.workload.boost_annotation if self.priority_boost else 0)
        if detection.kind is DetectionKind.PREEMPTED and outcome.recorded_any(FactKind.PREEMPTION):
            eviction = detection.eviction
            preemptor = eviction.preemptor if eviction is not None else None
            by = self._uids.get(preemptor.workload_uid or "", "an unknown workload") if preemptor else "?"
            reason = eviction.preemption_reason.value if eviction and eviction.preemption_reason else "Unknown"
            state.preemptions += 1
            state.relaunch_at = self.t + RELAUNCH_DELAY_SECONDS
            if state.attempts:
                state.attempts[-1].ended_at, state.attempts[-1].outcome = self.t, "preempted"
            self._add(TimelineKind.PREEMPTED, job, effective, f"by {by} ({reason})", ONPREM_CONTEXT)
        if outcome_applied(outcome) and outcome.patch is not None and outcome.decision is not None:
            decision = outcome.decision
            state.priority = outcome.patch.effective_priority
            patch = outcome.patch
            # The patch's boost is its change to the Workload; the words need the offset from the class.
            class_value = self._class_values.get(job.priority_class, decision.base_priority)
            words = explain_level(
                class_name=job.priority_class,
                class_value=class_value,
                boost=patch.effective_priority - class_value,
                band=decision.admitted_boost is not None,
                waiting_level=patch.effective_priority == decision.effective_priority,
                preemptions=decision.preemptions,
                preemption_points=decision.preemption_points,
                age_points=decision.age_points,
                cap=decision.boost_limit,
            )
            self._add(
                TimelineKind.AGED,
                job,
                patch.effective_priority,
                f"{patch.mechanism.value} {patch.boost:+d} -> {patch.effective_priority}: {words} "
                f"({decision.counted_preemptions} preemption(s) "
                f"+{decision.preemption_points}, age +{decision.age_points}, cap {decision.boost_limit})",
                ONPREM_CONTEXT,
            )
        kept = [n.removeprefix(GATE_NOTE) for n in outcome.notes if n.startswith(GATE_NOTE)]
        if kept and state.kept_after != state.preemptions:
            # The first verdict after each preemption: the one SkyPilot's relaunch follows (the
            # controller judges the waiting relaunch again at each reconcile; those are not shown).
            state.kept, state.kept_after = kept[-1], state.preemptions
            self._add(TimelineKind.KEPT, job, effective, f"controller's burst gate: {state.kept}", ONPREM_CONTEXT)
        if outcome.burst is not None:
            state.burst, state.burst_wait, state.kept = outcome.burst.detail, outcome.burst.predicted_wait_seconds, None
            burst = outcome.burst
            self._add(
                TimelineKind.BURST,
                job,
                effective,
                f"controller marks it for a burst ({burst.reason}): {burst.detail}",
                ONPREM_CONTEXT,
            )

    # --- the clusters ---------------------------------------------------------------

    def _effective(self, obj: dict[str, Any]) -> int:
        spec = obj.get("spec") or {}
        priority = int(spec.get("priority") or 0)
        if self.priority_boost:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            boost = str(annotations.get(kueue_api.PRIORITY_BOOST_ANNOTATION, "0"))
            priority += int(boost) if boost.lstrip("-").isdigit() else 0
        return priority

    @staticmethod
    def _workload(sb: Sandbox, key: str) -> dict[str, Any] | None:
        ns, name = key.split("/", 1)
        found: dict[str, Any] | None = sb.store.try_get(WORKLOADS, name, ns)
        return found

    def _history(self, job: DemoJob) -> JobHistory:
        """The job's history as the recovery strategy reads it: the controller's state, read-only."""
        from sky_kueue.controller.sqlite_store import SqliteHistoryStore

        assert self._state_path is not None
        with SqliteHistoryStore(self._state_path, read_only=True) as store:
            return store.load(job.key) or JobHistory(job.key)

    def _relaunch_target(self, state: JobState) -> RelaunchChoice:
        """What ``KUEUE_AGING`` decides before SkyPilot relaunches (``prepare_relaunch``), with the
        gate of the job's team as :meth:`sky_kueue.controller.skypilot_plugin.AgingSource.burst_verdict`
        picks it; a relaunch the gate keeps on-prem says the controller's verdict."""
        assert self.config is not None
        now = float(self._clock.now().timestamp())
        history = self._history(state.job)
        identity = history.identity
        gate = self.config.burst_gates.for_namespace(
            None if identity is None else identity.namespace, team=state.job.team
        )
        burst, why = relaunch_burst(history, self.config.aging, now, enabled=self.config.enabled, gate=gate)
        if burst:
            targets = [c for c in state.candidates if is_burst_target(*c, self.config.burst_contexts)]
            if targets and len(targets) < len(state.candidates):
                state.candidates = targets  # the strategy keeps only these for later recoveries too
            if targets:
                return RelaunchChoice(self.t, str(targets[0][1] or targets[0][0]), True, why)
            why = f"should burst ({why}) but the task has no burst target"
        elif gate is not None and state.kept is not None:
            why = f"{why}; it kept the job in Kueue: {state.kept}"
        cloud, region = state.candidates[0]
        return RelaunchChoice(self.t, str(region or cloud), False, why)

    def _submit(self, clients: dict[str, ApiClient], state: JobState, kind: TimelineKind, cluster: str) -> None:
        from kubernetes import client as k8s

        job = state.job
        k8s.CoreV1Api(clients[cluster]).create_namespaced_pod(job.namespace, job.pod())
        state.attempts.append(Attempt(cluster, self.t))
        value = self._class_values.get(job.priority_class, 0)
        gpus = f" + {job.gpus} GPU" if job.gpus else ""
        detail = f"{job.cpu} CPU{gpus}, {job.run_seconds} s, {job.priority_class}"
        if kind is TimelineKind.RESUBMITTED:
            choice = state.relaunches[-1]
            where = f"burst to {cluster}" if choice.burst else f"on {cluster}"
            detail = f"SkyPilot relaunch {where} (KUEUE_AGING: {choice.why})"
        self._add(kind, job, value, detail, cluster)

    def _synced(self, sb: Sandbox, controller: Controller) -> bool:
        if not controller.idle():
            return False
        workloads, pods = controller.versions()
        want_workloads = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in sb.store.list(WORKLOADS).items
        }
        want_pods = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in sb.store.list("pods", label_selector=SKYPILOT_POD_GROUP_SELECTOR).items
        }
        return workloads == want_workloads and pods == want_pods

    def _settle(self, sb: Sandbox, controller: Controller) -> None:
        if not controller.wait_until(lambda: self._synced(sb, controller), SETTLE_TIMEOUT_SECONDS):
            raise RuntimeError(f"the controller did not catch up within {SETTLE_TIMEOUT_SECONDS:.0f} s")

    def _step(self, clusters: dict[str, Sandbox], controller: Controller) -> bool:
        changed = False
        for name, sb in clusters.items():
            report = sb.step()
            for key in report.created:
                obj = self._workload(sb, key)
                if obj is not None:
                    self._uids[str(obj["metadata"]["uid"])] = key
            for key in report.admitted:
                job = self.by_workload.get(key)
                obj = self._workload(sb, key)
                if job is None or obj is None:
                    continue
                state = self.jobs[job.key]
                if state.attempts:
                    state.attempts[-1].admitted_at, state.attempts[-1].outcome = self.t, "running"
                state.priority = self._effective(obj)
                self._add(TimelineKind.ADMITTED, job, state.priority, f"runs {job.run_seconds} s", name)
            for key in report.finished:
                job = self.by_workload.get(key)
                if job is None:
                    continue
                state = self.jobs[job.key]
                if state.attempts and state.attempts[-1].outcome == "running":
                    state.finished_at = self.t
                    state.attempts[-1].ended_at, state.attempts[-1].outcome = self.t, "finished"
                    self._add(TimelineKind.FINISHED, job, state.priority, "completed its run", name)
            changed = changed or bool(report.created or report.admitted or report.preempted or report.finished)
        self._settle(clusters[ONPREM_CONTEXT], controller)
        return changed

    def run(self) -> RunResult:
        from sky_kueue.controller.leader import LeaseSettings
        from sky_kueue.controller.manager import Controller, ControllerSettings
        from sky_kueue.controller.runtime_state import RuntimeState
        from sky_kueue.controller.sqlite_store import SqliteHistoryStore
        from sky_kueue.mirror.connection import connect
        from sky_kueue.sandbox.apiserver.clock import ManualClock
        from sky_kueue.sandbox.sandbox import Sandbox
        from sky_kueue.sandbox.seed import seed_setup

        self._clock = clock = ManualClock(EPOCH)
        with (
            tempfile.TemporaryDirectory(prefix="sky-kueue-demo-") as tmp,
            Sandbox(clock=clock, run_emulator=False, priority_boost=self.priority_boost, name=ONPREM_CONTEXT) as onprem,
            Sandbox(clock=clock, run_emulator=False, priority_boost=self.priority_boost, name=BURST_CONTEXT) as burst,
        ):
            config_path, self.config = demo_config.write_run_config(self.spec, Path(tmp))
            team_b = load_metric_teams(config_path).team("team-b")
            self.burst_pricing = team_b.pricing if team_b is not None else None
            candidates = task_candidates(demo_config.team_burst_targets(config_path, "team-b"))
            self.jobs = {
                j.key: JobState(j, list(candidates if j.team == "team-b" else candidates[:1])) for j in self.job_list
            }
            clusters = {ONPREM_CONTEXT: onprem, BURST_CONTEXT: burst}
            kubeconfig = merged_kubeconfig(Path(tmp) / "kubeconfig", clusters.values())
            clients = {name: connect(kubeconfig, name, retries=False).api_client for name in clusters}
            setup = seed_setup()
            for sb in clusters.values():
                sb.apply(setup)
            self._class_values = {
                str(d["metadata"]["name"]): int(d.get("value", 0))
                for d in setup
                if d.get("kind") == "WorkloadPriorityClass"
            }
            self._state_path = state_path = Path(tmp) / "controller.db"
            store = SqliteHistoryStore(state_path)
            runtime = RuntimeState(state_path)
            controller = Controller(
                clients[ONPREM_CONTEXT],
                store,
                self.config.aging,
                ControllerSettings(
                    lease=LeaseSettings(namespace="default", identity="sky-kueue-demo"),
                    priority_boost_gate=self.priority_boost,
                ),
                runtime=runtime,
                clock=lambda: clock.now().timestamp(),
                observers=[self.observe],
                burst_gates=self.config.burst_gates,
            )
            controller.start()
            try:
                if not controller.wait_until(controller.idle, SETTLE_TIMEOUT_SECONDS):
                    raise RuntimeError("the controller did not start leading the sandbox")
                self._loop(clusters, clients, clock, controller)
            finally:
                controller.stop()
                store.close()
                runtime.close()
                for api_client in clients.values():
                    api_client.close()
        mechanism = "boost-annotation" if self.priority_boost else "spec-priority"
        return RunResult(
            self.events,
            self._jobs_summary(),
            mechanism,
            self.config.aging.policy,
            self.t,
            self.spec,
            self.config,
            self.burst_pricing,
        )

    def _end_grace_periods(self, clusters: dict[str, Sandbox]) -> None:
        """Plays the kubelet: deleted pods whose grace period is over go (their Workload with them)."""
        from sky_kueue.sandbox.apiserver.clock import parse_timestamp

        now = self._clock.now()

        def strip(obj: dict[str, Any]) -> None:
            obj["metadata"]["finalizers"] = [f for f in obj["metadata"].get("finalizers") or [] if f != GRACE_FINALIZER]

        for sb in clusters.values():
            for pod in sb.store.list("pods", label_selector=SKYPILOT_POD_GROUP_SELECTOR).items:
                meta = pod["metadata"]
                deleted = meta.get("deletionTimestamp")
                if not deleted or GRACE_FINALIZER not in (meta.get("finalizers") or []):
                    continue
                if (now - parse_timestamp(deleted)).total_seconds() >= POD_GRACE_SECONDS:
                    sb.store.mutate("pods", meta["name"], strip, meta["namespace"])

    def _loop(
        self, clusters: dict[str, Sandbox], clients: dict[str, ApiClient], clock: Any, controller: Controller
    ) -> None:
        while self.t <= self.horizon:
            self._end_grace_periods(clusters)
            for state in sorted(self.jobs.values(), key=lambda s: s.job.submit_at):
                if not state.submitted and state.job.submit_at <= self.t:
                    state.submitted = True
                    self._submit(clients, state, TimelineKind.SUBMITTED, state.cluster)
                elif (
                    state.relaunch_at is not None
                    and state.relaunch_at <= self.t
                    # SkyPilot waits for the teardown of the preempted cluster
                    and self._workload(clusters[state.cluster], state.job.workload) is None
                ):
                    state.relaunch_at = None
                    state.relaunches.append(self._relaunch_target(state))
                    self._submit(clients, state, TimelineKind.RESUBMITTED, state.relaunches[-1].cluster)
            self._settle(clusters[ONPREM_CONTEXT], controller)
            for _ in range(MAX_STEPS_PER_TICK):
                if not self._step(clusters, controller):
                    break
            if self.stop_when_done and all(s.finished_at is not None for s in self.jobs.values()):
                return
            self.t += TICK_SECONDS
            clock.advance(TICK_SECONDS)
        self.t = min(self.t, self.horizon)

    def _jobs_summary(self) -> dict[str, dict[str, Any]]:
        summary: dict[str, dict[str, Any]] = {}
        for key, state in self.jobs.items():
            job = state.job
            for attempt in state.attempts:
                if attempt.outcome in ("pending", "running"):
                    attempt.outcome = f"{attempt.outcome} at the end (t={self.t} s)"
            summary[key] = {
                "workload": job.workload,
                "team": job.team,
                "priority_class": job.priority_class,
                "cpus": job.cpu,
                "gpus": job.gpus or "0",
                "class_priority": self._class_values.get(job.priority_class, 0),
                "final_priority": state.priority,
                "submitted_at": job.submit_at,
                "preemptions": state.preemptions,
                "admitted_at": [a.admitted_at for a in state.attempts if a.admitted_at is not None],
                "finished_at": state.finished_at,
                "finished_on": state.attempts[-1].cluster if state.finished_at is not None else None,
                "state": "finished" if state.finished_at is not None else "unfinished",
                "burst": state.burst,
                "burst_predicted_wait_seconds": state.burst_wait,
                "kept": state.kept,
                "attempts": [a.to_json() for a in state.attempts],
                "relaunches": [r.to_json() for r in state.relaunches],
            }
        return summary


def merged_kubeconfig(path: Path, clusters: Sequence[Sandbox] | Any) -> Path:
    """One kubeconfig with every sandbox's cluster, user and context, as kubectl merges
    ``KUBECONFIG=a:b`` (the first file's current context stays current)."""
    import yaml

    merged: dict[str, Any] = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": [], "contexts": []}
    for sb in clusters:
        doc = yaml.safe_load(sb.kubeconfig_path.read_text(encoding="utf-8"))
        for section in ("clusters", "users", "contexts"):
            merged[section].extend(doc.get(section) or [])
        merged.setdefault("current-context", doc.get("current-context"))
    path.write_text(yaml.safe_dump(merged, sort_keys=False), encoding="utf-8")
    path.chmod(0o600)
    return path


def run_seed(*, priority_boost: bool = False) -> RunResult:
    return _Run(
        seed_jobs(), demo_config.SEED_RUN, SEED_HORIZON_SECONDS, priority_boost=priority_boost, stop_when_done=True
    ).run()


def run_starvation(spec: RunSpec, *, priority_boost: bool = False) -> RunResult:
    """One run of the starvation scenario with ``spec``'s changes."""
    return _Run(
        starvation_jobs(), spec, STARVATION_HORIZON_SECONDS, priority_boost=priority_boost, stop_when_done=False
    ).run()


def _why_unfinished(dev: dict[str, Any], result: RunResult) -> str | None:
    if dev["finished_at"] is not None:
        return None
    preempted = (
        f"preempted {dev['preemptions']} time(s) by team-a's prod jobs (borrowWithinCohort takes dev's "
        "borrowed quota below priority 100)"
    )
    if not dev["relaunches"]:
        return f"{preempted}; it was never relaunched"
    last = dev["relaunches"][-1]
    if last["burst"]:
        return f"{preempted}; its relaunch on {last['cluster']} had not run to the end by t={result.end} s"
    return f"{preempted}; every relaunch stayed on {ONPREM_CONTEXT}: {last['why']}"


def _variant(result: RunResult, reference: RunResult) -> dict[str, Any]:
    """One starvation run's document, its cost judged against ``reference`` (the run without aging)."""
    dev = result.jobs[managed_job_key(DEV_JOB_ID)]
    prod = [v for k, v in result.jobs.items() if k != managed_job_key(DEV_JOB_ID)]
    return {
        "run": result.spec.name,
        "label": result.spec.label,
        "changes": [c.to_json() for c in result.spec.changes],
        "policy": result.policy,
        "burst_gate": _gate_json(result.config),
        "events": [e.to_json() for e in result.events],
        "jobs": result.jobs,
        "team_b": {
            "workload": dev["workload"],
            "preemptions": dev["preemptions"],
            "attempts": dev["attempts"],
            "relaunches": dev["relaunches"],
            "finished_at": dev["finished_at"],
            "finished_on": dev["finished_on"],
            "starved": dev["finished_at"] is None,
            "why_unfinished": _why_unfinished(dev, result),
            "final_priority": dev["final_priority"],
            "burst": dev["burst"],
            "burst_predicted_wait_seconds": dev["burst_predicted_wait_seconds"],
            "kept": dev["kept"],
        },
        "team_a_finished": sum(1 for p in prod if p["finished_at"] is not None),
        "team_a_jobs": len(prod),
        "horizon_seconds": result.end,
        "cost": cost_json(
            result.jobs,
            reference.jobs,
            dev_key=managed_job_key(DEV_JOB_ID),
            horizon=result.end,
            burst_cluster=BURST_CONTEXT,
            pricing=result.burst_pricing,
        ),
        "cost_reference": reference.spec.label,
    }


def _verdict(without: dict[str, Any], boost: dict[str, Any], ranked: dict[str, Any]) -> str:
    a, b, d = without["team_b"], boost["team_b"], ranked["team_b"]
    text = (
        f"without aging team-b was preempted {a['preemptions']} times and "
        + ("never finished" if a["starved"] else f"finished only at t={a['finished_at']} s")
        + f" within {without['horizon_seconds']} s; with the boost policy (bounded) it was preempted "
        + f"{b['preemptions']} time(s) and "
        + ("still did not finish" if b["starved"] else f"finished at t={b['finished_at']} s")
        + f" (priority {b['final_priority']}, above the borrowWithinCohort threshold 100 the admin set to let "
        + "prod take dev's borrowed quota); with rank and team-b's burst target configured, "
        + f"it was preempted {d['preemptions']} time(s), "
    )
    if d["starved"]:
        return text + f"and did not finish: {d['why_unfinished']}"
    bursts = [r for r in d["relaunches"] if r["burst"]]
    where = f"relaunched on {bursts[0]['cluster']} by KUEUE_AGING and " if bursts else ""
    gate = f" (the controller's burst gate: {d['burst']})" if d["burst"] else ""
    return text + f"{where}finished on {d['finished_on']} at t={d['finished_at']} s{gate}"


def _gate_json(config: ControllerConfig) -> dict[str, Any] | None:
    """team-b's predicted-wait burst gate in the run's config (None: team-b has none)."""
    gate = config.burst_gates.by_team.get("team-b")
    if gate is None:
        return None
    return {
        "team": "team-b",
        "cloud_startup_seconds": gate.cloud_startup_seconds,
        "margin_seconds": gate.margin_seconds,
        "threshold_seconds": gate.threshold_seconds,
        "wait": gate.wait_kind.value,
    }


def run_demo(*, priority_boost: bool = False) -> dict[str, Any]:
    """Runs the seed scenario and the three starvation runs; returns the JSON document."""
    started = time.monotonic()
    seed = run_seed(priority_boost=priority_boost)
    runs = [run_starvation(spec, priority_boost=priority_boost) for spec in demo_config.RUNS]
    without, boost, ranked = (_variant(run, runs[0]) for run in runs)
    preempted = sorted({e.workload for e in seed.events if e.type is TimelineKind.PREEMPTED})
    admitted: list[str] = []
    for event in seed.events:
        if event.type is TimelineKind.ADMITTED and event.workload not in admitted:
            admitted.append(event.workload)
    settings = seed.config.aging.to_mapping()
    return {
        "events": [e.to_json() for e in seed.events],
        "final": {
            "scenario": "seed: team-b's dev job borrows cohort CPU; team-a's prod job (7 CPU, 2 GPU) reclaims it",
            "actuator": "boost-annotation" if priority_boost else "spec-priority",
            "clusters": {
                "onprem": ONPREM_CONTEXT,
                "burst": BURST_CONTEXT,
                "note": "two sandbox clusters in one kubeconfig, each its own context; the controller watches "
                "the on-prem one",
            },
            "config": f"configs/sky-kueue-demo.yaml (sky_kueue/data/{demo_config.DEMO_CONFIG_RESOURCE})",
            "seed_changes": [c.to_json() for c in seed.spec.changes],
            "burst_gate": _gate_json(seed.config),
            "aging": {
                k: settings[k]
                for k in ("policy", "preemptions_per_step", "boost_per_step", "max_boost", "burst_after_preemptions")
            },
            "jobs": seed.jobs,
            "preempted": preempted,
            "admitted": admitted,
            "starvation": {
                "scenario": starvation_scenario(),
                "without_aging": without,
                "with_aging": boost,
                "with_rank": ranked,
                "verdict": _verdict(without, boost, ranked),
            },
            "elapsed_seconds": round(time.monotonic() - started, 2),
        },
    }

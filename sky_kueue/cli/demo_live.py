"""The live demo: the sandbox cluster, SkyPilot-like jobs, and the resubmission controller.

What runs, all on this machine with no cluster: the sandbox API server on 127.0.0.1 with its
Kueue emulation (the exact scheduling model), the seed setup (team-a and team-b sharing the
``team-ab`` cohort), and the real controller (:class:`sky_kueue.controller.manager.Controller`)
talking to the sandbox over HTTP through the official client: leader election, watches,
history in a temporary SQLite file, ``spec.priority`` (or ``priority-boost``) patches.

What plays SkyPilot: each job is a pod group shaped as SkyPilot 0.14.1 shapes it (labels
``kueue.x-k8s.io/queue-name``, ``pod-group-name``, ``priority-class``, ``skypilot-cluster-name``;
annotations ``retriable-in-group: "false"``, ``skypilot-managed-job-id``), and a preempted
job is relaunched the way SkyPilot's jobs controller does it: after a recovery delay, and
only once the old Workload is gone, a new pod group with the same name (SkyPilot 0.14.1
``sky/jobs/recovery_strategy.py``).

Time: the cluster clock is stepped (``TICK_SECONDS`` of cluster time per step) as fast as
the controller keeps up; after every step the demo waits until the controller has handled
every change (its caches equal the sandbox's objects and its queue is empty). That makes the
timeline deterministic and the whole demo take a few seconds.

Two scenarios:

* **seed**: team-b's dev job borrows cohort CPU; team-a's prod job (7 CPU, 2 GPUs) reclaims
  it; team-b is relaunched, aged, and admitted when the capacity frees.
* **starvation**: prod jobs keep arriving. Without aging every one of them preempts team-b
  again (a borrowing victim at priority <= 100 is fair game for ``borrowWithinCohort``), so
  the dev job never completes; with aging its relaunch is raised above the
  ``maxPriorityThreshold`` after the first preemption, so it runs to completion.

The sandbox is imported inside :func:`run_demo` only: this is a sandbox demo, and production
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

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.detection import DetectionKind
from sky_kueue.controller.engine import FactKind
from sky_kueue.controller.events import ControllerEvent, ControllerEventKind, outcome_applied
from sky_kueue.kueue import api as kueue_api
from sky_kueue.mirror.identity import managed_job_key
from sky_kueue.mirror.kinds import SKYPILOT_POD_GROUP_SELECTOR

if TYPE_CHECKING:
    from sky_kueue.controller.manager import Controller
    from sky_kueue.sandbox.sandbox import Sandbox

#: Cluster seconds per emulation step.
TICK_SECONDS = 10
#: SkyPilot notices a preemption and relaunches after this long (its status poll is ~15 s).
RELAUNCH_DELAY_SECONDS = 20
#: Emulation steps per tick at most (a preemption and the preemptor's admission take two).
MAX_STEPS_PER_TICK = 4
#: Real seconds to wait for the controller to catch up after a step.
SETTLE_TIMEOUT_SECONDS = 30.0
#: SkyPilot's 8-hex user hash in ``cluster_name_on_cloud``.
USER_HASH = "fcd1e5cf"
#: Console width when the output is not a terminal (rich would assume 80 columns).
WIDE_OUTPUT_COLUMNS = 120
#: Where the demo's cluster clock starts.
EPOCH = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
#: How long a variant of the starvation scenario runs (cluster seconds).
STARVATION_HORIZON_SECONDS = 1_300
#: The seed scenario ends when every job finished, or at this time.
SEED_HORIZON_SECONDS = 900

WORKLOADS = f"workloads.{kueue_api.KUEUE_GROUP}"


class TimelineKind(str, Enum):
    """What a line of the demo's timeline says happened."""

    SUBMITTED = "submitted"
    ADMITTED = "admitted"
    PREEMPTED = "preempted"
    RESUBMITTED = "resubmitted"
    AGED = "aged"
    BURST = "burst"
    FINISHED = "finished"


EVENT_TYPES = tuple(kind.value for kind in TimelineKind)


def demo_settings(policy: str = "bounded") -> AgingSettings:
    """The aging settings of the demo: one step (+100) per preemption, burst after 3."""
    return AgingSettings(
        policy=policy,
        preemptions_per_step=1,
        boost_per_step=100,
        burst_after_preemptions=3,
    )


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
                },
            },
            "spec": {
                "containers": [
                    {
                        "name": "ray-node",
                        "image": "rayproject/ray",
                        "resources": {"requests": requests, "limits": limits},
                    }
                ]
            },
        }


def seed_jobs() -> list[DemoJob]:
    """team-b's dev job borrows 5 cohort CPUs; team-a's prod job (7 CPUs, 2 GPUs) arrives a minute later."""
    return [
        DemoJob("1", "dev", "team-b", "dev-priority", "5", run_seconds=300, submit_at=0),
        DemoJob("2", "train", "team-a", "prod-priority", "7", run_seconds=120, submit_at=60, gpus="2"),
    ]


def starvation_jobs() -> list[DemoJob]:
    """team-b's dev job needs 600 s; a prod job (120 s) arrives every 240 s."""
    jobs = [DemoJob("1", "dev", "team-b", "dev-priority", "5", run_seconds=600, submit_at=0)]
    for index, at in enumerate(range(60, STARVATION_HORIZON_SECONDS - 200, 240)):
        jobs.append(DemoJob(str(index + 2), "train", "team-a", "prod-priority", "7", 120, at, gpus="2"))
    return jobs


@dataclass(frozen=True)
class TimelineEvent:
    t: int
    type: TimelineKind
    workload: str
    job: str
    priority: int
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "type": self.type.value}


@dataclass
class JobState:
    job: DemoJob
    submitted: bool = False
    relaunch_at: int | None = None
    preemptions: int = 0
    admitted_at: list[int] = field(default_factory=list)
    finished_at: int | None = None
    priority: int = 0
    burst: str | None = None


@dataclass(frozen=True)
class RunResult:
    events: list[TimelineEvent]
    jobs: dict[str, dict[str, Any]]
    mechanism: str
    policy: str
    end: int


class _Run:
    """One scenario on a fresh sandbox with a fresh controller."""

    def __init__(
        self,
        jobs: Sequence[DemoJob],
        settings: AgingSettings,
        horizon: int,
        *,
        priority_boost: bool,
        stop_when_done: bool,
    ) -> None:
        self.jobs = {j.key: JobState(j) for j in jobs}
        self.by_workload = {j.workload: j for j in jobs}
        self.settings = settings
        self.horizon = horizon
        self.priority_boost = priority_boost
        self.stop_when_done = stop_when_done
        self.t = 0
        self.events: list[TimelineEvent] = []
        self._lock = threading.Lock()
        self._uids: dict[str, str] = {}
        self._class_values: dict[str, int] = {}

    # --- recording ------------------------------------------------------------------

    def _add(self, type_: TimelineKind, job: DemoJob, priority: int, detail: str) -> None:
        with self._lock:
            self.events.append(TimelineEvent(self.t, type_, job.workload, job.key, priority, detail))

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
            self._add(TimelineKind.PREEMPTED, job, effective, f"by {by} ({reason})")
        if outcome_applied(outcome) and outcome.patch is not None and outcome.decision is not None:
            decision = outcome.decision
            state.priority = outcome.patch.effective_priority
            patch = outcome.patch
            self._add(
                TimelineKind.AGED,
                job,
                patch.effective_priority,
                f"{patch.mechanism.value} +{patch.boost} -> {patch.effective_priority} "
                f"({decision.counted_preemptions} preemption(s) "
                f"+{decision.preemption_points}, age +{decision.age_points}, cap {decision.boost_limit})",
            )
        if outcome.burst is not None:
            state.burst = outcome.burst.detail
            burst = outcome.burst
            why = (
                f"predicted wait {burst.predicted_wait_seconds:.0f} s"
                if burst.predicted_wait_seconds is not None
                else f"{burst.preemptions} preemption(s)"
            )
            self._add(TimelineKind.BURST, job, effective, f"cloud fallback: {why}")

    # --- the cluster ----------------------------------------------------------------

    def _effective(self, obj: dict[str, Any]) -> int:
        spec = obj.get("spec") or {}
        priority = int(spec.get("priority") or 0)
        if self.priority_boost:
            annotations = (obj.get("metadata") or {}).get("annotations") or {}
            boost = str(annotations.get(kueue_api.PRIORITY_BOOST_ANNOTATION, "0"))
            priority += int(boost) if boost.lstrip("-").isdigit() else 0
        return priority

    def _workload(self, sb: Sandbox, key: str) -> dict[str, Any] | None:
        ns, name = key.split("/", 1)
        found: dict[str, Any] | None = sb.store.try_get(WORKLOADS, name, ns)
        return found

    def _submit(self, sb: Sandbox, state: JobState, kind: TimelineKind) -> None:
        job = state.job
        sb.apply(job.pod())
        value = self._class_values.get(job.priority_class, 0)
        gpus = f" + {job.gpus} GPU" if job.gpus else ""
        detail = f"{job.cpu} CPU{gpus}, {job.run_seconds} s, {job.priority_class}"
        if kind is TimelineKind.RESUBMITTED:
            detail = f"SkyPilot relaunch: same group name, {job.priority_class}"
        self._add(kind, job, value, detail)

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

    def _step(self, sb: Sandbox, controller: Controller) -> bool:
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
            state.admitted_at.append(self.t)
            state.priority = self._effective(obj)
            self._add(TimelineKind.ADMITTED, job, state.priority, f"runs {job.run_seconds} s")
        for key in report.finished:
            job = self.by_workload.get(key)
            if job is None:
                continue
            state = self.jobs[job.key]
            state.finished_at = self.t
            self._add(TimelineKind.FINISHED, job, state.priority, "completed its run")
        self._settle(sb, controller)
        return bool(report.created or report.admitted or report.preempted or report.finished)

    def run(self) -> RunResult:
        from sky_kueue.controller.leader import LeaseSettings
        from sky_kueue.controller.manager import Controller, ControllerSettings
        from sky_kueue.controller.runtime_state import RuntimeState
        from sky_kueue.controller.sqlite_store import SqliteHistoryStore
        from sky_kueue.sandbox.apiserver.clock import ManualClock
        from sky_kueue.sandbox.sandbox import Sandbox
        from sky_kueue.sandbox.seed import seed_setup

        clock = ManualClock(EPOCH)
        with (
            tempfile.TemporaryDirectory(prefix="sky-kueue-demo-") as tmp,
            Sandbox(clock=clock, run_emulator=False, priority_boost=self.priority_boost) as sb,
        ):
            setup = seed_setup()
            sb.apply(setup)
            self._class_values = {
                str(d["metadata"]["name"]): int(d.get("value", 0))
                for d in setup
                if d.get("kind") == "WorkloadPriorityClass"
            }
            state_path = Path(tmp) / "controller.db"
            store = SqliteHistoryStore(state_path)
            runtime = RuntimeState(state_path)
            controller = Controller(
                sb.api_client(),
                store,
                self.settings,
                ControllerSettings(
                    lease=LeaseSettings(namespace="default", identity="sky-kueue-demo"),
                    priority_boost_gate=self.priority_boost,
                ),
                runtime=runtime,
                clock=lambda: clock.now().timestamp(),
                observers=[self.observe],
            )
            controller.start()
            try:
                if not controller.wait_until(controller.idle, SETTLE_TIMEOUT_SECONDS):
                    raise RuntimeError("the controller did not start leading the sandbox")
                self._loop(sb, clock, controller)
            finally:
                controller.stop()
                store.close()
                runtime.close()
        mechanism = "boost-annotation" if self.priority_boost else "spec-priority"
        return RunResult(self.events, self._jobs_summary(), mechanism, self.settings.policy, self.t)

    def _loop(self, sb: Sandbox, clock: Any, controller: Controller) -> None:
        while self.t <= self.horizon:
            for state in sorted(self.jobs.values(), key=lambda s: s.job.submit_at):
                if not state.submitted and state.job.submit_at <= self.t:
                    state.submitted = True
                    self._submit(sb, state, TimelineKind.SUBMITTED)
                elif (
                    state.relaunch_at is not None
                    and state.relaunch_at <= self.t
                    and self._workload(sb, state.job.workload) is None  # SkyPilot waits for the teardown
                ):
                    state.relaunch_at = None
                    self._submit(sb, state, TimelineKind.RESUBMITTED)
            self._settle(sb, controller)
            for _ in range(MAX_STEPS_PER_TICK):
                if not self._step(sb, controller):
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
            summary[key] = {
                "workload": job.workload,
                "team": job.team,
                "priority_class": job.priority_class,
                "class_priority": self._class_values.get(job.priority_class, 0),
                "final_priority": state.priority,
                "submitted_at": job.submit_at,
                "preemptions": state.preemptions,
                "admitted_at": state.admitted_at,
                "finished_at": state.finished_at,
                "state": "finished" if state.finished_at is not None else "unfinished",
                "burst": state.burst,
            }
        return summary


def run_seed(settings: AgingSettings | None = None, *, priority_boost: bool = False) -> RunResult:
    return _Run(
        seed_jobs(),
        settings or demo_settings(),
        SEED_HORIZON_SECONDS,
        priority_boost=priority_boost,
        stop_when_done=True,
    ).run()


def run_starvation(aging: bool | str, *, priority_boost: bool = False) -> RunResult:
    """The starvation scenario under ``bounded`` (True), no aging (False) or the named policy."""
    policy = aging if isinstance(aging, str) else ("bounded" if aging else "none")
    settings = demo_settings(policy)
    return _Run(
        starvation_jobs(), settings, STARVATION_HORIZON_SECONDS, priority_boost=priority_boost, stop_when_done=False
    ).run()


def _variant(result: RunResult) -> dict[str, Any]:
    dev = result.jobs[managed_job_key("1")]
    prod = [v for k, v in result.jobs.items() if k != managed_job_key("1")]
    return {
        "policy": result.policy,
        "events": [e.to_json() for e in result.events],
        "jobs": result.jobs,
        "team_b": {
            "workload": dev["workload"],
            "preemptions": dev["preemptions"],
            "finished_at": dev["finished_at"],
            "starved": dev["finished_at"] is None,
            "final_priority": dev["final_priority"],
            "burst": dev["burst"],
        },
        "team_a_finished": sum(1 for p in prod if p["finished_at"] is not None),
        "team_a_jobs": len(prod),
        "horizon_seconds": result.end,
    }


def run_demo(*, priority_boost: bool = False) -> dict[str, Any]:
    """Runs the seed scenario and both starvation variants; returns the JSON document."""
    started = time.monotonic()
    seed = run_seed(priority_boost=priority_boost)
    without = _variant(run_starvation(False, priority_boost=priority_boost))
    with_aging = _variant(run_starvation(True, priority_boost=priority_boost))
    with_rank = _variant(run_starvation("rank", priority_boost=priority_boost))
    preempted = sorted({e.workload for e in seed.events if e.type is TimelineKind.PREEMPTED})
    admitted: list[str] = []
    for event in seed.events:
        if event.type is TimelineKind.ADMITTED and event.workload not in admitted:
            admitted.append(event.workload)
    a, b, r = without["team_b"], with_aging["team_b"], with_rank["team_b"]
    verdict = (
        f"without aging team-b was preempted {a['preemptions']} times and "
        + ("never finished" if a["starved"] else f"finished only at t={a['finished_at']} s")
        + f" within {without['horizon_seconds']} s; with the boost policy (bounded) it was preempted "
        + f"{b['preemptions']} time(s) and "
        + ("still did not finish" if b["starved"] else f"finished at t={b['finished_at']} s")
        + f", because priority {b['final_priority']} is above the borrowWithinCohort threshold (100) the admin "
        + "set to let prod take dev's borrowed quota; under rank, the default, which never lifts a job "
        + f"out of its class, it was preempted {r['preemptions']} times"
        + (f" and marked for a cloud burst ({r['burst']})" if r["burst"] else "")
    )
    settings = demo_settings()
    return {
        "events": [e.to_json() for e in seed.events],
        "final": {
            "scenario": "seed: team-b's dev job borrows cohort CPU; team-a's prod job (7 CPU, 2 GPU) reclaims it",
            "actuator": "boost-annotation" if priority_boost else "spec-priority",
            "aging": {
                k: settings.to_mapping()[k]
                for k in ("policy", "preemptions_per_step", "boost_per_step", "max_boost", "burst_after_preemptions")
            },
            "jobs": seed.jobs,
            "preempted": preempted,
            "admitted": admitted,
            "starvation": {
                "scenario": (
                    "team-b's dev job needs 600 s of cohort CPU; team-a submits a prod job (120 s) every 240 s"
                ),
                "without_aging": without,
                "with_aging": with_aging,
                "with_rank": with_rank,
                "verdict": verdict,
            },
            "elapsed_seconds": round(time.monotonic() - started, 2),
        },
    }


def print_text(document: dict[str, Any]) -> None:
    """The timeline and the starvation comparison as rich tables."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=WIDE_OUTPUT_COLUMNS)
    final = document["final"]
    console.print(
        "[bold]sky-kueue demo[/bold]: the sandbox cluster (Kueue emulation, seed setup), SkyPilot-like jobs, "
        f"and the resubmission controller ({final['actuator']}; one aging step of "
        f"+{final['aging']['boost_per_step']} per preemption)."
    )

    def timeline(title: str, events: list[dict[str, Any]]) -> Table:
        table = Table(title=title)
        table.add_column("t (s)", justify="right")
        table.add_column("event")
        table.add_column("workload", no_wrap=True)
        table.add_column("priority", justify="right")
        table.add_column("detail", overflow="fold")
        styles = {"preempted": "red", "aged": "green", "burst": "yellow", "finished": "cyan"}
        for e in events:
            style = styles.get(e["type"], "")
            table.add_row(str(e["t"]), e["type"], e["workload"], str(e["priority"]), e["detail"], style=style)
        return table

    console.print(timeline(final["scenario"], document["events"]))
    starvation = final["starvation"]
    summary = Table(title=f"Starvation: {starvation['scenario']}")
    for column in ("variant", "team-b preemptions", "team-b finished at", "team-b priority", "burst", "prod done"):
        summary.add_column(column)
    variants = (
        ("without aging", starvation["without_aging"]),
        ("boost (bounded)", starvation["with_aging"]),
        ("rank (default)", starvation["with_rank"]),
    )
    for label, variant in variants:
        b = variant["team_b"]
        summary.add_row(
            label,
            str(b["preemptions"]),
            "never (starved)" if b["starved"] else f"t={b['finished_at']} s",
            str(b["final_priority"]),
            "yes" if b["burst"] else "-",
            f"{variant['team_a_finished']}/{variant['team_a_jobs']}",
        )
    console.print(summary)
    for label, key in (("without aging", "without_aging"), ("with the boost policy", "with_aging")):
        dev_events = [e for e in starvation[key]["events"] if e["job"] == managed_job_key("1")]
        console.print(timeline(f"team-b's dev job, {label}", dev_events))
    console.print(f"[bold]{starvation['verdict']}[/bold] (demo took {final['elapsed_seconds']} s)")

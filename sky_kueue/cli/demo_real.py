"""``sky-kueue demo --real``: the seed's story on real Kubernetes and the real Kueue.

The sandbox demo (:mod:`sky_kueue.cli.demo_live`) runs on a simulated clock; this one runs the
same seed jobs (:func:`sky_kueue.cli.demo_live.seed_jobs`) on a real cluster
(:mod:`sky_kueue.realcluster`: kube-apiserver, Kueue and KWOK nodes on 127.0.0.1, built from
their Go modules, cached) on the wall clock, with the real controller, and prints what Kueue
did at each stage with the evidence (the Workload's conditions, ``spec.priority``) and the
time: team-b's dev job borrows the cohort's CPUs; team-a's prod job reclaims them (the victim
keeps its quota until its pod's grace period ends); SkyPilot's relaunch is recorded and aged
(``bounded``: one boost step of 100 per preemption, above team-a's ``maxPriorityThreshold``);
and a Kueue restart resets the aged priority, which the controller puts back.
About a minute; the cluster is removed at the end.
"""

from __future__ import annotations

import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from sky_kueue.cli.demo_live import DemoJob, seed_jobs
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.leader import LeaseSettings
from sky_kueue.controller.manager import Controller, ControllerSettings
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.realcluster import build, versions
from sky_kueue.realcluster.cluster import RealCluster
from sky_kueue.sandbox.seed import seed_setup

T = TypeVar("T")
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
#: The demo's pods' grace period (SkyPilot's keep Kubernetes' 30 s; shorter keeps it brief).
GRACE_SECONDS = 10
#: How long a stage waits for Kueue, the scheduler or KWOK before the demo fails (seconds).
STAGE_SECONDS = 90.0
POLL_SECONDS = 0.2
#: The aging the demo runs: one boost step of 100 per preemption (``bounded``).
AGING = AgingSettings(policy="bounded", preemptions_per_step=1, boost_per_step=100)


class RealDemoError(RuntimeError):
    """A stage did not happen in time; the message names it."""


@dataclass
class Stage:
    at_seconds: float
    what: str
    evidence: str


@dataclass
class RealDemo:
    versions: dict[str, str]
    stages: list[Stage] = field(default_factory=list)


def _conditions(obj: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in ((obj or {}).get("status") or {}).get("conditions") or []}


def _true(obj: dict[str, Any] | None, kind: str) -> bool:
    return _conditions(obj).get(kind, {}).get("status") == "True"


def _brief(obj: dict[str, Any] | None) -> str:
    shown = ("QuotaReserved", "Admitted", "Evicted", "Preempted", "Finished")
    conditions = _conditions(obj)
    parts = [f"{k}={conditions[k]['status']}/{conditions[k].get('reason', '')}" for k in shown if k in conditions]
    priority = ((obj or {}).get("spec") or {}).get("priority")
    return f"{', '.join(parts)}; spec.priority {priority}"


def _pod(job: DemoJob) -> dict[str, Any]:
    """The demo job's head pod for a real cluster: no sandbox finalizer or run-time hint."""
    pod = job.pod()
    pod["metadata"].pop("finalizers", None)
    pod["metadata"]["annotations"].pop("sandbox.sky-kueue.io/run-seconds", None)
    pod["spec"]["terminationGracePeriodSeconds"] = GRACE_SECONDS
    return pod


class _Story:
    def __init__(self, cluster: RealCluster, echo: Callable[[str], None], demo: RealDemo) -> None:
        from kubernetes import client

        self.cluster = cluster
        self.api = cluster.api_client()
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.echo = echo
        self.demo = demo
        self.started = time.monotonic()

    def stage(self, what: str, evidence: str) -> None:
        at = time.monotonic() - self.started
        self.demo.stages.append(Stage(round(at, 1), what, evidence))
        self.echo(f"[{at:6.1f} s] {what}\n           {evidence}")

    def wait(self, what: str, probe: Callable[[], T | None]) -> T:
        deadline = time.monotonic() + STAGE_SECONDS
        while time.monotonic() < deadline:
            found = probe()
            if found is not None and found is not False:
                return found
            time.sleep(POLL_SECONDS)
        raise RealDemoError(f"timed out after {STAGE_SECONDS:.0f} s waiting for {what}")

    def workload(self, job: DemoJob) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            found: dict[str, Any] = self.custom.get_namespaced_custom_object(
                KUEUE_GROUP, KUEUE_VERSION, job.namespace, "workloads", job.group
            )
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        return found

    def wait_workload(self, job: DemoJob, what: str, test: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        return self.wait(
            f"{job.workload}: {what}", lambda: (lambda w: w if w and test(w) else None)(self.workload(job))
        )

    def apply(self, docs: list[dict[str, Any]]) -> None:
        from kubernetes import dynamic

        client = dynamic.DynamicClient(self.api)
        for doc in docs:
            resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
            resource.server_side_apply(
                body=doc,
                name=doc["metadata"]["name"],
                namespace=doc["metadata"].get("namespace"),
                field_manager="sky-kueue-demo",
                force_conflicts=True,
            )

    def pod_gone(self, job: DemoJob) -> bool:
        return not self.core.list_namespaced_pod(
            job.namespace, label_selector=f"skypilot-cluster-name={job.group}"
        ).items


@contextmanager
def _controller(cluster: RealCluster, state: Path) -> Iterator[SqliteHistoryStore]:
    store = SqliteHistoryStore(state)
    runtime = RuntimeState(state)
    settings = ControllerSettings(
        lease=LeaseSettings(namespace="default", identity="sky-kueue-demo", retry_period_seconds=1.0),
        priority_boost_gate=False,
    )
    controller = Controller(cluster.api_client(), store, AGING, settings, runtime=runtime, clock=time.time)
    controller.start()
    try:
        yield store
    finally:
        controller.stop()
        store.close()
        runtime.close()


def run_real_demo(echo: Callable[[str], None], directory: Path | None = None) -> RealDemo:
    """Runs the story (see the module docstring) and returns its stages.

    Raises:
        build.BuildError: the real cluster's components could not be built.
        RealDemoError, ClusterError: a stage did not happen in time, or the cluster did not start.
    """
    pins = versions.load_pins()
    binaries = build.ensure_built(pins, log=echo)
    demo = RealDemo(versions={"kubernetes": pins.kubernetes, "kueue": pins.kueue, "etcd": pins.etcd, "kwok": pins.kwok})
    with tempfile.TemporaryDirectory(prefix="sky-kueue-real-demo-") as scratch:
        root = directory or Path(scratch) / "cluster"
        cluster = RealCluster(root, binaries, log=echo)
        cluster.up()
        try:
            with _controller(cluster, Path(scratch) / "controller.db") as store:
                _tell(_Story(cluster, echo, demo), store)
        finally:
            cluster.down()
    return demo


def _tell(story: _Story, store: SqliteHistoryStore) -> None:
    dev, train = seed_jobs()
    story.apply(seed_setup())
    story.stage("seed setup applied", "team-a-cq, team-b-cq, shared-cq in cohort team-ab; Kueue's webhooks accepted it")

    story.core.create_namespaced_pod(dev.namespace, _pod(dev))
    admitted = story.wait_workload(dev, "admitted", lambda w: _true(w, "Admitted"))
    story.stage(f"team-b's dev job ({dev.cpu} CPU) admitted, borrowing shared-cq's CPUs", _brief(admitted))

    story.core.create_namespaced_pod(train.namespace, _pod(train))
    evicted = story.wait_workload(dev, "preempted", lambda w: _true(w, "Evicted"))
    message = _conditions(evicted)["Preempted"].get("message", "")
    story.stage(
        f"team-a's prod job ({train.cpu} CPU, {train.gpus} GPUs) makes Kueue preempt the dev job",
        f"{_brief(evicted)}; {message.split(';')[0]}",
    )
    story.stage(
        f"the dev job keeps its quota while its pod runs out its {GRACE_SECONDS}-s grace period",
        f"QuotaReserved={_conditions(evicted)['QuotaReserved']['status']}; prod waits",
    )
    prod = story.wait_workload(train, "admitted", lambda w: _true(w, "Admitted"))
    story.stage("the prod job admitted once the dev pod stopped", _brief(prod))

    history = story.wait(
        "the controller's record", lambda: (lambda h: h if h and h.preemptions else None)(store.load(dev.key))
    )
    story.stage("the controller recorded the preemption", f"{dev.key}: {len(history.preemptions)} preemption(s)")

    story.wait("the dev pod gone", lambda: story.pod_gone(dev))
    story.wait("the finished Workload collected", lambda: story.workload(dev) is None)
    story.core.create_namespaced_pod(dev.namespace, _pod(dev))
    aged = story.wait_workload(dev, "aged", lambda w: (w.get("spec") or {}).get("priority") == 200)
    story.stage(
        "SkyPilot's relaunch (a new Workload) aged by the controller: dev-priority 100 + one step of 100",
        f"{_brief(aged)}; it waits, no longer preemptible by team-a's borrowing (threshold 100)",
    )

    seen: list[int | None] = []
    done = threading.Event()

    def watch() -> None:
        from kubernetes import watch as kube_watch

        stream = kube_watch.Watch().stream(
            story.custom.list_namespaced_custom_object,
            KUEUE_GROUP,
            KUEUE_VERSION,
            dev.namespace,
            "workloads",
            field_selector=f"metadata.name={dev.group}",
            resource_version=aged["metadata"]["resourceVersion"],
            timeout_seconds=int(STAGE_SECONDS),
        )
        for event in stream:
            seen.append(event["object"].get("spec", {}).get("priority"))
            if 100 in seen and seen[-1] == 200:
                done.set()
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    restart = time.monotonic()
    story.cluster.stop_kueue()
    story.cluster.start_kueue()
    story.cluster.wait_kueue_ready(time.monotonic() + STAGE_SECONDS)
    if not done.wait(STAGE_SECONDS):
        raise RealDemoError(f"the aged priority was not reset and restored after Kueue's restart (seen {seen})")
    versions_seen = " -> ".join(str(v) for v in seen)
    story.stage(
        "Kueue restarted: it reset spec.priority to the class value; the controller put the step back",
        f"spec.priority versions {versions_seen}, {time.monotonic() - restart:.1f} s after the restart",
    )

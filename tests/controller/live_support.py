"""A harness for the live controller tests: the sandbox, the seed setup and a controller.

The sandbox runs on a manual clock with the emulator stepped by the test (``step``); the
controller runs for real (its threads, HTTP watches through the official client, SQLite in
``tmp_path``). After every step the test waits until the controller has handled every change
(:meth:`Live.settle` waits on the controller's condition variable, never sleeps).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.burst_gate import BurstGates
from sky_kueue.controller.clock import ManualClock as LeaseClock
from sky_kueue.controller.events import Observer, Recorder
from sky_kueue.controller.history import HistoryStore, JobHistory
from sky_kueue.controller.hold import HoldTeams
from sky_kueue.controller.kube_store import KubernetesHistoryStore, KubernetesRuntimeState
from sky_kueue.controller.lane_route import Lanes
from sky_kueue.controller.leader import LeaseSettings
from sky_kueue.controller.manager import Controller, ControllerSettings
from sky_kueue.controller.runtime_state import RuntimeState
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.controller.state_spec import ControllerState
from sky_kueue.mirror.kinds import SKYPILOT_POD_GROUP_SELECTOR
from sky_kueue.sandbox.apiserver.clock import ManualClock
from sky_kueue.sandbox.apiserver.events import EventType
from sky_kueue.sandbox.apiserver.watch import Watcher
from sky_kueue.sandbox.sandbox import Sandbox
from sky_kueue.sandbox.seed import seed_setup

WORKLOADS = "workloads.kueue.x-k8s.io"
EPOCH = datetime.datetime(2026, 1, 1, 12, 0, tzinfo=datetime.timezone.utc)
SETTLE_SECONDS = 20.0
#: Fast election timing for tests (seconds of the injected lease clock).
#: Lease timings of live tests' controllers (seconds): duration, renew deadline, retry period.
TEST_LEASE_SECONDS = (15.0, 10.0, 2.0)
USER_HASH = "fcd1e5cf"
#: How long a deleted pod of a ``group_pod`` keeps running (cluster seconds): Kubernetes'
#: default ``terminationGracePeriodSeconds``, which SkyPilot's pods keep and, trapping
#: SIGTERM, use up. A preempted group keeps its quota, and its Workload stays, that long.
POD_GRACE_SECONDS = 30
#: The controller's requests carry this User-Agent (as ``controller run`` sets it).
CONTROLLER_USER_AGENT = "sky-kueue-controller"
#: Where the Kubernetes store keeps JobHistory objects in live tests (the Deployment's namespace).
STORE_NAMESPACE = "sky-kueue-system"


def updates(events: list[Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(previous version, new version) of every Workload update a watch delivered."""
    previous: dict[str, dict[str, Any]] = {}
    pairs = []
    for event in events:
        new = event.obj
        old = previous.get(new["metadata"]["uid"])
        previous[new["metadata"]["uid"]] = new
        if old is not None and event.type is EventType.MODIFIED:
            pairs.append((old, new))
    return pairs


def held_quota(obj: dict[str, Any]) -> bool:
    conditions = {c["type"]: c["status"] for c in (obj.get("status") or {}).get("conditions") or []}
    return conditions.get("QuotaReserved") == "True"


def demo_aging(**overrides: Any) -> AgingSettings:
    values: dict[str, Any] = {"policy": "bounded", "preemptions_per_step": 1, "boost_per_step": 100}
    values.update(overrides)
    return AgingSettings(**values)


def group_pod(
    task: str,
    job_id: str,
    team: str,
    priority_class: str,
    cpu: str,
    *,
    gpus: str | None = None,
    run_seconds: int | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    """The head pod of a SkyPilot 0.14.1 managed-job cluster queued in Kueue."""
    group = group or f"{task}-{job_id}-{USER_HASH}"
    requests: dict[str, str] = {"cpu": cpu}
    limits: dict[str, str] = {}
    if gpus:
        requests["nvidia.com/gpu"] = gpus
        limits["nvidia.com/gpu"] = gpus
    annotations = {
        "kueue.x-k8s.io/pod-group-total-count": "1",
        "kueue.x-k8s.io/retriable-in-group": "false",
        "skypilot-managed-job-id": job_id,
        "skypilot-managed-job-name": task,
    }
    if run_seconds is not None:
        annotations["sandbox.sky-kueue.io/run-seconds"] = str(run_seconds)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{group}-head",
            "namespace": team,
            "labels": {
                "parent": "skypilot",
                "skypilot-cluster-name": group,
                "kueue.x-k8s.io/queue-name": f"{team}-lq",
                "kueue.x-k8s.io/pod-group-name": group,
                "kueue.x-k8s.io/priority-class": priority_class,
            },
            "annotations": annotations,
        },
        "spec": {
            "containers": [{"name": "ray", "image": "ray", "resources": {"requests": requests, "limits": limits}}]
        },
    }


@dataclass
class Live:
    """A running sandbox + controller pair."""

    sandbox: Sandbox
    clock: ManualClock
    lease_clock: LeaseClock
    store: HistoryStore
    runtime: ControllerState
    state_path: Path
    controllers: list[Controller] = field(default_factory=list)
    recorder: Recorder = field(default_factory=Recorder)
    changes: Watcher | None = None
    last_workload_change: int = 0

    @property
    def controller(self) -> Controller:
        return self.controllers[0]

    def now(self) -> float:
        return self.clock.now().timestamp()

    def new_controller(
        self,
        aging: AgingSettings,
        *,
        identity: str = "replica-a",
        gate: bool | None = None,
        start: bool = True,
        namespace: str | None = None,
        observers: Sequence[Observer] = (),
        holds: HoldTeams | None = None,
        burst_gates: BurstGates | None = None,
        lanes: Lanes | None = None,
        pod_namespaces: tuple[str, ...] | None = None,
    ) -> Controller:
        """A controller on the sandbox (``pod_namespaces``: its pod watches, as ``controller run``
        takes them from the config's teams; None: one watch of every namespace)."""
        api_client = self.sandbox.api_client()
        api_client.user_agent = CONTROLLER_USER_AGENT
        controller = Controller(
            api_client,
            self.store,
            aging,
            ControllerSettings(
                lease=LeaseSettings(
                    namespace="default",
                    identity=identity,
                    lease_duration_seconds=TEST_LEASE_SECONDS[0],
                    renew_deadline_seconds=TEST_LEASE_SECONDS[1],
                    retry_period_seconds=TEST_LEASE_SECONDS[2],
                ),
                priority_boost_gate=gate,
                namespace=namespace,
                pod_namespaces=pod_namespaces,
            ),
            runtime=self.runtime,
            clock=self.now,
            lease_clock=self.lease_clock,
            observers=[self.recorder, *observers],
            holds=holds,
            burst_gates=burst_gates,
            lanes=lanes,
        )
        self.controllers.append(controller)
        if start:
            assert controller.step(), f"{identity} did not become leader"
            self.settle(controller)
        return controller

    def synced(self, controller: Controller) -> bool:
        """Idle, caches equal to the sandbox, and every Workload change handled (deletions too)."""
        if self.changes is not None:
            while (change := self.changes.next(0)) is not None:
                self.last_workload_change = max(self.last_workload_change, change.resource_version)
        if not controller.idle() or (controller.handled_workload_version() or 0) < self.last_workload_change:
            return False
        workloads, pods = controller.versions()
        store = self.sandbox.store
        want_workloads = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in store.list(WORKLOADS).items
        }
        watched = controller.settings.pod_namespaces
        want_pods = {
            f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in store.list("pods", label_selector=SKYPILOT_POD_GROUP_SELECTOR).items
            if watched is None or o["metadata"]["namespace"] in watched
        }
        return workloads == want_workloads and pods == want_pods

    def settle(self, controller: Controller | None = None) -> None:
        target = controller or self.controller
        assert target.wait_until(lambda: self.synced(target), SETTLE_SECONDS), "controller did not catch up"

    def step(self, seconds: float = 0.0, *, controller: Controller | None = None) -> Any:
        if seconds:
            self.clock.advance(seconds)
        report = self.sandbox.step()
        self.settle(controller)
        return report

    def apply(self, *objs: dict[str, Any], controller: Controller | None = None) -> None:
        for obj in objs:
            self.sandbox.apply(obj)
        self.settle(controller)

    def workload(self, namespace: str, name: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.sandbox.store.try_get(WORKLOADS, name, namespace)
        return found

    def history(self, job_id: str) -> JobHistory:
        history = self.store.load(f"managed-job/{job_id}")
        assert history is not None, f"no history for managed job {job_id}"
        return history

    def stop(self) -> None:
        for controller in self.controllers:
            controller.stop()


@contextmanager
def live_sandbox(
    tmp_path: Path,
    *,
    priority_boost: bool = False,
    setup: Sequence[dict[str, Any]] | None = None,
    state_kind: str = "sqlite",
    pod_grace_periods: bool = False,
) -> Iterator[Live]:
    """A sandbox and the controller's state: a SQLite file, or (``state_kind="kubernetes"``)
    JobHistory objects in the sandbox's ``sky-kueue-system`` namespace, written with the
    controller's user agent (so the RBAC test sees the store's requests as the controller's)."""
    clock = ManualClock(EPOCH)
    with Sandbox(
        clock=clock, run_emulator=False, priority_boost=priority_boost, pod_grace_periods=pod_grace_periods
    ) as sandbox:
        sandbox.apply(list(setup) if setup is not None else seed_setup())
        state = tmp_path / "controller.db"
        store: HistoryStore
        runtime: ControllerState
        if state_kind == "kubernetes":
            sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORE_NAMESPACE}})
            api_client = sandbox.api_client()
            api_client.user_agent = CONTROLLER_USER_AGENT
            store = KubernetesHistoryStore(api_client, STORE_NAMESPACE)
            runtime = KubernetesRuntimeState(api_client, STORE_NAMESPACE)
        else:
            store = SqliteHistoryStore(state)
            runtime = RuntimeState(state)
        live = Live(sandbox, clock, LeaseClock(EPOCH.timestamp()), store, runtime, state)
        live.changes = sandbox.store.watch(WORKLOADS)
        try:
            yield live
        finally:
            live.changes.close()
            live.stop()
            store.close()
            runtime.close()

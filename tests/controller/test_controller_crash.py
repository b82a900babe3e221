"""The controller as a real process, SIGKILLed at random points, through 200 preemptions.

The sandbox runs in this process on the real clock (the controller subprocess reads the
same wall clock), with the Kueue emulation stepped by the test. ``JOBS`` SkyPilot managed
jobs share one ClusterQueue; each round a prod job arrives and Kueue preempts all of them
(``InClusterQueue``), their Workloads finish and are garbage-collected, SkyPilot relaunches
them, and the test waits until every relaunch carries the boost the aging policy computes
from the test's *own* record of what happened; then the prod job leaves and the jobs run
again. Meanwhile a killer thread SIGKILLs ``sky-kueue controller run`` at random moments
(mid-transaction, mid-patch, mid-replay) and restarts it, sometimes after letting the
cluster move on without it. Every restart watches again from the durable cursor.

It runs against both stores: the SQLite file, and (``--state kubernetes``) JobHistory objects
in the sandbox's API server, where every write is a compare-and-swap over HTTP.

Afterwards: every preemption recorded exactly once, one decision per relaunch at exactly
the policy's boost, each actuated, and each Workload's priority changed exactly once and only
while it was waiting. Finally SIGTERM stops the last process gracefully (exit 0, Lease
released).
"""

from __future__ import annotations

import datetime
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from sky_kueue.controller import aging
from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.history import HistoryStore, JobHistory, PreemptionRecord, StepState
from sky_kueue.controller.keys import EpisodeKey
from sky_kueue.controller.kube_store import KubernetesHistoryStore
from sky_kueue.controller.sqlite_store import SqliteHistoryStore
from sky_kueue.sandbox.apiserver.events import EventType
from sky_kueue.sandbox.sandbox import Sandbox

from .live_support import STORE_NAMESPACE, WORKLOADS, group_pod

#: Jobs preempted together each round, and rounds: JOBS x ROUNDS preemptions (the issue asks 200).
JOBS = 4
ROUNDS = 50
#: At least this many SIGKILLs must land during the run (each costs a process start, ~1 s).
MIN_KILLS = 10
#: When the killer strikes: after this many handled events (plus a few milliseconds), or,
#: for a fraction of the lives, at a random moment of the startup.
KILL_AFTER_EVENTS = (10, 100)
KILL_JITTER_SECONDS = (0.0, 0.03)
KILL_DURING_STARTUP_SECONDS = (0.1, 1.0)
DURING_STARTUP_FRACTION = 0.1
KILL_POINT_POLL_SECONDS = 0.2
#: The cluster moves on without a controller for this long before the restart (seconds).
RESTART_AFTER_SECONDS = (0.0, 0.3)
STARTUP_TIMEOUT_SECONDS = 30.0
#: Real seconds to wait for one round's aging (a restart takes about a second).
ROUND_TIMEOUT_SECONDS = 60.0
RANDOM_SEED = 20260101
REPO = Path(__file__).resolve().parents[2]
SETTINGS = {
    "policy": "bounded",
    "preemptions_per_step": 1,
    "boost_per_step": 5,
    "max_boost": 1000,
    "age_weight": 0,
    "min_run_before_reboost_seconds": 0,
}
PROD_PRIORITY, DEV_PRIORITY = 1000, 100
SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "crash"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "prod-priority"},
        "value": PROD_PRIORITY,
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "dev-priority"},
        "value": DEV_PRIORITY,
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "crash-cq"},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [{"name": "default-flavor", "resources": [{"name": "cpu", "nominalQuota": str(JOBS)}]}],
                }
            ],
        },
    },
    {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "crash-lq", "namespace": "crash"},
        "spec": {"clusterQueue": "crash-cq"},
    },
]


def controller_command(
    sandbox: Sandbox,
    state_spec: str,
    config: Path,
    *,
    lease_namespace: str,
    lease_seconds: tuple[float, float, float],
    extra: tuple[str, ...] = (),
) -> list[str]:
    """``sky-kueue controller run`` against ``sandbox``; lease (duration, renew deadline, retry)."""
    duration, renew, retry = lease_seconds
    return [
        sys.executable,
        "-m",
        "sky_kueue.cli.main",
        "controller",
        "run",
        "--kubeconfig",
        str(sandbox.kubeconfig_path),
        "--state",
        state_spec,
        "--config",
        str(config),
        "--lease-namespace",
        lease_namespace,
        "--lease-duration",
        str(duration),
        "--renew-deadline",
        str(renew),
        "--retry-period",
        str(retry),
        "--priority-boost-gate",
        "off",
        *extra,
    ]


def _config(tmp: Path) -> Path:
    data = yaml.safe_load((REPO / "configs" / "sky-kueue.yaml").read_text())
    data["aging"]["parameters"] = dict(SETTINGS)
    # The jobs run in namespace crash: team-b's there, as the controller watches SkyPilot's pods
    # in its config's team namespaces only.
    data["teams"]["team-b"].update(namespace="crash", local_queue="crash-lq")
    path = tmp / "sky-kueue.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Killer:
    """Runs ``sky-kueue controller run`` and SIGKILLs it at random points until told to stop.

    A kill point is a random number of handled events into the process's life (read from its
    log: one ``reconciled`` line per reconcile that changed something) plus a random few
    milliseconds, which lands inside the next reconcile: mid-transaction, between deciding and
    patching, between patching and marking, mid-replay. Some kills land during startup.
    """

    def __init__(self, command: list[str], log_path: Path, rng: random.Random) -> None:
        self.command = command
        self.log_path = log_path
        self.rng = rng
        self.kills = 0
        self.stop = threading.Event()
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = threading.Event()
        self.kill_point = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.error: BaseException | None = None

    def _start(self, events_before_kill: int | None) -> None:
        self.ready.clear()
        self.kill_point.clear()
        proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
        self.proc = proc
        threading.Thread(target=self._copy_log, args=(proc, events_before_kill), daemon=True).start()

    def _copy_log(self, proc: subprocess.Popen[bytes], events_before_kill: int | None) -> None:
        assert proc.stderr is not None
        handled = 0
        with self.log_path.open("ab") as log:
            for line in proc.stderr:
                log.write(line)
                if b'"session started"' in line:
                    self.ready.set()
                elif b'"msg": "reconciled' in line:
                    handled += 1
                    if events_before_kill is not None and handled >= events_before_kill:
                        self.kill_point.set()

    def _plan(self) -> int | None:
        """Events to handle before the next kill (None: kill during startup instead)."""
        if self.rng.random() < DURING_STARTUP_FRACTION:
            return None
        return self.rng.randint(*KILL_AFTER_EVENTS)

    def _run(self) -> None:
        try:
            plan = self._plan()
            self._start(plan)
            while not self.stop.is_set():
                if plan is None:
                    if self.stop.wait(self.rng.uniform(*KILL_DURING_STARTUP_SECONDS)):
                        return
                else:
                    while not self.kill_point.wait(KILL_POINT_POLL_SECONDS):
                        if self.stop.is_set():
                            return
                    if self.stop.wait(self.rng.uniform(*KILL_JITTER_SECONDS)):
                        return
                assert self.proc is not None
                if self.proc.poll() is not None:
                    raise AssertionError(f"the controller exited on its own with {self.proc.returncode}")
                self.proc.send_signal(signal.SIGKILL)
                self.proc.wait()
                self.kills += 1
                self.stop.wait(self.rng.uniform(*RESTART_AFTER_SECONDS))  # the cluster moves on without it
                plan = self._plan()
                self._start(plan)
        except (AssertionError, OSError, subprocess.SubprocessError) as err:  # surfaced by finish()
            self.error = err

    def finish(self) -> subprocess.Popen[bytes]:
        """Stops killing; returns the running controller process once it has started.

        The last kill may have been followed by a restart a moment ago: a SIGTERM sent before
        the new process installed its handlers would kill it outright (exit -15) and test
        nothing about the graceful stop.
        """
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error
        assert self.proc is not None
        assert self.ready.wait(STARTUP_TIMEOUT_SECONDS), "the last controller did not start"
        return self.proc

    def kill_now(self) -> None:
        """Cleanup after a failure: stop the killer and the process."""
        self.stop.set()
        self.thread.join()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class Driver:
    """Plays Kueue's preemptor and SkyPilot's relaunches; keeps its own record of the history."""

    def __init__(self, sandbox: Sandbox, settings: AgingSettings) -> None:
        self.sb = sandbox
        self.settings = settings
        self.histories = {
            str(j): JobHistory(f"managed-job/{j}", base_priority=DEV_PRIORITY) for j in range(1, JOBS + 1)
        }
        self.expected: dict[str, tuple[str, int]] = {}  # relaunch uid -> (job, boost)
        self.changes = sandbox.store.watch(WORKLOADS)
        self.seen: dict[str, dict[str, Any]] = {}
        self.priority_writes: list[tuple[str, int, int, bool]] = []  # uid, old, new, was holding quota

    @staticmethod
    def group(job: str) -> str:
        return f"dev-{job}-fcd1e5cf"

    def workload(self, job: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = self.sb.store.try_get(WORKLOADS, self.group(job), "crash")
        return found

    def drain(self, timeout: float = 0.0) -> bool:
        """Consumes Workload changes (checking every priority write); False if none came in time."""
        event = self.changes.next(timeout)
        if event is None:
            return False
        while event is not None:
            obj = event.obj
            uid = obj["metadata"]["uid"]
            old = self.seen.get(uid)
            if event.type is EventType.DELETED:
                self.seen.pop(uid, None)
            else:
                self.seen[uid] = obj
            if event.type is EventType.MODIFIED and old is not None:
                before, after = old["spec"].get("priority"), obj["spec"].get("priority")
                if before != after:
                    conditions = {c["type"]: c["status"] for c in (old.get("status") or {}).get("conditions") or []}
                    self.priority_writes.append((uid, before, after, conditions.get("QuotaReserved") == "True"))
            event = self.changes.next(0)
        return True

    def launch(self, job: str) -> None:
        self.sb.apply(group_pod("dev", job, "crash", "dev-priority", "1"))

    def admit_all(self) -> None:
        for _ in range(JOBS + 2):
            self.sb.step()
        for job in self.histories:
            workload = self.workload(job)
            assert workload is not None
            admitted = {c["type"]: c["status"] for c in workload["status"]["conditions"]}.get("Admitted")
            assert admitted == "True", f"job {job} not admitted"
            uid = workload["metadata"]["uid"]
            self.histories[job] = self.histories[job].admitted(uid, time.time())

    def preempt_all(self, round_: int) -> str:
        prod = group_pod("prod", f"9{round_:03d}", "crash", "prod-priority", str(JOBS))
        self.sb.apply(prod)
        uids = {job: self.workload(job)["metadata"]["uid"] for job in self.histories}  # type: ignore[index]
        report = self.sb.step()
        assert sorted(report.preempted) == sorted(f"crash/{self.group(j)}" for j in self.histories), report
        now = time.time()
        prod_uid = self.sb.store.get(WORKLOADS, f"prod-9{round_:03d}-fcd1e5cf", "crash")["metadata"]["uid"]
        for job, uid in uids.items():
            record = PreemptionRecord(EpisodeKey(uid, 1), now, self.group(job), "InClusterQueue", prod_uid, None, 1000)
            self.histories[job] = self.histories[job].with_preemption(record)
        self.sb.step()  # the prod job is admitted
        return str(prod["metadata"]["name"])

    def relaunch_all(self) -> None:
        for job in self.histories:
            assert self.workload(job) is None, "the preempted Workload must be gone before SkyPilot relaunches"
            self.launch(job)
        self.sb.step()
        for job in self.histories:
            workload = self.workload(job)
            assert workload is not None
            uid = workload["metadata"]["uid"]
            now = time.time()
            self.histories[job] = self.histories[job].queued(uid, now)
            boost = aging.decide(self.histories[job], self.settings, now).boost
            self.expected[uid] = (job, boost)

    def wait_for_aging(self) -> None:
        deadline = time.monotonic() + ROUND_TIMEOUT_SECONDS

        def aged() -> bool:
            for job in self.histories:
                workload = self.workload(job)
                assert workload is not None
                _, boost = self.expected[workload["metadata"]["uid"]]
                if workload["spec"]["priority"] != DEV_PRIORITY + boost:
                    return False
            return True

        while not aged():
            remaining = deadline - time.monotonic()
            assert remaining > 0, "the controller did not age the relaunches in time"
            self.drain(remaining)  # wakes on the next Workload change
        self.drain()


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.parametrize("state_kind", ["sqlite", "kubernetes"])
def test_sigkill_at_random_points_through_200_preemptions(tmp_path: Path, state_kind: str) -> None:
    rng = random.Random(RANDOM_SEED)
    settings = AgingSettings.from_mapping(SETTINGS)
    state = tmp_path / "controller.db"
    state_spec = str(state) if state_kind == "sqlite" else f"kubernetes:{STORE_NAMESPACE}"
    # The sandbox keeps the real time: the controller process stamps its decisions with it.
    with Sandbox(run_emulator=False, start=datetime.datetime.now(datetime.timezone.utc)) as sandbox:
        sandbox.apply(SETUP)
        if state_kind == "kubernetes":
            sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORE_NAMESPACE}})
        command = controller_command(
            sandbox,
            state_spec,
            _config(tmp_path),
            lease_namespace="default",
            lease_seconds=(4.0, 3.0, 0.5),
            # a restarted pod keeps its name: it re-acquires its own lease at once
            extra=("--identity", "crash-controller"),
        )
        driver = Driver(sandbox, settings)
        killer = Killer(command, tmp_path / "controller.log", rng)
        killer.thread.start()
        try:
            assert killer.ready.wait(STARTUP_TIMEOUT_SECONDS), "the controller did not start"
            for job in driver.histories:
                driver.launch(job)
            driver.admit_all()
            for round_ in range(ROUNDS):
                prod = driver.preempt_all(round_)
                driver.relaunch_all()
                driver.wait_for_aging()
                sandbox.store.delete("pods", f"{prod}", "crash")
                driver.admit_all()
        except BaseException:
            killer.kill_now()
            raise
        last = killer.finish()

        assert killer.kills >= MIN_KILLS, f"only {killer.kills} kills landed"
        last.send_signal(signal.SIGTERM)  # graceful: close watches, save the cursor, release the Lease
        assert last.wait(timeout=30) == 0
        lease = client.CoordinationV1Api(sandbox.api_client()).read_namespaced_lease("sky-kueue-controller", "default")
        assert not lease.spec.holder_identity
        driver.drain()
        driver.changes.close()

        store: HistoryStore = (
            SqliteHistoryStore(state, read_only=True)
            if state_kind == "sqlite"
            else KubernetesHistoryStore(sandbox.api_client(), STORE_NAMESPACE)
        )
        total = 0
        for job, want in driver.histories.items():
            got = store.load(f"managed-job/{job}")
            assert got is not None
            # Zero lost, zero duplicated preemptions.
            assert sorted(p.key.token for p in got.preemptions) == sorted(p.key.token for p in want.preemptions)
            assert all(p.preemptor_priority == PROD_PRIORITY for p in got.preemptions)
            total += len(got.preemptions)
            for step in got.steps:
                expected_job, boost = driver.expected.get(step.key.workload_uid, (job, 0))
                assert expected_job == job
                # One decision per pending episode, equal to the policy's value for the job's history.
                assert (step.key.evictions, step.revision, step.boost) == (0, 0, boost), step
                assert step.state is StepState.ACTUATED, step
                assert step.actuated_boost == boost
            relaunches = {uid for uid, (j, _) in driver.expected.items() if j == job}
            assert relaunches <= {s.key.workload_uid for s in got.steps}
        assert total == JOBS * ROUNDS
        # No aging step is left undone. A zero-boost step needs no patch; one decided just
        # before a kill may stay "decided" until the next start's replay confirms it, which is
        # harmless (the Workload is already at its priority) and checked to be the only case.
        pending = store.pending_steps()
        assert all(step.boost == 0 for step in pending), pending
        store.close()

    # Each relaunch's priority was raised exactly once, to its boost, while it was waiting.
    raised: dict[str, list[tuple[int, int, bool]]] = {}
    for uid, before, after, holding in driver.priority_writes:
        raised.setdefault(uid, []).append((before, after, holding))
    for uid, (_, boost) in driver.expected.items():
        assert raised.get(uid) == [(DEV_PRIORITY, DEV_PRIORITY + boost, False)], uid
    assert set(raised) <= set(driver.expected)
    assert os.path.getsize(tmp_path / "controller.log") > 0

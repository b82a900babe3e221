"""Two replicas on the Kubernetes store: the leader SIGKILLed mid-burst, the follower finishes.

Two ``sky-kueue controller run --state kubernetes`` processes share one sandbox (the history
in JobHistory objects, the Lease in ``default``). The test plays Kueue and SkyPilot as the
crash test does (``test_controller_crash.Driver``): each round every job is preempted and
relaunched. In the middle round the leader is SIGKILLed right after the burst of preemptions
and relaunches lands, with one relaunch aged and the others' patches in flight. The follower
must take the Lease within one lease duration of its last observation of the leader's
renewal, as client-go ``tools/leaderelection`` does (a candidate polls every RetryPeriod and
counts LeaseDuration from the moment it *observed* the record change, not from the holder's
``renewTime``, so clocks need not agree): measured from the last renewal that is at most
LeaseDuration plus two RetryPeriods (the observation lag and the next poll). It then resumes
from the history and cursor in the cluster and ages every relaunch.

Afterwards: every preemption recorded once, one step per relaunch at the policy's boost,
each actuated; every relaunch's priority raised exactly once; and the aging PATCHes the API
server accepted number exactly the steps with a boost, so no step was actuated by both
replicas (the leader's requests all precede its death; the follower leads only after).
"""

from __future__ import annotations

import datetime
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kubernetes import client

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.history import StepState
from sky_kueue.controller.kube_store import KubernetesHistoryStore
from sky_kueue.sandbox.sandbox import Sandbox

from .live_support import STORE_NAMESPACE
from .test_controller_crash import (
    DEV_PRIORITY,
    JOBS,
    PROD_PRIORITY,
    REPO,
    SETTINGS,
    SETUP,
    STARTUP_TIMEOUT_SECONDS,
    Driver,
    _config,
    controller_command,
)

#: Rounds of "preempt every job, relaunch every job"; the leader dies in the middle one.
ROUNDS = 8
KILL_ROUND = ROUNDS // 2
LEASE_DURATION_SECONDS = 4.0
RENEW_DEADLINE_SECONDS = 3.0
RETRY_PERIOD_SECONDS = 0.5
LEASE_NAME = "sky-kueue-controller"
LEASE_NAMESPACE = "default"
LEASE_POLL_SECONDS = 0.05
#: Process scheduling on a shared 2-core machine (the suite runs two pytest workers beside
#: the controller processes), on top of the election's own bound.
SCHEDULING_SLACK_SECONDS = 1.0
#: The follower's bound from the leader's last renewal (see the module docstring).
TAKEOVER_BOUND_SECONDS = LEASE_DURATION_SECONDS + 2 * RETRY_PERIOD_SECONDS + SCHEDULING_SLACK_SECONDS
STOP_TIMEOUT_SECONDS = 30


class Replica:
    """One controller process; its stderr (JSON logs) copied to a file, "leading" noticed."""

    def __init__(self, name: str, command: list[str], log_path: Path) -> None:
        self.name = name
        self.leading = threading.Event()
        self.proc = subprocess.Popen(
            [*command, "--identity", name], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO
        )
        self._log_path = log_path
        threading.Thread(target=self._copy_log, daemon=True).start()

    def _copy_log(self) -> None:
        assert self.proc.stderr is not None
        with self._log_path.open("ab") as log:
            for line in self.proc.stderr:
                log.write(line)
                if b'"session started"' in line:
                    self.leading.set()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def _holder(coordination: client.CoordinationV1Api) -> tuple[str | None, datetime.datetime | None]:
    lease = coordination.read_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
    return lease.spec.holder_identity, lease.spec.renew_time


@pytest.mark.slow
def test_the_follower_takes_over_mid_burst_and_nothing_is_lost_or_doubled(tmp_path: Path) -> None:
    settings = AgingSettings.from_mapping(SETTINGS)
    with Sandbox(run_emulator=False, start=datetime.datetime.now(datetime.timezone.utc)) as sandbox:
        sandbox.apply(SETUP)
        sandbox.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": STORE_NAMESPACE}})
        command = controller_command(
            sandbox,
            f"kubernetes:{STORE_NAMESPACE}",
            _config(tmp_path),
            lease_namespace=LEASE_NAMESPACE,
            lease_seconds=(LEASE_DURATION_SECONDS, RENEW_DEADLINE_SECONDS, RETRY_PERIOD_SECONDS),
        )
        coordination = client.CoordinationV1Api(sandbox.api_client())
        leader = Replica("replica-a", command, tmp_path / "replica-a.log")
        replicas = [leader]
        try:
            assert leader.leading.wait(STARTUP_TIMEOUT_SECONDS), "the first replica did not lead"
            follower = Replica("replica-b", command, tmp_path / "replica-b.log")
            replicas.append(follower)
            driver = Driver(sandbox, settings)
            for job in driver.histories:
                driver.launch(job)
            driver.admit_all()
            takeover_seconds = None
            patches_before_kill = 0
            for round_ in range(ROUNDS):
                if round_ == KILL_ROUND:
                    # All but the first aging patch of the round are slowed down, so the kill
                    # lands mid-burst: one relaunch aged, the others' patches in flight (the
                    # server still applies them after the client died, as a real one would).
                    sandbox.inject("delay", verb="patch", resource="workloads", delay_seconds=0.0, times=1)
                    sandbox.inject("delay", verb="patch", resource="workloads", delay_seconds=1.0, times=JOBS)
                    aged_before = len(_aging_patches(sandbox))
                prod = driver.preempt_all(round_)
                driver.relaunch_all()
                if round_ == KILL_ROUND:
                    deadline = time.monotonic() + STARTUP_TIMEOUT_SECONDS
                    while len(_aging_patches(sandbox)) == aged_before:
                        assert time.monotonic() < deadline, "the leader never aged the burst"
                        time.sleep(LEASE_POLL_SECONDS / 10)
                    _, last_renewal = _holder(coordination)
                    leader.kill()
                    killed_at = datetime.datetime.now(datetime.timezone.utc)
                    patches_before_kill = len(_aging_patches(sandbox))
                    deadline = time.monotonic() + LEASE_DURATION_SECONDS + 2 * RETRY_PERIOD_SECONDS + 5
                    while _holder(coordination)[0] != follower.name:
                        assert time.monotonic() < deadline, "the follower never took the Lease"
                        time.sleep(LEASE_POLL_SECONDS)
                    acquired_at = datetime.datetime.now(datetime.timezone.utc)
                    assert last_renewal is not None
                    takeover_seconds = (acquired_at - last_renewal).total_seconds()
                    print(
                        f"failover: Lease taken {takeover_seconds:.2f} s after the leader's last renewal, "
                        f"{(acquired_at - killed_at).total_seconds():.2f} s after the SIGKILL; "
                        f"{patches_before_kill} aging patches before it"
                    )
                driver.wait_for_aging()
                sandbox.store.delete("pods", prod, "crash")
                driver.admit_all()
            assert takeover_seconds is not None
            assert takeover_seconds <= TAKEOVER_BOUND_SECONDS
            assert follower.leading.is_set()
            follower.proc.send_signal(signal.SIGTERM)
            assert follower.proc.wait(timeout=STOP_TIMEOUT_SECONDS) == 0
            driver.drain()
            driver.changes.close()
            patches = _aging_patches(sandbox)
            store = KubernetesHistoryStore(sandbox.api_client(), STORE_NAMESPACE)
            boosted_steps = 0
            for job, want in driver.histories.items():
                got = store.load(f"managed-job/{job}")
                assert got is not None
                assert sorted(p.key.token for p in got.preemptions) == sorted(p.key.token for p in want.preemptions)
                assert all(p.preemptor_priority == PROD_PRIORITY for p in got.preemptions)
                for step in got.steps:
                    expected_job, boost = driver.expected.get(step.key.workload_uid, (job, 0))
                    assert expected_job == job
                    assert (step.key.evictions, step.revision, step.boost) == (0, 0, boost), step
                    assert step.state is StepState.ACTUATED and step.actuated_boost == boost, step
                    boosted_steps += boost > 0
                relaunches = {uid for uid, (j, _) in driver.expected.items() if j == job}
                assert relaunches <= {s.key.workload_uid for s in got.steps}
            assert sum(len(h.preemptions) for h in driver.histories.values()) == JOBS * ROUNDS
            assert store.pending_steps() == ()
        finally:
            for replica in replicas:
                replica.kill()

    raised: dict[str, list[tuple[int, int, bool]]] = {}
    for uid, before, after, holding in driver.priority_writes:
        raised.setdefault(uid, []).append((before, after, holding))
    for uid, (_, boost) in driver.expected.items():
        want_writes = [(DEV_PRIORITY, DEV_PRIORITY + boost, False)] if boost else None
        assert raised.get(uid) == want_writes, uid
    # Each boosted step was patched exactly once, by one replica: the leader before its death
    # or the follower after it, never both.
    assert len(patches) == boosted_steps, (len(patches), boosted_steps, patches_before_kill)
    assert 0 < patches_before_kill < len(patches)


def _aging_patches(sandbox: Sandbox) -> list[str]:
    """The Workload PATCHes the API server accepted (the aging actuations), in order."""
    return [
        r.info.name
        for r in sandbox.requests.records()
        if r.info.resource == "workloads" and r.info.verb == "patch" and r.status == 200
    ]

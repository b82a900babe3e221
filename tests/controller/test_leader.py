"""Leader election over a Lease in the sandbox, timed by an injected clock (no sleeps).

Unit level: acquisition, exclusion, takeover after expiry measured on the follower's own
clock, fencing at the renew deadline, release on shutdown. Controller level: two replicas on
one cluster; only the leader acts; when it stops renewing, the follower takes over after the
lease expires and ages the next relaunch.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from sky_kueue.controller.clock import ManualClock
from sky_kueue.controller.leader import KubernetesLeaseClient, LeaderElector, LeaseSettings
from sky_kueue.sandbox.sandbox import Sandbox

from .live_support import POD_GRACE_SECONDS, demo_aging, group_pod, live_sandbox

DURATION, DEADLINE, PERIOD = 15.0, 10.0, 2.0


def _elector(sandbox: Sandbox, identity: str, clock: ManualClock) -> LeaderElector:
    settings = LeaseSettings(
        namespace="default",
        identity=identity,
        lease_duration_seconds=DURATION,
        renew_deadline_seconds=DEADLINE,
        retry_period_seconds=PERIOD,
    )
    return LeaderElector(KubernetesLeaseClient(sandbox.api_client()), settings, clock=clock)


@pytest.fixture
def sandbox() -> Iterator[Sandbox]:
    with Sandbox(run_emulator=False) as box:
        yield box


def test_one_leader_and_a_takeover_only_after_the_lease_expires(sandbox: Sandbox) -> None:
    clock_a, clock_b = ManualClock(1_000.0), ManualClock(5_000.0)  # unrelated clocks: skew is harmless
    a, b = _elector(sandbox, "a", clock_a), _elector(sandbox, "b", clock_b)

    assert a.try_acquire_or_renew() and a.is_leader()
    assert not b.try_acquire_or_renew() and b.observed_holder == "a"
    for _ in range(5):  # a renews every period; b never sees the record stand still long enough
        clock_a.advance(PERIOD)
        clock_b.advance(PERIOD)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()

    # a dies. b must wait a full lease duration from when it last saw the record change.
    clock_b.advance(DURATION - 1)
    assert not b.try_acquire_or_renew()
    clock_b.advance(2)
    assert b.try_acquire_or_renew() and b.is_leader()
    lease = client.CoordinationV1Api(sandbox.api_client()).read_namespaced_lease("sky-kueue-controller", "default")
    assert lease.spec.holder_identity == "b" and lease.spec.lease_transitions == 1

    # a comes back: it finds b holding a fresh lease and stays a follower.
    clock_a.advance(60)
    assert not a.try_acquire_or_renew() and not a.is_leader()


def test_the_leader_stops_acting_at_the_renew_deadline(sandbox: Sandbox) -> None:
    clock = ManualClock(0.0)
    a = _elector(sandbox, "a", clock)
    assert a.try_acquire_or_renew()
    clock.advance(DEADLINE - 0.5)
    assert a.is_leader()
    clock.advance(1)
    assert not a.is_leader()  # fenced before any follower could take over (DEADLINE < DURATION)
    assert a.try_acquire_or_renew() and a.is_leader()  # still its lease: renewed


def test_release_lets_a_follower_take_over_at_once(sandbox: Sandbox) -> None:
    clock = ManualClock(0.0)
    a, b = _elector(sandbox, "a", clock), _elector(sandbox, "b", clock)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release() and not a.is_leader()
    assert b.try_acquire_or_renew()


def test_only_the_leader_acts_and_the_follower_takes_over(tmp_path: Path) -> None:
    with live_sandbox(tmp_path) as live:
        a = live.new_controller(demo_aging(), identity="replica-a")
        b = live.new_controller(demo_aging(), identity="replica-b", start=False)
        assert not b.step() and not b.idle()  # follower: no session, no watches

        def preempt_and_relaunch(job_id: str, controller_for_settle: object) -> None:
            dev = group_pod("dev", job_id, "team-b", "dev-priority", "5")
            live.apply(dev, controller=controller_for_settle)  # type: ignore[arg-type]
            live.step(controller=controller_for_settle)  # type: ignore[arg-type]
            prod = group_pod("train", f"{job_id}0", "team-a", "prod-priority", "7", gpus="2")
            live.apply(prod, controller=controller_for_settle)  # type: ignore[arg-type]
            live.step(60, controller=controller_for_settle)  # type: ignore[arg-type]
            # the preempted pod runs out its grace period, then SkyPilot relaunches the group
            live.step(POD_GRACE_SECONDS, controller=controller_for_settle)  # type: ignore[arg-type]
            live.apply(dev, controller=controller_for_settle)  # type: ignore[arg-type]
            live.step(controller=controller_for_settle)  # type: ignore[arg-type]
            live.sandbox.store.delete("pods", prod["metadata"]["name"], "team-a")
            live.step(10, controller=controller_for_settle)  # type: ignore[arg-type]

        preempt_and_relaunch("1", a)
        assert live.workload("team-b", "dev-1-fcd1e5cf")["spec"]["priority"] == 200  # type: ignore[index]
        assert {s.actuator for s in live.history("1").steps if s.boost} == {"kubernetes"}
        live.sandbox.store.delete("pods", "dev-1-fcd1e5cf-head", "team-b")  # job 1 is done
        live.step(10, controller=a)

        # a stops renewing (a crash, a partition). b takes over one lease duration later.
        live.lease_clock.advance(DEADLINE + 0.5)
        assert not a.is_leader()  # a is fenced first...
        assert not b.step()  # ...b still waits
        live.lease_clock.advance(DURATION)
        assert b.step() and b.is_leader()
        assert not a.step()  # a sees b's lease and ends its session
        assert not a.idle()
        live.settle(b)

        preempt_and_relaunch("2", b)
        assert live.workload("team-b", "dev-2-fcd1e5cf")["spec"]["priority"] == 200  # type: ignore[index]
        assert live.history("2").preemptions and live.history("2").current_boost == 100


def test_writes_are_fenced_once_the_lease_is_lost(tmp_path: Path) -> None:
    """The actuator the controller gives its engine refuses to write when this replica no
    longer leads: the next leader will actuate the step. Removing the fence fails this test
    (a replica that lost its Lease kept writing priorities another replica now owns)."""
    from sky_kueue.controller.actuators import ActuationError, ActuationOutcome, WorkloadPatch, WorkloadRef
    from sky_kueue.controller.aging import ActuatorKind
    from sky_kueue.mirror.store import MirrorStore

    with live_sandbox(tmp_path) as live:
        a = live.new_controller(demo_aging(), identity="replica-a")
        dev = group_pod("dev", "1", "team-b", "dev-priority", "5")
        live.apply(dev, controller=a)
        live.step(controller=a)
        workload = live.workload("team-b", "dev-1-fcd1e5cf")
        assert workload is not None
        target = WorkloadRef("team-b", "dev-1-fcd1e5cf", workload["metadata"]["uid"])

        def patch(priority: int) -> WorkloadPatch:
            return WorkloadPatch(
                target, {"spec": {"priority": priority}}, ActuatorKind.SPEC_PRIORITY, priority - 100, priority, "test"
            )

        fenced = a._new_engine(MirrorStore())._actuator  # what every reconcile writes through
        assert a.is_leader()
        assert fenced.apply(patch(150)).outcome is ActuationOutcome.APPLIED
        live.lease_clock.advance(DEADLINE + 0.5)
        assert not a.is_leader()
        with pytest.raises(ActuationError, match="not the leader"):
            fenced.apply(patch(175))
        after = live.workload("team-b", "dev-1-fcd1e5cf")
    assert after is not None and after["spec"]["priority"] == 150

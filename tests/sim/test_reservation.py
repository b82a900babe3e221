"""Reservations for starved jobs (``SimConfig.reserve_after_s``) on a trace checked by hand."""

from __future__ import annotations

from dataclasses import replace

from sky_kueue.sim import policies
from sky_kueue.sim.reservation import QueueOrder
from sky_kueue.sim.simulator import SimConfig, Simulator
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder


def blocked_gang_trace() -> Trace:
    # 8 GPUs. The 8-GPU job "big" arrives at t=10 while two 4-GPU jobs run (ending at 100 and
    # 150); each half that frees is taken by the next 4-GPU job behind it (BestEffortFIFO).
    return (
        TraceBuilder()
        .team("a", gpus=8)
        .job("s1", at=0, gpus=4, run=100)
        .job("s2", at=0, gpus=4, run=150)
        .job("big", at=10, gpus=8, run=100)
        .job("s3", at=20, gpus=4, run=100)
        .job("s4", at=110, gpus=4, run=100)
        .job("s5", at=160, gpus=4, run=100)
        .trace()
    )


def admitted_at(config: SimConfig) -> tuple[dict[str, float | None], Simulator]:
    simulator = Simulator(blocked_gang_trace(), policies.resolve("baseline"), config)
    run = simulator.run()
    admitted = {
        j.job_id: None if j.first_admission_wait_s is None else j.first_admission_wait_s + j.submit_s for j in run.jobs
    }
    return admitted, simulator


def test_without_a_reservation_smaller_jobs_take_each_freed_half() -> None:
    admitted, _ = admitted_at(NO_DELAY)
    assert admitted["s3"] == 100  # s1's half
    assert admitted["s4"] == 150  # s2's half
    assert admitted["s5"] == 200  # s3's half
    assert admitted["big"] == 300  # only once the stream of small jobs dries up


def test_a_reservation_holds_back_the_work_queued_behind_the_starved_job() -> None:
    admitted, simulator = admitted_at(replace(NO_DELAY, reserve_after_s=60.0))
    # big reserves at t=70: s3 (created after it) is deactivated, so s1's half stays free
    # from 100 and big is admitted when s2 ends at 150; s4 arrives at 110 and is held too.
    assert admitted["big"] == 150
    # Reactivated at 150 and requeued at their creation times: s3 and s4 before s5 (160).
    assert admitted["s3"] == admitted["s4"] == 250
    assert admitted["s5"] == 350
    # Each job that waited 60 s held the reservation in turn, first come first served: big,
    # then s3 (starved while held back), s4 and s5.
    assert simulator.reservations.taken == 4
    assert all(state.holder is None and not state.held for state in simulator.reservations.cohorts.values())


def test_queue_order_is_kueues_priority_then_creation_time() -> None:
    assert QueueOrder(90, 5.0).behind(QueueOrder(100, 10.0))
    assert QueueOrder(100, 20.0).behind(QueueOrder(100, 10.0))
    assert not QueueOrder(100, 10.0).behind(QueueOrder(100, 10.0))
    assert not QueueOrder(110, 99.0).behind(QueueOrder(100, 10.0))

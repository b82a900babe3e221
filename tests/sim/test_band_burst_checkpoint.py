"""Band policies, bursting and checkpoints on traces small enough to check by hand."""

from __future__ import annotations

from dataclasses import replace

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import policies
from sky_kueue.sim.metrics import summarize
from sky_kueue.sim.results import JobOutcome
from sky_kueue.sim.simulator import simulate
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id, relaunch_after

DELAY_30S = relaunch_after(30.0)


def test_rank_admits_a_relaunch_before_a_fresh_arrival_created_earlier() -> None:
    # low-1 is preempted at t=10 and relaunched at t=40; low-2 arrived fresh at t=20. When
    # high-1 ends at t=60, Kueue's FIFO admits the older Workload (low-2) under baseline,
    # the relaunch under rank (it waits one level above fresh arrivals).
    trace = (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=100, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .job("low-2", at=20, gpus=4, run=100, klass="low")
        .trace()
    )
    baseline = by_id(simulate(trace, policies.resolve("baseline"), DELAY_30S))
    assert baseline["low-2"].first_admission_wait_s == 40
    assert baseline["low-1"].end_s == 260
    ranked = by_id(simulate(trace, policies.resolve("rank"), DELAY_30S))
    assert ranked["low-1"].end_s == 160
    assert ranked["low-2"].first_admission_wait_s == 140
    assert ranked["low-1"].preemptions == ranked["low-2"].preemptions + 1 == 1


def protect_trace() -> Trace:
    # Two low jobs share 8 GPUs; low-a (newest) is preempted by high-1, readmitted at t=60
    # and is again the newest when high-2 arrives at t=100.
    return (
        TraceBuilder()
        .team("a", gpus=8)
        .job("low-b", at=0, gpus=4, run=1_000, klass="low")
        .job("low-a", at=5, gpus=4, run=1_000, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .job("high-2", at=100, gpus=4, run=50, klass="high")
        .trace()
    )


def test_kueue_preempts_the_newest_admission_again_and_protection_moves_it_to_a_fresh_victim() -> None:
    baseline = by_id(simulate(protect_trace(), policies.resolve("baseline"), NO_DELAY))
    assert (baseline["low-a"].preemptions, baseline["low-b"].preemptions) == (2, 0)
    # Kueue's newest-first order loses the least work: 5 s, then 40 s, of low-a's 4 GPUs.
    assert baseline["low-a"].lost_gpu_s + baseline["low-b"].lost_gpu_s == 4 * (5 + 40)
    for name in ("protect", "keep-place"):
        protected = by_id(simulate(protect_trace(), policies.resolve(name), NO_DELAY))
        assert (protected["low-a"].preemptions, protected["low-b"].preemptions) == (1, 1), name
        assert protected["high-2"].wait_s == 0
        # The minimal counter-example to "halve repeated preemption at no cost": the same
        # two preemptions spread over two jobs take low-b's 100 s of work instead of 40 s.
        assert protected["low-a"].lost_gpu_s + protected["low-b"].lost_gpu_s == 4 * (5 + 100)


def test_protection_can_end_after_a_bounded_run() -> None:
    # Protected for 20 s of its run from t=60, low-a is back at its class's plain level and
    # the newest admission when high-2 arrives at t=100: Kueue's own order applies again.
    settings = AgingSettings(protect_seconds=20.0)
    released = by_id(simulate(protect_trace(), policies.resolve("keep-place", settings), NO_DELAY))
    assert (released["low-a"].preemptions, released["low-b"].preemptions) == (2, 0)


def repeatedly_preempted_trace() -> Trace:
    builder = TraceBuilder().team("a", gpus=4).job("low", at=0, gpus=4, run=1_000, klass="low")
    for i, at in enumerate((10, 100, 200, 300)):
        builder.job(f"high-{i}", at=at, gpus=4, run=50, klass="high")
    return builder.trace()


def test_allow_burst_sends_the_relaunch_to_a_cloud_after_burst_after_preemptions() -> None:
    settings = replace(policies.with_burst_defaults(AgingSettings()), burst_after_preemptions=3)
    assert policies.with_burst_defaults(AgingSettings()).burst_after_preemptions == 1
    # An instant cloud (cloud_startup_s=0): this checks when the burst is decided.
    config = replace(NO_DELAY, allow_burst=True, burst_cost_per_gpu_hour=3.6, cloud_startup_s=0.0)
    run = simulate(repeatedly_preempted_trace(), policies.resolve("keep-place", settings), config)
    low = by_id(run)["low"]
    assert low.preemptions == 3
    assert low.outcome is JobOutcome.BURST
    assert low.end_s == 200 + 1_000
    assert low.burst_cost == 4 * 1_000 / 3600 * 3.6
    metrics = summarize(run, ["low", "high"])
    assert metrics.burst_gpu_hours == 4 * 1_000 / 3600
    # First preemption at t=10; the capacity it kept came with the burst at t=200.
    assert metrics.max_wait_after_preemption_s == 190
    # The baseline never bursts on preemptions: it is SkyPilot's behaviour without the controller.
    baseline = by_id(simulate(repeatedly_preempted_trace(), policies.resolve("baseline", settings), config))["low"]
    assert (baseline.preemptions, baseline.outcome) == (4, JobOutcome.FINISHED)


def test_allow_burst_times_out_a_waiting_relaunch() -> None:
    settings = replace(
        policies.with_burst_defaults(AgingSettings()), burst_after_preemptions=5, burst_max_predicted_wait_seconds=25.0
    )
    config = replace(NO_DELAY, allow_burst=True, cloud_startup_s=0.0)  # instant cloud: the decision's time
    low = by_id(simulate(repeatedly_preempted_trace(), policies.resolve("rank", settings), config))["low"]
    # Preempted at t=10, relaunched at once, still waiting behind high-0 at t=35: burst.
    assert (low.preemptions, low.outcome, low.end_s) == (1, JobOutcome.BURST, 35 + 1_000)


def test_checkpoints_keep_whole_intervals_of_a_preempted_run() -> None:
    trace = (
        TraceBuilder()
        .team("a", gpus=4)
        .job("low-1", at=0, gpus=4, run=100, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .trace()
    )
    run = simulate(trace, policies.resolve("baseline"), replace(NO_DELAY, checkpoint_every_s=4.0))
    low = by_id(run)["low-1"]
    assert low.lost_gpu_s == 4 * 2  # ran 10 s, kept two 4-s checkpoints
    assert low.end_s == 60 + 92
    assert low.wait_after_preemption_s == 50
    assert run.useful_gpu_s == 4 * 8


def test_a_launchs_old_wait_limit_never_sends_its_relaunch_to_a_cloud() -> None:
    # low-1's first launch carries the team's 100 s admission timeout (due at t=100). It is
    # admitted at once, preempted at t=10 and relaunched 200 s later: that old timeout fires
    # while it waits to be relaunched and must not move it to a cloud (no --allow-burst here).
    trace = (
        TraceBuilder()
        .team("a", gpus=4, wait_limit=100.0)
        .job("low-1", at=0, gpus=4, run=1_000, klass="low")
        .job("high-1", at=10, gpus=4, run=50, klass="high")
        .trace()
    )
    low = by_id(simulate(trace, policies.resolve("baseline"), relaunch_after(200.0)))["low-1"]
    assert (low.outcome, low.preemptions, low.end_s) == (JobOutcome.FINISHED, 1, 210 + 1_000)

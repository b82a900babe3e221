"""Band protection granted only within nominal quota (``AgingSettings.protect_within_nominal``).

Why it matters: Kueue's reclaim takes a borrowing ClusterQueue's Workloads lowest priority
first and stops once the ClusterQueue is within nominal quota, so protecting more relaunches
than nominal quota holds only moves the reclaim onto the oldest plain work, which ran longest.
"""

from __future__ import annotations

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.sim import policies
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.simulator import Simulator
from sky_kueue.sim.traces import Trace
from tests.sim.builders import NO_DELAY, TraceBuilder, by_id


def _two_reclaims() -> Trace:
    """Team a (nominal 2 GPUs) runs three 2-GPU jobs, two of them on team b's idle quota. b's
    first owner (4 GPUs, t=100) reclaims the two newest; both are readmitted at t=200 when it
    ends. b's second owner (2 GPUs, t=1000) reclaims one 2-GPU job."""
    return (
        TraceBuilder()
        .team("a", gpus=2, cohort="org")
        .team("b", gpus=4, cohort="org")
        .job("a-first", at=0, gpus=2, run=5000, team="a")
        .job("a-second", at=0.5, gpus=2, run=5000, team="a")
        .job("a-third", at=1, gpus=2, run=5000, team="a")
        .job("b-owner-0", at=100, gpus=4, run=100, klass="high", team="b")
        .job("b-owner-1", at=1000, gpus=2, run=100, klass="high", team="b")
        .trace()
    )


def _run(within_nominal: bool) -> RunResult:
    settings = AgingSettings(
        policy="keep-place", protect_levels=1, protect_after_preemptions=1, protect_within_nominal=within_nominal
    )
    return Simulator(_two_reclaims(), policies.resolve("keep-place", settings), NO_DELAY).run()


def test_protecting_every_relaunch_sends_the_reclaim_to_the_oldest_plain_job() -> None:
    jobs = by_id(_run(within_nominal=False))
    assert [jobs[j].preemptions for j in ("a-second", "a-third")] == [1, 1]
    # Both relaunches are protected (4 GPUs above a nominal 2): the reclaim takes a-first,
    # which had run 1,000 s, and leaves two protected jobs that a reclaim of more would reach.
    assert jobs["a-first"].preemptions == 1


def test_within_nominal_only_one_relaunch_is_protected_and_the_newest_plain_one_pays() -> None:
    jobs = by_id(_run(within_nominal=True))
    assert jobs["a-first"].preemptions == 0
    relaunched = sorted(jobs[j].preemptions for j in ("a-second", "a-third"))
    # One relaunch fits the nominal 2 GPUs and keeps its protected level; the other is
    # admitted at the plain level, the newest plain admission, and is reclaimed again.
    assert relaunched == [1, 2]


def test_the_setting_is_off_by_default_and_reaches_the_simulators_decision() -> None:
    assert AgingSettings().protect_within_nominal is False
    assert AgingSettings.from_mapping({"protect_within_nominal": True}).protect_within_nominal is True
    policy = policies.resolve("keep-place", AgingSettings(policy="keep-place", protect_within_nominal=True))
    assert isinstance(policy, policies.RegistryPolicy)
    assert policy.settings.protect_within_nominal is True

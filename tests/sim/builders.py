"""Small traces for simulator tests, built like Kueue's ``MakeWorkload(...)`` fixtures."""

from __future__ import annotations

from dataclasses import dataclass, field

from sky_kueue.sim.cluster import ClusterSpec, TeamSpec, build_cluster
from sky_kueue.sim.relaunch import RelaunchModel
from sky_kueue.sim.results import JobResult, RunResult
from sky_kueue.sim.simulator import SimConfig
from sky_kueue.sim.traces import JobSpec, Trace

#: A relaunch the moment its job is preempted (no detection delay, no backoff).
NO_DELAY = SimConfig(relaunch=RelaunchModel(detection_gap_s=0.0, backoff=False))


def relaunch_after(seconds: float) -> SimConfig:
    """A relaunch exactly ``seconds`` after its preemption (no jitter, no growth): SkyPilot's
    delay, or a policy's hold."""
    return SimConfig(
        relaunch=RelaunchModel(
            detection_gap_s=0.0,
            backoff_initial_s=seconds,
            backoff_multiplier=1.0,
            backoff_max_s=seconds,
            backoff_jitter=0.0,
        )
    )


def by_id(run: RunResult) -> dict[str, JobResult]:
    """A run's jobs by id."""
    return {j.job_id: j for j in run.jobs}


@dataclass
class TraceBuilder:
    """``TraceBuilder().team("a", gpus=4).job("j1", at=0, gpus=4, run=100, klass="low").trace()``."""

    teams: list[TeamSpec] = field(default_factory=list)
    jobs: list[JobSpec] = field(default_factory=list)

    def team(self, name: str, gpus: int, cohort: str | None = None, wait_limit: float | None = None) -> TraceBuilder:
        self.teams.append(TeamSpec(name=name, gpus=gpus, cohort=cohort, wait_limit_seconds=wait_limit))
        return self

    def job(
        self,
        job_id: str,
        *,
        at: float,
        gpus: int,
        run: float,
        klass: str = "low",
        team: str | None = None,
        fails: bool = False,
    ) -> TraceBuilder:
        self.jobs.append(
            JobSpec(
                job_id=job_id,
                submit_s=at,
                duration_s=run,
                gpus=gpus,
                cpu_milli=gpus * 1000,
                memory_bytes=gpus * 2**30,
                priority_class=klass,
                team=team if team is not None else self.teams[0].name,
                fails=fails,
            )
        )
        return self

    def trace(self) -> Trace:
        cluster = build_cluster(ClusterSpec(teams=tuple(self.teams)))
        jobs = tuple(sorted(self.jobs, key=lambda j: (j.submit_s, j.job_id)))
        return Trace(name="test", jobs=jobs, cluster=cluster, description="test trace")


def team_above_nominal() -> Trace:
    """The safe-relaunch counter-example (issue 24, dev-starvation and the storms): team a offers
    more work than its nominal 4 GPUs, in 1-GPU jobs arriving every 100 s for 400 s each, so its
    own fresh work keeps its usage at or above nominal; its 4-GPU job ``a-big`` borrows team b's
    idle GPUs, and b's owners return every 600 s for 300 s. Shared by the plain hold's test
    (no safe place) and the team reservation's (the reservation makes one)."""
    builder = TraceBuilder().team("a", gpus=4, cohort="org").team("b", gpus=4, cohort="org")
    builder.job("a-big", at=450, gpus=4, run=1200, team="a")
    for index in range(60):
        builder.job(f"a-small-{index:02d}", at=1 + 100 * index, gpus=1, run=400, team="a")
    for index in range(10):
        builder.job(f"b-owner-{index}", at=300 + 600 * index, gpus=4, run=300, klass="high", team="b")
    return builder.trace()

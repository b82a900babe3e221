"""A synthetic GPU-cluster trace calibrated to published statistics.

Why synthetic: real traces are rarely shareable, yet the question "does aging end
starvation without hurting anyone?" needs realistic contention: heavy-tailed run times,
mostly small jobs with a few very large ones, a day/night rhythm, and many jobs that fail.
The published analyses of production GPU clusters agree on the shape:

* **Run time** is close to lognormal. Fits on Microsoft Philly, SenseTime Helios, Alibaba
  PAI and Shanghai AI Lab Acme give a log-mean ``mu`` of about 4.8 to 6.8 and a log-sd
  ``sigma`` of about 2.1 to 2.6 (seconds). We default to the middle of both ranges
  (:data:`DEFAULT_DURATION_MU` = 5.8, i.e. a median of about 5.5 minutes, and
  :data:`DEFAULT_DURATION_SIGMA` = 2.3), clipped to [:data:`MIN_DURATION_SECONDS`,
  :data:`MAX_DURATION_SECONDS`].
* **GPUs per job** are powers of two with a median of 1 and a long tail
  (:data:`DEFAULT_GPU_WEIGHTS`), never more than one team's nominal quota (a larger job
  could only run by borrowing a whole team's quota and would starve by construction).
* **Arrivals** follow a diurnal cycle: their density is proportional to
  ``1 + amplitude * cos(2 pi (t - peak) / 1 day)``, sampled by thinning. The offered load
  is *calibrated*, not left to chance: the jobs (size, run time) are drawn first, and the
  arrival window is then set so that the GPU-seconds they bring over the window's capacity
  equal :attr:`SyntheticParams.load` (demand above 1 builds queues). Drawing arrivals at a
  mean rate instead made the realized load a lottery under these heavy tails (a requested
  0.85 came out between 0.65 and 1.10 over seeds 0-2, because one multi-day job is a large
  share of the work); :meth:`Trace.realized_load` reports what a trace actually offers.
* **Failures**: 15 to 40 % of jobs fail in these traces; :data:`DEFAULT_FAILURE_FRACTION`
  of jobs exit with an error after their drawn run time (SkyPilot does not relaunch a
  user failure unless asked to).
* **Teams** differ in demand (a Zipf skew, :data:`DEFAULT_TEAM_SKEW`), so busy teams
  borrow idle quota and are reclaimed when its owners return: the preemptions that make
  SkyPilot relaunches starve.

Every draw comes from the ``rng`` passed in, so a seed fixes the trace.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from sky_kueue.sim.cluster import (
    DEFAULT_COHORT,
    DEFAULT_CPU_PER_GPU_MILLI,
    DEFAULT_MEMORY_PER_GPU_BYTES,
    ClusterSpec,
    TeamSpec,
    build_cluster,
)
from sky_kueue.sim.traces import SYNTHETIC, JobSpec, Trace, TraceError

DEFAULT_JOBS = 2_000
DEFAULT_TEAMS = 6
#: Teams are split into this many cohorts of consecutive teams (borrowing stays within one).
DEFAULT_COHORTS = 1
DEFAULT_GPUS_PER_TEAM = 32
#: Offered GPU demand over capacity, averaged over a day (>1: queues build at peak).
DEFAULT_LOAD = 1.1
DEFAULT_DURATION_MU = 5.8
DEFAULT_DURATION_SIGMA = 2.3
MIN_DURATION_SECONDS = 10.0
MAX_DURATION_SECONDS = 3 * 86_400.0
#: (GPUs, relative weight): median 1, long tail of multi-node jobs.
DEFAULT_GPU_WEIGHTS: tuple[tuple[int, float], ...] = (
    (1, 0.55),
    (2, 0.15),
    (4, 0.12),
    (8, 0.12),
    (16, 0.04),
    (32, 0.02),
)
#: (priority class, share of jobs).
DEFAULT_CLASS_MIX: tuple[tuple[str, float], ...] = (("low", 0.5), ("medium", 0.3), ("high", 0.2))
DEFAULT_FAILURE_FRACTION = 0.25
#: Zipf exponent of team demand: team i gets a share proportional to 1 / (i + 1) ** skew.
DEFAULT_TEAM_SKEW = 1.0
#: Relative swing of the arrival rate over a day (0: flat, 1: rate 0 at night).
DEFAULT_DIURNAL_AMPLITUDE = 0.5
#: Hour of the day (trace time) when arrivals peak.
DEFAULT_PEAK_HOUR = 14.0
SECONDS_PER_DAY = 86_400.0


@dataclass(frozen=True)
class SyntheticParams:
    """Every knob of the generator (see the module docstring for the calibration)."""

    #: Number of jobs; when None, generate arrivals for ``hours`` instead.
    jobs: int | None = DEFAULT_JOBS
    hours: float | None = None
    teams: int = DEFAULT_TEAMS
    cohorts: int = DEFAULT_COHORTS
    gpus_per_team: int = DEFAULT_GPUS_PER_TEAM
    load: float = DEFAULT_LOAD
    duration_mu: float = DEFAULT_DURATION_MU
    duration_sigma: float = DEFAULT_DURATION_SIGMA
    min_duration_s: float = MIN_DURATION_SECONDS
    max_duration_s: float = MAX_DURATION_SECONDS
    gpu_weights: tuple[tuple[int, float], ...] = DEFAULT_GPU_WEIGHTS
    class_mix: tuple[tuple[str, float], ...] = DEFAULT_CLASS_MIX
    failure_fraction: float = DEFAULT_FAILURE_FRACTION
    team_skew: float = DEFAULT_TEAM_SKEW
    diurnal_amplitude: float = DEFAULT_DIURNAL_AMPLITUDE
    peak_hour: float = DEFAULT_PEAK_HOUR
    #: Seconds in Kueue after which a launch attempt bursts to the cloud (None: never).
    wait_limit_seconds: float | None = None

    def validate(self) -> None:
        """Raises TraceError naming the first invalid parameter."""
        if (self.jobs is None) == (self.hours is None):
            raise TraceError("synthetic trace: give exactly one of jobs or hours")
        if self.jobs is not None and self.jobs < 1:
            raise TraceError(f"synthetic trace: jobs must be at least 1, got {self.jobs}")
        if self.hours is not None and self.hours <= 0:
            raise TraceError(f"synthetic trace: hours must be positive, got {self.hours}")
        if self.teams < 1 or self.gpus_per_team < 1:
            raise TraceError("synthetic trace: teams and gpus_per_team must be at least 1")
        if not 1 <= self.cohorts <= self.teams:
            raise TraceError(f"synthetic trace: cohorts must be in [1, teams], got {self.cohorts}")
        if self.load <= 0:
            raise TraceError(f"synthetic trace: load must be positive, got {self.load}")
        if not 0 <= self.failure_fraction <= 1:
            raise TraceError(f"synthetic trace: failure_fraction must be in [0, 1], got {self.failure_fraction}")
        if not 0 <= self.diurnal_amplitude <= 1:
            raise TraceError(f"synthetic trace: diurnal_amplitude must be in [0, 1], got {self.diurnal_amplitude}")
        if not 0 < self.min_duration_s <= self.max_duration_s:
            raise TraceError("synthetic trace: need 0 < min_duration_s <= max_duration_s")
        if not any(g <= self.gpus_per_team for g, _ in self.gpu_weights):
            raise TraceError("synthetic trace: no GPU count in gpu_weights fits a team's quota")


def _weights(pairs: tuple[tuple[int, float], ...], limit: int) -> tuple[list[int], list[float]]:
    kept = [(g, w) for g, w in pairs if g <= limit and w > 0]
    return [g for g, _ in kept], [w for _, w in kept]


def _diurnal_arrival(rng: random.Random, window_s: float, params: SyntheticParams) -> float:
    """One arrival time in ``[0, window_s)`` with the diurnal density (thinning)."""
    peak_s = params.peak_hour * 3600.0
    while True:
        t = rng.random() * window_s
        density = 1 + params.diurnal_amplitude * math.cos(2 * math.pi * (t - peak_s) / SECONDS_PER_DAY)
        if rng.random() * (1 + params.diurnal_amplitude) <= density:
            return t


def generate(params: SyntheticParams, rng: random.Random) -> Trace:
    """A synthetic trace; deterministic for a given ``rng`` state.

    Raises:
        TraceError: invalid parameters.
    """
    params.validate()
    teams = [f"team-{chr(ord('a') + i)}" if i < 26 else f"team-{i}" for i in range(params.teams)]
    per_cohort = math.ceil(params.teams / params.cohorts)
    spec = ClusterSpec(
        teams=tuple(
            TeamSpec(
                name=t,
                gpus=params.gpus_per_team,
                cohort=DEFAULT_COHORT if params.cohorts == 1 else f"{DEFAULT_COHORT}-{i // per_cohort}",
                wait_limit_seconds=params.wait_limit_seconds,
            )
            for i, t in enumerate(teams)
        )
    )
    cluster = build_cluster(spec)
    gpu_values, gpu_weights = _weights(params.gpu_weights, params.gpus_per_team)
    capacity = params.teams * params.gpus_per_team
    # The skew repeats within each cohort, so every cohort has busy and quiet teams.
    team_weights = [1.0 / (i % per_cohort + 1) ** params.team_skew for i in range(params.teams)]
    class_names = [c for c, _ in params.class_mix]
    class_weights = [w for _, w in params.class_mix]
    for name in class_names:
        cluster.priority_value(name)  # unknown class -> ModelError, surfaced below
    # 1. The jobs: a count, or as much work as ``load`` offers over ``hours``.
    work_target = params.load * capacity * params.hours * 3600.0 if params.hours is not None else math.inf
    limit = params.jobs if params.jobs is not None else math.inf
    drawn: list[tuple[int, float, str, str, bool]] = []
    work = 0.0
    while len(drawn) < limit and work < work_target:
        gpus = rng.choices(gpu_values, gpu_weights)[0]
        duration = math.exp(rng.gauss(params.duration_mu, params.duration_sigma))
        duration = round(min(max(duration, params.min_duration_s), params.max_duration_s), 3)
        drawn.append(
            (
                gpus,
                duration,
                rng.choices(class_names, class_weights)[0],
                rng.choices(teams, team_weights)[0],
                rng.random() < params.failure_fraction,
            )
        )
        work += gpus * duration
    # 2. The window that makes that work the requested load, and diurnal arrivals in it.
    window = params.hours * 3600.0 if params.hours is not None else work / (params.load * capacity)
    arrivals = sorted(_diurnal_arrival(rng, window, params) for _ in drawn)
    if arrivals:
        arrivals[-1] = window  # the window ends with the last arrival, so the load is exact
    jobs = [
        JobSpec(
            job_id=f"job-{index:06d}",
            submit_s=round(at, 3),
            duration_s=duration,
            gpus=gpus,
            cpu_milli=gpus * DEFAULT_CPU_PER_GPU_MILLI,
            memory_bytes=gpus * DEFAULT_MEMORY_PER_GPU_BYTES,
            priority_class=priority_class,
            team=team,
            fails=fails,
        )
        for index, (at, (gpus, duration, priority_class, team, fails)) in enumerate(zip(arrivals, drawn, strict=True))
    ]
    description = (
        f"synthetic: {len(jobs)} jobs, {params.teams} teams x {params.gpus_per_team} GPUs "
        f"in {params.cohorts} cohort(s), load {params.load}, "
        f"lognormal(mu={params.duration_mu}, sigma={params.duration_sigma}) s, "
        f"failures {params.failure_fraction:.0%}, diurnal amplitude {params.diurnal_amplitude}"
    )
    return Trace(name=SYNTHETIC, jobs=tuple(jobs), cluster=cluster, description=description)

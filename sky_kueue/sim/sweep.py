"""Sweeps: many independent simulator runs on every local core, with the serial run's results.

Why: sizing aging or a relaunch lane on a team's own history takes policies x traces x seeds
(x the policy's own parameters) runs, each minutes of one core; a sweep that keeps the other
cores idle takes N times longer than it needs to. A run is a pure function of (trace, policy,
config) (:func:`sky_kueue.sim.compare.run_policy`), so the runs can be made in any process and
any order; :func:`run_sweep` returns them in the order they were described, so the tables and
JSON built from them are byte for byte those of the serial run.

A run is described by value (:class:`SweepRun`: the trace's name and parameters, the resolved
policy, the simulator settings) so that the description, not a live object, crosses the process
boundary; each worker builds its own trace and simulator and shares nothing with the others.
Workers are started with ``spawn`` (a fresh interpreter: no inherited threads, locks or module
state such as a progress bar's thread; Python's ``multiprocessing`` documentation, "Contexts and
start methods", on why forking a threaded process is unsafe), the same on Linux and macOS.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

from sky_kueue.sim import compare, eta, policies, traces
from sky_kueue.sim.metrics import PolicyMetrics, StarvationRule
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.simulator import SimConfig

#: The start method of sweep workers (module docstring).
START_METHOD = "spawn"
#: Traces a worker keeps built: a sweep's runs of one trace come one after another, and a
#: trace is immutable (every run derives its own cluster state from it).
TRACES_CACHED = 4


@dataclass(frozen=True)
class TraceSpec:
    """A trace by name and parameters (:func:`sky_kueue.sim.traces.load_trace`): cheap to send
    to a worker, which builds the same trace from it (the generators are seeded)."""

    source: str
    seed: int
    jobs: int | None = None
    hours: float | None = None
    load: float | None = None
    cluster_yaml: Path | None = None

    def build(self) -> traces.Trace:
        """The trace.

        Raises:
            TraceError: see :func:`~sky_kueue.sim.traces.load_trace`.
        """
        return traces.load_trace(
            self.source,
            seed=self.seed,
            jobs=self.jobs,
            hours=self.hours,
            load=self.load,
            cluster_yaml=self.cluster_yaml,
        )


@dataclass(frozen=True)
class SweepRun:
    """One simulator run of a sweep: a policy over a trace with a configuration."""

    trace: TraceSpec
    #: Resolved by the caller (:func:`sky_kueue.sim.policies.resolve`), so a bad name fails
    #: before any worker starts, and a policy with tuned parameters is described by its value.
    policy: policies.ResubmissionPolicy
    config: SimConfig
    starvation: StarvationRule | None = None
    eta_sample: int = 0
    eta_within_s: float = eta.DEFAULT_ETA_WITHIN_SECONDS
    #: Send back every job's record (:class:`~sky_kueue.sim.results.RunResult`), not only the
    #: summary: reports and plots need them; a benchmark's figures do not, and a 2,000-job
    #: run's records are most of what a worker would otherwise pickle back.
    keep_records: bool = True


@dataclass(frozen=True)
class SweepResult:
    run: SweepRun
    metrics: PolicyMetrics
    #: None unless the run asked for them (:attr:`SweepRun.keep_records`).
    records: RunResult | None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's cpuset), the
    default number of sweep workers."""
    process_cpu_count: Callable[[], int | None] | None = getattr(os, "process_cpu_count", None)
    if process_cpu_count is not None:  # Python 3.13+
        return process_cpu_count() or 1
    if hasattr(os, "sched_getaffinity"):  # Linux
        return len(os.sched_getaffinity(0)) or 1
    return os.cpu_count() or 1


@functools.lru_cache(maxsize=TRACES_CACHED)
def _trace(spec: TraceSpec) -> traces.Trace:
    return spec.build()


def run_one(run: SweepRun) -> SweepResult:
    """One run, in this process (what each worker does)."""
    records, metrics = compare.run_policy(
        _trace(run.trace),
        run.policy,
        run.config,
        starvation=run.starvation,
        eta_sample=run.eta_sample,
        eta_within_s=run.eta_within_s,
    )
    return SweepResult(run=run, metrics=metrics, records=records if run.keep_records else None)


def run_sweep(
    runs: Sequence[SweepRun],
    *,
    workers: int | None = None,
    weight: Callable[[SweepRun], float] | None = None,
    on_done: Callable[[SweepResult], None] | None = None,
) -> list[SweepResult]:
    """Every run's result, in the order of ``runs``, made by ``workers`` processes.

    Args:
        workers: processes (default :func:`usable_cores`); 1, or a sweep of one run, runs in
            this process.
        weight: an estimate of each run's cost; runs are started heaviest first (ties in the
            given order) so that no long run starts last while the other workers idle.
        on_done: called in this process with each result as it arrives (completion order).

    Raises:
        ValueError: ``workers`` is below 1.
        Whatever a run raises (the first failure, after the runs not yet started are cancelled).
    """
    count = usable_cores() if workers is None else workers
    if count < 1:
        raise ValueError(f"workers: expected at least 1, got {count}")
    if count == 1 or len(runs) <= 1:
        results = []
        for run in runs:
            result = run_one(run)
            if on_done is not None:
                on_done(result)
            results.append(result)
        return results
    start = sorted(range(len(runs)), key=lambda i: -weight(runs[i])) if weight is not None else range(len(runs))
    done: list[SweepResult | None] = [None] * len(runs)
    pool = ProcessPoolExecutor(max_workers=min(count, len(runs)), mp_context=multiprocessing.get_context(START_METHOD))
    try:
        pending: dict[Future[SweepResult], int] = {pool.submit(run_one, runs[i]): i for i in start}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                result = future.result()
                done[pending.pop(future)] = result
                if on_done is not None:
                    on_done(result)
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [result for result in done if result is not None]


def comparison(trace: traces.Trace, results: Sequence[SweepResult]) -> compare.Comparison:
    """The :class:`~sky_kueue.sim.compare.Comparison` of ``results``, runs of different policies
    on ``trace`` with one configuration, as :func:`~sky_kueue.sim.compare.compare` would have
    made it in one process.

    Raises:
        ValueError: the results differ in configuration, lack their records, or name a policy twice.
    """
    if not results:
        raise ValueError("give at least one result")
    config = results[0].run.config
    runs: dict[str, RunResult] = {}
    summaries: dict[str, PolicyMetrics] = {}
    for result in results:
        name = result.run.policy.name
        if result.run.config != config:
            raise ValueError(f"policy {name!r} ran with another configuration than {results[0].run.policy.name!r}")
        if result.records is None:
            raise ValueError(f"policy {name!r} ran without keep_records")
        if name in runs:
            raise ValueError(f"policy {name!r} is listed twice")
        runs[name] = result.records
        summaries[name] = result.metrics
    return compare.assemble(trace, config, runs, summaries)

"""Several policies over one trace, side by side, with the baseline measured in the same run.

Why one entry point: a ratio "aging against baseline" is only meaningful when both ran on
the same trace, the same cluster, the same seed and the same settings; :func:`compare`
guarantees that and computes the targets against the ``baseline`` run when the list
includes it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from sky_kueue.controller.aging import AgingSettings
from sky_kueue.controller.aging.safe_relaunch import SafeRelaunchSettings
from sky_kueue.sim import eta as eta_mod
from sky_kueue.sim import policies
from sky_kueue.sim.burst_cost import BurstCost, burst_costs
from sky_kueue.sim.metrics import PolicyMetrics, StarvationRule, TargetCheck, check_targets, summarize
from sky_kueue.sim.results import RunResult
from sky_kueue.sim.simulator import ProgressFn, SimConfig, Simulator
from sky_kueue.sim.traces import Trace

#: progress_for(policy name) -> the callback for that policy's run (or None)
ProgressFactory = Callable[[str], "ProgressFn | None"]


@dataclass(frozen=True)
class Comparison:
    trace: Trace
    config: SimConfig
    class_order: list[str]
    runs: dict[str, RunResult]
    metrics: dict[str, PolicyMetrics]
    #: Against the baseline run, for every other policy (empty without a baseline).
    targets: dict[str, TargetCheck]
    reference: str | None
    #: What bursting cost, for every policy that burst (:mod:`sky_kueue.sim.burst_cost`).
    bursting: dict[str, BurstCost] = field(default_factory=dict)


def compare(
    trace: Trace,
    policy_names: Sequence[str | policies.ResubmissionPolicy],
    config: SimConfig | None = None,
    *,
    settings: AgingSettings | None = None,
    safe: SafeRelaunchSettings | None = None,
    starvation: StarvationRule | None = None,
    eta_sample: int = 0,
    eta_within_s: float = eta_mod.DEFAULT_ETA_WITHIN_SECONDS,
    progress_for: ProgressFactory | None = None,
) -> Comparison:
    """Runs every policy over ``trace`` and summarises them.

    Args:
        policy_names: names (see :func:`sky_kueue.sim.policies.resolve`) or policy objects,
            e.g. a :class:`~sky_kueue.sim.policies.RegistryPolicy` with tuned settings.
        safe: the safe-relaunch settings of ``+safe`` names (default: the simulator's).

    Raises:
        UnknownSimPolicyError: a policy name is unknown.
        ValueError: the list is empty or names a policy twice.
    """
    resolved = [policies.resolve(p, settings, safe) if isinstance(p, str) else p for p in policy_names]
    names = [p.name for p in resolved]
    if not names:
        raise ValueError("give at least one policy")
    if len(set(names)) != len(names):
        raise ValueError(f"a policy is listed twice: {', '.join(names)}")
    config = config if config is not None else SimConfig()
    runs: dict[str, RunResult] = {}
    summaries: dict[str, PolicyMetrics] = {}
    for policy in resolved:
        runs[policy.name], summaries[policy.name] = run_policy(
            trace,
            policy,
            config,
            starvation=starvation,
            eta_sample=eta_sample,
            eta_within_s=eta_within_s,
            progress=progress_for(policy.name) if progress_for is not None else None,
        )
    return assemble(trace, config, runs, summaries)


def run_policy(
    trace: Trace,
    policy: policies.ResubmissionPolicy,
    config: SimConfig,
    *,
    starvation: StarvationRule | None = None,
    eta_sample: int = 0,
    eta_within_s: float = eta_mod.DEFAULT_ETA_WITHIN_SECONDS,
    progress: ProgressFn | None = None,
) -> tuple[RunResult, PolicyMetrics]:
    """One policy's run over ``trace`` and its summary: a pure function of its arguments, so
    that the runs of a comparison (or a sweep, :mod:`sky_kueue.sim.sweep`) can be made in any
    order or process and :func:`assemble` gives the same :class:`Comparison`."""
    sample = eta_mod.sample_indices(len(trace.jobs), eta_sample)
    probe = eta_mod.EtaProbe(sample) if sample else None
    run = Simulator(trace, policy, config, progress=progress, on_arrival=probe).run()
    eta_summary = None
    if probe is not None:
        actual = {j.job_id: j.first_admission_wait_s for j in run.jobs}
        run = replace(
            run,
            eta=tuple((e.job_id, actual.get(e.job_id), e.model_s, e.naive_s) for e in probe.estimates),
        )
        eta_summary = eta_mod.summarize(probe.estimates, actual, eta_within_s)
    return run, summarize(run, trace.class_order(), starvation, eta_summary)


def assemble(
    trace: Trace, config: SimConfig, runs: dict[str, RunResult], summaries: dict[str, PolicyMetrics]
) -> Comparison:
    """The comparison of runs made on ``trace`` with ``config`` (by :func:`run_policy`), in the
    order of ``summaries``: targets and burst costs against its ``baseline`` when it has one."""
    order = trace.class_order()
    reference = policies.BASELINE if policies.BASELINE in summaries else None
    targets: dict[str, TargetCheck] = {}
    if reference is not None:
        for name, summary in summaries.items():
            if name != reference:
                targets[name] = check_targets(summary, summaries[reference], order)
    return Comparison(
        trace=trace,
        config=config,
        class_order=order,
        runs=runs,
        metrics=summaries,
        targets=targets,
        reference=reference,
        bursting=burst_costs(summaries, reference),
    )

"""``sky-kueue simulate``: replay a trace under several resubmission policies, side by side.

Why: aging is only worth turning on if it ends starvation without hurting high-priority
work or utilisation, and a user should be able to check that on their own trace, with
their own aging and burst settings, before touching a cluster. Every policy replays the
same jobs on the same ClusterQueues with the same seed; ratios are against the
``baseline`` (SkyPilot today) of the same run.

Examples::

    sky-kueue simulate --trace kueue-perf --policies baseline,rank --jobs 3000
    sky-kueue simulate --trace dev-starvation --config sky-kueue.yaml --policies baseline,aging
    sky-kueue simulate --trace jobs.csv --config sky-kueue.yaml --output json
    sky-kueue simulate --trace synthetic --aging-set max_age_seconds=3600 --plot waits.png
    sky-kueue simulate --trace reclaim-storm --policies baseline,rank+lane --lane-gpus 16 --lane-after 2
    sky-kueue simulate --trace jobs.csv --lane-sweep --plot lane.png
    sky-kueue simulate --trace dev-starvation --policies baseline,rank,safe-place --seeds 0,1,2,3,4

Every (policy, seed) run is independent; they run on ``--workers`` processes (default: every
usable core) with the same results as on one (:mod:`sky_kueue.sim.sweep`).

Bad input (unknown trace or policy, bad CSV row, invalid setting) prints one line and exits
with code 2.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import yaml

from sky_kueue.cli import errors, options
from sky_kueue.cli.aging_cmd import load_settings
from sky_kueue.cli.errors import EXIT_BAD_INPUT
from sky_kueue.controller.aging import AgingSettings, SettingsError
from sky_kueue.controller.aging.safe_relaunch import DEFAULT_SAFE_MAX_HOLD_SECONDS, SafeRelaunchSettings
from sky_kueue.controller.predicted_burst import (
    DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS,
    DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS,
    PredictedBurstSettings,
)
from sky_kueue.kueue import objects as o
from sky_kueue.kueue.errors import ModelError
from sky_kueue.sim.lane import LANE_RECLAIM_POLICIES, LaneScope, LaneSettings

if TYPE_CHECKING:
    from _typeshed import DataclassInstance
    from rich.progress import Progress

    from sky_kueue.sim.compare import Comparison
    from sky_kueue.sim.simulator import SimConfig
    from sky_kueue.sim.sweep import SweepRun
    from sky_kueue.sim.traces import Trace

_Settings = TypeVar("_Settings", bound="DataclassInstance")


def _settings(config: Path | None, overrides: tuple[str, ...]) -> AgingSettings:
    settings = load_settings(config)
    if not overrides:
        return settings
    values: dict[str, Any] = settings.to_mapping()
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            errors.fail(f"--aging-set: expected KEY=VALUE, got {item!r}", EXIT_BAD_INPUT)
        try:
            values[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            errors.fail(f"--aging-set {key}: cannot read value {raw!r}", EXIT_BAD_INPUT)
    try:
        return AgingSettings.from_mapping(values, where="--aging-set")
    except SettingsError as err:
        errors.fail(str(err), EXIT_BAD_INPUT)


def _given(defaults: _Settings, **options: object) -> _Settings:
    """``defaults`` with the fields whose option was given (an option left out is None and
    keeps the default), so every ``--x`` that overrides one setting reads the same way."""
    given = {name: value for name, value in options.items() if value is not None}
    return replace(defaults, **given) if given else defaults


def _safe_settings(
    safe_after: int | None, safe_max_hold: float | None, hold_unpredicted: bool = False
) -> SafeRelaunchSettings | None:
    """The ``+safe`` policies' settings from the options (None: the simulator's defaults)."""
    if safe_after is None and safe_max_hold is None and not hold_unpredicted:
        return None
    from sky_kueue.sim import policies

    return SafeRelaunchSettings(
        safe_after_preemptions=safe_after if safe_after is not None else policies.SAFE_AFTER_PREEMPTIONS_DEFAULT,
        safe_max_hold_seconds=safe_max_hold if safe_max_hold is not None else DEFAULT_SAFE_MAX_HOLD_SECONDS,
        hold_only_when_predicted=not hold_unpredicted,
    )


#: ``--predicted-wait-max-stays`` value meaning no bound (``predicted_wait_gate_max_stays: null``).
UNBOUNDED_STAYS = "unbounded"


class _MaxStays(click.ParamType):
    """An integer >= 0, or :data:`UNBOUNDED_STAYS` (kept as that string; None: not given)."""

    name = "N|unbounded"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        text = str(value).strip().lower()
        if text == UNBOUNDED_STAYS:
            return UNBOUNDED_STAYS
        if text.isdigit():
            return int(text)
        self.fail(f"expected an integer >= 0 or {UNBOUNDED_STAYS!r}, got {value!r}", param, ctx)


def _stays(given: int | str | None) -> int | None:
    """``--predicted-wait-max-stays`` as the gate's bound (None given: the default)."""
    if given is None:
        return DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS
    return None if given == UNBOUNDED_STAYS else int(given)


def _predicted_settings(
    margin: float | None,
    gate_startup: float | None,
    cloud_startup: float | None,
    max_stays: int | str | None = None,
) -> PredictedBurstSettings:
    """The ``+predicted`` policies' gate: its start-up is the simulated one unless told otherwise,
    so that a gate tuned for a 600-s cloud is not silently kept when ``--cloud-startup`` changes it."""
    from sky_kueue.sim.simulator import SimConfig

    startup = gate_startup if gate_startup is not None else cloud_startup
    return PredictedBurstSettings(
        cloud_startup_seconds=startup if startup is not None else SimConfig().cloud_startup_s,
        margin_seconds=margin if margin is not None else DEFAULT_PREDICTED_WAIT_MARGIN_SECONDS,
        max_stays=_stays(max_stays),
    )


def _positive_ints(option: str, given: str | None, default: tuple[int, ...]) -> tuple[int, ...]:
    """A comma-separated list of integers >= 1 (None: ``default``); bad input fails in one line."""
    if given is None:
        return default
    values: list[int] = []
    for item in given.split(","):
        text = item.strip()
        if not text.isdigit() or int(text) < 1:
            errors.fail(f"{option}: expected comma-separated integers >= 1, got {given!r}", EXIT_BAD_INPUT)
        values.append(int(text))
    return tuple(sorted(set(values)))


def _run_lane_sweep(
    trace: Trace,
    config: SimConfig,
    lanes: list[str],
    sweep_gpus: str | None,
    sweep_after: str | None,
    *,
    lane: LaneSettings,
    settings: AgingSettings,
    output: str,
    plot_path: Path | None,
    quiet: bool,
) -> None:
    """``--lane-sweep``: the lane policies of ``--policies`` (one base policy), or ``rank`` in both scopes."""
    from sky_kueue.cli import simulate_lane
    from sky_kueue.sim import lane_sizing, plots, policies

    gpus = _positive_ints("--lane-sweep-gpus", sweep_gpus, lane_sizing.DEFAULT_SWEEP_GPUS)
    after = _positive_ints("--lane-sweep-after", sweep_after, lane_sizing.DEFAULT_SWEEP_AFTER)
    bases: set[str] = set()
    scopes: list[LaneScope] = []
    for name in lanes:
        if name.endswith(policies.COHORT_LANE_SUFFIX):
            bases.add(name[: -len(policies.COHORT_LANE_SUFFIX)])
            scopes.append(LaneScope.COHORT)
        else:
            bases.add(name[: -len(policies.LANE_SUFFIX)])
            scopes.append(LaneScope.TEAM)
    if len(bases) > 1:
        errors.fail(
            f"--lane-sweep: the lane policies of --policies ({', '.join(lanes)}) must share one base policy",
            EXIT_BAD_INPUT,
        )
    base = bases.pop() if bases else lane_sizing.DEFAULT_LANE_POLICY
    try:
        simulate_lane.run(
            trace,
            config,
            policy=base,
            scopes=scopes or (LaneScope.TEAM, LaneScope.COHORT),
            gpus=gpus,
            after=after,
            lane=lane,
            settings=settings,
            output=output,
            plot_path=plot_path,
            quiet=quiet,
        )
    except (ModelError, policies.UnknownSimPolicyError, plots.PlotError) as err:
        errors.fail(f"--lane-sweep: {err}", EXIT_BAD_INPUT)


def _seeds(seed: int, seed_list: str | None) -> list[int]:
    """``--seeds`` as integers (without it, ``--seed``)."""
    if seed_list is None:
        return [seed]
    try:
        seeds = [int(s) for s in seed_list.split(",") if s.strip()]
    except ValueError:
        errors.fail(f"--seeds: expected comma-separated integers, got {seed_list!r}", EXIT_BAD_INPUT)
    if not seeds:
        errors.fail("--seeds: give at least one seed", EXIT_BAD_INPUT)
    if len(set(seeds)) != len(seeds):
        errors.fail(f"--seeds: a seed is listed twice: {seed_list}", EXIT_BAD_INPUT)
    return seeds


def _sweep(runs: list[SweepRun], loaded: list[Trace], workers: int | None, progress: Progress) -> list[Comparison]:
    """The runs on ``workers`` processes, one comparison per trace of ``loaded`` (per seed), with
    one progress bar over the runs (a worker's per-job progress stays in its process)."""
    from sky_kueue.sim import sweep

    with progress:
        task = progress.add_task("policy runs", total=len(runs), sim="-")
        done = sweep.run_sweep(runs, workers=workers, on_done=lambda _: progress.advance(task))
    per_seed = len(runs) // len(loaded)
    return [sweep.comparison(trace, done[i * per_seed : (i + 1) * per_seed]) for i, trace in enumerate(loaded)]


@click.command("simulate")
@click.option(
    "--trace",
    "trace_source",
    default="synthetic",
    show_default=True,
    help="synthetic, kueue-perf, reclaim-storm, reclaim-storm-hot, dev-starvation, or a CSV file (submit_time, "
    "duration, gpus, cpus, memory, priority_class, team).",
)
@click.option(
    "--policies",
    "policy_list",
    default="baseline,rank",
    show_default=True,
    help="Comma-separated: baseline, aging (the configured policy: --config's aging.parameters.policy, or the "
    "default none, which must equal baseline), or a registered aging policy; any of them "
    "with +safe (e.g. rank+safe) adds the safe-relaunch rule; safe-place is keep-place protecting only within "
    "nominal quota, with that rule; +lane (e.g. rank+lane) or +cohort-lane sends relaunches to a relaunch lane "
    "after --lane-after preemptions.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the trace generator and relaunch jitter.")
@click.option(
    "--seeds",
    "seed_list",
    default=None,
    metavar="S1,S2,...",
    help="Comma-separated seeds: one comparison per seed, in this order (instead of --seed).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Processes for the (policy, seed) runs (default: the usable cores; 1: in this process, with a "
    "progress bar per policy).",
)
@click.option("--jobs", type=click.IntRange(min=1), default=None, help="Simulate this many jobs of the trace.")
@click.option(
    "--hours",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Simulate the jobs submitted in the first H hours.",
)
@click.option(
    "--load",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Offered load (GPU demand over capacity): synthetic draws exactly this much work; kueue-perf "
    "spreads its arrivals to it (below its own 1.18 only).",
)
@options.output_option()
@click.option(
    "--plot",
    "plot_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write wait-time CDFs and a ClusterQueue timeline as PNG (needs matplotlib).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="sky-kueue.yaml whose aging settings the aging policies use.",
)
@click.option(
    "--aging-set",
    "aging_overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Override one aging setting (e.g. max_age_seconds=3600); repeatable.",
)
@click.option(
    "--cluster",
    "cluster_yaml",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Kueue objects (YAML) to run a CSV trace on; teams name LocalQueues.",
)
@click.option(
    "--cycle-interval", type=click.FloatRange(min=0), default=None, help="Seconds between Kueue cycles (default 1)."
)
@click.option(
    "--burst-after",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Burst a launch attempt to the cloud after this many seconds in Kueue (all teams).",
)
@click.option("--burst-cost", type=click.FloatRange(min=0), default=None, help="Cloud price per GPU-hour (USD).")
@click.option(
    "--cloud-startup",
    type=click.FloatRange(min=0),
    default=None,
    help="Seconds from a burst decision to the job running in the cloud (default 600: SkyPilot waits up to "
    "90-300 s for a new node per attempt, then installs its runtime and the task pulls a multi-GB GPU image). "
    "Billed, counted as wait.",
)
@click.option(
    "--cloud-startup-jitter",
    type=click.FloatRange(min=0),
    default=None,
    help="Add a seeded uniform 0..S seconds to each burst's start-up (default 0).",
)
@click.option(
    "--predicted-wait-margin",
    type=click.FloatRange(min=0),
    default=None,
    help="+predicted policies: a job due a burst goes to the cloud only when its predicted on-prem wait "
    "exceeds the gate's cloud start-up plus this many seconds (default 300, as "
    "teams.<t>.burst.predicted_wait_margin_seconds).",
)
@click.option(
    "--predicted-wait-max-stays",
    type=_MaxStays(),
    default=None,
    help="+predicted policies: how many due preemptions the gate may keep a job on-prem before it bursts "
    f"whatever the prediction (an integer >= 0 or {UNBOUNDED_STAYS!r}; default "
    f"{DEFAULT_PREDICTED_WAIT_GATE_MAX_STAYS}, as teams.<t>.burst.predicted_wait_gate_max_stays).",
)
@click.option(
    "--predicted-cloud-startup",
    type=click.FloatRange(min=0),
    default=None,
    help="+predicted policies: the cloud start-up the gate compares with (default: --cloud-startup, i.e. the "
    "simulated start-up; set it to model a team whose burst.cloud_startup_seconds is wrong).",
)
@click.option(
    "--cloud-capacity",
    type=click.IntRange(min=0),
    default=None,
    help="GPUs the cloud grants at once (default unlimited); a burst beyond them waits, counted as wait.",
)
@click.option(
    "--allow-burst",
    is_flag=True,
    help="Let the controller's policies send preempted jobs to a cloud: after burst_after_preemptions "
    "preemptions (default 1), or when a relaunch waits burst_max_predicted_wait_seconds (default 900). "
    "The baseline keeps SkyPilot's behaviour.",
)
@click.option(
    "--checkpoint-every",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Jobs checkpoint every S seconds of run time and resume from it after a preemption.",
)
@click.option(
    "--reserve-after",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="A Workload waiting S seconds reserves its cohort: the pending Workloads Kueue would admit "
    "after it are deactivated until it is admitted (every policy, baseline included).",
)
@click.option(
    "--starve-factor",
    type=click.FloatRange(min=0),
    default=None,
    help="Starved: wait > K x run time (and > --starve-after). Default 10.",
)
@click.option(
    "--starve-after",
    type=click.FloatRange(min=0),
    default=None,
    help="Starved: wait > T seconds (and > K x run time). Default 3600.",
)
@click.option(
    "--eta-sample",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Grade admission ETAs at submission for about N jobs per policy.",
)
@click.option(
    "--eta-within",
    type=click.FloatRange(min=0),
    default=None,
    help="Threshold T of the 'admitted within T' check, seconds (default 600).",
)
@click.option(
    "--safe-after",
    type=click.IntRange(min=1),
    default=None,
    help="+safe policies: hold a relaunch after this many preemptions of the job until Kueue would admit it "
    "without borrowing (default 2).",
)
@click.option(
    "--safe-max-hold",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="+safe policies: release a held relaunch after this many seconds (default 1800).",
)
@click.option(
    "--safe-hold-unpredicted",
    is_flag=True,
    help="+safe policies: hold even when no safe place is predicted within the hold "
    "(safe_relaunch.hold_only_when_predicted: false).",
)
@click.option(
    "--lane-gpus",
    type=click.IntRange(min=1),
    default=None,
    help="+lane/+cohort-lane policies: nominal GPUs of each relaunch lane, carved from its team's ClusterQueue "
    "(+lane) or the cohort's largest (+cohort-lane) (default 8).",
)
@click.option(
    "--lane-after",
    type=click.IntRange(min=1),
    default=None,
    help="+lane/+cohort-lane policies: a job's relaunch goes to the lane after this many preemptions (k; "
    "default 2). No job admitted in the lane is preempted again, so a job is preempted at most k times.",
)
@click.option(
    "--lane-donor",
    default=None,
    metavar="CLUSTERQUEUE",
    help="+cohort-lane policies (and --lane-sweep): carve the cohort's lane from this ClusterQueue (default: the "
    "cohort's largest by nominal GPUs).",
)
@click.option(
    "--lane-reclaim",
    type=click.Choice([policy.value for policy in LANE_RECLAIM_POLICIES]),
    default=None,
    help="+lane/+cohort-lane policies (and --lane-sweep): the lane ClusterQueue's reclaimWithinCohort (default "
    "Any: a relaunch takes the lane's lent quota back from any borrower; LowerPriority: only from borrowers of "
    "lower priority, and waits for the others).",
)
@click.option(
    "--lane-sweep",
    is_flag=True,
    help="Sweep the relaunch lane's size x k (--lane-sweep-gpus, --lane-sweep-after) against SkyPilot alone and "
    "recommend the smallest lane meeting the targets; sweeps the +lane/+cohort-lane policies of --policies "
    "(none: rank+lane and rank+cohort-lane). --plot draws the curve.",
)
@click.option(
    "--lane-sweep-gpus",
    default=None,
    metavar="N,N,...",
    help="--lane-sweep: GPUs per lane to try (default 2,4,8,12,16,24,32).",
)
@click.option(
    "--lane-sweep-after",
    default=None,
    metavar="K,K,...",
    help="--lane-sweep: preemption counts k to try (default 1,2).",
)
@click.option("--no-relaunch-backoff", is_flag=True, help="Relaunch right after detection (no recovery backoff).")
@click.option(
    "--clusters",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Split the trace's cluster into N clusters and compare placement by prediction with SkyPilot's fixed "
    "order (first policy of --policies).",
)
@click.option(
    "--failover-after",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="With --clusters: seconds a launch waits in one cluster's queue before SkyPilot tries the next "
    "(kubernetes.kueue.admission_timeout; default SkyPilot's 86400).",
)
@click.option(
    "--oracle-runtimes",
    is_flag=True,
    help="With --clusters: predicted placement knows every job's true run time (an upper bound) instead of "
    "what the plugin's estimator knows (declared, else the team's history).",
)
@click.option(
    "--declared-runtimes",
    type=click.FloatRange(min=0, max=1),
    default=None,
    help="With --clusters: share of jobs whose users declare a run time (default 0.3).",
)
@click.option(
    "--declared-runtime-factor",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="With --clusters: declared over true run time, before rounding up to 5m, 10m, 15m, 30m, 1h, 2h... "
    "(default 1).",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def simulate(
    trace_source: str,
    policy_list: str,
    seed: int,
    seed_list: str | None,
    workers: int | None,
    jobs: int | None,
    hours: float | None,
    load: float | None,
    output: str,
    plot_path: Path | None,
    config_path: Path | None,
    aging_overrides: tuple[str, ...],
    cluster_yaml: Path | None,
    cycle_interval: float | None,
    burst_after: float | None,
    burst_cost: float | None,
    cloud_startup: float | None,
    cloud_startup_jitter: float | None,
    predicted_wait_margin: float | None,
    predicted_cloud_startup: float | None,
    predicted_wait_max_stays: int | str | None,
    cloud_capacity: int | None,
    allow_burst: bool,
    checkpoint_every: float | None,
    reserve_after: float | None,
    starve_factor: float | None,
    starve_after: float | None,
    eta_sample: int,
    eta_within: float | None,
    safe_after: int | None,
    safe_max_hold: float | None,
    safe_hold_unpredicted: bool,
    lane_gpus: int | None,
    lane_after: int | None,
    lane_donor: str | None,
    lane_reclaim: str | None,
    lane_sweep: bool,
    lane_sweep_gpus: str | None,
    lane_sweep_after: str | None,
    no_relaunch_backoff: bool,
    clusters: int,
    failover_after: float | None,
    oracle_runtimes: bool,
    declared_runtimes: float | None,
    declared_runtime_factor: float | None,
    quiet: bool,
) -> None:
    """Compare resubmission policies (SkyPilot today vs aging) on a trace."""
    from sky_kueue.sim import compare, eta, metrics, policies, report, simulator, sweep, traces
    from sky_kueue.sim.relaunch import RelaunchModel

    if jobs is not None and hours is not None:
        errors.fail("give --jobs or --hours, not both", EXIT_BAD_INPUT)
    seeds = _seeds(seed, seed_list)
    if len(seeds) > 1 and plot_path is not None:
        errors.fail("--plot draws one seed's runs; give one seed or drop --plot", EXIT_BAD_INPUT)
    if len(seeds) > 1 and clusters > 1:
        errors.fail("--seeds is modelled for one cluster; give one seed or drop --clusters", EXIT_BAD_INPUT)
    names = [n.strip() for n in policy_list.split(",") if n.strip()]
    if not names:
        errors.fail("--policies: give at least one policy", EXIT_BAD_INPUT)
    settings = _settings(config_path, aging_overrides)
    if allow_burst:
        settings = policies.with_burst_defaults(settings)
    safe = _safe_settings(safe_after, safe_max_hold, safe_hold_unpredicted)
    if safe is not None and not any(n.endswith(policies.SAFE_SUFFIX) for n in names):
        errors.fail(
            "--safe-after/--safe-max-hold/--safe-hold-unpredicted apply to +safe policies; add one to --policies",
            EXIT_BAD_INPUT,
        )
    if reserve_after is not None and any(n.endswith(policies.SAFE_SUFFIX) for n in names):
        errors.fail("--reserve-after is not modelled with +safe policies; drop one of them", EXIT_BAD_INPUT)
    gated = any(n.endswith(policies.PREDICTED_SUFFIX) for n in names)
    given = (predicted_wait_margin, predicted_cloud_startup, predicted_wait_max_stays)
    if any(value is not None for value in given) and not gated:
        errors.fail(
            "--predicted-wait-margin/--predicted-cloud-startup/--predicted-wait-max-stays apply to +predicted "
            "policies; add one to --policies",
            EXIT_BAD_INPUT,
        )
    predicted = (
        _predicted_settings(predicted_wait_margin, predicted_cloud_startup, cloud_startup, predicted_wait_max_stays)
        if gated
        else None
    )
    lanes = [n for n in names if n.endswith((policies.LANE_SUFFIX, policies.COHORT_LANE_SUFFIX))]
    if (lane_gpus is not None or lane_after is not None) and not lanes:
        errors.fail(
            "--lane-gpus/--lane-after apply to +lane/+cohort-lane policies; add one to --policies", EXIT_BAD_INPUT
        )
    if (lane_sweep_gpus is not None or lane_sweep_after is not None) and not lane_sweep:
        errors.fail("--lane-sweep-gpus/--lane-sweep-after apply to --lane-sweep; add it", EXIT_BAD_INPUT)
    if lanes and reserve_after is not None:
        errors.fail("--reserve-after is not modelled with a relaunch lane; drop one of them", EXIT_BAD_INPUT)
    if lane_sweep and clusters > 1:
        errors.fail("--lane-sweep is modelled for one cluster; drop it or --clusters", EXIT_BAD_INPUT)
    if lane_donor is not None and not lane_sweep and not any(n.endswith(policies.COHORT_LANE_SUFFIX) for n in lanes):
        errors.fail("--lane-donor applies to +cohort-lane policies and --lane-sweep; add one", EXIT_BAD_INPUT)
    if lane_reclaim is not None and not lane_sweep and not lanes:
        errors.fail("--lane-reclaim applies to +lane/+cohort-lane policies and --lane-sweep; add one", EXIT_BAD_INPUT)
    reclaim = None if lane_reclaim is None else o.PreemptionPolicy(lane_reclaim)
    lane = _given(
        LaneSettings(), gpus=lane_gpus, after_preemptions=lane_after, donor=lane_donor, reclaim_within_cohort=reclaim
    )
    resolved: list[policies.ResubmissionPolicy] = []
    for name in names:
        try:
            resolved.append(policies.resolve(name, settings, safe, predicted, lane))
        except policies.UnknownSimPolicyError as err:
            errors.fail(f"--policies: {err}", EXIT_BAD_INPUT)
    if len(set(names)) != len(names):
        errors.fail(f"--policies: a policy is listed twice: {policy_list}", EXIT_BAD_INPUT)
    placement_only = oracle_runtimes or declared_runtimes is not None or declared_runtime_factor is not None
    if placement_only and clusters < 2:
        errors.fail(
            "--oracle-runtimes/--declared-runtimes/--declared-runtime-factor apply to placement over several "
            "clusters; add --clusters N (N >= 2)",
            EXIT_BAD_INPUT,
        )
    if reserve_after is not None and clusters > 1:
        errors.fail("--reserve-after is modelled for one cluster; drop it or --clusters", EXIT_BAD_INPUT)
    if plot_path is not None:
        from sky_kueue.sim import plots

        try:
            plots.require_matplotlib()
        except plots.PlotError as err:
            errors.fail(str(err), EXIT_BAD_INPUT)
    specs = [sweep.TraceSpec(trace_source, s, jobs, hours, load, cluster_yaml) for s in seeds]
    try:
        loaded = [spec.build() for spec in specs]
    except (traces.TraceError, ModelError) as err:
        errors.fail(str(err), EXIT_BAD_INPUT)
    trace = loaded[0]
    config = _given(
        simulator.SimConfig(seed=seeds[0], relaunch=RelaunchModel(backoff=not no_relaunch_backoff)),
        cycle_interval_s=cycle_interval,
        wait_limit_s=burst_after,
        burst_cost_per_gpu_hour=burst_cost,
        cloud_startup_s=cloud_startup,
        cloud_startup_jitter_s=cloud_startup_jitter,
        cloud_capacity_gpus=cloud_capacity,
    )
    config = replace(
        config, allow_burst=allow_burst, checkpoint_every_s=checkpoint_every, reserve_after_s=reserve_after
    )
    rule = _given(metrics.StarvationRule(), runtime_multiple=starve_factor, min_wait_s=starve_after)
    within = eta_within if eta_within is not None else eta.DEFAULT_ETA_WITHIN_SECONDS

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("jobs ended, sim t={task.fields[sim]}"),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=quiet,
    )

    def progress_for(name: str) -> simulator.ProgressFn:
        task = progress.add_task(name, total=len(trace.jobs), sim="0s")

        def update(done: int, total: int, sim_s: float) -> None:
            progress.update(task, completed=done, total=total, sim=report.duration(sim_s))

        return update

    if lane_sweep:
        _run_lane_sweep(
            trace,
            config,
            lanes,
            lane_sweep_gpus,
            lane_sweep_after,
            lane=lane,
            settings=settings,
            output=output,
            plot_path=plot_path,
            quiet=quiet,
        )
        return

    if clusters > 1:
        from sky_kueue.cli import simulate_clusters
        from sky_kueue.sim.runtime_knowledge import DeclarationModel

        declarations = _given(DeclarationModel(), fraction=declared_runtimes, factor=declared_runtime_factor)
        simulate_clusters.run(
            trace,
            resolved[0],
            clusters,
            config,
            failover_after,
            output,
            oracle_runtimes=oracle_runtimes,
            declarations=declarations,
        )
        return

    runs = [
        sweep.SweepRun(spec, policy, replace(config, seed=spec.seed), rule, eta_sample, within)
        for spec in specs
        for policy in resolved
    ]
    if workers == 1 or len(runs) == 1:
        results = []
        with progress:
            for spec, seed_trace in zip(specs, loaded, strict=True):
                results.append(
                    compare.compare(
                        seed_trace,
                        resolved,
                        replace(config, seed=spec.seed),
                        settings=settings,
                        safe=safe,
                        starvation=rule,
                        eta_sample=eta_sample,
                        eta_within_s=within,
                        progress_for=progress_for,
                    )
                )
    else:
        results = _sweep(runs, loaded, workers, progress)
    result = results[0]
    if output == "json":
        document = (
            report.to_json(result)
            if len(results) == 1
            else {"seeds": seeds, "runs": [report.to_json(r) for r in results]}
        )
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        for each in results:
            report.print_text(each)
    if plot_path is not None:
        from sky_kueue.sim import plots

        try:
            plots.plot(result, plot_path)
        except plots.PlotError as err:
            errors.fail(str(err), EXIT_BAD_INPUT)
        if output != "json":
            click.echo(f"plot written to {plot_path}")

"""What each demo run cost, and what each aging step meant, in words.

Why: a run that ends team-b's starvation is only half the story. Ending it costs someone:
the ``bounded`` boost lifts the dev job above the threshold that lets prod take borrowed quota,
so prod jobs wait behind it; the default sends it to the burst target, where its CPU- and
GPU-hours are paid for. The demo's tables showed neither, only "prod done 5/6", and printed
aging steps as bare numbers (``spec-priority +-8 -> 992``). This module turns a run's job
summaries into its cost (the prod waits longer than in the reference run, the burst hours and
their price as the controller predicts burst spend, :mod:`sky_kueue.controller.burst_cost`),
and an aging step into a sentence. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sky_kueue.controller.burst_cost import BurstPricing, UnpricedReason
from sky_kueue.kueue.quantity import QuantityError, parse_quantity

SECONDS_PER_HOUR = Decimal(3600)


@dataclass(frozen=True)
class ProdWait:
    """How long one prod job waited in Kueue's queue before its first admission."""

    job: str
    workload: str
    submitted_at: int
    #: When it was first admitted (None: never, by the run's end).
    admitted_at: int | None
    waited_seconds: int
    finished: bool


def prod_waits(jobs: Mapping[str, Mapping[str, Any]], dev_key: str, horizon: int) -> list[ProdWait]:
    """Every prod job's queue wait: first admission - submission (the run's end if never admitted)."""
    waits = []
    for key, job in jobs.items():
        if key == dev_key:
            continue
        admitted = job["admitted_at"][0] if job["admitted_at"] else None
        end = admitted if admitted is not None else horizon
        waits.append(
            ProdWait(
                job=key,
                workload=str(job["workload"]),
                submitted_at=int(job["submitted_at"]),
                admitted_at=admitted,
                waited_seconds=int(end) - int(job["submitted_at"]),
                finished=job["finished_at"] is not None,
            )
        )
    return waits


def delays(waits: list[ProdWait], reference: list[ProdWait]) -> list[tuple[ProdWait, int]]:
    """The prod jobs that waited longer than their counterpart in ``reference``, and by how much.

    Why counterparts and not the same job: team-a's sweep queues four equal jobs at once on
    its two GPUs, so three of them wait in every run and which one goes first is arbitrary.
    Jobs submitted at the same time are therefore paired by rank of their wait (shortest with
    shortest); only a wait beyond its counterpart's is what the run's policy cost prod.
    """
    by_time = _grouped(reference)
    counterpart: dict[str, int] = {}
    for submitted_at, group in _grouped(waits).items():
        before = sorted(w.waited_seconds for w in by_time.get(submitted_at, []))
        for i, w in enumerate(sorted(group, key=lambda w: (w.waited_seconds, w.job))):
            counterpart[w.job] = before[i] if i < len(before) else 0
    return [(w, w.waited_seconds - counterpart[w.job]) for w in waits if w.waited_seconds > counterpart[w.job]]


def _grouped(waits: list[ProdWait]) -> dict[int, list[ProdWait]]:
    groups: dict[int, list[ProdWait]] = {}
    for w in waits:
        groups.setdefault(w.submitted_at, []).append(w)
    return groups


@dataclass(frozen=True)
class BurstUse:
    """What the runs on the burst target used, and its price as the controller predicts one."""

    cluster: str
    seconds: int
    cpu_hours: Decimal
    gpu_hours: Decimal
    #: The first burst target SkyPilot tries (what ``price_per_gpu_hour_usd`` is keyed by).
    target: str
    cost_usd: Decimal | None
    unpriced: UnpricedReason | None


def burst_use(
    jobs: Mapping[str, Mapping[str, Any]], burst_cluster: str, horizon: int, pricing: BurstPricing | None
) -> BurstUse | None:
    """CPU- and GPU-hours of every attempt admitted on ``burst_cluster`` (None: no burst ran).

    Priced per GPU-hour at the first burst target's ``price_per_gpu_hour_usd`` as
    :func:`sky_kueue.controller.burst_cost.predict` does; CPU-hours have no price setting, so a
    burst of CPUs alone is unpriced (``no-price``) rather than guessed.
    """
    seconds, cpu_seconds, gpu_seconds = 0, Decimal(0), Decimal(0)
    for job in jobs.values():
        for attempt in job["attempts"]:
            if attempt["cluster"] != burst_cluster or attempt["admitted_at"] is None:
                continue
            ended = attempt["ended_at"] if attempt["ended_at"] is not None else horizon
            ran = int(ended) - int(attempt["admitted_at"])
            seconds += ran
            cpu_seconds += _quantity(job.get("cpus")) * ran
            gpu_seconds += _quantity(job.get("gpus")) * ran
    if seconds == 0:
        return None
    gpu_hours = gpu_seconds / SECONDS_PER_HOUR
    target = pricing.target if pricing is not None else ""
    price = pricing.price_per_gpu_hour_usd.get(target) if pricing is not None else None
    unpriced: UnpricedReason | None = None
    if pricing is None:
        unpriced = UnpricedReason.NO_TEAM
    elif price is None or (gpu_hours == 0 and cpu_seconds > 0):
        unpriced = UnpricedReason.NO_PRICE
    return BurstUse(
        cluster=burst_cluster,
        seconds=seconds,
        cpu_hours=cpu_seconds / SECONDS_PER_HOUR,
        gpu_hours=gpu_hours,
        target=target,
        cost_usd=gpu_hours * price if price is not None and unpriced is None else None,
        unpriced=unpriced,
    )


def cost_json(
    jobs: Mapping[str, Mapping[str, Any]],
    reference_jobs: Mapping[str, Mapping[str, Any]],
    *,
    dev_key: str,
    horizon: int,
    burst_cluster: str,
    pricing: BurstPricing | None,
) -> dict[str, Any]:
    """A run's cost as the demo's JSON document carries it (``starvation.<run>.cost``)."""
    waits = prod_waits(jobs, dev_key, horizon)
    delayed = delays(waits, prod_waits(reference_jobs, dev_key, horizon))
    burst = burst_use(jobs, burst_cluster, horizon, pricing)
    return {
        "prod_wait_seconds": sum(w.waited_seconds for w in waits),
        "prod_delayed": [
            {
                "job": w.job,
                "workload": w.workload,
                "submitted_at": w.submitted_at,
                "admitted_at": w.admitted_at,
                "waited_seconds": w.waited_seconds,
                "longer_by_seconds": extra,
                "finished": w.finished,
            }
            for w, extra in delayed
        ],
        "prod_delay_seconds": sum(extra for _, extra in delayed),
        "burst": None
        if burst is None
        else {
            "cluster": burst.cluster,
            "seconds": burst.seconds,
            "cpu_hours": float(round(burst.cpu_hours, 3)),
            "gpu_hours": float(round(burst.gpu_hours, 3)),
            "target": burst.target,
            "cost_usd": None if burst.cost_usd is None else float(round(burst.cost_usd, 2)),
            "unpriced": None if burst.unpriced is None else burst.unpriced.value,
        },
    }


def describe_cost(cost: Mapping[str, Any], reference_label: str, horizon: int) -> str:
    """One sentence: the prod work delayed (which job, how long) and the burst's hours and price."""
    delayed = cost["prod_delayed"]
    if delayed:
        each = "; ".join(
            f"{d['workload']} waited {d['waited_seconds']} s "
            + (f"(t={d['submitted_at']}-{d['admitted_at']})" if d["admitted_at"] is not None else "(never admitted)")
            + f", {d['longer_by_seconds']} s longer"
            + ("" if d["finished"] else f", unfinished at t={horizon} s")
            for d in delayed
        )
        prod = f"prod waited {cost['prod_delay_seconds']} s longer than {reference_label}: {each}"
    else:
        prod = f"no prod job waited longer than {reference_label}"
    burst = cost["burst"]
    if burst is None:
        return f"{prod}; no burst"
    hours = (
        f"{burst['cpu_hours']:g} CPU-hours and {burst['gpu_hours']:g} GPU-hours "
        f"({burst['seconds']} s on {burst['cluster']})"
    )
    if burst["cost_usd"] is not None:
        price = f"${burst['cost_usd']:.2f} at {burst['target']}'s price per GPU-hour"
    elif burst["unpriced"] == UnpricedReason.NO_PRICE.value and burst["gpu_hours"] == 0:
        price = "unpriced: sky-kueue prices bursts per GPU-hour only (burst.price_per_gpu_hour_usd), and it used no GPU"
    elif burst["unpriced"] == UnpricedReason.NO_PRICE.value:
        price = f"unpriced: no burst.price_per_gpu_hour_usd for {burst['target']}"
    else:
        price = "unpriced: its team has no burst settings"
    return f"{prod}; burst {hours}, {price}"


def explain_level(
    *,
    class_name: str,
    class_value: int,
    boost: int,
    band: bool,
    waiting_level: bool,
    preemptions: int,
    preemption_points: int,
    age_points: int,
    cap: int,
) -> str:
    """What one aging step means, in words (the demo prints it beside the numbers).

    Args:
        class_name: the job's WorkloadPriorityClass.
        class_value: its value (the job's base priority).
        boost: the step's offset from ``class_value`` (the new priority is their sum).
        band: whether the policy is a band policy (``rank`` and its kin: offsets below the
            class value only, :mod:`sky_kueue.controller.aging.band`).
        waiting_level: whether the step sets the level of a waiting Workload (else of an
            admitted one).
        preemptions: the job's preemptions so far.
        preemption_points: the boost policies' points for them.
        age_points: the boost policies' points for waiting.
        cap: the boost policies' largest boost.
    """
    where = f"{class_name}'s {class_value}"
    if band and waiting_level:
        if preemptions == 0:
            return (
                f"{-boost} below {where}: a fresh arrival waits at the bottom of its class, behind any "
                "relaunch of the class"
            )
        return (
            f"{-boost} below {where}: its relaunch after {preemptions} preemption(s) waits ahead of its class's "
            "fresh arrivals, yet below every admitted job of the class, so it cannot preempt one"
        )
    if band:
        if boost == 0:
            return f"back at {where}: admitted, so its place in line no longer matters"
        return f"{-boost} below {where} while admitted: reclaims take less-preempted jobs of its class first"
    if boost > 0:
        return (
            f"{boost} above {where}: +{preemption_points} for its {preemptions} preemption(s) and +{age_points} "
            f"for its wait, at most +{cap}"
        )
    return f"at {where}: no boost"


def _quantity(value: object) -> Decimal:
    if value is None:
        return Decimal(0)
    try:
        return parse_quantity(value)
    except QuantityError:
        return Decimal(0)

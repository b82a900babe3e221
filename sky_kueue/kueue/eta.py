"""When will a pending workload be admitted? An estimate from expected run times.

Kueue cannot know: a parked workload is reconsidered only when quota is freed in its
cohort tree (Kueue ``pkg/scheduler/scheduler.go`` ``requeueAndUpdate``). So the estimate simulates exactly that: it
settles the
cluster with the exact model, then repeatedly lets the quota holder expected to finish
first finish (its quota is freed and the tree's parked workloads return to their queues,
as in Kueue), settles again, and records when each workload of interest is admitted. Jobs
admitted during the simulation finish after their own expected run time.

Run times come from the caller (a per-workload function): an annotation, a team default,
or history. A workload whose run time is unknown is assumed to run past the horizon, so
an ETA that depends on it is reported as unknown rather than guessed. Each ETA lists where
the run times it waited on came from (:data:`EXPECTED_RUNTIME_SOURCE_ANNOTATION`, written
next to the run time by sky-kueue's admin policy), so a user can tell a declared run time
from a guess off the team's history.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sky_kueue.kueue import objects as o
from sky_kueue.kueue.cohort_trees import TreeId, restrict_to_trees
from sky_kueue.kueue.predictor import DEFAULT_NOW, run_until_settled
from sky_kueue.kueue.scheduler import CycleResult, Engine
from sky_kueue.kueue.validation import validate_state

#: How far ahead the estimate looks before it gives up.
DEFAULT_HORIZON_SECONDS = 7 * 24 * 3600
#: Cycles allowed to settle after each simulated completion.
SETTLE_CAP_CYCLES = 200
#: Annotation a workload may carry with its expected run time in seconds.
EXPECTED_RUNTIME_ANNOTATION = "sky-kueue.io/expected-runtime-seconds"
#: Annotation saying where that run time came from (``declared``, ``history(n=7)``).
EXPECTED_RUNTIME_SOURCE_ANNOTATION = "sky-kueue.io/expected-runtime-source"
#: The source reported for a run time annotated without a source.
UNSPECIFIED_SOURCE = "annotated"
#: The start of :attr:`Eta.reason` when its tree's next known completion is past the horizon.
BEYOND_HORIZON_REASON = "not admitted within"
#: The start of :attr:`Eta.reason` when no quota holder of its tree with a known run time is left.
NO_KNOWN_RUNTIME_REASON = "no quota holder with a known run time frees room"

RuntimeFn = Callable[[o.Workload], float | None]
SourceFn = Callable[[o.Workload], str]


def source_from_annotation(wl: o.Workload) -> str:
    """Where ``wl``'s run time came from, per :data:`EXPECTED_RUNTIME_SOURCE_ANNOTATION`."""
    return wl.annotations.get(EXPECTED_RUNTIME_SOURCE_ANNOTATION) or UNSPECIFIED_SOURCE


def runtime_from_annotation(default_seconds: float | None = None) -> RuntimeFn:
    """Expected run time from :data:`EXPECTED_RUNTIME_ANNOTATION`, else ``default_seconds``."""

    def runtime(wl: o.Workload) -> float | None:
        value = wl.annotations.get(EXPECTED_RUNTIME_ANNOTATION)
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                return default_seconds
        return default_seconds

    return runtime


@dataclass
class Eta:
    """The estimated admission of one workload."""

    workload: str
    #: seconds from now until admission; 0 means in the next scheduling cycles; None: unknown
    seconds: float | None
    #: quota holders whose completion the admission waits for
    waits_for: list[str] = field(default_factory=list)
    #: workloads it preempts when admitted
    preempts: list[str] = field(default_factory=list)
    reason: str = ""
    #: where the run times of ``waits_for`` came from, one entry per workload, in its order
    runtime_sources: list[str] = field(default_factory=list)
    #: not admitted while quota holders of its cohort tree whose run time is unknown remain:
    #: the admission waits on them. False with :data:`NO_KNOWN_RUNTIME_REASON` means nothing
    #: in its tree will ever free room (every holder there finished and it still does not fit).
    waits_on_unknown_runtime: bool = False


def estimate(
    state: o.ClusterState,
    workloads: Iterable[str],
    runtime: RuntimeFn,
    now: datetime | None = None,
    horizon_seconds: float = DEFAULT_HORIZON_SECONDS,
    source: SourceFn = source_from_annotation,
) -> dict[str, Eta]:
    """Estimate when each of ``workloads`` (keys ``ns/name``) is admitted.

    ``source`` names where a workload's run time came from (for :attr:`Eta.runtime_sources`).

    Only the cohort trees of ``workloads`` are simulated
    (:func:`sky_kueue.kueue.cohort_trees.restrict_to_trees`): Kueue never lends, borrows or
    preempts across cohort trees and frees a tree's parked Workloads only on that tree's
    events, so the other trees' completions never free room for these and their admission
    times are the whole cluster's. On a large cluster this is what keeps the burst gate's
    per-job call cheap: the whole cluster once stepped every tree's completions. So
    :attr:`Eta.waits_for` lists completions of the workload's own tree only, and when that
    tree has no known completion left the reason is :data:`NO_KNOWN_RUNTIME_REASON` (not the
    horizon, which only unrelated trees' completions could reach).

    Raises:
        ModelError: if ``state`` fails Kueue's validation.
    """
    validate_state(state)
    wanted = list(workloads)
    restricted = restrict_to_trees(state, wanted)
    return _simulate(restricted.state, wanted, runtime, now, horizon_seconds, source, restricted.tree_by_cluster_queue)


def _estimate_whole_cluster(
    state: o.ClusterState,
    workloads: Iterable[str],
    runtime: RuntimeFn,
    now: datetime | None = None,
    horizon_seconds: float = DEFAULT_HORIZON_SECONDS,
    source: SourceFn = source_from_annotation,
) -> dict[str, Eta]:
    """:func:`estimate` simulating every cohort tree (the tests' reference for its ``seconds``)."""
    validate_state(state)
    return _simulate(state, list(workloads), runtime, now, horizon_seconds, source, None)


def _simulate(
    state: o.ClusterState,
    workloads: list[str],
    runtime: RuntimeFn,
    now: datetime | None,
    horizon_seconds: float,
    source: SourceFn,
    trees: dict[str, TreeId] | None,
) -> dict[str, Eta]:
    """The simulation behind :func:`estimate` on ``state`` as given.

    ``trees`` maps each ClusterQueue to its cohort tree; with it, ``waits_for`` and the
    reasons count only completions in the workload's own tree (None: every completion).
    """
    start = now or state.now or DEFAULT_NOW
    engine = Engine(state, start)
    wanted = set(workloads)
    result: dict[str, Eta] = {}
    finish_at: dict[str, datetime] = {}
    sources: dict[str, str] = {}

    def same_tree(cluster_queue: str) -> Callable[[str], bool]:
        if trees is None:
            return lambda _other: True
        tree = trees.get(cluster_queue)
        return lambda other: tree is not None and trees.get(other) == tree

    for key, info in engine.holders.items():
        total = runtime(info.obj)
        if total is None:
            continue
        reserved = info.reserved_at or start
        finish_at[key] = max(start, reserved + timedelta(seconds=total))
        sources[key] = source(info.obj)
    #: completed quota holders, with the ClusterQueue each held quota in
    finished: list[tuple[str, str]] = []
    victims_of: dict[str, list[str]] = {}

    def on_cycle(cycle: CycleResult) -> None:
        for victim in cycle.preempted:
            finish_at.pop(victim.victim.key, None)
            victims_of.setdefault(victim.preemptor.key, []).append(victim.victim.key)
        for entry in cycle.admitted:
            key = entry.info.key
            total = runtime(entry.info.obj)
            if total is not None:
                finish_at[key] = engine.now + timedelta(seconds=total)
                sources[key] = source(entry.info.obj)
            if key in wanted and key not in result:
                in_tree = same_tree(entry.cq)
                waited = [k for k, cq in finished if in_tree(cq)]
                result[key] = Eta(
                    key,
                    (engine.now - start).total_seconds(),
                    waits_for=waited,
                    preempts=list(victims_of.get(key, [])),
                    runtime_sources=[sources.get(k, UNSPECIFIED_SOURCE) for k in waited],
                )

    horizon = start + timedelta(seconds=horizon_seconds)
    run_until_settled(engine, SETTLE_CAP_CYCLES, on_cycle)
    while not wanted.issubset(result) and finish_at:
        moment = min(finish_at.values())
        if moment > horizon:
            break
        engine.now = moment
        for key in [k for k, t in finish_at.items() if t == moment]:
            del finish_at[key]
            holder = engine.holders.get(key)
            finished.append((key, holder.cluster_queue if holder is not None else ""))
            engine.delete_workload(key)
        run_until_settled(engine, SETTLE_CAP_CYCLES, on_cycle)
    for key in sorted(wanted - set(result)):
        pending = engine.pending.get(key)
        if pending is None:
            result[key] = Eta(key, None, reason="not a pending workload of this cluster")
            continue
        in_tree = same_tree(pending.cluster_queue)
        if any(in_tree(engine.holders[k].cluster_queue) for k in finish_at if k in engine.holders):
            result[key] = Eta(key, None, reason=f"{BEYOND_HORIZON_REASON} {horizon_seconds / 3600:.0f}h")
        else:
            message = pending.message or "waiting for its turn"
            result[key] = Eta(
                key,
                None,
                reason=f"{NO_KNOWN_RUNTIME_REASON}: {message}",
                waits_on_unknown_runtime=any(in_tree(info.cluster_queue) for info in engine.holders.values()),
            )
    return result

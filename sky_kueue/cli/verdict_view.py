"""Human-readable rendering of a prediction: one verdict per workload."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from sky_kueue.kueue.predictor import Prediction, Verdict, VerdictKind


def _flavors(v: Verdict) -> str:
    parts = []
    for ps, flavors in sorted(v.flavors.items()):
        inner = ", ".join(f"{r}={f}" for r, f in sorted(flavors.items()))
        parts.append(f"{ps}: {inner}")
    return "; ".join(parts)


def describe(v: Verdict) -> str:
    """One sentence saying what happens to the workload and why."""
    if v.kind is VerdictKind.ADMITTED:
        return f"admitted in cycle {v.cycle} to {v.cluster_queue} ({_flavors(v)})"
    if v.kind is VerdictKind.ADMITTED_AFTER_PREEMPTION:
        victims = ", ".join(
            f"{w} ({reason}{'; ' + v.victim_details[w] if w in v.victim_details else ''})" for w, reason in v.victims
        )
        return f"admitted in cycle {v.cycle} to {v.cluster_queue} after preempting {victims} ({_flavors(v)})"
    if v.kind is VerdictKind.PREEMPTED:
        return f"preempted in cycle {v.cycle} by {v.preempted_by} ({v.reason})"
    if v.kind is VerdictKind.RUNNING:
        return f"keeps running in {v.cluster_queue}"
    message = v.message or "not evaluated yet: other workloads of its queue come first"
    return f"pending in {v.cluster_queue}: {message}"


def print_verdicts(result: Prediction, only_pending_at_start: bool = True, console: Console | None = None) -> None:
    console = console or Console()
    table = Table(title="Kueue admission prediction", show_lines=False)
    table.add_column("WORKLOAD", no_wrap=True)
    table.add_column("VERDICT", no_wrap=True)
    table.add_column("DETAIL")
    kinds_shown = {
        VerdictKind.ADMITTED,
        VerdictKind.ADMITTED_AFTER_PREEMPTION,
        VerdictKind.PENDING,
        VerdictKind.PREEMPTED,
    }
    for key in sorted(result.verdicts):
        v = result.verdicts[key]
        if only_pending_at_start and v.kind not in kinds_shown:
            continue
        table.add_row(key, v.kind.value, describe(v))
    console.print(table)
    settled = "settled" if result.settled else "not settled (cycle cap reached)"
    console.print(f"{len(result.cycles)} cycle(s), {settled}.")

"""The live demo's document as rich tables: what each run changed, where each attempt ran,
when (or whether) team-b's dev job finished, and why the controller's predicted-wait burst gate
kept a preempted job on-prem or sent it to the burst cluster."""

from __future__ import annotations

from typing import Any

from sky_kueue.cli.demo_cost import describe_cost

#: Console width when the output is not a terminal (rich would assume 80 columns).
WIDE_OUTPUT_COLUMNS = 120
#: The dev job's key in the document.
DEV_KEY = "managed-job/1"


def _attempts(attempts: list[dict[str, Any]]) -> str:
    """``sky-kueue-sandbox t=0-60 preempted -> sky-kueue-burst t=80-690 finished``."""
    parts = []
    for a in attempts:
        span = f"t={a['submitted_at']}" + (f"-{a['ended_at']}" if a["ended_at"] is not None else "")
        parts.append(f"{a['cluster']} {span} {a['outcome']}")
    return " -> ".join(parts) or "-"


def _gate_said(job: dict[str, Any]) -> str:
    """What the controller's gate said about a job: its burst, or its last verdict keeping it."""
    if job.get("burst"):
        return f"burst, {job['burst']}"
    if job.get("kept"):
        return f"kept on-prem, {job['kept']}"
    return "not asked (the job was never due a burst)"


def print_text(document: dict[str, Any]) -> None:
    """The seed timeline, the three runs side by side, and the default run's dev timeline."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=WIDE_OUTPUT_COLUMNS)
    final = document["final"]
    clusters = final["clusters"]
    console.print(
        f"[bold]sky-kueue demo[/bold]: two sandbox clusters in one kubeconfig, {clusters['onprem']} (on-prem "
        f"Kueue, watched by the resubmission controller; {final['actuator']}) and {clusters['burst']} (team-b's "
        f"burst target), SkyPilot-like jobs, settings from {final['config']}."
    )

    def timeline(title: str, events: list[dict[str, Any]]) -> Table:
        table = Table(title=title)
        table.add_column("t (s)", justify="right")
        table.add_column("event")
        table.add_column("cluster", no_wrap=True)
        table.add_column("workload", no_wrap=True)
        table.add_column("priority", justify="right")
        table.add_column("detail", overflow="fold")
        styles = {"preempted": "red", "aged": "green", "kept": "magenta", "burst": "yellow", "finished": "cyan"}
        for e in events:
            style = styles.get(e["type"], "")
            table.add_row(
                str(e["t"]), e["type"], e["cluster"], e["workload"], str(e["priority"]), e["detail"], style=style
            )
        return table

    console.print(timeline(final["scenario"] + " (default settings)", document["events"]))
    gate = final.get("burst_gate")
    if gate is not None:
        console.print(
            f"[bold]Burst gate[/bold] ({gate['team']}, the default run): a job due a burst goes to the burst "
            f"cluster only when the controller predicts its relaunch would wait on-prem more than cloud start-up "
            f"{gate['cloud_startup_seconds']:.0f} s + margin {gate['margin_seconds']:.0f} s = "
            f"{gate['threshold_seconds']:.0f} s. Seed: {_gate_said(final['jobs'].get(DEV_KEY, {}))}."
        )
    starvation = final["starvation"]
    variants = (starvation["without_aging"], starvation["with_aging"], starvation["with_rank"])
    console.print(
        "[bold]What each run changes from configs/sky-kueue.yaml[/bold] (besides the open teams of "
        "configs/sky-kueue-demo.yaml):"
    )
    for variant in variants:
        for change in variant["changes"]:
            console.print(f"  {variant['label']}: {change['key']} = {change['value']!r} ({change['why']})")
    summary = Table(title=f"Starvation: {starvation['scenario']}")
    for column in ("run", "dev preemptions", "dev attempts", "dev finished", "burst gate", "prod done"):
        summary.add_column(column, overflow="fold")

    def gate_column(variant: dict[str, Any]) -> str:
        gate, b = variant.get("burst_gate"), variant["team_b"]
        if gate is None:
            return "none"
        if b["burst"]:
            wait = b["burst_predicted_wait_seconds"]
            said = "?" if wait is None else f"{wait:.0f} s"
            return f"burst: predicted wait {said} > {gate['threshold_seconds']:.0f} s"
        return "kept on-prem" if b["kept"] else "not asked"

    for variant in variants:
        b = variant["team_b"]
        finished = (
            f"t={b['finished_at']} s on {b['finished_on']}"
            if not b["starved"]
            else f"no, by t={variant['horizon_seconds']} s: {b['why_unfinished']}"
        )
        summary.add_row(
            variant["label"],
            str(b["preemptions"]),
            _attempts(b["attempts"]),
            finished,
            gate_column(variant),
            f"{variant['team_a_finished']}/{variant['team_a_jobs']}",
        )
    console.print(summary)
    console.print("[bold]What each run cost[/bold]:")
    for variant in variants:
        reference = variant["cost_reference"]
        label = "the same run" if reference == variant["label"] else f"the {reference} run"
        console.print(f"  {variant['label']}: {describe_cost(variant['cost'], label, variant['horizon_seconds'])}")
    dev_events = [e for e in starvation["with_rank"]["events"] if e["job"] == DEV_KEY]
    console.print(timeline(f"team-b's dev job, {starvation['with_rank']['label']}", dev_events))
    console.print(f"[bold]{starvation['verdict']}[/bold] (demo took {final['elapsed_seconds']} s)")

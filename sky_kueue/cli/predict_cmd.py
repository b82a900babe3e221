"""``sky-kueue predict``: what Kueue will do with the pending workloads of a cluster.

Reads a snapshot (Kueue objects as ``kubectl get -o yaml`` prints them), optionally adds
hypothetical workloads (``--add``), runs the scheduling model until the cluster settles and
prints either the oracle's JSON format (``--output json``) or a verdict per workload.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sky_kueue.cli import errors
from sky_kueue.kueue.errors import ModelError

#: Exit code for bad input (unreadable file, invalid YAML, invalid object).
EXIT_BAD_INPUT = 2


@click.command("predict")
@click.option(
    "--snapshot",
    "snapshot",
    type=click.Path(dir_okay=False, path_type=Path),
    required=False,
    help="Multi-document YAML of Kueue objects (as `kubectl get -o yaml` prints them).",
)
@click.option(
    "--add",
    "add",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="A hypothetical pending Workload to add (what-if); repeatable.",
)
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--cycle-cap", type=click.IntRange(min=1), default=None, help="Override the number of cycles recorded.")
@click.option("--kubeconfig", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Predict on a live cluster through its API server instead of a snapshot.")
@click.option("--context", "kube_context", default=None, help="kubeconfig context (with --kubeconfig).")
@click.option("--task", "tasks", multiple=True, type=click.Path(dir_okay=False, path_type=Path),
              help="A SkyPilot task YAML to add as the pod group it would create (with --kubeconfig).")
def predict(
    snapshot: Path | None,
    add: tuple[Path, ...],
    output: str,
    cycle_cap: int | None,
    kubeconfig: Path | None,
    kube_context: str | None,
    tasks: tuple[Path, ...],
) -> None:
    """Predict Kueue's admissions, preemptions and pending reasons."""
    from sky_kueue.kueue import loader, predictor

    try:
        if snapshot is not None:
            if tasks:
                raise ModelError("--task needs --kubeconfig (use --add with a Workload for a snapshot)")
            state = loader.load_state_file(snapshot, add)
            scenario = snapshot.stem
        elif kubeconfig is not None:
            from sky_kueue.mirror import live  # imported lazily: pulls in the kubernetes client

            state = live.load_live_state(kubeconfig, kube_context, add, tasks)
            scenario = ""
        else:
            raise ModelError("give --snapshot FILE or --kubeconfig FILE")
        result = predictor.predict(state, cycle_cap=cycle_cap)
    except ModelError as exc:
        errors.fail(str(exc), EXIT_BAD_INPUT)
        return
    if output == "json":
        json.dump(result.to_json(scenario), sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
        return
    from sky_kueue.cli import verdict_view

    verdict_view.print_verdicts(result, only_pending_at_start=True)

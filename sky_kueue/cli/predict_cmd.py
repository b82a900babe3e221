"""``sky-kueue predict``: what Kueue will do with the pending workloads of a cluster.

Reads a snapshot (Kueue objects as ``kubectl get -o yaml`` prints them), optionally adds
hypothetical workloads (``--add``), runs the scheduling model until the cluster settles and
prints either the oracle's JSON format (``--output json``) or a verdict per workload.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import click

from sky_kueue.cli import errors
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.objects import KueueConfig

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
@click.option(
    "--kueue-config",
    "kueue_config",
    default=None,
    metavar="MODE",
    help=(
        "The scheduling mode the cluster's Kueue runs, overriding the snapshot's '# kueue-config:' header: "
        "'classical', 'fairSharing', or 'admissionFairSharing usageHalfLifeTime=30m usageSamplingInterval=5m "
        "[resourceWeights=cpu:1,memory:0]'."
    ),
)
def predict(
    snapshot: Path | None,
    add: tuple[Path, ...],
    output: str,
    cycle_cap: int | None,
    kueue_config: str | None,
) -> None:
    """Predict Kueue's admissions, preemptions and pending reasons."""
    from sky_kueue.kueue import loader, predictor

    try:
        if snapshot is None:
            raise ModelError("give --snapshot FILE (a multi-document YAML of Kueue objects)")
        state = loader.load_state_file(snapshot, add)
        if kueue_config is not None:
            state.config = _override_config(state.config, kueue_config)
        scenario = snapshot.stem
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


def _override_config(current: KueueConfig, mode: str) -> KueueConfig:
    """Replace the scheduling mode of ``current`` by the one named on the command line."""
    from sky_kueue.kueue import parse

    if mode.strip() == "classical":
        return dataclasses.replace(current, fair_sharing=None, admission_fair_sharing=None)
    parsed = parse.parse_header(f"# kueue-config: {mode}")
    return dataclasses.replace(
        current, fair_sharing=parsed.fair_sharing, admission_fair_sharing=parsed.admission_fair_sharing
    )

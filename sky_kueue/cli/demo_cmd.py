"""``sky-kueue demo``: what sky-kueue does, on the seed setup, with no cluster needed.

The seed setup is two teams sharing a cohort: team-b's dev job borrows cohort CPU, then
team-a's prod job (7 CPU, 2 GPUs) arrives. The demo predicts, with the exact Kueue model,
that team-a preempts team-b (reclaim while borrowing) and is admitted one cycle later.
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import click

from sky_kueue.cli import errors
from sky_kueue.kueue.errors import ModelError

SEED_SCENARIO = "seed-scenario.yaml"


@click.command("demo")
@click.option("--output", "-o", type=click.Choice(["text", "json"]), default="text", show_default=True)
def demo(output: str) -> None:
    """Predict the seed scenario: team-a's prod job preempts team-b's borrowing dev job."""
    from sky_kueue.kueue import loader, predictor

    text = resources.files("sky_kueue.data").joinpath(SEED_SCENARIO).read_text(encoding="utf-8")
    try:
        result = predictor.predict(loader.load_state(text, SEED_SCENARIO))
    except ModelError as exc:  # the embedded scenario is validated by the tests; keep the contract anyway
        errors.fail(str(exc))
    if output == "json":
        json.dump(result.to_json("seed"), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from sky_kueue.cli import verdict_view

    click.echo(__doc__.split("\n\n", 1)[1].strip() if __doc__ else "")
    click.echo()
    verdict_view.print_verdicts(result)

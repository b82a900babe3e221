"""``sky-kueue demo``: the resubmission controller at work on sandbox clusters, no cluster needed.

By default the demo is live (:mod:`sky_kueue.cli.demo_live`): it starts two sandbox API
servers with their Kueue emulation in one kubeconfig (``sky-kueue-sandbox``, the on-prem
cluster with the seed setup and the real controller; ``sky-kueue-burst``, team-b's burst
target), takes its settings from ``configs/sky-kueue-demo.yaml`` plus the changes each run
names (:mod:`sky_kueue.cli.demo_config`), submits SkyPilot-like pod groups with their declared
run times, relaunches preempted jobs where the ``KUEUE_AGING`` recovery strategy sends them
(after the controller's predicted-wait burst gate, as in production), and prints the seed
timeline and three runs of a starvation scenario (no aging, boost, default) with each run's
preemptions, where each attempt ran and when the dev job finished, or why not
(:mod:`sky_kueue.cli.demo_text`). ``--output json`` prints ``{"events": [...], "final": {...}}``.

``--predict-only`` keeps the original, model-only demo: the exact Kueue model predicts
that team-a preempts team-b (reclaim while borrowing) and is admitted one cycle later.
"""

from __future__ import annotations

import json
import sys
from importlib import resources

import click

from sky_kueue.cli import errors, options
from sky_kueue.kueue.errors import ModelError

SEED_SCENARIO = "seed-scenario.yaml"


def _predict(output: str) -> None:
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

    click.echo(
        "The seed setup: team-b's dev job borrows cohort CPU, then team-a's prod job (7 CPU, 2 GPUs) "
        "arrives. The exact Kueue model predicts that team-a preempts team-b (reclaim while borrowing) "
        "and is admitted one cycle later."
    )
    click.echo()
    verdict_view.print_verdicts(result)


def _real(output: str) -> None:
    import dataclasses

    from sky_kueue.cli import demo_real
    from sky_kueue.realcluster.build import BuildError
    from sky_kueue.realcluster.cluster import ClusterError

    echo = (lambda line: click.echo(line, err=True)) if output == "json" else click.echo
    try:
        result = demo_real.run_real_demo(echo)
    except BuildError as exc:
        errors.fail(f"the real cluster cannot be built: {exc}", code=1)
    except (ClusterError, demo_real.RealDemoError) as exc:
        errors.fail(f"the real demo failed: {exc}", code=1)
    if output == "json":
        json.dump(dataclasses.asdict(result), sys.stdout, indent=2)
        sys.stdout.write("\n")


@click.command("demo")
@options.output_option()
@click.option("--predict-only", is_flag=True, help="Only predict the seed scenario with the Kueue model.")
@click.option(
    "--priority-boost",
    is_flag=True,
    help="Run the sandbox with Kueue's PriorityBoost gate on (the controller sets the annotation).",
)
@click.option(
    "--real",
    is_flag=True,
    help="Run the seed's story on real Kubernetes and the real Kueue (built from their Go modules; about a minute).",
)
def demo(output: str, predict_only: bool, priority_boost: bool, real: bool) -> None:
    """Live demo: Kueue preempts a SkyPilot job; the default relaunches it on the burst cluster."""
    if predict_only:
        _predict(output)
        return
    if real:
        _real(output)
        return
    from sky_kueue.cli import demo_live  # the sandbox is imported only here

    try:
        document = demo_live.run_demo(priority_boost=priority_boost)
    except RuntimeError as exc:  # DemoConfigError included
        errors.fail(f"the demo failed: {exc}", code=1)
    if output == "json":
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    from sky_kueue.cli import demo_text

    demo_text.print_text(document)

"""``sky-kueue aging``: show how a job's priority boost is computed from its history.

Why: a boost reorders a shared queue, so "why is this job at +200?" must be answerable
from the durable record alone. ``aging explain`` opens the controller's history store
read-only (safe while the controller runs: the store is in WAL mode), re-runs the
configured policy on the job's history, and prints every rule it applied next to the steps
the controller actually recorded and actuated.

Bad input (missing file, unknown job, invalid config, bad option) prints one line and exits
with code 2; it never shows a traceback.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import click

from sky_kueue.cli import errors, options, state_option
from sky_kueue.controller import aging as aging_policies
from sky_kueue.controller.aging import AgingDecision, AgingSettings, SettingsError
from sky_kueue.controller.detection import parse_time
from sky_kueue.controller.history import JobHistory, StoreError

#: How many known jobs an "unknown job" error lists.
MAX_JOBS_IN_ERROR = 10


def load_settings(config_path: Path | None) -> AgingSettings:
    """Reads the aging settings from a ``sky-kueue.yaml`` (defaults without a file).

    The whole file is validated by :func:`sky_kueue.skypilot.config.load_config` (the same
    loader the policy server and the controller use); the aging tunables come from
    ``aging.parameters`` and the ladder from ``aging.ladder`` + ``priority_classes``.

    Raises:
        UserError: the file is missing, invalid, or has a bad aging setting.
    """
    if config_path is None:
        return AgingSettings()
    if not config_path.is_file():
        errors.fail(f"config file {config_path} does not exist")
    from sky_kueue.skypilot.config import ConfigError, load_config  # pydantic: only with --config

    try:
        config = load_config(config_path)
    except ConfigError as err:
        errors.fail(str(err))
    try:
        return AgingSettings.from_plugin_section(
            config.aging.parameters, config.aging_ladder(), where=f"{config_path}: aging.parameters"
        )
    except SettingsError as err:
        errors.fail(str(err))
    except KeyError as err:  # a ladder class missing from priority_classes (validated away)
        errors.fail(f"{config_path}: aging.ladder: unknown priority class {err}")


def _parse_at(text: str | None) -> float:
    if text is None:
        import time

        return time.time()
    try:
        value = float(text)
    except ValueError:
        parsed = parse_time(text)
        if parsed is None:
            errors.fail(f"--at: expected POSIX seconds or an RFC 3339 time (2026-01-01T00:00:00Z), got {text!r}")
        return parsed
    if not math.isfinite(value):
        errors.fail(f"--at: expected a finite time, got {text!r}")
    return value


def _load_history(
    state_text: str, job_ref: str, kubeconfig: Path | None, context: str | None, in_cluster: bool
) -> JobHistory:
    spec = state_option.parse(state_text)
    opened = state_option.open_from_cli(
        spec, kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, read_only=True
    )
    where = opened.location
    try:
        store = opened.store
        key = store.resolve(job_ref)
        if key is None:
            known = [job.key for job in store.jobs()]
            listed = ", ".join(known[:MAX_JOBS_IN_ERROR]) or "none"
            more = f" (and {len(known) - MAX_JOBS_IN_ERROR} more)" if len(known) > MAX_JOBS_IN_ERROR else ""
            errors.fail(f"no job matching {job_ref!r} in {where}; known jobs: {listed}{more}")
        history = store.load(key)
    except StoreError as err:
        errors.fail(str(err))
    finally:
        opened.close()
    if history is None:
        errors.fail(f"job {job_ref!r} disappeared from {where} while reading")
    return history


def _report(history: JobHistory, settings: AgingSettings, decision: AgingDecision) -> dict[str, Any]:
    identity = history.identity
    return {
        "job": history.key,
        "identity": None
        if identity is None
        else {
            "namespace": identity.namespace,
            "pod_group": identity.pod_group,
            "managed_job_id": identity.managed_job_id,
            "managed_job_name": identity.managed_job_name,
            "user": identity.user,
        },
        "settings": settings.to_mapping(),
        "decision": decision.to_dict(),
        "history": {
            "base_priority": history.base_priority,
            "first_seen": history.first_seen,
            "phase": history.phase.value if history.phase else None,
            "wait_seconds": history.wait_seconds(decision.now),
            "run_seconds": history.run_seconds(decision.now),
            "last_admission_at": history.last_admission_at,
            "preemptions": [
                {
                    "key": p.key.token,
                    "at": p.at,
                    "workload": p.workload_name,
                    "reason": p.reason,
                    "preemptor_uid": p.preemptor_uid,
                    "preemptor_priority": p.preemptor_priority,
                }
                for p in history.preemptions
            ],
            "other_evictions": [
                {
                    "key": e.key.token,
                    "at": e.at,
                    "workload": e.workload_name,
                    "reason": e.reason,
                    "kind": e.kind,
                }
                for e in history.evictions
            ],
        },
        "recorded_steps": [
            {
                "key": s.key.token,
                "workload": f"{s.workload_namespace}/{s.workload_name}",
                "policy": s.policy,
                "boost": s.boost,
                "revision": s.revision,
                "state": s.state.value,
                "decided_at": s.decided_at,
                "actuated_boost": s.actuated_boost,
                "actuated_at": s.actuated_at,
                "actuator": s.actuator,
                "detail": s.detail,
            }
            for s in history.steps
        ],
        "burst": None
        if history.burst is None
        else {
            "decided_at": history.burst.decided_at,
            "reason": history.burst.reason,
            "detail": history.burst.detail,
            "preemptions": history.burst.preemptions,
        },
    }


def _print_text(history: JobHistory, decision: AgingDecision) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    origin = history.first_seen if history.first_seen is not None else decision.now
    console.print(
        f"[bold]{history.key}[/bold]  policy [bold]{decision.policy}[/bold]  "
        f"boost [bold]{decision.boost}[/bold]  effective priority {decision.effective_priority} "
        f"(base {decision.base_priority}; currently applied {decision.current_boost})"
    )
    table = Table(title="How the boost is computed", show_lines=False)
    table.add_column("#", justify="right")
    table.add_column("rule")
    table.add_column("value", justify="right")
    table.add_column("detail", overflow="fold")
    for index, step in enumerate(decision.steps, start=1):
        table.add_row(str(index), step.rule, step.value, step.detail)
    console.print(table)
    if history.steps:
        steps = Table(title="Recorded aging steps")
        for column in ("episode", "workload", "boost", "state", "actuated", "at"):
            steps.add_column(column)
        for s in history.steps:
            actuated = "-" if s.actuated_boost is None else f"{s.actuated_boost} via {s.actuator}"
            steps.add_row(
                s.key.token,
                f"{s.workload_namespace}/{s.workload_name}",
                str(s.boost),
                s.state.value + (f" ({s.detail})" if s.detail else ""),
                actuated,
                f"t+{s.decided_at - origin:.0f}s",
            )
        console.print(steps)
    if history.burst is not None:
        console.print(f"[bold]burst[/bold]: {history.burst.reason}: {history.burst.detail}")


@click.group(name="aging")
def aging() -> None:
    """Inspect priority aging of preempted SkyPilot jobs."""


@aging.command("explain")
@click.option("--job", "job_ref", metavar="JOB", help="Managed-job id (17), job key, or pod-group name.")
@click.option(
    "--state",
    "state_text",
    metavar="SPEC",
    help="The controller's history: sqlite:PATH, PATH, or kubernetes[:NAMESPACE].",
)
@state_option.cluster_options
@click.option("--config", "config_path", metavar="FILE", type=click.Path(path_type=Path), help="sky-kueue config.")
@click.option(
    "--policy", "policy_name", metavar="NAME", help="Evaluate with this policy instead of the configured one."
)
@click.option("--at", "at_text", metavar="TIME", help="Evaluate at this time (RFC 3339 or POSIX seconds).")
@options.output_option()
def explain(
    job_ref: str | None,
    state_text: str | None,
    kubeconfig: Path | None,
    context: str | None,
    in_cluster: bool,
    config_path: Path | None,
    policy_name: str | None,
    at_text: str | None,
    output: str,
) -> None:
    """Show how the boost of JOB is computed from the durable history."""
    if not job_ref or not job_ref.strip():
        errors.fail("--job is required (a managed-job id, job key or pod-group name)")
    if state_text is None:
        errors.fail("--state is required (the controller's history: sqlite:PATH, PATH, or kubernetes[:NAMESPACE])")
    settings = load_settings(config_path)
    if policy_name is not None:
        try:
            policy = aging_policies.get_policy(policy_name)
        except aging_policies.UnknownPolicyError as err:
            errors.fail(f"--policy: {err}")
    else:
        policy = aging_policies.get_policy(settings.policy)
    now = _parse_at(at_text)
    history = _load_history(state_text, job_ref, kubeconfig, context, in_cluster)
    decision = policy.decide(history, settings, now)
    if output == "json":
        json.dump(_report(history, settings, decision), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _print_text(history, decision)


@aging.command("policies")
@options.output_option()
def policies(output: str) -> None:
    """List the registered aging policies."""
    rows = [{"name": p.name, "summary": p.summary} for p in aging_policies.all_policies()]
    if output == "json":
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    for row in rows:
        click.echo(f"{row['name']:<10} {row['summary']}")

"""``sky-kueue launch``: show what the admin policy and Kueue will do with a task, then submit it.

Prints the identity the request is made for (the SkyPilot user and workspace, found by
SkyPilot's own client functions: :mod:`sky_kueue.skypilot.client_identity`), then the team,
queue, priority class, the admission prediction (admit now / preempt whom / wait and why /
never fits) and the burst choice, followed by the task as the policy rewrites it; or one
rejection line. Without ``--dry-run`` the task is submitted with ``sky.jobs.launch``, after
SkyPilot's own parser has read it.

A dry run does not import SkyPilot (3-10 s on two cores, most of its time) for what it can read
as SkyPilot would: the task (:mod:`sky_kueue.skypilot.task_reader`, which gives
``sky.Task.from_yaml(path).to_yaml_config()`` for the spellings a Kubernetes task uses), the
user and SkyPilot's config (:mod:`sky_kueue.skypilot.client_identity`). Whatever those readers
leave to SkyPilot (a field they do not read, a config SkyPilot reads differently) is read by
SkyPilot itself, with the same output, only slower; ``-v`` says which field.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import yaml

from sky_kueue.cli import console, errors, options
from sky_kueue.skypilot import labels
from sky_kueue.skypilot.client_identity import ClientIdentity, IdentityError, current_identity, plan_as_client
from sky_kueue.skypilot.cluster_view import (
    ManifestError,
    ModelUnavailable,
    build_views,
    load_manifests,
    view_from_documents,
)
from sky_kueue.skypilot.config import ConfigError, PluginConfig, load_config, resolve_config_path
from sky_kueue.skypilot.history_source import HistorySource
from sky_kueue.skypilot.kubeconfig_contexts import kubeconfig_contexts
from sky_kueue.skypilot.launch import submit, summary
from sky_kueue.skypilot.runtime_estimate import source_description
from sky_kueue.skypilot.task_reader import TaskFileError, own_task
from sky_kueue.skypilot.task_yaml import (
    KUBERNETES_CLOUD,
    Infra,
    candidates,
    parse_infra,
    resource_group,
    with_candidates,
    with_infra,
)
from sky_kueue.skypilot.view import ClusterView, ContextHealth, ContextViews, SharedView

#: Exit code when the policy rejects the task (docs/exit-codes.md).
EXIT_REJECTED = 1


@click.command("launch")
@click.argument("task_path", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--team", default=None, help="Submit as this team (sets the sky-kueue.io/team label).")
@click.option("--priority", default=None, help="WorkloadPriorityClass to request (resources.priority_class).")
@click.option("--dry-run", is_flag=True, help="Only show what would happen; do not submit.")
@options.output_option()
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Plugin config (default: $SKY_KUEUE_CONFIG or ~/.sky/sky-kueue.yaml).",
)
@click.option(
    "--snapshot",
    multiple=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Kueue objects (kubectl get -o yaml, Workloads included) to predict against; repeatable.",
)
@click.option("--name", default=None, help="Managed-job name (default: the task's name).")
@options.kubeconfig_option(
    "Kubeconfig of the Kueue clusters; a list joined by ':' is merged as kubectl merges $KUBECONFIG "
    "(default: the plugin config's cluster.kubeconfig, else $KUBECONFIG, else ~/.kube/config)."
)
@click.option(
    "--context",
    "context",
    default=None,
    help="Run on this kubeconfig context only (pins the task's Kubernetes resources to it).",
)
def launch(
    task_path: Path,
    team: str | None,
    priority: str | None,
    dry_run: bool,
    output: str,
    config_path: Path | None,
    snapshot: tuple[Path, ...],
    name: str | None,
    kubeconfig: Path | None,
    context: str | None,
) -> None:
    """Apply the sky-kueue policy to TASK_PATH, predict its admission, and submit it."""
    try:
        config = load_config(resolve_config_path(config_path))
        if kubeconfig is not None:
            config = with_kubeconfig(config, kubeconfig)
        if context is not None:
            _check_context(config, context)
        view: ClusterView | ContextViews
        if snapshot:
            documents = load_manifests(str(p) for p in snapshot)
            view = view_from_documents(documents, "the snapshot " + ", ".join(p.name for p in snapshot))
        else:
            view = build_views(config)
    except (ConfigError, ManifestError, ModelUnavailable) as exc:
        errors.fail(str(exc))
    task = _read_task(task_path, own_reader=dry_run)
    if context is not None:
        task = pinned_to_context(task, context)
    identity = _identity()
    result = plan_as_client(
        identity, task, config, view, team=team, priority=priority, past_runs=HistorySource().runs()
    )
    described = {"identity": identity.to_dict(), **summary(result)}
    if output == "json":
        click.echo(json.dumps(described, indent=2, sort_keys=False))
    else:
        click.echo(identity.describe())
        click.echo(_text(described))
    if described["decision"] == "rejected":
        raise SystemExit(EXIT_REJECTED)
    unread = None if snapshot or described["decision"] != "placed" else unread_cluster(config, view, described)
    if unread is not None:
        if unread.message:
            click.echo(f"warning: {unread.message}", err=True)
        if dry_run:
            raise SystemExit(unread.exit_code)
    if dry_run:
        return
    console.restore_skypilot()
    try:
        outcome = submit(result, name=name)
    except Exception as exc:  # noqa: BLE001 - SkyPilot raises many types; report them in one line
        errors.fail(f"submission failed: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    click.echo(f"submitted: {outcome}")


@dataclass(frozen=True)
class UnreadCluster:
    """Why the prediction rests on no cluster.

    Attributes:
        message: the warning line ("" when the cluster view has already logged one).
        exit_code: what ``--dry-run`` exits with (docs/exit-codes.md): 2 when no kubeconfig
            was found (bad input, as for ``queue``), 1 when the clusters cannot be reached.
    """

    message: str
    exit_code: int


def unread_cluster(
    config: PluginConfig, view: ClusterView | ContextViews, described: dict[str, Any]
) -> UnreadCluster | None:
    """Whether the prediction is unknown because no cluster could be read, though the plugin
    config asks for live clusters (``cluster.discover`` or ``cluster.kubeconfig``, no
    ``cluster.manifests``). The launch itself still goes ahead: SkyPilot's API server applies
    the policy with its own kubeconfig; a dry run, whose question was the prediction, fails."""
    if config.cluster.manifests or not (config.cluster.discover or config.cluster.kubeconfig):
        return None
    if isinstance(view, SharedView):
        from sky_kueue.mirror.kubeconfig import why_none

        return UnreadCluster(
            f"no cluster was read ({why_none(os.environ, os.path.exists)}), so the prediction is unknown: pass "
            "--kubeconfig FILE or --snapshot FILE",
            errors.EXIT_BAD_INPUT,
        )
    if not isinstance(view, ContextViews):
        return None
    health = {row["context"]: view.lookup(row["context"]).health for row in described["placement"]}
    if health and all(h is ContextHealth.UNREACHABLE for h in health.values()):
        return UnreadCluster("", errors.EXIT_CLUSTER_ERROR)  # the live view has said which and why
    return None


def with_kubeconfig(config: PluginConfig, kubeconfig: Path) -> PluginConfig:
    """``config`` reading the clusters through ``kubeconfig`` (``--kubeconfig``); a named file
    that does not exist is bad input (one line, exit 2), as kubectl refuses it too."""
    parts = [p for p in str(kubeconfig).split(os.pathsep) if p]
    missing = [p for p in parts if not Path(p).expanduser().is_file()]
    if not parts or missing:
        errors.fail(f"--kubeconfig: no such file: {', '.join(missing) or kubeconfig}", errors.EXIT_BAD_INPUT)
    cluster = config.cluster.model_copy(update={"kubeconfig": str(kubeconfig)})
    return config.model_copy(update={"cluster": cluster})


def _check_context(config: PluginConfig, context: str) -> None:
    """Fail in one line when ``--context`` names no context of the kubeconfig in use."""
    contexts = kubeconfig_contexts(config.cluster.kubeconfig)
    if contexts and context not in contexts:
        errors.fail(
            f"--context: {context!r} is not a context of the kubeconfig (available: {', '.join(contexts)})",
            errors.EXIT_BAD_INPUT,
        )


def pinned_to_context(task: dict[str, Any], context: str) -> dict[str, Any]:
    """The task with every Kubernetes (or unpinned) candidate pinned to ``context``, as
    ``infra: k8s/<context>``; the policy then places it on that cluster only."""
    updated = []
    for candidate in candidates(task):
        infra = parse_infra(candidate)
        if infra.is_kubernetes or infra.cloud is None:
            candidate = with_infra(candidate, Infra(KUBERNETES_CLOUD, context))
        updated.append(candidate)
    return with_candidates(task, resource_group(task), updated)


def _identity() -> ClientIdentity:
    try:
        return current_identity()
    except IdentityError as exc:
        errors.fail(str(exc))


def _read_task(path: Path, *, own_reader: bool) -> dict[str, Any]:
    """The task as ``sky.Task.from_yaml(path).to_yaml_config()`` gives it: with sky-kueue's own
    reader first when ``own_reader`` (a dry run), else (or for what it leaves) SkyPilot's."""
    if own_reader:
        try:
            read = own_task(path)
        except TaskFileError as exc:
            errors.fail(f"{path}: not a valid SkyPilot task: {exc}")
        if read is not None:
            return read
    return skypilot_task(path)


def skypilot_task(path: Path) -> dict[str, Any]:
    """The task as SkyPilot's own parser reads it (imports SkyPilot)."""
    import sky

    console.quiet_skypilot()
    try:
        task = sky.Task.from_yaml(str(path))
    except (OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as exc:
        message = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        errors.fail(f"{path}: not a valid SkyPilot task: {message}")
    config: dict[str, Any] = task.to_yaml_config()
    return config


def _text(described: dict[str, Any]) -> str:
    if described["decision"] == "rejected":
        return f"rejected: {described['message']}"
    if described["decision"] == "unchanged":
        return f"unchanged: {described['reason']}\n" + yaml.safe_dump(described["task"], sort_keys=False)
    prediction = described["prediction"]
    outcome = prediction["outcome"]
    if prediction["preempts"]:
        outcome += f" (preempts {', '.join(prediction['preempts'])})"
    if prediction["expected_wait_seconds"] is not None:
        outcome += f" (ETA {_eta_text(prediction['expected_wait_seconds'], prediction['expected_wait_basis'])})"
    runtime = described["expected_runtime"]
    runtime_text = (
        f"{_duration(runtime['seconds'])} ({source_description(runtime['source'])})"
        if runtime["seconds"] is not None
        else f"unknown: declare it with the label {labels.RUNTIME_LABEL} (90m, 2h) or run the job once"
    )
    lines = [
        f"team:       {described['team']}",
        f"queue:      {described['namespace']}/{described['local_queue']}"
        + (f" on context {described['context']}" if described["context"] else ""),
        f"priority:   {described['priority_class']}",
        f"prediction: {outcome}" + (f": {prediction['reason']}" if prediction["reason"] else ""),
        f"burst:      {described['burst']['action']}"
        + (f": {described['burst']['message']}" if described["burst"]["message"] else ""),
        f"timeout:    {described['admission_timeout_seconds']}s waiting for Kueue admission",
        f"run time:   {runtime_text}",
        *_placement_lines(described["placement"]),
        "--- task ---",
        yaml.safe_dump(_without_internal(described["task"]), sort_keys=False).rstrip(),
    ]
    return "\n".join(lines)


def _placement_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One line per cluster when the team has several: rank, context, outcome, ETA, why."""
    if len(rows) < 2:
        return []
    lines = ["placement:"]
    rank = 0
    for row in rows:
        if row["ordered"]:
            rank += 1
            where = f"  {rank}."
        else:
            where = "  - "
        eta = (
            f" ETA {_eta_text(row['expected_wait_seconds'], row['expected_wait_basis'])}"
            if row["expected_wait_seconds"] is not None
            else ""
        )
        context = row["context"] or "(current context)"
        lines.append(
            f"{where} {context}: {row['outcome']}{eta} ({row['namespace']}/{row['local_queue']}): {row['reason']}"
        )
    return lines


def _duration(seconds: int) -> str:
    """``45s``, ``12m``, ``2h05m``: a wait or run time as people say it."""
    if seconds < 60:
        return f"{seconds}s"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{minutes}m"
    return f"{minutes // 60}h{minutes % 60:02d}m" if minutes % 60 else f"{minutes // 60}h"


def _eta_text(seconds: int, basis: str) -> str:
    """``12m (history of 7 runs)``: the wait and where the run times behind it came from."""
    return _duration(seconds) + (f" ({basis})" if basis else "")


def _without_internal(task: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in task.items() if k != "_user_specified_yaml"}

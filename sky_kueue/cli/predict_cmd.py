"""``sky-kueue predict``: what Kueue will do with the pending workloads of a cluster.

Reads a snapshot (Kueue objects as ``kubectl get -o yaml`` prints them) or, with
``--kubeconfig``/``--context``, the live cluster (one consistent list of every Kueue kind
through the queue mirror); optionally adds hypothetical workloads (``--add`` Workload YAML,
``--task`` SkyPilot task YAML turned into the pod-group Workload it would create), runs the
scheduling model until the cluster settles and prints either the oracle's JSON format
(``--output json``) or a verdict per workload.

A ``--task`` is predicted where and at the priority class the admin policy would submit it
(the plugin config's team: :mod:`sky_kueue.skypilot.task_team`), so ``predict --task`` and
``launch --dry-run`` agree; a note on stderr names the team applied, or says why none was.

The live branch imports the ``kubernetes`` client (about half a second); the snapshot
branch does not, so ``predict --snapshot`` stays fast.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sky_kueue.cli import errors, options
from sky_kueue.cli.errors import EXIT_BAD_INPUT
from sky_kueue.kueue.errors import ModelError
from sky_kueue.kueue.objects import ClusterState, KueueConfig

if TYPE_CHECKING:
    from sky_kueue.skypilot.config import PluginConfig

#: Header line of a snapshot written by ``sky-kueue snapshot`` (see ``sky_kueue.mirror.export``).
TAKEN_AT_HEADER = "taken at:"
#: Resource ``--task`` accelerators become when neither ``--gpu-resource`` nor a plugin config says.
DEFAULT_GPU_RESOURCE = "nvidia.com/gpu"


@click.command("predict")
@options.file_option(
    "--snapshot", "snapshot", "Multi-document YAML of Kueue objects (as `kubectl get -o yaml` prints them)."
)
@options.kubeconfig_option("Predict on the live cluster of this kubeconfig (instead of --snapshot).")
@options.context_option()
@options.file_option("--add", "add", "A hypothetical pending Workload to add (what-if); repeatable.", multiple=True)
@options.file_option(
    "--task",
    "tasks",
    "A SkyPilot task YAML to add as the pod-group Workload it would create; repeatable.",
    multiple=True,
)
@click.option(
    "--task-queue",
    "task_queue",
    default=None,
    metavar="NAMESPACE/LOCALQUEUE",
    help="LocalQueue for --task files whose config names none (config.kubernetes.kueue.local_queue_name).",
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Plugin config whose teams place --task files as the admin policy would "
    "(default: $SKY_KUEUE_CONFIG or ~/.sky/sky-kueue.yaml, when it exists).",
)
@click.option(
    "--gpu-resource",
    default=None,
    help="Resource name that --task accelerators become on the cluster "
    "(default: the plugin config's kubernetes.gpu_resource, else nvidia.com/gpu).",
)
@options.output_option()
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
    kubeconfig: Path | None,
    context: str | None,
    add: tuple[Path, ...],
    tasks: tuple[Path, ...],
    task_queue: str | None,
    config_path: Path | None,
    gpu_resource: str | None,
    output: str,
    cycle_cap: int | None,
    kueue_config: str | None,
) -> None:
    """Predict Kueue's admissions, preemptions and pending reasons."""
    from sky_kueue.kueue import loader, predictor

    live = kubeconfig is not None or context is not None or (snapshot is None and _kubeconfig_found())
    try:
        if live and snapshot is not None:
            raise ModelError("give either --snapshot FILE or --kubeconfig FILE, not both")
        if not live and snapshot is None:
            from sky_kueue.mirror.kubeconfig import why_none

            raise ModelError(
                "give --snapshot FILE (a multi-document YAML of Kueue objects) or --kubeconfig FILE (a live cluster), "
                f"or set $KUBECONFIG as for kubectl ({why_none(os.environ, os.path.exists)})"
            )
        additions = [loader.read_additions(path) for path in add]
        if live:
            state, scenario, default_namespace = _live_state(kubeconfig, context)
        else:
            assert snapshot is not None
            state = _load_snapshot(snapshot)
            state.now = state.now or _snapshot_time(snapshot)
            scenario, default_namespace = snapshot.stem, "default"
        for note in loader.add_documents(state, additions, state.now or predictor.DEFAULT_NOW):
            click.echo(f"note: {note}", err=True)
        if kueue_config is not None:
            state.config = _override_config(state.config, kueue_config)
        plugin_config, config_source = _plugin_config(config_path) if tasks else (None, "")
        for task in tasks:
            note = _add_task(
                state,
                task,
                task_queue=task_queue,
                gpu_resource=gpu_resource
                or (plugin_config.kubernetes.gpu_resource if plugin_config else DEFAULT_GPU_RESOURCE),
                created_at=loader.submitted_now(state, state.now or predictor.DEFAULT_NOW),
                namespace=default_namespace,
                plugin_config=plugin_config,
                config_source=config_source,
            )
            click.echo(f"note: {task}: {note}", err=True)
        result = predictor.predict(state, cycle_cap=cycle_cap)
    except ModelError as exc:
        errors.fail(str(exc), EXIT_BAD_INPUT)
        return
    finally:
        gc.unfreeze()
    if output == "json":
        json.dump(result.to_json(scenario), sys.stdout, indent=2, sort_keys=False)
        sys.stdout.write("\n")
        return
    from sky_kueue.cli import verdict_view

    verdict_view.print_verdicts(result, only_pending_at_start=True)


def _plugin_config(explicit: Path | None) -> tuple[PluginConfig | None, str]:
    """The plugin config that places ``--task`` files, and where it is (or was looked for);
    None when no ``--config`` is given and the default file does not exist.

    Raises:
        ModelError: the config cannot be read or is invalid (exit 2).
    """
    from sky_kueue.skypilot.config import ConfigError, load_config, resolve_config_path

    path = resolve_config_path(explicit)
    if explicit is None and not path.exists():
        return None, f"{path} does not exist; pass --config FILE"
    try:
        return load_config(path), str(path)
    except ConfigError as exc:
        raise ModelError(str(exc)) from None


def _kubeconfig_found() -> bool:
    """Whether kubectl would find a cluster (``$KUBECONFIG``, ``~/.kube/config``, in a pod):
    then ``predict`` without ``--snapshot`` reads that live cluster, as ``kubectl get`` would."""
    from sky_kueue.mirror.kubeconfig import find_kubeconfig

    return find_kubeconfig(None, os.environ, os.path.exists) is not None


def _live_state(kubeconfig: Path | None, context: str | None) -> tuple[ClusterState, str, str]:
    """The live cluster's state, its name, and the context's namespace.

    Exits with a one-line error when the cluster cannot be read.
    """
    from sky_kueue.cli import cluster_fetch
    from sky_kueue.mirror import export

    conn, fetched = cluster_fetch.fetch_or_fail(kubeconfig, context)
    warnings: list[str] = []
    docs = export.documents(fetched.store, warnings=warnings)
    for warning in [*fetched.warnings, *warnings]:
        click.echo(f"warning: {warning}", err=True)
    state = export.cluster_state(docs, now=datetime.now(timezone.utc))
    return state, conn.context or conn.host, conn.namespace or "default"


def _load_snapshot(snapshot: Path) -> ClusterState:
    """The snapshot's state, built with Python's cyclic garbage collector held off.

    Why: a large snapshot is hundreds of thousands of small containers and objects (plain
    trees, no cycles), and every few hundred allocations the collector would walk all of
    them again; after loading they stay alive for the whole prediction, so they are frozen
    (``gc.freeze``: left out of later collections, until the command's ``gc.unfreeze``).
    On a 3.3 MB snapshot this is about 0.15 s of collector work less.
    """
    from sky_kueue.kueue import loader

    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return loader.load_state_file(snapshot)
    finally:
        gc.freeze()
        if was_enabled:
            gc.enable()


def _snapshot_time(path: Path) -> datetime | None:
    """The ``# taken at: <ISO time>`` header ``sky-kueue snapshot`` writes: the prediction's "now"."""
    from sky_kueue.mirror.clock import parse_timestamp

    try:
        with path.open(encoding="utf-8") as handle:
            for line in handle:
                if not line.startswith("#"):
                    break
                body = line[1:].strip()
                if body.startswith(TAKEN_AT_HEADER):
                    return parse_timestamp(body[len(TAKEN_AT_HEADER) :].strip())
    except (OSError, UnicodeDecodeError):
        return None
    return None


def _add_task(
    state: ClusterState,
    path: Path,
    *,
    task_queue: str | None,
    gpu_resource: str,
    created_at: datetime,
    namespace: str,
    plugin_config: PluginConfig | None,
    config_source: str,
) -> str:
    """Add the Workload a SkyPilot task would create, queued as the admin policy would queue
    it; returns the note saying how (:func:`sky_kueue.skypilot.task_team.task_queueing`).

    Raises:
        ModelError: unreadable task, no LocalQueue, unknown priority class, name clash, or
            what the admin policy would reject.
    """
    from sky_kueue.kueue import parse
    from sky_kueue.skypilot import task_team, task_workload

    queue_ns, queue_name = None, None
    if task_queue:
        queue_ns, sep, queue_name = task_queue.partition("/")
        if not sep or not queue_ns or not queue_name:
            raise ModelError(f"--task-queue {task_queue!r}: expected NAMESPACE/LOCALQUEUE")
    task = task_workload.load_task(path)
    queueing = task_team.task_queueing(
        task, plugin_config, config_source, source=str(path), namespace=queue_ns, local_queue=queue_name
    )
    doc = task_workload.workload_from_task(
        task,
        source=str(path),
        namespace=queueing.namespace,
        local_queue=queueing.local_queue,
        priority_class=queueing.priority_class,
        gpu_resource=gpu_resource,
        created_at=created_at,
        default_namespace=namespace,
    )
    ref = doc["spec"].get("priorityClassRef")
    if ref is not None and ref["name"] not in state.priority_classes:
        raise ModelError(
            f"{path}: WorkloadPriorityClass {ref['name']!r} does not exist on the cluster; Kueue would not create "
            "the Workload"
        )
    workload = parse.parse_workload(doc, state.priority_classes)
    if workload.key in state.workloads:
        raise ModelError(f"{path}: a Workload {workload.key} already exists")
    state.workloads[workload.key] = workload
    return queueing.note


def _override_config(current: KueueConfig, mode: str) -> KueueConfig:
    """Replace the scheduling mode of ``current`` by the one named on the command line."""
    from sky_kueue.kueue import parse

    if mode.strip() == "classical":
        return dataclasses.replace(current, fair_sharing=None, admission_fair_sharing=None)
    parsed = parse.parse_header(f"# kueue-config: {mode}")
    return dataclasses.replace(
        current, fair_sharing=parsed.fair_sharing, admission_fair_sharing=parsed.admission_fair_sharing
    )

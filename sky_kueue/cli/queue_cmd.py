"""``sky-kueue queue``: the live picture of a cluster's Kueue queues, and what happens next.

With several ``--context`` (or ``--all-contexts``) each cluster is listed once and shown side
by side, one column per cluster: a team on several clusters sees where its work waits.

Per ClusterQueue: quota (nominal, usage, borrowed, lent per flavor and resource), admitted
and pending workloads with priority, age, position, predicted outcome, Kueue's reason, the
SkyPilot job behind each pod group, and preemption counts (:mod:`sky_kueue.mirror.view`);
for each pending Workload, its ETA and where the run times behind it came from
(:mod:`sky_kueue.cli.queue_eta`: ``ETA 12m (declared)``, ``ETA unknown: no run times``).

Without ``--watch`` the cluster is listed once. With ``--watch`` the queue mirror keeps a
copy through watch streams and the view is redrawn when that copy changes (coalescing bursts
of changes; when standard output is not a terminal, each redraw is printed whole after a
``---`` line): no request is made while nothing happens, except a visibility-API query per
redraw when that API is served (rate-limited). ``--output json`` prints the view as one JSON
document (with ``--watch``, one per line per redraw).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sky_kueue.cli import errors, options
from sky_kueue.cli.errors import EXIT_BAD_INPUT, EXIT_CLUSTER_ERROR

if TYPE_CHECKING:
    from rich.console import Console

    from sky_kueue.cli.queue_eta import QueuePicture
    from sky_kueue.kueue.objects import KueueConfig
    from sky_kueue.mirror.connection import Connection
    from sky_kueue.mirror.discovery import KueueApi
    from sky_kueue.mirror.store import MirrorStore

#: What a watch loop builds and shows (the command's :class:`QueuePicture`; tests' own).
_Shown = TypeVar("_Shown")
#: How long ``--watch`` waits for the initial list of every kind (seconds).
SYNC_TIMEOUT_SECONDS = 60.0
#: After a change, wait this long for more before redrawing (seconds): bursts redraw once.
REDRAW_QUIET_SECONDS = 0.2
#: Never redraw more often than this (seconds); a redraw runs the predictor.
REDRAW_MIN_INTERVAL_SECONDS = 1.0
#: Local wake-up while waiting for changes, so Ctrl-C is handled promptly (no request is made).
WAIT_SLICE_SECONDS = 1.0


@click.command("queue")
@options.kubeconfig_option()
@click.option(
    "--context",
    "contexts",
    multiple=True,
    help="Kubeconfig context (default: the current one); repeat to show several clusters side by side.",
)
@click.option("--all-contexts", is_flag=True, help="Show every context of the kubeconfig side by side.")
@click.option(
    "--cluster-queue", "cluster_queues", multiple=True, metavar="NAME", help="Show only this ClusterQueue; repeatable."
)
@click.option("--namespace", "-n", default=None, help="Show only workloads of this namespace.")
@click.option("--watch", "-w", is_flag=True, help="Keep redrawing as the cluster changes (from watch streams).")
@options.output_option()
@click.option("--no-predict", is_flag=True, help="Skip the predicted outcomes (faster on large clusters).")
@click.option(
    "--kueue-config",
    "kueue_config",
    default=None,
    metavar="MODE",
    help="Kueue's scheduling mode for predictions: 'classical', 'fairSharing' or 'admissionFairSharing ...'.",
)
@click.option("--max-redraws", type=click.IntRange(min=1), default=None, hidden=True)
def queue(
    kubeconfig: Path | None,
    contexts: tuple[str, ...],
    all_contexts: bool,
    cluster_queues: tuple[str, ...],
    namespace: str | None,
    watch: bool,
    output: str,
    no_predict: bool,
    kueue_config: str | None,
    max_redraws: int | None,
) -> None:
    """Show ClusterQueues, their quota, and admitted and pending workloads."""
    from sky_kueue.cli.cluster_fetch import connect_or_fail
    from sky_kueue.kueue.errors import ModelError
    from sky_kueue.mirror import discovery
    from sky_kueue.mirror.errors import MirrorError

    try:
        config = _config(kueue_config)
    except ModelError as exc:
        errors.fail(f"--kueue-config: {exc}", EXIT_BAD_INPUT)
    options = _ViewOptions(
        config=config, cluster_queues=cluster_queues or None, namespace=namespace, predict=not no_predict
    )
    if all_contexts and contexts:
        errors.fail("give --context or --all-contexts, not both", EXIT_BAD_INPUT)
    if all_contexts or len(contexts) > 1:
        if watch:
            errors.fail("--watch follows one cluster; give a single --context", EXIT_BAD_INPUT)
        chosen = list(contexts) if contexts else _kubeconfig_contexts(kubeconfig)
        _show_several(kubeconfig, chosen, options, output)
        return
    context = contexts[0] if contexts else None
    conn = connect_or_fail(kubeconfig, context)
    try:
        api = discovery.discover(conn.api_client, conn.host)
        if watch:
            _watch(conn, api, options, output, max_redraws)
        else:
            from sky_kueue.mirror import export

            fetched = export.fetch(conn, api)
            for warning in fetched.warnings:
                click.echo(f"warning: {warning}", err=True)
            _emit(_build(conn, api, fetched.store, options), output)
    except MirrorError as exc:
        errors.fail(str(exc), EXIT_CLUSTER_ERROR)
    except ModelError as exc:
        errors.fail(f"cannot model the cluster: {exc}", EXIT_CLUSTER_ERROR)
    finally:
        conn.close()


def _kubeconfig_contexts(kubeconfig: Path | None) -> list[str]:
    """Every context of the kubeconfig, found and merged as kubectl does (``$KUBECONFIG``)."""
    import os

    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    from sky_kueue.skypilot.cluster_discovery import find_kubeconfig

    found = find_kubeconfig(str(kubeconfig) if kubeconfig is not None else None, os.environ, os.path.exists)
    if found is None or found.path is None:
        errors.fail("--all-contexts needs a kubeconfig: pass --kubeconfig FILE or set $KUBECONFIG", EXIT_BAD_INPUT)
    try:
        contexts, _current = kube_config.list_kube_config_contexts(config_file=found.path)
    except (ConfigException, OSError) as exc:
        errors.fail(
            f"kubeconfig {found.path}: {str(exc).splitlines()[0] if str(exc) else 'unreadable'}", EXIT_BAD_INPUT
        )
    names = [str(c.get("name")) for c in contexts or []]
    if not names:
        errors.fail(f"kubeconfig {found.path} has no contexts", EXIT_BAD_INPUT)
    return names


@dataclass(frozen=True)
class _ClusterPicture:
    """One context's view, or why there is none."""

    context: str
    view: QueuePicture | None
    problem: str | None = None


def _show_several(kubeconfig: Path | None, contexts: list[str], options: _ViewOptions, output: str) -> None:
    """List each cluster once and show them side by side (JSON: one document with a list).

    A cluster that cannot be read is shown with its one-line problem; the exit code is 1 only
    when none can be read.
    """
    from sky_kueue.kueue.errors import ModelError
    from sky_kueue.mirror import connection, discovery, export
    from sky_kueue.mirror.errors import MirrorError

    pictures: list[_ClusterPicture] = []
    for context in contexts:
        try:
            conn = connection.connect(kubeconfig, context)
        except MirrorError as exc:
            pictures.append(_ClusterPicture(context, None, str(exc)))
            continue
        try:
            api = discovery.discover(conn.api_client, conn.host)
            fetched = export.fetch(conn, api)
            for warning in fetched.warnings:
                click.echo(f"warning: {context}: {warning}", err=True)
            pictures.append(_ClusterPicture(context, _build(conn, api, fetched.store, options)))
        except MirrorError as exc:
            pictures.append(_ClusterPicture(context, None, str(exc)))
        except ModelError as exc:
            pictures.append(_ClusterPicture(context, None, f"cannot model the cluster: {exc}"))
        finally:
            conn.close()
    if output == "json":
        rows = [
            {"context": p.context, "view": p.view.to_json() if p.view else None, "error": p.problem} for p in pictures
        ]
        click.echo(json.dumps({"clusters": rows}, separators=(",", ":")))
    else:
        from sky_kueue.cli import queue_view

        queue_view.console().print(
            queue_view.render_side_by_side(
                [(p.context, p.view.view if p.view else None, p.problem) for p in pictures],
                {p.context: p.view.etas for p in pictures if p.view is not None},
            )
        )
    if all(p.view is None for p in pictures):
        raise SystemExit(EXIT_CLUSTER_ERROR)


@dataclass(frozen=True)
class _ViewOptions:
    """What the user asked to see."""

    config: KueueConfig | None
    cluster_queues: tuple[str, ...] | None
    namespace: str | None
    predict: bool


def _config(mode: str | None) -> KueueConfig | None:
    """The KueueConfig named by ``--kueue-config`` (None: classical).

    Raises:
        ModelError: an unknown mode.
    """
    if mode is None or mode.strip() == "classical":
        return None
    from sky_kueue.kueue import parse

    return parse.parse_header(f"# kueue-config: {mode}")


def _build(conn: Connection, api: KueueApi, store: MirrorStore, options: _ViewOptions) -> QueuePicture:
    """The view of the store's current state (visibility positions when served), with the
    pending Workloads' ETAs unless ``--no-predict``.

    Raises:
        ModelError: a queue-level object the model cannot read.
    """
    from sky_kueue.cli.queue_eta import PendingEta, QueuePicture, pending_etas, pending_keys
    from sky_kueue.mirror import export, view, visibility
    from sky_kueue.mirror.kinds import KindName
    from sky_kueue.skypilot.runtime_annotations import with_pod_runtimes

    notes: list[str] = []
    # The run times the policy wrote on the pods, onto their pod groups' Workloads (for the ETA).
    docs = with_pod_runtimes(export.documents(store, warnings=notes), store.items(KindName.POD))
    shown = options.cluster_queues or [
        str((cq.get("metadata") or {}).get("name")) for cq in store.items(KindName.CLUSTER_QUEUE)
    ]
    positions = visibility.positions(conn.api_client, api.visibility_version, shown)
    result = view.build_view(
        docs,
        now=datetime.now(timezone.utc),
        identities=store.identities(),
        positions=positions,
        predict=options.predict,
        config=options.config,
        cluster_queues=options.cluster_queues,
        namespace=options.namespace,
    )
    etas: dict[str, PendingEta] = {}
    if result.predicted:
        etas, eta_notes = pending_etas(docs, pending_keys(result), now=result.taken_at, config=options.config)
        notes += eta_notes
    if notes:
        result = replace(result, notes=(*result.notes, *notes))
    return QueuePicture(result, etas)


def _emit(result: QueuePicture, output: str) -> None:
    if output == "json":
        click.echo(json.dumps(result.to_json(), separators=(",", ":")))
        return
    from sky_kueue.cli import queue_view

    queue_view.console().print(queue_view.render(result.view, result.etas))


def _watch(conn: Connection, api: KueueApi, options: _ViewOptions, output: str, max_redraws: int | None) -> None:
    """Redraw on every (coalesced) change of the mirror until Ctrl-C.

    Raises:
        MirrorError: the mirror cannot sync.
    """
    from sky_kueue.mirror.mirror import Mirror

    mirror = Mirror(conn, api)
    with mirror:
        mirror.wait_synced(SYNC_TIMEOUT_SECONDS)
        for warning in mirror.warnings:
            click.echo(f"warning: {warning}", err=True)

        def build() -> QueuePicture:
            return _build(conn, api, mirror.store, options)

        health = _Health(mirror)

        try:
            if output == "json":
                watch_loop(
                    mirror.store, build, lambda v: _emit(v, "json"), max_redraws=max_redraws, on_idle=health.check
                )
            else:
                from rich.live import Live

                from sky_kueue.cli import queue_view

                console = queue_view.console()
                if not console.is_terminal:
                    watch_loop(
                        mirror.store, build, _snapshot_printer(console), max_redraws=max_redraws, on_idle=health.check
                    )
                    return
                with Live(console=console, auto_refresh=False, screen=False) as live:

                    def show(result: QueuePicture) -> None:
                        live.update(queue_view.render(result.view, result.etas), refresh=True)

                    watch_loop(mirror.store, build, show, max_redraws=max_redraws, on_idle=health.check)
        except KeyboardInterrupt:
            return


#: Line between two snapshots when ``--watch`` writes to a pipe or a file.
SNAPSHOT_SEPARATOR = "---"


def _snapshot_printer(console: Console) -> Callable[[QueuePicture], None]:
    """``--watch`` output for a pipe or a file: the whole view again at every redraw, after a
    :data:`SNAPSHOT_SEPARATOR` line, flushed at once.

    Why not rich's ``Live``: off a terminal it draws only when it stops, so ``queue --watch |
    tee log`` wrote nothing until Ctrl-C.
    """
    from sky_kueue.cli import queue_view

    shown = 0

    def show(result: QueuePicture) -> None:
        nonlocal shown
        if shown:
            console.print(SNAPSHOT_SEPARATOR)
        console.print(queue_view.render(result.view, result.etas))
        console.file.flush()
        shown += 1

    return show


class _Health:
    """Tells the user, on stderr, when the view stops following the cluster and when it
    follows it again: a view that silently kept showing a dead server's state would be
    worse than none (the mirror's reflectors reconnect and relist on their own)."""

    def __init__(self, mirror: Any) -> None:
        self._mirror = mirror
        self._errors = mirror.error_count
        self._lists = mirror.request_counts["lists"]
        self._failing = False

    def check(self) -> None:
        errors, lists = self._mirror.error_count, self._mirror.request_counts["lists"]
        if errors > self._errors and not self._failing:
            self._failing = True
            click.echo(
                f"warning: {self._mirror.last_error_message()}; showing the last known state while reconnecting",
                err=True,
            )
        if lists > self._lists:
            self._failing = False
            click.echo(f"note: resynced with {self._mirror.connection.host} (listed again)", err=True)
        self._errors, self._lists = errors, lists


def watch_loop(
    store: MirrorStore,
    build: Callable[[], _Shown],
    show: Callable[[_Shown], None],
    *,
    max_redraws: int | None = None,
    quiet_seconds: float = REDRAW_QUIET_SECONDS,
    min_interval_seconds: float = REDRAW_MIN_INTERVAL_SECONDS,
    on_idle: Callable[[], None] | None = None,
) -> int:
    """Show the view now and after every change of ``store``; returns the number of redraws.

    Waiting is on the store's change notification (fed by the watch streams), never on a
    timer that would query the server.
    """
    redraws = 0
    last_draw = float("-inf")
    generation = store.generation
    show(build())
    redraws += 1
    while max_redraws is None or redraws < max_redraws:
        current = store.wait_changed(generation, WAIT_SLICE_SECONDS)
        if on_idle is not None:
            on_idle()
        if current == generation:
            continue
        # Coalesce a burst: wait until the store has been quiet, and not too soon after the last draw.
        while True:
            settled = store.wait_changed(current, quiet_seconds)
            if settled == current:
                break
            current = settled
        pause = last_draw + min_interval_seconds - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        generation = store.generation
        show(build())
        last_draw = time.monotonic()
        redraws += 1
    return redraws

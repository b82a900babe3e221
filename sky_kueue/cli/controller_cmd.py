"""``sky-kueue controller``: run the resubmission controller, or show what it recorded.

``controller run`` connects with a kubeconfig (or the pod's service account), takes part in
leader election, and while leading watches Workloads and pod-group pods, records each
SkyPilot job's preemptions and ages its relaunches (see :mod:`sky_kueue.controller.manager`).
Pods are watched in the team namespaces of ``--config`` only, one watch each (its RBAC grants
nothing more, docs/operations.md "RBAC"); the list is read at start, so a team added to the
config is watched after a restart.
Logs are JSON lines on stderr. SIGTERM or SIGINT stops it gracefully: the watches close, the
watch cursor is saved, the Lease is released so a follower takes over at once, and the
process exits 0.

``controller status`` reads the store only (a SQLite file is safe to read while the
controller runs: WAL mode; ``--state kubernetes`` reads the JobHistory objects) and lists the
jobs with their preemptions, current boost and burst decisions, plus the last heartbeat.
``controller migrate`` moves a SQLite history into the in-cluster store.

Bad input (missing file, invalid config, unreachable cluster at startup) prints one line and
exits with code 2; never a traceback.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import click

from sky_kueue.cli import options
from sky_kueue.cli import state_option as state_option_module
from sky_kueue.cli.errors import UserError
from sky_kueue.cli.state_option import cluster_options, history_cluster_options, state_option
from sky_kueue.controller import liveness
from sky_kueue.controller.config_watch import CONFIG_POLL_SECONDS
from sky_kueue.controller.history import HoldRecord, StoreError
from sky_kueue.controller.leader import DEFAULT_RETRY_PERIOD_SECONDS
from sky_kueue.controller.state_spec import OpenedState, StateKind, pod_namespace

#: Console width when the output is not a terminal (rich would assume 80 columns).
WIDE_OUTPUT_COLUMNS = 120
#: Exit code of ``controller status --max-heartbeat-age`` when the heartbeat is missing or stale.
EXIT_STALE_HEARTBEAT = 1
#: Lease namespace when neither ``--lease-namespace`` nor the pod's namespace is known.
FALLBACK_LEASE_NAMESPACE = "default"


def _lease_namespace(explicit: str | None) -> str:
    """``--lease-namespace``, else the pod's own namespace, else :data:`FALLBACK_LEASE_NAMESPACE`."""
    return explicit or pod_namespace(FALLBACK_LEASE_NAMESPACE)


@click.group(name="controller")
def controller() -> None:
    """Run the resubmission controller (priority aging of preempted SkyPilot jobs)."""


@controller.command("run")
@cluster_options
@state_option
@history_cluster_options
@click.option("--config", "config_path", type=click.Path(path_type=Path, dir_okay=False), help="sky-kueue.yaml.")
@click.option(
    "--namespace",
    help="Watch one namespace only (default: Workloads in all, SkyPilot's pods in the config's team namespaces).",
)
@click.option("--lease-namespace", help="Namespace of the leader-election Lease (default: the pod's).")
@click.option("--lease-name", default=None, help="Name of the Lease (default: sky-kueue-controller).")
@click.option("--identity", help="This replica's name in the Lease (default: host_pid_random).")
@click.option("--lease-duration", type=float, default=None, help="Lease duration, seconds.")
@click.option("--renew-deadline", type=float, default=None, help="Stop acting if not renewed for this long, s.")
@click.option("--retry-period", type=float, default=None, help="Acquire/renew period, seconds.")
@click.option(
    "--priority-boost-gate",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Kueue's PriorityBoost gate: detect it, or say whether it is on.",
)
@click.option(
    "--reage-interval",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Re-age waiting Workloads every this many seconds (default 300).",
)
@click.option("--no-reage", is_flag=True, help="Age Workloads only when they change, never periodically.")
@click.option(
    "--config-poll-interval",
    type=click.FloatRange(min=0),
    default=CONFIG_POLL_SECONDS,
    show_default=True,
    help="Read the config file every this many seconds; when it changed to a valid config, start "
    "again from it (a team added, a ConfigMap updated). 0: never.",
)
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
@options.metrics_options()
def run(
    kubeconfig: Path | None,
    context: str | None,
    in_cluster: bool,
    state_text: str | None,
    state_kubeconfig: Path | None,
    state_context: str | None,
    config_path: Path | None,
    namespace: str | None,
    lease_namespace: str | None,
    lease_name: str | None,
    identity: str | None,
    lease_duration: float | None,
    renew_deadline: float | None,
    retry_period: float | None,
    priority_boost_gate: str,
    reage_interval: float | None,
    no_reage: bool,
    config_poll_interval: float,
    log_format: str,
    log_level: str,
    metrics_port: int | None,
    metrics_host: str,
) -> None:
    """Run the controller until SIGTERM/SIGINT."""
    if no_reage and reage_interval is not None:
        raise UserError("--no-reage and --reage-interval contradict each other; give one")
    from sky_kueue.controller import leader, logs
    from sky_kueue.controller.aging import SettingsError
    from sky_kueue.controller.config_file import ConfigFileError, ControllerConfig, load_controller_config
    from sky_kueue.controller.config_watch import ConfigWatch
    from sky_kueue.controller.events import Observer
    from sky_kueue.controller.hold_config import HoldTeams, load_hold_teams
    from sky_kueue.controller.kube_events import WorkloadEventRecorder
    from sky_kueue.controller.lane_moves import LaneEntryLog
    from sky_kueue.controller.manager import REAGE_INTERVAL_SECONDS, Controller, ControllerSettings
    from sky_kueue.controller.metric_teams import MetricTeams, load_metric_teams
    from sky_kueue.controller.metrics import ControllerMetrics
    from sky_kueue.skypilot.config import resolve_config_path

    spec = state_option_module.parse(state_text)

    def read_config(path: Path | None) -> tuple[ControllerConfig, HoldTeams, MetricTeams | None]:
        loaded = load_controller_config(resolve_config_path(path))
        holds = load_hold_teams(loaded.path)  # teams.<t>.safe_after_preemptions / safe_max_hold_seconds
        # The metrics' team labels and burst prices (teams.<t>.burst.price_per_gpu_hour_usd).
        metric_teams = load_metric_teams(loaded.path) if metrics_port is not None else None
        return loaded, holds, metric_teams

    try:
        loaded, holds, metric_teams = read_config(config_path)
    except ConfigFileError as err:
        raise UserError(str(err)) from None
    try:
        lease_settings = leader.LeaseSettings(
            namespace=_lease_namespace(lease_namespace),
            identity=identity or leader.default_identity(),
            name=lease_name or leader.DEFAULT_LEASE_NAME,
            lease_duration_seconds=lease_duration or leader.DEFAULT_LEASE_DURATION_SECONDS,
            renew_deadline_seconds=renew_deadline or leader.DEFAULT_RENEW_DEADLINE_SECONDS,
            retry_period_seconds=retry_period or leader.DEFAULT_RETRY_PERIOD_SECONDS,
        )
    except ValueError as err:
        raise UserError(str(err)) from None
    api_client = state_option_module.api_client_for(kubeconfig, context, in_cluster)
    try:
        opened = state_option_module.open_from_cli(
            spec,
            kubeconfig=kubeconfig,
            context=context,
            in_cluster=in_cluster,
            read_only=False,
            api_client=api_client,
            state_kubeconfig=state_kubeconfig,
            state_context=state_context,
        )
    except UserError as err:
        message = err.message if spec.kind is StateKind.KUBERNETES else f"--state: {err.message}"
        raise UserError(message) from None
    store, runtime = opened.store, opened.runtime
    click.get_current_context().call_on_close(logs.install(log_format, log_level))
    gate = {"auto": None, "on": True, "off": False}[priority_boost_gate]
    settings = ControllerSettings(
        lease=lease_settings,
        namespace=namespace,
        pod_namespaces=loaded.team_namespaces,  # read at start; a changed config starts it again
        priority_boost_gate=gate,
        reage_interval_seconds=None if no_reage else (reage_interval or REAGE_INTERVAL_SECONDS),
    )
    # Counted only when served: without --metrics-port the reconcile path pays nothing for them.
    metrics = ControllerMetrics(teams=metric_teams, lanes=loaded.lanes) if metric_teams is not None else None
    # Events on the Workloads acted on (MovedToLane on a relaunch entering its team's lane)
    recorder = WorkloadEventRecorder(api_client, lease_settings.identity, lanes=loaded.lanes)
    observers: list[Observer] = [recorder] if metrics is None else [metrics.observe, recorder]
    if loaded.lanes.enabled:
        observers.append(LaneEntryLog(loaded.lanes))

    def close_all() -> None:
        recorder.close()
        opened.close()

    try:
        ctl = Controller(
            api_client,
            store,
            loaded.aging,
            settings,
            runtime=runtime,
            observers=observers,
            holds=holds,
            burst_gates=loaded.burst_gates,  # teams.<t>.burst: cloud_startup_seconds + predicted_wait_margin_seconds
            lanes=loaded.lanes,  # teams.<t>.lane: reported in the heartbeat
        )
    except SettingsError as err:
        close_all()
        raise UserError(str(err)) from None
    metrics_server = None
    if metrics is not None:
        metrics.bind(ctl)
        metrics_server = options.serve_metrics_or_fail(metrics.registry, metrics_host, metrics_port, close_all)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    log = logging.getLogger("sky_kueue.controller")

    def config_problem(path: Path) -> str | None:
        try:
            read_config(path)
        except ConfigFileError as err:
            return str(err)
        return None

    watch = (
        ConfigWatch(loaded.path, config_problem, stop.set, poll_seconds=config_poll_interval)
        if config_poll_interval > 0
        else None
    )
    log.info(
        "controller starting",
        extra={
            "fields": {
                "identity": lease_settings.identity,
                "lease": f"{lease_settings.namespace}/{lease_settings.name}",
                "state": str(spec),
                "history": opened.location,
                "config": str(loaded.path),
                "aging_enabled": loaded.enabled,
                "policy": loaded.aging.policy,
                "actuator": loaded.aging.actuator.value,
                "pod_namespaces": [namespace] if namespace else list(loaded.team_namespaces),
                "safe_relaunch_namespaces": sorted(
                    ns for ns in holds.by_namespace if holds.for_namespace(ns) is not None
                ),
                "lane_teams": sorted(loaded.lanes.by_team),
                "pid": os.getpid(),
                "metrics": None if metrics_server is None else metrics_server.url,
            }
        },
    )
    if watch is not None:
        watch.start()
    try:
        ctl.run(stop)
    finally:
        if watch is not None:
            watch.stop()
        if metrics_server is not None:
            metrics_server.stop()
        recorder.close()
        opened.close()
    if watch is not None and watch.changed:
        _restart(log, lease_settings.identity)
    log.info("controller stopped", extra={"fields": {"identity": lease_settings.identity}})


def _restart(log: logging.Logger, identity: str) -> None:
    """Start this same command again in this process (same PID: the pod keeps running), so
    that everything the config says is read anew; the session has ended and released its
    Lease, and nothing is held in memory that the history store does not have."""
    log.info("controller restarting to read its config", extra={"fields": {"identity": identity}})
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError as exc:  # its supervisor (the pod's restartPolicy) starts it again
        message = f"the config changed and the controller could not restart itself ({exc}); start it again"
        raise UserError(message) from None


def _hold_document(hold: HoldRecord | None) -> dict[str, Any] | None:
    """A safe-relaunch hold as ``controller status -o json`` shows it."""
    if hold is None:
        return None
    return {
        "workload": f"{hold.workload_namespace}/{hold.workload_name}",
        "workload_uid": hold.workload_uid,
        "held_at": hold.held_at,
        "reason": hold.reason,
        "preemptions": hold.preemptions,
        "predicted_wait_seconds": hold.predicted_wait_seconds,
        "released_at": hold.released_at,
        "release_kind": hold.release_kind,
        "release_reason": hold.release_reason,
        "release_cluster": hold.release_cluster,
    }


def _status_document(opened: OpenedState) -> dict[str, Any]:
    store, runtime = opened.store, opened.runtime
    try:
        beat = runtime.heartbeat()
        cursors = runtime.cursors()
        jobs = []
        for summary in store.jobs():
            history = store.load(summary.key)
            if history is None:
                continue
            last = max(history.preemptions, key=lambda p: p.at, default=None)
            jobs.append(
                {
                    "job": summary.key,
                    "namespace": summary.namespace,
                    "pod_group": summary.pod_group,
                    "managed_job_id": summary.managed_job_id,
                    "phase": summary.phase.value if summary.phase else None,
                    "base_priority": history.base_priority,
                    "preemptions": summary.preemptions,
                    "other_evictions": summary.evictions,
                    "boost": summary.current_boost,
                    "last_preemption": None
                    if last is None
                    else {
                        "at": last.at,
                        "workload": last.workload_name,
                        "reason": last.reason,
                        "preemptor_uid": last.preemptor_uid,
                        "preemptor_priority": last.preemptor_priority,
                    },
                    "burst": None
                    if history.burst is None
                    else {
                        "reason": history.burst.reason,
                        "detail": history.burst.detail,
                        "decided_at": history.burst.decided_at,
                    },
                    "hold": _hold_document(history.current_hold),
                    "holds": [_hold_document(h) for h in history.holds],
                }
            )
    except StoreError as err:
        raise UserError(str(err), state_option_module.store_exit_code(err)) from None
    controller_info: dict[str, Any] | None = None
    lanes: list[dict[str, Any]] | None = None
    if beat is not None:
        now = time.time()
        state, period = liveness.liveness(beat.leader, beat.at, beat.details, now, DEFAULT_RETRY_PERIOD_SECONDS)
        details = dict(beat.details)
        lanes = details.pop(liveness.LANES_KEY, None)
        controller_info = {
            **details,
            "identity": beat.identity,
            "leader": beat.leader,
            "heartbeat_at": beat.at,
            "heartbeat_age_seconds": round(now - beat.at, 3),
            "liveness": state.value,
            liveness.PERIOD_KEY: period,
        }
    return {"state": opened.location, "controller": controller_info, "cursors": cursors, "jobs": jobs, "lanes": lanes}


def _hold_cell(holds: list[dict[str, Any]]) -> str:
    """The job's current hold ("held: waiting for nominal quota (predicted 4m)"), else its last release."""
    if not holds:
        return "-"
    last = holds[-1]
    if last["released_at"] is None:
        return str(last["reason"])
    return f"{last['release_reason']} ({last['release_kind']})"


def _liveness_text(info: dict[str, Any]) -> str:
    """``(leader), last heartbeat 3s ago``, or why the controller is not running."""
    age = info["heartbeat_age_seconds"]
    state = liveness.Liveness(info["liveness"])
    if state is liveness.Liveness.STOPPED:
        return f"stopped: shut down {age:.0f}s ago"
    if state is liveness.Liveness.SILENT:
        return (
            f"not running: its last heartbeat is {age:.0f}s old (it beats every {info[liveness.PERIOD_KEY]:g}s); "
            "it was stopped without shutting down, or cannot write to this store"
        )
    return f"({state.value}), last heartbeat {age:.0f}s ago"


def _print_status(document: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=WIDE_OUTPUT_COLUMNS)
    info = document["controller"]
    if info is None:
        console.print(f"{document['state']}: no controller heartbeat recorded yet")
    else:
        console.print(
            f"controller [bold]{info['identity']}[/bold] {_liveness_text(info)}; lease {info.get('lease', '?')}"
        )
    table = Table(title=f"Jobs in {document['state']}")
    for column in ("job", "workload group", "phase", "preemptions", "other evictions", "boost", "burst", "hold"):
        table.add_column(column, overflow="fold")
    for job in document["jobs"]:
        burst = "-" if job["burst"] is None else f"{job['burst']['reason']}: {job['burst']['detail']}"
        group = f"{job['namespace']}/{job['pod_group']}" if job["pod_group"] else job["namespace"]
        table.add_row(
            job["job"],
            group,
            job["phase"] or "-",
            str(job["preemptions"]),
            str(job["other_evictions"]),
            f"+{job['boost']}",
            burst,
            _hold_cell(job["holds"]),
        )
    console.print(table)
    if document.get("lanes"):
        _print_lanes(console, document["lanes"], info)


def _print_lanes(console: Any, lanes: list[dict[str, Any]], info: dict[str, Any] | None) -> None:
    """Each relaunch lane's occupancy and the relaunches waiting for it, as of the heartbeat."""
    from rich.table import Table

    from sky_kueue.cli.queue_eta import duration_text

    when = "" if info is None else f" (as of the heartbeat {info['heartbeat_age_seconds']:.0f}s ago)"
    table = Table(title=f"Relaunch lanes{when}")
    for column in ("lane", "scope", "admitted/nominal", "running", "waiting", "longest wait"):
        table.add_column(column, overflow="fold")
    waits = Table(title="Relaunches waiting in a lane")
    for column in ("workload", "lane", "job", "priority", "wait"):
        waits.add_column(column, overflow="fold")
    for lane in lanes:
        listed = lane["waiting"]
        table.add_row(
            lane["clusterQueue"],
            lane["scope"],
            lane["occupancy"],
            str(lane["admitted"]),
            str(lane["waitingCount"]),
            duration_text(listed[0]["waitSeconds"]) if listed else "-",
        )
        for waiting in listed:
            waits.add_row(
                waiting["workload"],
                lane["clusterQueue"],
                waiting["job"] or "-",
                str(waiting["priority"]),
                duration_text(waiting["waitSeconds"]),
            )
    console.print(table)
    if waits.row_count:
        console.print(waits)


@controller.command("status")
@state_option
@history_cluster_options
@cluster_options
@options.output_option()
@click.option(
    "--max-heartbeat-age",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Exit 1 if the last heartbeat is older than this (a liveness probe).",
)
def status(
    state_text: str | None,
    state_kubeconfig: Path | None,
    state_context: str | None,
    kubeconfig: Path | None,
    context: str | None,
    in_cluster: bool,
    output: str,
    max_heartbeat_age: float | None,
) -> None:
    """Jobs, preemptions, boosts, burst decisions and held relaunches recorded by the controller."""
    spec = state_option_module.parse(state_text)
    opened = state_option_module.open_from_cli(
        spec,
        kubeconfig=kubeconfig,
        context=context,
        in_cluster=in_cluster,
        read_only=True,
        state_kubeconfig=state_kubeconfig,
        state_context=state_context,
    )
    try:
        document = _status_document(opened)
    finally:
        opened.close()
    if output == "json":
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        _print_status(document)
    if max_heartbeat_age is not None:
        info = document["controller"]
        if info is None or info["heartbeat_age_seconds"] > max_heartbeat_age:
            click.echo(f"error: no controller heartbeat within {max_heartbeat_age:g} s", err=True)
            sys.exit(EXIT_STALE_HEARTBEAT)


@controller.command("migrate")
@click.option("--from", "source_text", required=True, metavar="sqlite:PATH", help="The SQLite history to move.")
@click.option(
    "--to", "target_text", required=True, metavar="kubernetes[:NS]", help="The in-cluster store to move it to."
)
@cluster_options
def migrate(source_text: str, target_text: str, kubeconfig: Path | None, context: str | None, in_cluster: bool) -> None:
    """Move a SQLite history (and its watch cursors) into the in-cluster store.

    Idempotent: facts are united by their idempotency keys, so running it twice, or after
    the in-cluster controller already recorded some facts, duplicates nothing. Stop the
    SQLite-backed controller first, or facts it records meanwhile stay behind.
    """
    from sky_kueue.controller.kube_store import KubernetesHistoryStore
    from sky_kueue.controller.state_spec import parse_kubernetes_spec

    source = state_option_module.parse(source_text, option="--from")
    if source.kind is not StateKind.SQLITE:
        raise UserError(f"--from {source_text!r}: expected a SQLite history (sqlite:PATH or PATH)")
    try:
        target = parse_kubernetes_spec(target_text, "--to")
    except ValueError as err:
        raise UserError(str(err)) from None
    reader = state_option_module.open_from_cli(source, kubeconfig=None, context=None, in_cluster=False, read_only=True)
    writer = state_option_module.open_from_cli(
        target, kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, read_only=False
    )
    assert isinstance(writer.store, KubernetesHistoryStore)
    jobs = preemptions = steps = written = 0
    try:
        for summary in reader.store.jobs():
            history = reader.store.load(summary.key)
            if history is None:
                continue
            written += writer.store.import_history(history, summary.namespace)
            moved = writer.store.load(history.key)
            if moved is None or moved.preemption_count < history.preemption_count:
                raise UserError(f"job {history.key}: the copy in {writer.location} is incomplete; run migrate again")
            jobs += 1
            preemptions += history.preemption_count
            steps += len(history.steps)
        for resource, version in reader.runtime.cursors().items():
            writer.runtime.save_cursor(resource, version, time.time())
    except StoreError as err:
        raise UserError(str(err)) from None
    finally:
        reader.close()
        writer.close()
    click.echo(
        f"migrated {jobs} jobs ({preemptions} preemptions, {steps} aging steps; {written} written, "
        f"{jobs - written} already there) from {reader.location} to {writer.location}"
    )

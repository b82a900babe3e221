"""``sky-kueue sandbox``: a local cluster to try sky-kueue without one.

Why a foreground process: the sandbox is for trying things out and for demos; running in the
foreground, printing its URL and stopping cleanly on Ctrl-C (or SIGTERM from a supervisor)
leaves nothing behind. ``serve`` runs the bare API server (no Kueue behaviour): useful to
point kubectl or the kubernetes client at an empty cluster that speaks Kueue's APIs.
"""

from __future__ import annotations

import contextlib
import datetime
import pathlib
import re
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import click

from sky_kueue.cli import errors
from sky_kueue.cli.options import F
from sky_kueue.sandbox.apiserver.kubeconfig import DEFAULT_CONTEXT

#: Where ``serve`` writes its kubeconfig unless told otherwise.
DEFAULT_KUBECONFIG_PATH = "~/.sky-kueue/sandbox/kubeconfig"


@contextlib.contextmanager
def _stop_on_signal() -> Iterator[threading.Event]:
    """An event set by Ctrl-C or SIGTERM for the duration of the block."""
    stop = threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_HOST_OPTION = click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
_PORT_OPTION = click.option(
    "--port", default=0, show_default=True, type=click.IntRange(0, 65535), help="0 picks a free port."
)


def _kubeconfig_out_option(default: str, help_text: str) -> Callable[[F], F]:
    """``--kubeconfig PATH``: where a command writes the kubeconfig of what it starts."""
    return click.option(
        "--kubeconfig",
        "kubeconfig_path",
        default=default,
        show_default=True,
        type=click.Path(dir_okay=False),
        help=help_text,
    )


@click.group()
def sandbox() -> None:
    """A local Kubernetes API server with Kueue's APIs, for tests and demos."""


@sandbox.command()
@_HOST_OPTION
@_PORT_OPTION
@_kubeconfig_out_option(DEFAULT_KUBECONFIG_PATH, "Where to write a kubeconfig for the server.")
def serve(host: str, port: int, kubeconfig_path: str) -> None:
    """Run the bare API server in the foreground until Ctrl-C or SIGTERM."""
    from sky_kueue.sandbox.apiserver import ApiServer

    with _stop_on_signal() as stop:
        try:
            server = ApiServer(host, port).start()
        except OSError as failure:
            raise errors.UserError(f"cannot listen on {host}:{port}: {failure.strerror}") from failure
        try:
            try:
                written = server.write_kubeconfig(kubeconfig_path)
            except OSError as failure:
                raise errors.UserError(
                    f"cannot write kubeconfig {kubeconfig_path}: {failure.strerror}; pass --kubeconfig PATH"
                ) from failure
            click.echo(f"API server listening on {server.url}")
            click.echo(f"kubeconfig: {written}")
            click.echo(f"try: kubectl --kubeconfig {written} get namespaces")
            stop.wait()
            click.echo("stopping")
        finally:
            server.stop()


#: Where ``up`` writes its kubeconfig unless told otherwise.
DEFAULT_UP_KUBECONFIG_PATH = "~/.sky-kueue/sandbox/kubeconfig"
#: Where ``up --name NAME`` writes its kubeconfig unless told otherwise (one file per sandbox).
NAMED_UP_KUBECONFIG_PATH = "~/.sky-kueue/sandbox/{name}/kubeconfig"
#: A sandbox name: also a kubeconfig context and SkyPilot's ``infra: k8s/<name>``, so no
#: ``/``, spaces or other characters that would need quoting.
_SANDBOX_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?")


def up_kubeconfig_path(name: str, given: str | None) -> str:
    """The kubeconfig path of ``up``: ``given``, else one per sandbox name."""
    if given is not None:
        return given
    return DEFAULT_UP_KUBECONFIG_PATH if name == DEFAULT_CONTEXT else NAMED_UP_KUBECONFIG_PATH.format(name=name)


def _check_name(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not _SANDBOX_NAME.fullmatch(value):
        raise click.BadParameter(
            f"{value!r} is not a usable name: 1-63 letters, digits, '.', '_' or '-', starting and ending with a "
            "letter or digit",
            param_hint="--name",
        )
    return value


@sandbox.command()
@_HOST_OPTION
@_PORT_OPTION
@click.option(
    "--kubeconfig",
    "kubeconfig_path",
    default=None,
    type=click.Path(dir_okay=False),
    help=f"Where to write a kubeconfig for the sandbox [default: {DEFAULT_UP_KUBECONFIG_PATH}, or "
    f"{NAMED_UP_KUBECONFIG_PATH} with --name].",
)
@click.option(
    "--name",
    default=DEFAULT_CONTEXT,
    show_default=True,
    callback=_check_name,
    help="Name of the kubeconfig's cluster, user and context; give each sandbox its own to merge several in one "
    "KUBECONFIG (KUBECONFIG=kc1:kc2:kc3).",
)
@click.option(
    "--apply",
    "apply_paths",
    multiple=True,
    type=click.Path(exists=True),
    help="Manifests (file or directory) to load at start; default: the seed setup (team-a/team-b).",
)
@click.option(
    "--time-scale",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=0.001),
    help="Simulated seconds per real second (pods' run-seconds play this much faster).",
)
@click.option("--priority-boost", is_flag=True, help="Emulate Kueue with the PriorityBoost feature gate on.")
@click.option(
    "--skypilot-home",
    "skypilot_home",
    default=None,
    type=click.Path(file_okay=False),
    help="Also prepare DIRECTORY as a SkyPilot home for the sandbox (offline catalog, global config with the admin "
    "policy and this sandbox's context, the plugin config) and print the exports that make your own `sky` use it.",
)
@click.option(
    "--kubelet",
    is_flag=True,
    help="Serve kubectl exec/logs by running commands as local processes (anyone who can reach the port can run "
    "commands as you; the sandbox binds 127.0.0.1).",
)
@click.option(
    "--containers",
    is_flag=True,
    help="Run pods' containers in namespaces of their own, on images built from Debian's packages (implies "
    "--kubelet; root only; the first base image build takes a few minutes).",
)
@click.option(
    "--pod-subnet",
    default=None,
    metavar="CIDR",
    help="Pod network of --containers [default: the first free 10.N.0.0/16 from 10.213.0.0/16].",
)
@click.option(
    "--start-time",
    default=None,
    metavar="RFC3339",
    help="Cluster time at start, e.g. 2026-01-01T12:00:00Z (reproducible demos); default: now.",
)
@click.option(
    "--kueue-config",
    "kueue_config",
    default=None,
    metavar="MODE",
    help="Scheduling mode, as for `predict`: 'fairSharing' or 'admissionFairSharing usageHalfLifeTime=... ...'.",
)
def up(
    host: str,
    port: int,
    kubeconfig_path: str,
    apply_paths: tuple[str, ...],
    time_scale: float,
    priority_boost: bool,
    kubelet: bool,
    containers: bool,
    pod_subnet: str | None,
    start_time: str | None,
    kueue_config: str | None,
    name: str,
    skypilot_home: str | None,
) -> None:
    """Run a sandbox cluster with Kueue's behaviour in the foreground until Ctrl-C or SIGTERM."""
    from sky_kueue.sandbox import seed
    from sky_kueue.sandbox.containers.network import NetworkError
    from sky_kueue.sandbox.containers.node import ContainersUnavailable
    from sky_kueue.sandbox.sandbox import Sandbox, SandboxError

    path = pathlib.Path(up_kubeconfig_path(name, kubeconfig_path)).expanduser()
    config = None
    if kueue_config is not None:
        from sky_kueue.kueue import parse
        from sky_kueue.kueue.errors import ModelError

        try:
            config = parse.parse_header(f"# kueue-config: {kueue_config}")
        except ModelError as failure:
            raise errors.UserError(str(failure)) from failure
    start = parse_start_time(start_time) if start_time is not None else None
    with _stop_on_signal() as stop:
        box = Sandbox(
            time_scale=time_scale,
            priority_boost=priority_boost,
            start=start,
            kubelet=kubelet,
            containers=containers,
            pod_subnet=pod_subnet,
            host=host,
            port=port,
            kubeconfig_path=path,
            config=config,
            name=name,
        )
        try:
            box.start()
        except (ContainersUnavailable, NetworkError) as failure:
            raise errors.UserError(str(failure)) from failure
        except OSError as failure:
            raise errors.UserError(f"cannot start the sandbox on {host}:{port}: {failure.strerror}") from failure
        try:
            try:
                if apply_paths:
                    for source in apply_paths:
                        box.apply(source)
                else:
                    box.apply(seed.seed_cluster())
            except SandboxError as failure:
                raise errors.UserError(str(failure)) from failure
            click.echo(f"sandbox cluster (Kueue emulation) listening on {box.url}")
            click.echo(f"kubeconfig: {box.kubeconfig_path} (context {name})")
            click.echo(f"try: kubectl --kubeconfig {box.kubeconfig_path} get clusterqueues")
            if skypilot_home is not None:
                _print_skypilot_exports(pathlib.Path(skypilot_home).expanduser(), box.kubeconfig_path, name)
            stop.wait()
            click.echo("stopping")
        finally:
            box.stop()


#: The plugin config a prepared SkyPilot home uses when the user has none of their own.
PACKAGED_PLUGIN_CONFIG_NAME = "sky-kueue.yaml"


def _print_skypilot_exports(root: pathlib.Path, kubeconfig: pathlib.Path, context: str) -> None:
    """Prepare ``root`` for ``sky`` on the sandbox and print the ``export`` lines that use it.

    The plugin config is the user's own (``$SKY_KUEUE_CONFIG``, else ``~/.sky/sky-kueue.yaml``,
    the README's step 3), else a copy of the demo config with open teams, said so.
    """
    import os
    import shlex
    from importlib import resources

    from sky_kueue.cli.demo_config import DEMO_CONFIG_RESOURCE
    from sky_kueue.sandbox.skypilot_home import skypilot_exports

    own = os.environ.get("SKY_KUEUE_CONFIG") or str(pathlib.Path("~/.sky/sky-kueue.yaml").expanduser())
    try:
        root.mkdir(parents=True, exist_ok=True)
        if pathlib.Path(own).is_file():
            plugin_config, whose = pathlib.Path(own).resolve(), "yours"
        else:
            plugin_config = root / PACKAGED_PLUGIN_CONFIG_NAME
            demo = resources.files("sky_kueue.data").joinpath(DEMO_CONFIG_RESOURCE)
            plugin_config.write_text(demo.read_text(encoding="utf-8"), encoding="utf-8")
            whose = f"the demo's, with open teams: no {own}"
        exports = skypilot_exports(root, kubeconfig, plugin_config, context)
    except OSError as failure:
        raise errors.UserError(
            f"cannot prepare the SkyPilot home {root}: {failure.strerror}; pass another --skypilot-home"
        ) from failure
    click.echo(f"SkyPilot home for this sandbox: {exports['HOME']} (plugin config {plugin_config}: {whose}); run:")
    for variable, value in exports.items():
        click.echo(f"  export {variable}={shlex.quote(value)}")
    click.echo("  sky check kubernetes   # then: sky launch --dryrun <task.yaml>, sky jobs launch <task.yaml>")


def parse_start_time(text: str) -> datetime.datetime:
    """An RFC 3339 time with a zone (``Z`` or an offset), as Kubernetes writes ``metav1.Time``.

    Raises:
        click.BadParameter: not such a time.
    """
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an RFC 3339 time such as 2026-01-01T12:00:00Z", param_hint="--start-time"
        ) from None
    if moment.tzinfo is None:
        raise click.BadParameter(f"{text!r} has no time zone; add Z or an offset", param_hint="--start-time")
    return moment.astimezone(datetime.timezone.utc)

"""``sky-kueue real-cluster``: real Kubernetes and the real Kueue on this machine.

``build`` compiles the pinned upstream components from their Go modules into a cache outside
the repository (the first build takes tens of minutes on two cores; then nothing), ``up``
starts a cluster in the background and prints its kubeconfig, ``down`` stops it and removes
every file it wrote, ``status`` says what runs. Unlike ``sandbox``, this needs Go (and the
Go module proxy) once, but no root.
"""

from __future__ import annotations

import json
from decimal import Decimal, InvalidOperation
from pathlib import Path

import click

from sky_kueue.cli import errors

#: Where ``up`` keeps a cluster's state unless told otherwise.
DEFAULT_DIRECTORY = "~/.sky-kueue/real-cluster"

_DIR_OPTION = click.option(
    "--dir",
    "directory",
    default=DEFAULT_DIRECTORY,
    show_default=True,
    type=click.Path(file_okay=False),
    help="The cluster's state directory (certificates, etcd data, kubeconfigs, logs).",
)


def _binaries(log: bool = True) -> object:
    from sky_kueue.realcluster import build, versions

    try:
        pins = versions.load_pins()
        return build.ensure_built(pins, log=(lambda line: click.echo(line, err=True)) if log else (lambda _: None))
    except versions.PinsError as err:
        errors.fail(str(err))
    except build.BuildError as err:
        errors.fail(str(err), errors.EXIT_CLUSTER_ERROR)


@click.group("real-cluster")
def real_cluster() -> None:
    """Real Kubernetes and the real Kueue on 127.0.0.1, built from their Go modules."""


@real_cluster.command("build")
def build_cmd() -> None:
    """Build (or find cached) the pinned kube-apiserver, etcd, Kueue and KWOK."""
    _binaries()


@real_cluster.command("up")
@_DIR_OPTION
@click.option("--nodes", default=2, show_default=True, type=click.IntRange(1, 50), help="Fake nodes (KWOK).")
@click.option("--node-cpu", default="16", show_default=True, help="CPU capacity of each node.")
@click.option("--node-memory", default="64Gi", show_default=True, help="Memory capacity of each node.")
@click.option(
    "--node-gpus", default=4, show_default=True, type=click.IntRange(0, 1024), help="nvidia.com/gpu per node."
)
def up_cmd(directory: str, nodes: int, node_cpu: str, node_memory: str, node_gpus: int) -> None:
    """Start a cluster in the background; prints the export that points kubectl at it."""
    from sky_kueue.realcluster import cluster as real
    from sky_kueue.realcluster.build import Binaries

    try:
        cpu = Decimal(node_cpu)
    except InvalidOperation:
        errors.fail(f"--node-cpu {node_cpu!r} is not a number of CPUs")
    binaries = _binaries()
    assert isinstance(binaries, Binaries)
    spec = real.NodeSpec(count=nodes, cpu=cpu, memory=node_memory, gpus=node_gpus)
    target = real.RealCluster(Path(directory).expanduser(), binaries, spec, log=lambda line: click.echo(line, err=True))
    try:
        target.up()
    except real.ClusterError as err:
        errors.fail(str(err), errors.EXIT_CLUSTER_ERROR)
    click.echo(f"export KUBECONFIG={target.kubeconfig}")


@real_cluster.command("down")
@_DIR_OPTION
def down_cmd(directory: str) -> None:
    """Stop the cluster's processes and remove its state directory."""
    from sky_kueue.realcluster import cluster as real
    from sky_kueue.realcluster import versions
    from sky_kueue.realcluster.build import Binaries, cache_root

    path = Path(directory).expanduser()
    if not (path / "state.json").exists():
        click.echo(f"no real cluster in {path}", err=True)
        return
    target = real.load(path, Binaries(cache_root(), versions.load_pins()))
    try:
        target.down()
    except real.ClusterError as err:
        errors.fail(str(err), errors.EXIT_CLUSTER_ERROR)
    click.echo(f"stopped the real cluster in {path}", err=True)


@real_cluster.command("status")
@_DIR_OPTION
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
def status_cmd(directory: str, output: str) -> None:
    """What runs: each process with its pid and whether it is alive; exit 1 if any is not."""
    from sky_kueue.realcluster import cluster as real

    path = Path(directory).expanduser()
    if not (path / "state.json").exists():
        errors.fail(
            f"no real cluster in {path} (start one with `sky-kueue real-cluster up`)", errors.EXIT_CLUSTER_ERROR
        )
    state = real.State.load(path)
    alive = {name: real.is_alive(proc.pid) for name, proc in state.processes.items()}
    if output == "json":
        click.echo(json.dumps({"ready": state.ready, "ports": state.ports, "alive": alive}, indent=2))
    else:
        click.echo(f"real cluster in {path}: {'ready' if state.ready else 'not ready'}")
        for name, proc in state.processes.items():
            click.echo(f"  {name:<24} pid {proc.pid:<8} {'running' if alive[name] else 'EXITED'}  log {proc.log}")
    if not state.ready or not all(alive.values()):
        raise SystemExit(errors.EXIT_CLUSTER_ERROR)

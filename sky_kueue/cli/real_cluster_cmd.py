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
from typing import TYPE_CHECKING, Any

import click

from sky_kueue.cli import errors

if TYPE_CHECKING:
    from sky_kueue.realcluster.cluster import RealCluster

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
    """Build (or find cached) the pinned kube-apiserver, etcd, Kueue, KWOK and kubelet."""
    _binaries()


@real_cluster.command("up")
@_DIR_OPTION
@click.option("--nodes", default=2, show_default=True, type=click.IntRange(1, 50), help="Fake nodes (KWOK).")
@click.option("--node-cpu", default="16", show_default=True, help="CPU capacity of each node.")
@click.option("--node-memory", default="64Gi", show_default=True, help="Memory capacity of each node.")
@click.option(
    "--node-gpus", default=4, show_default=True, type=click.IntRange(0, 1024), help="nvidia.com/gpu per node."
)
@click.option(
    "--real-node",
    is_flag=True,
    help="Also start a real node (kubelet, containerd, runc, CNI bridge; root) that runs pods' containers.",
)
@click.option(
    "--node-image",
    "node_images",
    multiple=True,
    metavar="REF",
    help="An image of the sandbox's image store (e.g. debian:bookworm) to build if needed and import "
    "into the real node (repeatable).",
)
def up_cmd(
    directory: str,
    nodes: int,
    node_cpu: str,
    node_memory: str,
    node_gpus: int,
    real_node: bool,
    node_images: tuple[str, ...],
) -> None:
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
    if node_images and not real_node:
        errors.fail("--node-image needs --real-node")
    target = real.RealCluster(
        Path(directory).expanduser(),
        binaries,
        spec,
        log=lambda line: click.echo(line, err=True),
        real_node=real_node,
        node_images=node_images,
    )
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


@real_cluster.command("oracle")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--dir",
    "directory",
    default=None,
    type=click.Path(file_okay=False),
    help=f"A cluster started by `real-cluster up` (default {DEFAULT_DIRECTORY}); Kueue is restarted "
    "with fair sharing or admission fair sharing for the scenarios that need it.",
)
@click.option(
    "--kubeconfig",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Another cluster with Kueue (admin rights); scenarios needing a non-default Kueue configuration are skipped.",
)
@click.option(
    "--release",
    type=click.Choice(["flavor", "running"]),
    default="flavor",
    show_default=True,
    help="How the built scenario is handed to Kueue: `flavor` creates last a ResourceFlavor every "
    "ClusterQueue lists, which activates them all at once; `running` releases held ClusterQueues "
    "with concurrent patches (for comparison).",
)
@click.option("-o", "--output", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--results",
    default=None,
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each scenario's result to RESULTS/<set>/<scenario>.json and the summary to RESULTS/summary.json.",
)
def oracle_cmd(
    scenarios: tuple[Path, ...],
    directory: str | None,
    kubeconfig: Path | None,
    release: str,
    output: str,
    results: Path | None,
) -> None:
    """Replay oracle scenarios (files or set directories) on the live Kueue and compare what it
    did with the recorded decisions and with `sky-kueue predict`."""
    from sky_kueue.kueue.errors import ModelError
    from sky_kueue.realcluster import live_oracle
    from sky_kueue.realcluster.oracle_replay import OracleReplayer, Scenario, manager_configuration

    if directory is not None and kubeconfig is not None:
        errors.fail("real-cluster oracle: give --dir or --kubeconfig, not both")
    paths = live_oracle.scenario_paths(scenarios)
    if not paths:
        errors.fail(f"real-cluster oracle: no scenario files (*.yaml) in {', '.join(map(str, scenarios))}")
    try:
        to_replay = live_oracle.read_scenarios(paths)
    except ModelError as err:
        errors.fail(str(err))

    def log(line: str) -> None:
        click.echo(line, err=True)

    reconfigure = None
    if kubeconfig is not None:
        replayer = OracleReplayer(_kubeconfig_client(kubeconfig), log=log, release=release)
    else:
        target = _owned_cluster(Path(directory or DEFAULT_DIRECTORY).expanduser())

        def reconfigure(scenario: Scenario) -> None:
            target.reconfigure_kueue(manager_configuration(scenario.config))

        replayer = OracleReplayer(target.api_client(), log=log, release=release)

    def record(result: live_oracle.ScenarioResult) -> None:
        if results is not None:
            (results / result.set).mkdir(parents=True, exist_ok=True)
            (results / result.set / f"{result.scenario}.json").write_text(
                json.dumps(result.to_json(), indent=2) + "\n", encoding="utf-8"
            )
        if output == "text":
            click.echo(_result_line(result))

    done = live_oracle.run(to_replay, replayer, reconfigure, log=log, on_result=record)
    summary = live_oracle.summary(done)
    if results is not None:
        (results / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    if output == "json":
        click.echo(json.dumps({"scenarios": [r.to_json() for r in done], "summary": summary}, indent=2))
    else:
        click.echo(_summary_table(summary))
    if any(r.error for r in done):
        raise SystemExit(errors.EXIT_CLUSTER_ERROR)


def _kubeconfig_client(kubeconfig: Path) -> Any:
    from kubernetes import config as kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        return kube_config.new_client_from_config(config_file=str(kubeconfig))
    except (ConfigException, OSError, ValueError) as err:
        errors.fail(f"--kubeconfig {kubeconfig}: {err}")


def _owned_cluster(path: Path) -> RealCluster:
    from sky_kueue.realcluster import cluster as real
    from sky_kueue.realcluster import versions
    from sky_kueue.realcluster.build import Binaries, cache_root

    if not (path / "state.json").exists():
        errors.fail(
            f"no real cluster in {path} (start one with `sky-kueue real-cluster up --dir {path}`, "
            "or give --kubeconfig)",
            errors.EXIT_CLUSTER_ERROR,
        )
    return real.load(path, Binaries(cache_root(), versions.load_pins()))


def _agreement_text(name: str, agreement: object) -> str:
    from sky_kueue.realcluster.oracle_agreement import Agreement

    if not isinstance(agreement, Agreement):
        return f"{name}: -"
    if agreement.decisions_agree:
        return f"{name}: agrees"
    return f"{name}: {'decisions differ' if agreement.final_agrees else 'DIFFERS'} ({'; '.join(agreement.differences)})"


def _result_line(result: object) -> str:
    from sky_kueue.realcluster.live_oracle import ScenarioResult

    assert isinstance(result, ScenarioResult)
    head = f"{result.set}/{result.scenario}"
    if result.skipped:
        return f"{head}: skipped: {result.skipped}"
    if result.error:
        return f"{head}: error: {result.error}"
    parts = [_agreement_text("recorded", result.recorded), _agreement_text("predict", result.predicted)]
    if result.hit_cycle_cap:
        parts.append(_agreement_text("predict settled", result.predicted_settled) + " [recording hit its cycle cap]")
    parts += [f"note: {note}" for note in result.notes]
    return f"{head} ({result.seconds:.1f} s): " + " | ".join(parts)


def _summary_table(summary: dict[str, dict[str, int]]) -> str:
    lines = [
        f"{'set':<14} {'replayed':>8} {'skipped':>7} {'errors':>6}  agree with recorded (final/all)  "
        "with predict (final/all)  capped"
    ]
    for name, row in summary.items():
        lines.append(
            f"{name:<14} {row['replayed']:>8} {row['skipped']:>7} {row['errors']:>6}  "
            f"{row['recordedFinal']:>14} / {row['recordedDecisions']:<14} "
            f"{row['predictFinal']:>10} / {row['predictDecisions']:<11} {row['hitCycleCap']:>6}"
        )
    return "\n".join(lines)

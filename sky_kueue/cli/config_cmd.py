"""``sky-kueue check-config``: validate a plugin config (sky-kueue.yaml) and summarise it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sky_kueue.cli import errors, options
from sky_kueue.skypilot import skypilot_files
from sky_kueue.skypilot.config import ConfigError, PluginConfig, load_config
from sky_kueue.skypilot.enabled_contexts import refused_team_clusters
from sky_kueue.skypilot.open_teams import open_team_warnings

if TYPE_CHECKING:
    from sky_kueue.skypilot.cluster_check import ClusterFacts


@click.command("check-config")
@click.argument("config_path", type=click.Path(path_type=Path))
@click.option(
    "--skypilot/--no-skypilot",
    default=True,
    show_default=True,
    help="Check the teams' contexts against the ones SkyPilot here enables (read from its config and the kubeconfig).",
)
@click.option(
    "--cluster",
    "against_cluster",
    is_flag=True,
    help="Also check that each team's cluster holds its namespace, LocalQueue (with an active "
    "ClusterQueue) and priority classes with the config's values; exit 1 if not.",
)
@options.kubeconfig_option("Kubeconfig for --cluster (default: $KUBECONFIG or ~/.kube/config, as kubectl).")
def check_config(config_path: Path, skypilot: bool, against_cluster: bool, kubeconfig: Path | None) -> None:
    """Validate CONFIG_PATH; print one line per team, or one error line and exit 2.

    Also warns (on stderr) about each open team (``users: ["*"]``: anyone may use its queue)
    and each context of a team that SkyPilot here does not enable: the policy leaves such
    clusters out of a launch. With ``--cluster``, each problem the clusters show is one line
    on stderr and the exit code is 1."""
    try:
        config = load_config(config_path)
    except ConfigError as exc:
        errors.fail(str(exc))
    for name, team in config.teams.items():
        burst = (
            f", burst after {team.burst.max_queue_wait_seconds}s to {'/'.join(team.burst.clouds)}" if team.burst else ""
        )
        classes = ", ".join(team.priority_classes.allowed)
        where = (
            "; ".join(f"{c.context}: {c.namespace}/{c.local_queue}" for c in config.team_clusters(team))
            if team.clusters
            else f"{team.namespace}/{team.local_queue}"
        )
        click.echo(f"{name}: {where}, classes {classes} (default {team.priority_classes.default}){burst}")
    for line in open_team_warnings(config):
        click.echo(line, err=True)
    for line in _skypilot_context_warnings(config) if skypilot else ():
        click.echo(line, err=True)
    if against_cluster:
        problems = _cluster_problems(config, kubeconfig)
        for line in problems:
            click.echo(f"error: {line}", err=True)
        if problems:
            raise SystemExit(errors.EXIT_CLUSTER_ERROR)
        click.echo(f"ok: {config_path} ({len(config.teams)} teams; the clusters hold every team's queue and classes)")
        return
    click.echo(f"ok: {config_path} ({len(config.teams)} teams)")


def _cluster_problems(config: PluginConfig, kubeconfig: Path | None) -> list[str]:
    """Read each team's cluster (one per context) and check it; a cluster that cannot be read
    is one error line and exit 1 (its URL named)."""
    import os

    from sky_kueue.mirror import kubeconfig as kubeconfig_lookup
    from sky_kueue.skypilot.cluster_check import config_problems

    found = kubeconfig_lookup.find_kubeconfig(str(kubeconfig) if kubeconfig else None, os.environ, os.path.exists)
    if found is None:
        errors.fail(f"--cluster: no cluster to check ({kubeconfig_lookup.why_none(os.environ, os.path.exists)})")
    contexts = sorted({c.context for team in config.teams.values() for c in config.team_clusters(team)}, key=str)
    return config_problems(config, {context: _read_facts(found.path, context) for context in contexts}, contexts)


def _read_facts(kubeconfig: str | None, context: str | None) -> ClusterFacts:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from sky_kueue.kueue import api as kueue_api
    from sky_kueue.mirror.errors import explain
    from sky_kueue.skypilot import cluster_check
    from sky_kueue.skypilot.setup_apply import ApplyError, api_client_for

    try:
        api = api_client_for(kubeconfig, context)  # kubectl's lookup, as setup --apply reads clusters
    except ApplyError as exc:
        errors.fail(f"--cluster: {exc} (context {context or 'current'})")
    host = api.configuration.host
    custom = client.CustomObjectsApi(api)
    group, version = kueue_api.KUEUE_GROUP, kueue_api.WORKLOAD_VERSIONS[0]
    try:
        namespaces = frozenset(ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items)
        queues = custom.list_cluster_custom_object(group, version, "localqueues")["items"]
        cqs = custom.list_cluster_custom_object(group, version, "clusterqueues")["items"]
        classes = custom.list_cluster_custom_object(group, version, "workloadpriorityclasses")["items"]
    except (ApiException, HTTPError, OSError) as exc:
        errors.fail(str(explain(exc, host=host, what="read the teams' Kueue objects")), errors.EXIT_CLUSTER_ERROR)
    finally:
        api.close()
    return cluster_check.ClusterFacts(
        namespaces=namespaces,
        local_queues={(q["metadata"]["namespace"], q["metadata"]["name"]): q for q in queues},
        cluster_queues={q["metadata"]["name"]: q for q in cqs},
        priority_classes={c["metadata"]["name"]: int(c.get("value", 0)) for c in classes},
    )


def _skypilot_context_warnings(config: PluginConfig) -> tuple[str, ...]:
    """Warnings for the teams' contexts that SkyPilot here does not enable (its own rule:
    ``kubernetes.allowed_contexts``, workspace, kubeconfig), read from SkyPilot's files without
    importing SkyPilot (``skypilot_files``), so the check answers in well under a second."""
    if not any(c.context is not None for team in config.teams.values() for c in config.team_clusters(team)):
        return ()
    enabled = skypilot_files.enabled_contexts()
    if enabled is None:
        return ("note: SkyPilot finds no Kubernetes context here; the teams' contexts were not checked",)
    return tuple(f"warning: {w}" for w in refused_team_clusters(config, enabled))

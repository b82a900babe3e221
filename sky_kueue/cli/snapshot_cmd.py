"""``sky-kueue snapshot``: write a live cluster's Kueue objects to a file ``predict`` reads.

Why: a snapshot freezes a moment of a cluster so a prediction can be repeated, shared in a
bug report, or compared with what Kueue then did. The file is multi-document YAML
(Namespaces and every Kueue kind, in the served version) with header comments recording the
server, the Kueue API version, the time (``predict`` uses it as "now") and, when given, the
scheduling mode (``# kueue-config:``), which cannot be read from the Kueue API.
"""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from sky_kueue.cli import errors, options

#: Exit code for bad input (kubeconfig, context, --kueue-config, unwritable file).
EXIT_BAD_INPUT = 2


@click.command("snapshot")
@options.kubeconfig_option()
@options.context_option()
@click.option(
    "--output",
    "-o",
    "output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path, allow_dash=True),
    help="File to write ('-' for standard output).",
)
@click.option(
    "--kueue-config",
    "kueue_config",
    default=None,
    metavar="MODE",
    help="Record the cluster's Kueue scheduling mode ('fairSharing', 'admissionFairSharing ...') in the header.",
)
def snapshot(kubeconfig: Path | None, context: str | None, output: Path, kueue_config: str | None) -> None:
    """Write the cluster's Kueue objects as a snapshot for `predict --snapshot`."""
    from sky_kueue.cli import cluster_fetch
    from sky_kueue.kueue import parse
    from sky_kueue.kueue.errors import ModelError
    from sky_kueue.mirror import export, kinds

    if kueue_config is not None and kueue_config.strip() != "classical":
        try:
            parse.parse_header(f"# kueue-config: {kueue_config}")
        except ModelError as exc:
            errors.fail(f"--kueue-config: {exc}", EXIT_BAD_INPUT)
    conn, fetched = cluster_fetch.fetch_or_fail(kubeconfig, context)
    warnings: list[str] = list(fetched.warnings)
    docs = export.documents(fetched.store, warnings=warnings)
    header = export.snapshot_header(
        host=conn.host,
        context=conn.context,
        api_version=fetched.api.version,
        taken_at=datetime.now(timezone.utc),
        kueue_config=None if kueue_config is None or kueue_config.strip() == "classical" else kueue_config.strip(),
    )
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
    if str(output) == "-":
        export.write_snapshot(sys.stdout, header, docs)
        return
    try:
        export.write_snapshot_file(output, header, docs)
    except OSError as exc:
        errors.fail(f"cannot write {output}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    workloads = fetched.store.count(kinds.KindName.WORKLOAD)
    click.echo(
        f"wrote {len(docs)} objects ({workloads} workloads, {kinds.KUEUE_GROUP}/{fetched.api.version}) to {output}",
        err=True,
    )

"""One read of a live cluster's Kueue objects for the CLI, with one-line errors.

``snapshot`` and ``predict --kubeconfig`` both connect, discover the served Kueue version
and list every kind the model needs (``queue`` shares the connection step); a bad
kubeconfig or context exits with code 2, an unreadable cluster (unreachable, Kueue not
installed, RBAC) with code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sky_kueue.cli import errors
from sky_kueue.cli.errors import EXIT_BAD_INPUT, EXIT_CLUSTER_ERROR

if TYPE_CHECKING:
    from sky_kueue.mirror.connection import Connection
    from sky_kueue.mirror.export import Fetched


def connect_or_fail(kubeconfig: Path | None, context: str | None) -> Connection:
    """A connection to the cluster, or a one-line error and exit code 2 (bad kubeconfig/context)."""
    from sky_kueue.mirror import connection
    from sky_kueue.mirror.errors import KubeconfigError

    try:
        return connection.connect(kubeconfig, context)
    except KubeconfigError as exc:
        errors.fail(str(exc), EXIT_BAD_INPUT)


def fetch_or_fail(kubeconfig: Path | None, context: str | None) -> tuple[Connection, Fetched]:
    """Connect, discover and list the model's kinds; the returned connection is already closed."""
    from sky_kueue.mirror import discovery, export, kinds
    from sky_kueue.mirror.errors import MirrorError

    conn = connect_or_fail(kubeconfig, context)
    try:
        api = discovery.discover(conn.api_client, conn.host)
        fetched = export.fetch(conn, api, kind_list=kinds.MODEL_KINDS)
    except MirrorError as exc:
        errors.fail(str(exc), EXIT_CLUSTER_ERROR)
    finally:
        conn.close()
    return conn, fetched

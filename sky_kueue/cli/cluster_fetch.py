"""One read of a live cluster's Kueue objects for the CLI, with one-line errors.

``snapshot`` and ``predict --kubeconfig`` both connect, discover the served Kueue version
and list every kind the model needs; a bad kubeconfig or context exits with code 2, an
unreadable cluster (unreachable, Kueue not installed, RBAC) with code 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sky_kueue.cli import errors

if TYPE_CHECKING:
    from sky_kueue.mirror.connection import Connection
    from sky_kueue.mirror.export import Fetched

#: Exit code for a bad kubeconfig or context.
EXIT_BAD_INPUT = 2
#: Exit code when the cluster cannot be read.
EXIT_CLUSTER_ERROR = 1


def fetch_or_fail(kubeconfig: Path | None, context: str | None) -> tuple[Connection, Fetched]:
    """Connect, discover and list the model's kinds; the returned connection is already closed."""
    from sky_kueue.mirror import connection, discovery, export, kinds
    from sky_kueue.mirror.errors import KubeconfigError, MirrorError

    try:
        conn = connection.connect(kubeconfig, context)
    except KubeconfigError as exc:
        errors.fail(str(exc), EXIT_BAD_INPUT)
    try:
        api = discovery.discover(conn.api_client, conn.host)
        fetched = export.fetch(conn, api, kind_list=kinds.MODEL_KINDS)
    except MirrorError as exc:
        errors.fail(str(exc), EXIT_CLUSTER_ERROR)
    finally:
        conn.close()
    return conn, fetched

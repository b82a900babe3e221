"""From mirrored objects to the scheduling model, and to snapshot files.

Why a snapshot is just Kubernetes documents: ``sky-kueue predict --snapshot`` already reads
``kubectl get -o yaml`` output through :func:`sky_kueue.kueue.parse.parse_documents`, in either
Kueue version; writing the mirror's objects the same way makes a snapshot readable by that
command, by ``kubectl apply`` and by a human, and the live path (``predict --kubeconfig``) runs
the very same parser on the very same documents.

Two sources of documents: a running :class:`~sky_kueue.mirror.mirror.Mirror`'s store, or a
one-shot :func:`fetch` that lists every kind once (with bounded retries, no watch) for
commands that only need the state of one moment.

When Namespaces cannot be listed (namespace-scoped RBAC), the model would treat every
namespace as unknown and every ClusterQueue's namespaceSelector as unmatched; instead the
namespaces of LocalQueues and Workloads are synthesized with only the
``kubernetes.io/metadata.name`` label, and a warning says so.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from sky_kueue.kueue import objects as model
from sky_kueue.kueue import parse
from sky_kueue.kueue.api import NAMESPACE_NAME_LABEL
from sky_kueue.mirror import connection, kinds
from sky_kueue.mirror.backoff import ONE_SHOT_POLICY, RetryPolicy, Sleep, retrying
from sky_kueue.mirror.discovery import KueueApi
from sky_kueue.mirror.errors import explain, is_transient, list_retryable
from sky_kueue.mirror.source import LIST_PAGE_SIZE_OBJECTS, KindSource
from sky_kueue.mirror.store import MirrorStore, normalize

_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class Fetched:
    """A one-shot copy of a cluster: a filled store, the API used, and what could not be read."""

    store: MirrorStore
    api: KueueApi
    host: str
    context: str | None = None
    warnings: list[str] = field(default_factory=list)


def fetch(
    conn: connection.Connection,
    api: KueueApi,
    *,
    kind_list: Iterable[kinds.Kind] = kinds.ALL_KINDS,
    policy: RetryPolicy = ONE_SHOT_POLICY,
    sleep: Sleep = time.sleep,
    store: MirrorStore | None = None,
) -> Fetched:
    """List every kind once into a new store.

    Raises:
        MirrorError: a required kind cannot be listed (forbidden, unreachable, retries
            exhausted); optional kinds that cannot be listed become warnings.
    """
    target = store or MirrorStore()
    result = Fetched(store=target, api=api, host=conn.host, context=conn.context)
    for kind in kind_list:
        if not api.serves(kind):
            continue
        source = KindSource(conn.api_client, kind, api.version_of(kind))
        try:
            items, resource_version = _list_all(source, policy, sleep)
        except (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError) as exc:
            error = explain(exc, host=conn.host, what=f"list {kind.resource_name(source.version)}")
            refused = isinstance(exc, ApiException) and not is_transient(exc)
            if kind.required or not refused:
                raise error from exc
            result.warnings.append(f"{kind.plural} not mirrored: {error}")
            continue
        target.replace(kind.name, [normalize(kind.name, source.api_version, i) for i in items], resource_version)
    return result


def _list_all(source: KindSource, policy: RetryPolicy, sleep: Sleep) -> tuple[list[dict[str, Any]], str]:
    for attempt in retrying(policy, sleep=sleep, retry_on=list_retryable):
        with attempt:
            items: list[dict[str, Any]] = []
            token: str | None = None
            version = ""
            while True:
                page = source.list_page(
                    limit=LIST_PAGE_SIZE_OBJECTS, continue_token=token, timeout=connection.REQUEST_TIMEOUT
                )
                items.extend(page.items)
                version = version or page.resource_version
                token = page.continue_token
                if not token:
                    return items, version
    raise AssertionError("unreachable: tenacity returns or re-raises")


def documents(store: MirrorStore, *, warnings: list[str] | None = None) -> list[dict[str, Any]]:
    """The model's documents (Namespaces, then Kueue kinds), from a store.

    Namespaces are synthesized when the store has none (see the module docstring); a note
    is appended to ``warnings`` then.
    """
    docs: list[dict[str, Any]] = []
    for kind in kinds.MODEL_KINDS:
        docs.extend(store.items(kind.name))
    if not store.is_synced(kinds.KindName.NAMESPACE):
        names = sorted(
            {
                str((o.get("metadata") or {}).get("namespace", ""))
                for kind in (kinds.KindName.LOCAL_QUEUE, kinds.KindName.WORKLOAD)
                for o in store.items(kind)
            }
            - {""}
        )
        docs = [_namespace(name) for name in names] + docs
        if warnings is not None and names:
            warnings.append(
                "namespaces could not be listed: assuming they carry only the "
                f"{NAMESPACE_NAME_LABEL} label (ClusterQueue namespaceSelectors may be misjudged)"
            )
    return docs


def _namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {NAMESPACE_NAME_LABEL: name}}}


def cluster_state(
    docs: Sequence[dict[str, Any]],
    *,
    config: model.KueueConfig | None = None,
    now: datetime | None = None,
    extra: Sequence[dict[str, Any]] = (),
) -> model.ClusterState:
    """Parse documents (plus what-if ``extra`` ones) into the model's :class:`ClusterState`.

    Raises:
        ModelError: an object the model cannot read (the message names it and the field).
    """
    state = parse.parse_documents([*docs, *extra], config)
    state.now = now
    return state


def snapshot_header(
    *, host: str, context: str | None, api_version: str, taken_at: datetime, kueue_config: str | None
) -> str:
    """Comment lines for a snapshot file; ``# kueue-config:`` is read back by ``predict``."""
    lines = [
        "# sky-kueue snapshot",
        f"# server: {host}" + (f" (context {context})" if context else ""),
        f"# kueue API: {kinds.KUEUE_GROUP}/{api_version}",
        f"# taken at: {taken_at.isoformat()}",
    ]
    if kueue_config:
        lines.insert(0, f"# kueue-config: {kueue_config}")
    return "\n".join(lines) + "\n"


def write_snapshot(stream: IO[str], header: str, docs: Sequence[dict[str, Any]]) -> None:
    """Write ``header`` and the documents as multi-document YAML."""
    stream.write(header)
    yaml.dump_all(list(docs), stream, Dumper=_Dumper, sort_keys=False, explicit_start=True, default_flow_style=False)


def write_snapshot_file(path: Path, header: str, docs: Sequence[dict[str, Any]]) -> None:
    """Write a snapshot file atomically (a partial file is never left behind).

    Raises:
        OSError: the file cannot be written.
    """
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        write_snapshot(handle, header, docs)
    tmp.replace(path)

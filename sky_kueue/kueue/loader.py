"""Load a cluster state from YAML text (a snapshot file, ``kubectl get -o yaml`` output).

Files and YAML go through the input boundary (:mod:`sky_kueue.inputs`): regular files of
bounded size only, YAML depth and alias expansion checked before anything is built, libyaml's
C parser when PyYAML has it (snapshots of large clusters are megabytes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.kueue import objects as o
from sky_kueue.kueue import parse
from sky_kueue.kueue.errors import ModelError


def load_documents(text: str, source: str = "<input>") -> list[Any]:
    """Parse multi-document YAML within the input limits.

    Raises:
        ModelError: if the text is not valid YAML or exceeds a limit.
    """
    try:
        return yaml_reader.load_all(text, source)
    except InputError as exc:
        raise ModelError(str(exc)) from None


def read_text(path: str | Path) -> str:
    """Read a regular UTF-8 file of bounded size, as a one-line :class:`ModelError` otherwise."""
    try:
        return files.read_text(path, "YAML file")
    except InputError as exc:
        raise ModelError(str(exc)) from None


def load_state(text: str, source: str = "<input>", extra: Iterable[Any] = ()) -> o.ClusterState:
    """Build a cluster state from snapshot text plus extra (what-if) documents.

    Raises:
        ModelError: on invalid YAML, an unknown kind or an invalid object.
    """
    config = parse.parse_header(text)
    docs = load_documents(text, source)
    try:
        return parse.parse_documents([*docs, *extra], config)
    except ModelError as exc:
        raise ModelError(f"{source}: {exc}") from exc


def load_state_file(path: str | Path, add: Iterable[str | Path] = ()) -> o.ClusterState:
    """Load a snapshot file and what-if workload files.

    Raises:
        ModelError: on unreadable files or invalid content.
    """
    extra: list[Any] = []
    for add_path in add:
        extra.extend(parse.flatten_documents(load_documents(read_text(add_path), str(add_path))))
    return load_state(read_text(path), str(path), extra)


#: A what-if file (``predict --add``): its name and its documents, flattened.
Additions = tuple[str, list[Mapping[str, Any]]]
#: How much later than the newest Workload a Workload "submitted now" is created.
SUBMITTED_AFTER_NEWEST_SECONDS = 1


def read_additions(path: str | Path) -> Additions:
    """The documents of a what-if file, read before the cluster is (so a bad file fails first).

    Raises:
        ModelError: unreadable, not YAML, or not Kubernetes objects (naming the file).
    """
    source = str(path)
    try:
        return source, parse.flatten_documents(load_documents(read_text(path), source))
    except ModelError as exc:
        message = str(exc)
        raise ModelError(message if message.startswith(source) else f"{source}: {message}") from None


def submitted_now(state: o.ClusterState, now: datetime) -> datetime:
    """When a job submitted ``now`` is created: after every Workload of ``state``, so it is the
    newest of its priority (Kueue orders a queue by priority, then creation time)."""
    latest = max((wl.creation_timestamp for wl in state.workloads.values()), default=None)
    return now if latest is None else max(now, latest + timedelta(seconds=SUBMITTED_AFTER_NEWEST_SECONDS))


def add_documents(state: o.ClusterState, additions: Sequence[Additions], now: datetime) -> list[str]:
    """Add what-if documents to a cluster state already read; returns one note per default taken.

    Why separately from the cluster's documents: an error in a what-if file must name that file,
    not the snapshot (which holds no such object); and a hypothetical Workload may leave out
    ``metadata.creationTimestamp``, which a real one always has: it is then a job submitted
    ``now`` (:func:`submitted_now`), and a note says so.

    Raises:
        ModelError: an invalid object, or one that clashes with the state (naming the file).
    """
    notes: list[str] = []
    defaulted: datetime | None = None
    for source, docs in additions:
        try:
            workloads: list[Mapping[str, Any]] = []
            for doc in docs:
                meta = doc.get("metadata")
                if doc.get("kind") == "Workload" and isinstance(meta, Mapping) and "creationTimestamp" not in meta:
                    # Each such Workload is newer than the cluster's and than the ones defaulted before it.
                    created = submitted_now(state, now)
                    if defaulted is not None:
                        created = max(created, defaulted + timedelta(seconds=SUBMITTED_AFTER_NEWEST_SECONDS))
                    defaulted = created
                    doc = {**doc, "metadata": {**meta, "creationTimestamp": created}}
                    notes.append(
                        f"{source}: Workload {meta.get('namespace', '')}/{meta.get('name', '')} has no "
                        f"metadata.creationTimestamp; taken as submitted now ({created.isoformat()}), after every "
                        "Workload of the cluster"
                    )
                parsed = parse.parse_object(doc)
                if parsed[0] == "Workload":
                    workloads.append(doc)
                else:
                    parse.add_object(state, parsed)
            parse.check_cohort_depth(state)
            for doc in workloads:
                parse.add_workload(state, parse.parse_workload(doc, state.priority_classes), doc)
        except ModelError as exc:
            raise ModelError(f"{source}: {exc}") from None
    return notes

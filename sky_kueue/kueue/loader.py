"""Load a cluster state from YAML text (a snapshot file, ``kubectl get -o yaml`` output).

Files and YAML go through the input boundary (:mod:`sky_kueue.inputs`): regular files of
bounded size only, YAML depth and alias expansion checked before anything is built, libyaml's
C parser when PyYAML has it (snapshots of large clusters are megabytes).
"""

from __future__ import annotations

from collections.abc import Iterable
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

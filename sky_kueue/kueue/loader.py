"""Load a cluster state from YAML text (a snapshot file, ``kubectl get -o yaml`` output).

YAML parsing uses libyaml's C loader when PyYAML has it (snapshots of large clusters are
megabytes), and falls back to the pure-Python loader otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from sky_kueue.kueue import objects as o
from sky_kueue.kueue import parse
from sky_kueue.kueue.errors import ModelError

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_documents(text: str, source: str = "<input>") -> list[Any]:
    """Parse multi-document YAML.

    Raises:
        ModelError: if the text is not valid YAML.
    """
    try:
        return [doc for doc in yaml.load_all(text, Loader=_Loader) if doc is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ModelError(f"{source}: invalid YAML{where}: {problem}") from exc


def read_text(path: str | Path) -> str:
    """Read a file, turning OS errors into one-line :class:`ModelError` messages."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ModelError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise ModelError(f"{path}: is a directory, expected a YAML file") from exc
    except PermissionError as exc:
        raise ModelError(f"{path}: permission denied") from exc
    except UnicodeDecodeError as exc:
        raise ModelError(f"{path}: not a UTF-8 text file") from exc
    except OSError as exc:
        raise ModelError(f"{path}: cannot read: {exc.strerror}") from exc


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

"""A SkyPilot task YAML as SkyPilot 0.14.1's parser gives it, read without importing SkyPilot.

Why: ``sky-kueue launch --dry-run`` plans with the task as ``sky.Task.from_yaml(path)
.to_yaml_config()`` returns it (the form the policy reads and prints), but importing SkyPilot
costs 3-10 s on two cores, most of a dry run. For the tasks people write for a Kueue cluster
(the shipped templates: a name, Kubernetes resources, ``num_nodes``, ``setup``/``run``,
``envs``, ``workdir``, a ``config.kubernetes.pod_config``), SkyPilot's parser only normalises
a few spellings, and this module does the same (``Task.from_yaml_config`` /
``Task._to_yaml_config`` in ``sky/task.py``; the resources in :mod:`.resources_reader`):

* ``num_nodes`` defaults to 1; ``envs`` keys and values become text (``1`` -> ``'1'``,
  ``true`` -> ``'True'``), an empty ``envs`` is left out;
* ``file_mounts: {}`` and ``volumes: {}`` are always written; ``_user_specified_yaml`` holds
  the file's text, with line ends as Python's text mode reads them;
* ``config:`` (only ``kubernetes.pod_config`` read here) moves onto every resources candidate.

Per field, what it does not read:

* the file itself missing, unreadable, not a regular file or over the input limit: a precise
  error (:class:`TaskFileError`), without SkyPilot (its ``open`` would block on a FIFO);
* everything else it does not read as SkyPilot would (a YAML problem, which SkyPilot reports in
  its own words; any other top-level key: ``file_mounts``, ``secrets``, ``service``, ...; a
  ``workdir`` with ``$VAR`` (SkyPilot substitutes ``envs``); an ``envs`` value that is null or a
  key SkyPilot reserves, ``SKYPILOT_*``; any other ``config`` key; the resources fields listed in
  :mod:`.resources_reader`): :class:`NotRead`, and the caller asks SkyPilot's own parser,
  printing nothing more, only slower. The reader never guesses.
"""

from __future__ import annotations

import copy
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sky_kueue.inputs import files, yaml_reader
from sky_kueue.inputs.errors import InputError
from sky_kueue.skypilot.resources_reader import LeaveToSkyPilot, resources_config

#: Top-level task keys read here (SkyPilot's task schema has many more: ``get_task_schema``).
TASK_KEYS = frozenset({"name", "resources", "num_nodes", "setup", "run", "workdir", "envs", "config"})
#: What the task's ``config:`` block may hold to be read here.
CONFIG_KEYS = frozenset({"kubernetes"})
KUBERNETES_CONFIG_KEYS = frozenset({"pod_config"})
#: ``envs`` key names SkyPilot's task schema accepts.
_ENV_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: Prefix of the variables SkyPilot reads itself (docker login, RunPod user): left to SkyPilot.
RESERVED_ENV_PREFIX = "SKYPILOT_"
#: ``workdir`` text SkyPilot substitutes ``envs`` into (``_fill_in_env_vars``).
ENV_REFERENCE = "$"
#: Where SkyPilot keeps the task's own text.
USER_YAML_KEY = "_user_specified_yaml"
WHAT = "SkyPilot task YAML"
logger = logging.getLogger(__name__)


class TaskFileError(ValueError):
    """The task file cannot be read at all (missing, unreadable, not a file, too large)."""


@dataclass(frozen=True)
class NotRead:
    """Why a task is left to SkyPilot's parser: one line naming the field."""

    reason: str


def read_task(path: str | Path) -> dict[str, Any] | NotRead:
    """The task at ``path`` as ``sky.Task.from_yaml(path).to_yaml_config()`` returns it, or why
    not read here.

    Raises:
        TaskFileError: the file cannot be read (see the module docstring).
    """
    try:
        data = files.read_bytes(path, WHAT)
    except InputError as exc:
        raise TaskFileError(exc.reason) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return NotRead("the file is not UTF-8")
    return task_from_text(_text_mode_newlines(text))


def own_task(path: str | Path) -> dict[str, Any] | None:
    """:func:`read_task`, or None when SkyPilot's parser must read the file (the reason is
    logged at debug level, which ``-v`` shows): the one place a caller asks "can we skip
    importing SkyPilot for this task?".

    Raises:
        TaskFileError: the file cannot be read (see the module docstring).
    """
    read = read_task(path)
    if isinstance(read, NotRead):
        logger.debug("%s is read by SkyPilot's parser: %s", path, read.reason)
        return None
    return read


def task_from_text(text: str) -> dict[str, Any] | NotRead:
    """The task YAML ``text`` as ``sky.Task.from_yaml_str(text).to_yaml_config()`` returns it,
    or why not read here."""
    try:
        raw = yaml_reader.load_one(text, "the task")
    except InputError as exc:
        return NotRead(f"YAML SkyPilot reads itself ({exc.reason})")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        return NotRead("the task is not a mapping")
    try:
        return _task(raw, text)
    except LeaveToSkyPilot as exc:
        return NotRead(str(exc))


def _task(raw: Mapping[Any, Any], text: str) -> dict[str, Any]:
    for key in raw:
        if not isinstance(key, str) or key not in TASK_KEYS:
            raise LeaveToSkyPilot(f"{key} is not read by sky-kueue's task reader")
    out: dict[str, Any] = {}
    name = _optional_text(raw, "name")
    if name is not None:
        out["name"] = name
    out["resources"] = resources_config(raw.get("resources"), _overrides(raw.get("config")))
    out["num_nodes"] = _num_nodes(raw.get("num_nodes"))
    for key in ("setup", "workdir", "run"):
        value = _optional_text(raw, key)
        if value is not None:
            out[key] = value
    if ENV_REFERENCE in out.get("workdir", ""):
        raise LeaveToSkyPilot("workdir refers to a variable (SkyPilot fills in envs)")
    envs = _envs(raw)
    if envs:
        out["envs"] = envs
    out["file_mounts"] = {}
    out["volumes"] = {}
    out[USER_YAML_KEY] = text
    return out


def _optional_text(raw: Mapping[str, Any], key: str) -> str | None:
    value = raw.get(key)
    if value is not None and not isinstance(value, str):
        raise LeaveToSkyPilot(f"{key} is not text")
    return value


def _num_nodes(value: Any) -> int:
    if value is None:
        return 1
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise LeaveToSkyPilot(f"num_nodes {value!r} is not a whole number >= 1")
    return value


def _envs(raw: Mapping[str, Any]) -> dict[str, str]:
    """``envs`` with keys and values as text, as ``Task.from_yaml_config`` converts them."""
    if "envs" not in raw:
        return {}
    envs = raw["envs"]
    if not isinstance(envs, Mapping):
        raise LeaveToSkyPilot("envs is not a mapping")
    out: dict[str, str] = {}
    for key, value in envs.items():
        name = str(key)
        if value is None or not _ENV_NAME_RE.fullmatch(name) or name.startswith(RESERVED_ENV_PREFIX):
            raise LeaveToSkyPilot(f"envs.{name} is not read by sky-kueue's task reader")
        out[name] = str(value)
    return out


def _overrides(config: Any) -> dict[str, Any] | None:
    """The task's ``config:`` block when it holds only ``kubernetes.pod_config``."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise LeaveToSkyPilot("config is not a mapping")
    for key, value in config.items():
        if key not in CONFIG_KEYS or not isinstance(value, Mapping):
            raise LeaveToSkyPilot(f"config.{key} is not read by sky-kueue's task reader")
        for inner, setting in value.items():
            if inner not in KUBERNETES_CONFIG_KEYS or not isinstance(setting, Mapping):
                raise LeaveToSkyPilot(f"config.{key}.{inner} is not read by sky-kueue's task reader")
    return copy.deepcopy(dict(config)) or None


def _text_mode_newlines(text: str) -> str:
    """Line ends as ``open(path, encoding='utf-8').read()`` returns them (universal newlines)."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text

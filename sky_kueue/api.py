"""The Python SDK: predict and launch SkyPilot tasks through sky-kueue's front door.

``sky_kueue.predict(task)`` says what the admin policy will do with a task (team, queue,
priority class, cloud fallback) and what Kueue will do with it (admit now, preempt whom,
wait how long and why), without submitting anything. ``sky_kueue.launch(task)`` does the
same and then submits it with ``sky.jobs.launch`` (unless ``dry_run``). Both accept a
``sky.Task``, a task dict (``Task.to_yaml_config()``) or a path to a task YAML.

Both plan as the SkyPilot user and workspace that SkyPilot's client would send (see
:mod:`sky_kueue.skypilot.client_identity`), with the user's SkyPilot config; the returned
dict names them under ``identity``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sky_kueue.skypilot import launch as launch_mod
from sky_kueue.skypilot.client_identity import current_identity, plan_as_client
from sky_kueue.skypilot.cluster_view import build_views, load_manifests, view_from_documents
from sky_kueue.skypilot.config import PluginConfig, load_config, resolve_config_path
from sky_kueue.skypilot.decision import Rejection
from sky_kueue.skypilot.engine import PolicyResult
from sky_kueue.skypilot.task_reader import own_task
from sky_kueue.skypilot.view import ClusterView, ContextViews

TaskLike = Any  # sky.Task | Mapping[str, Any] | str | os.PathLike[str]


class LaunchRejected(ValueError):
    """The sky-kueue policy rejected the task; the message says why and what to change."""


def _task_dict(task: TaskLike, *, own_reader: bool = False) -> dict[str, Any]:
    """The task as ``Task.to_yaml_config()`` gives it. A path is read by sky-kueue's own task
    reader when ``own_reader`` (a plan only: seconds faster, no SkyPilot import; what it does
    not read goes to SkyPilot's parser, with the same answer), else by SkyPilot's parser.

    Raises:
        TaskFileError: ``own_reader`` and the file cannot be read (missing, unreadable, too large).
    """
    if isinstance(task, Mapping):
        return dict(task)
    if isinstance(task, (str, os.PathLike)):
        if own_reader:
            read = own_task(os.fspath(task))
            if read is not None:
                return read
        import sky

        loaded: dict[str, Any] = sky.Task.from_yaml(os.fspath(task)).to_yaml_config()
        return loaded
    to_config = getattr(task, "to_yaml_config", None)
    if callable(to_config):
        as_dict: dict[str, Any] = to_config()
        return as_dict
    raise TypeError(f"expected a sky.Task, a task dict or a task YAML path, got {type(task).__name__}")


def _context(
    config: PluginConfig | str | os.PathLike[str] | None, snapshot: Sequence[str | os.PathLike[str]] | None
) -> tuple[PluginConfig, ClusterView | ContextViews]:
    plugin_config = config if isinstance(config, PluginConfig) else load_config(resolve_config_path(config))
    view: ClusterView | ContextViews
    if snapshot:
        paths = [str(Path(p)) for p in snapshot]
        view = view_from_documents(load_manifests(paths), "the snapshot " + ", ".join(paths))
    else:
        view = build_views(plugin_config)
    return plugin_config, view


def _plan(
    task: TaskLike,
    team: str | None,
    priority: str | None,
    config: PluginConfig | str | os.PathLike[str] | None,
    snapshot: Sequence[str | os.PathLike[str]] | None,
    *,
    own_reader: bool,
) -> tuple[PolicyResult, dict[str, Any]]:
    plugin_config, view = _context(config, snapshot)
    task_dict = _task_dict(task, own_reader=own_reader)
    identity = current_identity()
    result = plan_as_client(identity, task_dict, plugin_config, view, team=team, priority=priority)
    return result, {"identity": identity.to_dict(), **launch_mod.summary(result)}


def predict(
    task: TaskLike,
    *,
    team: str | None = None,
    priority: str | None = None,
    config: PluginConfig | str | os.PathLike[str] | None = None,
    snapshot: Sequence[str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """What the policy and Kueue will do with ``task``; nothing is submitted.

    Returns:
        The decision as a dict (``identity`` {user, user_id, workspace}, ``decision``,
        ``team``, ``local_queue``, ``priority_class``, ``prediction`` {outcome, reason,
        preempts, expected_wait_seconds}, ``burst``, ``task``); a rejection is
        ``decision: rejected`` with its ``message``.

    Raises:
        ConfigError: the plugin config is missing or invalid.
        ManifestError: a snapshot cannot be read.
        IdentityError: SkyPilot cannot tell who the current user is.
        TaskFileError: a task path cannot be read (missing, unreadable, too large).
    """
    _, described = _plan(task, team, priority, config, snapshot, own_reader=True)
    return described


def launch(
    task: TaskLike,
    *,
    team: str | None = None,
    priority: str | None = None,
    dry_run: bool = False,
    name: str | None = None,
    config: PluginConfig | str | os.PathLike[str] | None = None,
    snapshot: Sequence[str | os.PathLike[str]] | None = None,
) -> dict[str, Any]:
    """Plan ``task`` like :func:`predict`, then submit it with ``sky.jobs.launch``.

    Returns:
        The plan (as :func:`predict`), with ``submitted`` set to SkyPilot's result unless ``dry_run``.

    Raises:
        LaunchRejected: the policy rejected the task.
        ConfigError: the plugin config is missing or invalid.
        IdentityError: SkyPilot cannot tell who the current user is.
        TaskFileError: ``dry_run`` and a task path cannot be read.
        Exception: whatever SkyPilot raises (reading the task, submitting).
    """
    result, described = _plan(task, team, priority, config, snapshot, own_reader=dry_run)
    if isinstance(result.decision, Rejection):
        raise LaunchRejected(result.decision.message)
    if not dry_run:
        described["submitted"] = launch_mod.submit(result, name=name)
    return described

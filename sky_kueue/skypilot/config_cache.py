"""The plugin config and its cluster view, loaded once and reloaded when the file changes.

Why: SkyPilot calls the admin policy for every task of every request, and the policy server
answers many requests; parsing YAML and the Kueue manifests each time would be wasteful,
yet an admin who edits ``sky-kueue.yaml`` expects the change to apply without restarting
the API server. The file's (path, mtime, size) is checked on each call, which costs one
``stat``. A config that stops loading makes the policy fail closed (see
``engine.misconfigured``) until it is fixed.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path

from sky_kueue.skypilot.cluster_discovery import allows_all_contexts
from sky_kueue.skypilot.cluster_view import ManifestError, build_views
from sky_kueue.skypilot.config import ConfigError, PluginConfig, load_config, resolve_config_path
from sky_kueue.skypilot.engine import PolicyResult, evaluate, misconfigured
from sky_kueue.skypilot.history_source import HistorySource
from sky_kueue.skypilot.kubeconfig_contexts import kubeconfig_contexts
from sky_kueue.skypilot.request import PolicyRequest
from sky_kueue.skypilot.view import ContextViews


def with_kubeconfig_contexts(request: PolicyRequest, config: PluginConfig) -> PolicyRequest:
    """``request`` with the kubeconfig's contexts when SkyPilot's ``allowed_contexts`` is
    ``all`` and SkyPilot's own answer is not in the request (see ``kubeconfig_contexts``)."""
    if request.enabled_contexts is not None or request.kubeconfig_contexts is not None:
        return request
    if not allows_all_contexts(request.skypilot_config, request.workspace, os.environ):
        return request
    return dataclasses.replace(request, kubeconfig_contexts=kubeconfig_contexts(config.cluster.kubeconfig))


class ConfigCache:
    """A cached (config, view) pair for one config file.

    Args:
        path: the config file, or a function returning it (evaluated on each call, so an
            environment variable can name it); default: ``resolve_config_path``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | Callable[[], Path] | None = None,
        history: HistorySource | None = None,
    ) -> None:
        if path is None:
            self._path: Callable[[], Path] = resolve_config_path
        elif callable(path):
            self._path = path
        else:
            fixed = Path(os.fspath(path))
            self._path = lambda: fixed
        self._lock = threading.Lock()
        self._key: tuple[str, int, int] | None = None
        self._value: tuple[PluginConfig, ContextViews] | None = None
        self._history = history if history is not None else HistorySource()

    def get(self) -> tuple[PluginConfig, ContextViews]:
        """The current config and views (one per context), reloaded if the file changed.

        Raises:
            ConfigError: the config file is missing or invalid.
            ManifestError: a manifest named by the config cannot be read.
        """
        path = self._path()
        try:
            stat = path.stat()
        except OSError as exc:
            raise ConfigError(str(path), "", f"cannot read the config file: {exc.strerror or exc}") from None
        key = (str(path), stat.st_mtime_ns, stat.st_size)
        with self._lock:
            if self._key != key or self._value is None:
                config = load_config(path)
                self._value = (config, build_views(config))
                self._key = key
            return self._value

    def warm(self) -> None:
        """Load the config and read the run history once, before the first request (a server
        at start): that first read imports the Kubernetes client, about 0.25 s, which every
        request of a launch storm's first wave would otherwise wait for behind the history's lock.

        Raises:
            ConfigError: the config file is missing or invalid.
            ManifestError: a manifest named by the config cannot be read.
        """
        self.get()
        self._history.runs()

    def loaded_views(self) -> ContextViews | None:
        """The views of the config last loaded, without checking the file (None: never loaded)."""
        with self._lock:
            return None if self._value is None else self._value[1]

    def evaluate(self, request: PolicyRequest) -> PolicyResult:
        """Evaluate a request with the cached config, failing closed when it cannot be loaded."""
        try:
            config, view = self.get()
        except (ConfigError, ManifestError) as exc:
            return misconfigured(request, exc)
        if not request.past_runs:
            request = dataclasses.replace(request, past_runs=self._history.runs())
        return evaluate(with_kubeconfig_contexts(request, config), config, view)

"""Points SkyPilot's "is the network up" probe at a local address, for the e2e's SkyPilot processes.

Why: SkyPilot's managed-jobs controller checks the network before every job status check
(``sky/jobs/controller.py`` -> ``sky/backends/backend_utils.py``
``async_check_network_connection``, a HEAD to ``https://8.8.8.8`` and ``https://1.1.1.1``) and,
when neither answers, skips the check ("Network is not available. Retrying again in 15
seconds") - forever on a machine that reaches only package registries, so no job is ever seen
to finish. The e2e puts this directory on ``PYTHONPATH`` of the SkyPilot API server it starts
(its jobs controllers inherit it) with ``SKY_KUEUE_E2E_NETWORK_PROBE_URL`` set to the sandbox's
API server; this module replaces ``_TEST_IP_LIST`` with that URL when SkyPilot's module is
first imported. Nothing else is changed; the sandbox fakes "the internet answers".
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import types
from collections.abc import Sequence

PROBE_URL_ENV = "SKY_KUEUE_E2E_NETWORK_PROBE_URL"
TARGET_MODULE = "sky.backends.backend_utils"


class _PatchAfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``TARGET_MODULE`` with the other finders, then sets the probe list once it ran."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._spec: importlib.machinery.ModuleSpec | None = None

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TARGET_MODULE or self._spec is not None:
            return None
        for finder in sys.meta_path:
            if finder is self:
                continue
            spec = finder.find_spec(fullname, path, target) if hasattr(finder, "find_spec") else None
            if spec is not None and spec.loader is not None:
                self._spec = spec
                return importlib.machinery.ModuleSpec(fullname, self, origin=spec.origin, is_package=False)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        assert self._spec is not None and self._spec.loader is not None
        return self._spec.loader.create_module(self._spec)

    def exec_module(self, module: types.ModuleType) -> None:
        assert self._spec is not None and self._spec.loader is not None
        module.__spec__ = self._spec
        module.__file__ = self._spec.origin
        self._spec.loader.exec_module(module)
        module._TEST_IP_LIST = [self.url]  # type: ignore[attr-defined]


_url = os.environ.get(PROBE_URL_ENV)
if _url:
    sys.meta_path.insert(0, _PatchAfterImport(_url))

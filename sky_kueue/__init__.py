"""sky-kueue: SkyPilot on Kueue-managed Kubernetes clusters.

Subpackages, one per concept (dependencies point inward only):

* ``kueue``      - pure model of Kueue objects and of its scheduling cycle (no I/O).
* ``mirror``     - watch-based local mirror of a cluster's Kueue objects (kubernetes client).
* ``controller`` - preemption detection and resubmission with priority aging.
* ``skypilot``   - SkyPilot admin policy, policy server and plugin configuration.
* ``sim``        - trace-driven discrete-event simulation over the model.
* ``sandbox``    - a local API server with Kueue behaviour, for tests and demos.
* ``cli``        - the ``sky-kueue`` command.

The SDK is re-exported lazily (importing ``sky_kueue`` stays cheap): :func:`predict`,
:func:`launch`, and the hook decorators :func:`on_preempted`, :func:`on_resubmitted`,
:func:`on_burst`.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "predict": "sky_kueue.api",
    "launch": "sky_kueue.api",
    "LaunchRejected": "sky_kueue.api",
    "on_preempted": "sky_kueue.hooks",
    "on_resubmitted": "sky_kueue.hooks",
    "on_burst": "sky_kueue.hooks",
}

__all__ = ["LaunchRejected", "__version__", "launch", "on_burst", "on_preempted", "on_resubmitted", "predict"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sky_kueue' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)

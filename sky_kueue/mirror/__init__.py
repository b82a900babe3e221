"""The queue mirror: a watch-based, indexed local copy of a cluster's Kueue state.

Reflectors (list, then watch; resume on dropped streams, relist on 410, jittered backoff)
built on the official ``kubernetes`` client keep a :class:`MirrorStore` equal to the server,
derive typed Workload transitions (created, quota reserved, admitted, evicted, preempted with
the preemptor resolved, requeued, finished, deleted) and deliver them in order to
subscribers. The store exports documents and the model's ``ClusterState`` for predictions on
live state. Modules, one concept each:

* :mod:`.connection` (kubeconfig → client, retry policy, timeouts), :mod:`.discovery`
  (Kueue version, visibility API), :mod:`.errors` (one-line failures), :mod:`.backoff`;
* :mod:`.source` (list pages, raw watch), :mod:`.reflector`, :mod:`.store`,
  :mod:`.transitions`, :mod:`.subscriptions`, :mod:`.identity` (SkyPilot jobs from pods);
* :mod:`.mirror` (the facade), :mod:`.export` (snapshots, ``ClusterState``),
  :mod:`.visibility`, :mod:`.view` (the ``sky-kueue queue`` picture).

Production code: nothing here imports the sandbox.

Nothing here imports ``sky_kueue.skypilot`` (which imports the mirror). The names below are
loaded on first use (PEP 562), so light modules (``clock``, ``view``) can be imported
without pulling in the ``kubernetes`` client: ``sky-kueue predict --snapshot`` must stay fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sky_kueue.mirror.errors import (
        ForbiddenError,
        KubeconfigError,
        KueueNotInstalledError,
        MirrorError,
        SyncTimeoutError,
        UnknownContextError,
        UnreachableError,
    )
    from sky_kueue.mirror.identity import SkyPilotIdentity
    from sky_kueue.mirror.mirror import Mirror
    from sky_kueue.mirror.store import MirrorStore
    from sky_kueue.mirror.subscriptions import Subscription, SubscriptionClosed
    from sky_kueue.mirror.transitions import ChangeSource, Preemptor, Transition, TransitionKind

#: Public name -> the submodule defining it.
_EXPORTS: dict[str, str] = {
    "ChangeSource": "transitions",
    "ForbiddenError": "errors",
    "KubeconfigError": "errors",
    "KueueNotInstalledError": "errors",
    "Mirror": "mirror",
    "MirrorError": "errors",
    "MirrorStore": "store",
    "Preemptor": "transitions",
    "SkyPilotIdentity": "identity",
    "Subscription": "subscriptions",
    "SubscriptionClosed": "subscriptions",
    "SyncTimeoutError": "errors",
    "Transition": "transitions",
    "TransitionKind": "transitions",
    "UnknownContextError": "errors",
    "UnreachableError": "errors",
}

__all__ = [
    "ChangeSource",
    "ForbiddenError",
    "KubeconfigError",
    "KueueNotInstalledError",
    "Mirror",
    "MirrorError",
    "MirrorStore",
    "Preemptor",
    "SkyPilotIdentity",
    "Subscription",
    "SubscriptionClosed",
    "SyncTimeoutError",
    "Transition",
    "TransitionKind",
    "UnknownContextError",
    "UnreachableError",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)

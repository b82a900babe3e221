"""Every context of the kubeconfig kubectl would use, read with the official client (edge).

Why: with SkyPilot's ``kubernetes.allowed_contexts: all`` every context is a candidate, and
where SkyPilot cannot be asked which ones it enables (a client, the RESTful policy server)
the policy reads them itself, from the same kubeconfig: ``cluster.kubeconfig`` or, as
kubectl, ``$KUBECONFIG`` (files joined by ``os.pathsep``, merged: the official client's
``KubeConfigMerger``, like client-go's ``clientcmd`` loader) else ``~/.kube/config``. In a
pod with no kubeconfig, the in-cluster credentials reach one cluster and name no context.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

from sky_kueue.skypilot.cluster_discovery import find_kubeconfig

logger = logging.getLogger(__name__)


def kubeconfig_contexts(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The context names of the kubeconfig kubectl would use (empty when there is none or it
    cannot be read: SkyPilot then reports the broken kubeconfig itself)."""
    found = find_kubeconfig(explicit, os.environ if environ is None else environ, os.path.exists)
    if found is None or found.path is None:
        return ()
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException

    try:
        contexts, _current = kube_config.list_kube_config_contexts(config_file=found.path)
    except (ConfigException, OSError, ValueError, TypeError) as exc:
        logger.debug("sky-kueue: cannot list the contexts of %s (%s)", found.path, exc)
        return ()
    return tuple(str(c["name"]) for c in contexts or () if isinstance(c, dict) and c.get("name"))

"""A kubeconfig for the local API server.

Why a file: ``kubectl``, the ``kubernetes`` client's ``load_kube_config`` and SkyPilot all find a
cluster through a kubeconfig; writing one that points at the sandbox lets the same commands
and code paths run against it as against a real cluster. The server speaks plain HTTP on
127.0.0.1 and does no authentication, so the user entry is empty.
"""

from __future__ import annotations

import os
import pathlib
from typing import Any

import yaml

#: Name of the cluster, user and context written.
DEFAULT_CONTEXT = "sky-kueue-sandbox"
#: Namespace the context selects.
DEFAULT_NAMESPACE = "default"


def document(server_url: str, *, context: str = DEFAULT_CONTEXT, namespace: str = DEFAULT_NAMESPACE) -> dict[str, Any]:
    """The kubeconfig as a dict."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": context, "user": {}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context, "namespace": namespace}}],
        "current-context": context,
        "preferences": {},
    }


def write(
    path: str | pathlib.Path,
    server_url: str,
    *,
    context: str = DEFAULT_CONTEXT,
    namespace: str = DEFAULT_NAMESPACE,
) -> pathlib.Path:
    """Writes the kubeconfig (owner-only permissions, like kubectl's) and returns its path.

    Raises:
        OSError: if the file cannot be written.
    """
    target = pathlib.Path(path).expanduser()
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(document(server_url, context=context, namespace=namespace), sort_keys=False)
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as handle:
        handle.write(text)
    return target

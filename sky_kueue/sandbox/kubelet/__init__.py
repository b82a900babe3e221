"""The sandbox's local kubelet: ``pods/exec`` and ``pods/log`` served from local processes.

* :mod:`.websocket` - the server side of RFC 6455, as Kubernetes' streaming uses it;
* :mod:`.exec_session` - the ``v4``/``v5.channel.k8s.io`` exec protocol over it;
* :mod:`.kubelet` - :class:`LocalKubelet`, pod directories and environments, and
  :func:`attach`, which installs it on an API server.
"""

from __future__ import annotations

import pathlib
from typing import Any

from sky_kueue.sandbox.apiserver import ApiServer
from sky_kueue.sandbox.kubelet.kubelet import LocalKubelet, match

__all__ = ["LocalKubelet", "attach"]


def attach(server: ApiServer, root: pathlib.Path) -> LocalKubelet:
    """Serve the streaming subresources of ``server``'s pods from ``root`` (one dir per pod)."""
    kubelet = LocalKubelet(server.store, root)

    def handle(connection: Any, method: str) -> bool:
        target = match(connection.path)
        if target is None:
            return False
        kubelet.serve(connection, method, target)
        return True

    server.stream_handler = handle
    return kubelet

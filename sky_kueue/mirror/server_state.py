"""Whether the API server's state went back: an older resourceVersion, or another cluster.

Why the mirror must notice: a consumer that saved a position (the controller's Workload
cursor) trusts that every change up to it was delivered. After an etcd snapshot restore the
server holds an older state and reuses the revisions after the snapshot for new writes; a
cluster rebuilt from scratch (or a restarted sandbox) starts its revisions over. Either way
a resumed watch, or a list trusted as "everything up to my position", can skip changes the
consumer never saw. Two signals, both cheap:

* **A list older than a version already seen.** A list without ``resourceVersion`` is a
  consistent read, never older than what the same server delivered before (Kubernetes API
  concepts, "Resource versions" and "Semantics for get and list"), so an older one means
  the state went back. resourceVersions are opaque strings in Kubernetes; only where both
  parse as integers (etcd revisions, as on every etcd-backed API server and the sandbox)
  are they compared, and otherwise nothing is concluded.
* **Another cluster identity**: the UID of the ``kube-system`` namespace, which every
  cluster creates once and which survives restarts and etcd restores (the convention
  multi-cluster tools use as a cluster ID). Read with one GET before each list and before a
  watch resumed after a failure or an early end (:mod:`.cluster_identity`); a watch that ran
  its full ``timeoutSeconds`` was served by one server all along, so a healthy mirror makes
  no extra request. A server that refuses the read (403, 404) disables the check.

What no signal can catch: a restore that keeps the identity and has already passed the
saved revision when the consumer reconnects. ``etcdutl snapshot restore --bump-revision
--mark-compacted`` avoids it: revisions jump past every old one and older ones are
compacted, so a resumed watch gets 410 and relists (docs/operations.md).

Pure: no I/O (the identity is read by :mod:`.cluster_identity`).
"""

from __future__ import annotations

import enum


class ResetReason(str, enum.Enum):
    """Why the mirror decided the server's state went back (the label of the metric)."""

    RESOURCE_VERSION = "resource-version"
    CLUSTER = "cluster"


def went_back(previous: str | None, listed: str) -> bool:
    """Whether a list at ``listed`` is older than ``previous``, a version already seen.

    resourceVersions are opaque in Kubernetes: they are compared only when both parse as
    integers (etcd revisions); otherwise the answer is False (nothing can be concluded).
    """
    before, now = as_revision(previous), as_revision(listed)
    return before is not None and now is not None and now < before


def as_revision(version: str | None) -> int | None:
    """A resourceVersion as an etcd revision, or None when it is not one."""
    try:
        return int(version) if version else None
    except ValueError:
        return None

"""What the policy may ask about a cluster: the :class:`ClusterView` protocol.

Why a protocol: the policy validates a task against whatever knowledge of the cluster is at
hand - the live cluster through the queue mirror, a snapshot of Kueue manifests, or only
the plugin config - and must behave the same way with each, just with fewer checks when
less is known. Every answer is therefore three-valued where it can be: a fact, its
negation, or ``None`` for "this view does not know", and the policy skips a check whose
inputs are unknown. Implementations: ``config_view.ConfigClusterView`` (plugin config only)
and ``cluster_view.ModelClusterView`` (the Kueue model over manifests or a mirror).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from sky_kueue.skypilot.demand import WorkloadDemand
from sky_kueue.skypilot.verdict import AdmissionVerdict


@dataclass(frozen=True)
class QueueFacts:
    """A LocalQueue and what is known about the ClusterQueue behind it.

    Attributes:
        namespace: the LocalQueue's namespace.
        name: the LocalQueue's name.
        cluster_queue: the ClusterQueue it points at (None = unknown).
        cluster_queue_exists: whether that ClusterQueue exists (None = unknown).
        cluster_queue_active: whether it is active (not stopped, flavors present).
        selects_namespace: whether its namespaceSelector matches ``namespace``.
    """

    namespace: str
    name: str
    cluster_queue: str | None = None
    cluster_queue_exists: bool | None = None
    cluster_queue_active: bool | None = None
    selects_namespace: bool | None = None


@dataclass(frozen=True)
class Shortfall:
    """A resource whose total request exceeds what the ClusterQueue could ever hold.

    Attributes:
        resource: resource name.
        requested: total request over all pods (base units).
        potential: the most the ClusterQueue can hold with all possible borrowing.
    """

    resource: str
    requested: int
    potential: int


@dataclass(frozen=True)
class CapacityFacts:
    """Whether a demand is covered by, and fits into, a ClusterQueue's potential capacity.

    Attributes:
        known: False when the view cannot tell (all other fields are then empty).
        uncovered: requested resources the ClusterQueue does not cover at all.
        exceeding: resources requested beyond the ClusterQueue's potential capacity.
    """

    known: bool
    uncovered: tuple[str, ...] = ()
    exceeding: tuple[Shortfall, ...] = ()

    @property
    def fits(self) -> bool | None:
        """True/False when known, None otherwise."""
        if not self.known:
            return None
        return not self.uncovered and not self.exceeding


#: Capacity answer of a view that knows nothing about quotas.
UNKNOWN_CAPACITY = CapacityFacts(known=False)


class ClusterView(Protocol):
    """Read-only questions the policy asks about the Kueue objects of one cluster."""

    @property
    def source(self) -> str:
        """Where the answers come from, for messages (e.g. ``"the plugin config"``)."""
        ...

    def local_queue(self, namespace: str, name: str) -> QueueFacts | None:
        """The LocalQueue ``namespace/name``, or None if it does not exist."""
        ...

    def priority_classes(self) -> Mapping[str, int] | None:
        """All WorkloadPriorityClasses (name -> value), or None if unknown."""
        ...

    def capacity(self, queue: QueueFacts, demand: WorkloadDemand) -> CapacityFacts:
        """Coverage and potential-capacity check of ``demand`` in ``queue``'s ClusterQueue."""
        ...

    def predict(self, queue: QueueFacts, demand: WorkloadDemand, priority_class: str) -> AdmissionVerdict:
        """Predicted admission of ``demand`` submitted now to ``queue`` at ``priority_class``."""
        ...


class ContextHealth(enum.Enum):
    """How well a context's view reflects its cluster right now."""

    #: Answers come from the cluster's current state (or from an offline description that
    #: stands in for it: manifests, a snapshot, the plugin config).
    READY = "ready"
    #: The cluster answers but its mirror has not listed everything yet: no prediction.
    NOT_SYNCED = "not-synced"
    #: The cluster cannot be reached (or its kubeconfig context is unusable).
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class ContextView:
    """The view of one kubeconfig context and how current it is.

    Attributes:
        view: the answers (an offline fallback when the cluster is not usable).
        health: whether ``view`` reflects the cluster now.
        detail: why, when not ``READY`` (one phrase, for notes).
    """

    view: ClusterView
    health: ContextHealth = ContextHealth.READY
    detail: str = ""


@runtime_checkable
class ContextViews(Protocol):
    """A view per kubeconfig context: what placement over several clusters asks."""

    def lookup(self, context: str | None) -> ContextView:
        """The view of ``context`` (None: the default context)."""
        ...

    def warm(self, contexts: Iterable[str | None]) -> None:
        """Start connecting to ``contexts`` at once, so their first syncs overlap."""
        ...


@dataclass(frozen=True)
class SharedView:
    """One view that answers for every context (the plugin config, manifests, a snapshot)."""

    view: ClusterView

    def lookup(self, context: str | None) -> ContextView:
        return ContextView(self.view)

    def warm(self, contexts: Iterable[str | None]) -> None:
        return None


def as_context_views(view: ClusterView | ContextViews) -> ContextViews:
    """``view`` itself when it already answers per context, else one view for all contexts."""
    if isinstance(view, ContextViews):
        return view
    return SharedView(view)

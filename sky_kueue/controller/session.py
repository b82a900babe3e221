"""One leadership term: a mirror resumed from the durable cursor, a work queue, one worker.

Why a fresh mirror per term rather than one for the process: a replica that lost the Lease
may have missed nothing, but the next leader must replay from the *durable* cursor, which
is what a new term does in every case (after a crash, a restart or a lost Lease): list,
then resume the Workload watch from the cursor, so changes the last term never handled
(deletions included) are replayed (:mod:`sky_kueue.mirror.reflector`, rule 5).

The mirror holds only what the controller reads: Workloads, the pods of SkyPilot groups
(job identity, ``TerminationTarget``, the relaunch race) and WorkloadPriorityClasses (a
preemptor's class). Pods are watched in the team namespaces only when the controller is given
them (``pod_namespaces``, from the plugin config's teams): SkyPilot creates its pods there,
and the controller's RBAC then grants reading pods (whose specs hold environment values) in
those namespaces and nowhere else. Its sink puts every transition on the :class:`WorkQueue` in the
mirror's order, under the mirror's lock; the worker thread takes them one at a time to the
:class:`~sky_kueue.controller.reconciler.Reconciler`. The worker starts once every kind is
listed, so the first Workload it reconciles already has its pods (its job identity).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from kubernetes import client

from sky_kueue.controller.cursor import WorkloadCursor
from sky_kueue.controller.engine import AgingEngine
from sky_kueue.controller.reconciler import Reconciler
from sky_kueue.controller.work_queue import WorkCause, WorkItem, WorkQueue
from sky_kueue.mirror import kinds
from sky_kueue.mirror.backoff import RetryPolicy
from sky_kueue.mirror.connection import Connection
from sky_kueue.mirror.discovery import KueueApi
from sky_kueue.mirror.mirror import Mirror
from sky_kueue.mirror.reflector import ReflectorSettings
from sky_kueue.mirror.store import MirrorStore
from sky_kueue.mirror.transitions import WORKLOAD_KINDS, TransitionKind

log = logging.getLogger(__name__)

#: What the controller's mirror lists and watches. LocalQueues always: a Workload names only
#: its LocalQueue (``spec.queueName``) and an evicted or pending one has no admission, so its
#: ClusterQueue (the ``cluster_queue`` label of the metrics, as Kueue labels its own) comes from
#: the LocalQueue's ``spec.clusterQueue``; one small object per team namespace.
CONTROLLER_KINDS: tuple[kinds.Kind, ...] = (
    kinds.LOCAL_QUEUES,
    kinds.PRIORITY_CLASSES,
    kinds.WORKLOADS,
    kinds.PODS,
)
#: With safe relaunch or a burst gate on, the other queue kinds too: the predictor judges a held
#: relaunch, or a relaunch's on-prem wait, on the mirror's copy of the cluster
#: (:mod:`sky_kueue.controller.safety_probe`).
HOLD_KINDS: tuple[kinds.Kind, ...] = (
    kinds.NAMESPACES,
    kinds.RESOURCE_FLAVORS,
    kinds.COHORTS,
    kinds.CLUSTER_QUEUES,
)


def session_kinds(holds: bool) -> tuple[kinds.Kind, ...]:
    """The kinds a session mirrors (``holds``: the predictor runs on the mirror, for some team's
    safe relaunch or burst gate)."""
    return (*HOLD_KINDS, *CONTROLLER_KINDS) if holds else CONTROLLER_KINDS


#: The transitions the work queue takes: every Workload change, and the stream markers.
WANTED_TRANSITIONS = WORKLOAD_KINDS | {
    TransitionKind.SYNCED,
    TransitionKind.CAUGHT_UP,
    TransitionKind.BOOKMARK,
    TransitionKind.POD_CHANGED,
    TransitionKind.POD_DELETED,
}
#: A controller resumes quickly after a cut watch (the mirror's default waits longer).
CONTROLLER_RETRY_POLICY = RetryPolicy(initial_delay_seconds=0.1, max_delay_seconds=5.0)
#: How long a new term waits for the first lists before it gives up (and retries).
SESSION_SYNC_TIMEOUT_SECONDS = 30.0
#: How long stopping a session waits for its worker.
SESSION_JOIN_SECONDS = 10.0

#: Builds the term's engine; its argument is the mirror's store (to resolve preemptors).
EngineFactory = Callable[[MirrorStore], AgingEngine]
#: Builds the term's reconciler from its cache, engine and cursor.
ReconcilerFactory = Callable[[MirrorStore, AgingEngine, WorkloadCursor], Reconciler]


class Session:
    """Mirror, work queue and worker of one leadership term."""

    def __init__(
        self,
        api_client: client.ApiClient,
        *,
        workload_version: str,
        namespace: str | None,
        cursor: WorkloadCursor,
        new_engine: EngineFactory,
        new_reconciler: ReconcilerFactory,
        on_handled: Callable[[], None],
        kind_list: tuple[kinds.Kind, ...] = CONTROLLER_KINDS,
        pod_namespaces: tuple[str, ...] | None = None,
    ) -> None:
        """Args:
        namespace: watch every kind in this namespace only (None: all).
        pod_namespaces: watch pods in these namespaces only, one watch each (None: all).
        """
        self.cursor = cursor
        self.queue = WorkQueue()
        self.kinds = kind_list
        self.mirror = Mirror(
            Connection(api_client, str(api_client.configuration.host)),
            KueueApi(
                version=workload_version,
                served_plurals=frozenset(kind.plural for kind in kind_list if kind.is_kueue),
            ),
            kind_list=kind_list,
            settings=ReflectorSettings(policy=CONTROLLER_RETRY_POLICY),
            resume={kinds.KindName.WORKLOAD: cursor.version} if cursor.version else None,
            resume_cluster=cursor.cluster,
            namespace=namespace,
            per_namespace=None if pod_namespaces is None else {kinds.KindName.POD: pod_namespaces},
            owns_connection=False,
        )
        self.mirror.subscribe(WANTED_TRANSITIONS, sink=self.queue.put_transition)
        self._new_engine = new_engine
        self._new_reconciler = new_reconciler
        self._on_handled = on_handled
        self._worker: threading.Thread | None = None
        self.engine: AgingEngine | None = None
        self.error: BaseException | None = None

    def start(self) -> None:
        """Lists every kind (resuming the Workload watch from the cursor), then starts the worker.

        Raises:
            MirrorError: the lists failed or did not finish in time.
        """
        self.mirror.start()
        self.mirror.wait_synced(SESSION_SYNC_TIMEOUT_SECONDS)
        self.engine = self._new_engine(self.mirror.store)
        reconciler = self._new_reconciler(self.mirror.store, self.engine, self.cursor)
        log.info(
            "session started",
            extra={
                "fields": {
                    "workloads": self.mirror.store.count(kinds.KindName.WORKLOAD),
                    "pods": self.mirror.store.count(kinds.KindName.POD),
                    "listed_version": self.mirror.delivered_version(kinds.KindName.WORKLOAD),
                    "replay_from": self.cursor.version,
                    "mechanism": self.engine.mechanism.value,
                }
            },
        )
        self._worker = threading.Thread(target=self._work, args=(reconciler,), name="sky-kueue-worker", daemon=True)
        self._worker.start()

    def _work(self, reconciler: Reconciler) -> None:
        while (item := self.queue.get()) is not None:
            try:
                reconciler.handle(item)
            except BaseException as err:  # a dying worker must end the session, not hang it
                self.error = err
                log.exception("controller session failed: %s", err)
                self.queue.close()
                return
            finally:
                self.queue.done()
                self._on_handled()

    @property
    def failed(self) -> bool:
        return self.error is not None

    def idle(self) -> bool:
        return self._worker is not None and self.queue.idle

    def retry_later(self) -> None:
        """Queues a retry of undecided steps, unless work is pending (which retries anyway)."""
        if self.queue.idle:
            self.queue.put(WorkItem(WorkCause.RETRY))

    def reage_later(self) -> None:
        """Queues a pass over every waiting Workload (after the items already queued)."""
        if not self.queue.holds(WorkCause.REAGE):
            self.queue.put(WorkItem(WorkCause.REAGE))

    def stop(self) -> None:
        """Stops the mirror and the worker; saves the cursor unless the term failed."""
        self.mirror.stop()
        self.queue.close()
        if self._worker is not None and self._worker is not threading.current_thread():
            self._worker.join(SESSION_JOIN_SECONDS)
        if self.error is None:
            self.cursor.save(force=True)

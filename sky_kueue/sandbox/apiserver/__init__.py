"""A local Kubernetes API server for tests and the sandbox.

Why: no Kubernetes cluster, container runtime or kube-apiserver binary is available where
sky-kueue is developed and demonstrated, yet the mirror, controller, policy and demo must be
exercised through the official ``kubernetes`` client and ``kubectl`` over HTTP, with faults.
This package is a purpose-built server on the standard library whose storage core has the
apiserver's semantics (resourceVersion, watch with bookmarks and 410 Gone, label and field
selectors, the three patch types, status subresources; see "Known gaps" below).

Layout, one concept per module:

* :mod:`.store` - versioned object store: resourceVersions, optimistic concurrency, status
  isolation, finalizers, garbage collection, namespaces, watches, hooks (no HTTP).
* :mod:`.events`, :mod:`.watch` - the bounded event log (410 after compaction) and watchers.
* :mod:`.resources`, :mod:`.conversion` - the served resources; Kueue v1beta1/v1beta2 from
  one store.
* :mod:`.selectors`, :mod:`.patch`, :mod:`.objects` - selectors, patch algorithms, metadata
  rules.
* :mod:`.routing`, :mod:`.discovery`, :mod:`.tables`, :mod:`.server` - the HTTP front.
* :mod:`.faults`, :mod:`.requestlog` - fault injection and the request log.
* :mod:`.kubeconfig` - a kubeconfig pointing at the server.

Entry point: :class:`ApiServer` (``with ApiServer() as server: ...``); in-process code uses
``server.store`` (:class:`ObjectStore`).

Known gaps (do not rely on them; they differ from a real cluster):

* no server-side apply (``application/apply-patch+yaml`` gets 415), so no ``kubectl apply
  --server-side``; client-side ``kubectl apply`` works, but strategic merge
  (what it sends for built-in kinds) is approximated as a JSON merge patch: lists are
  replaced, never merged by key;
* protobuf request bodies only for the kinds kubectl's typed ``create`` commands send
  (:mod:`.protobuf_body`); responses are always JSON;
* OpenAPI v3 (:mod:`.openapi`) without the Kubernetes type schemas: every kind keeps unknown
  fields, so ``kubectl apply`` works (it leaves validation to the server, which accepts
  ``fieldValidation=Strict`` and checks nothing), and ``kubectl explain`` shows no fields;
* no admission chain or defaulting beyond what the store does itself (uid, timestamps,
  generation, initial status phase of pods and namespaces); no schema validation;
* no authentication or authorization; plain HTTP on 127.0.0.1;
* no kubelet or controllers: a delete without finalizers removes the object at once whatever
  its grace period; foreground deletion behaves like background; garbage collection through
  ownerReferences runs synchronously inside the owner's deletion;
* field selectors accept any dotted path on any resource (the real server a per-kind set);
* no aggregated discovery (clients fall back to the legacy documents), no
  ``/api/v1/watch/...`` legacy paths, no ``pods/log``, ``pods/exec`` or ``pods/eviction``.
"""

from __future__ import annotations

from sky_kueue.sandbox.apiserver.clock import Clock, ManualClock, SystemClock
from sky_kueue.sandbox.apiserver.errors import ApiError
from sky_kueue.sandbox.apiserver.events import EventType, StoreEvent
from sky_kueue.sandbox.apiserver.faults import Fault, FaultKind
from sky_kueue.sandbox.apiserver.patch import PatchType
from sky_kueue.sandbox.apiserver.requestlog import RequestRecord
from sky_kueue.sandbox.apiserver.resources import GroupResource, ResourceType
from sky_kueue.sandbox.apiserver.server import ApiServer
from sky_kueue.sandbox.apiserver.store import (
    AdmissionRequest,
    ListResult,
    ObjectStore,
    Operation,
    Preconditions,
    Propagation,
)
from sky_kueue.sandbox.apiserver.watch import WatchClosed, Watcher, WatchEvent

__all__ = [
    "AdmissionRequest",
    "ApiError",
    "ApiServer",
    "Clock",
    "EventType",
    "Fault",
    "FaultKind",
    "GroupResource",
    "ListResult",
    "ManualClock",
    "ObjectStore",
    "Operation",
    "PatchType",
    "Preconditions",
    "Propagation",
    "RequestRecord",
    "ResourceType",
    "StoreEvent",
    "SystemClock",
    "WatchClosed",
    "WatchEvent",
    "Watcher",
]

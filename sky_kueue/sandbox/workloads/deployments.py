"""Deployments and ReplicaSets for the sandbox: what kube-controller-manager's deployment and
replicaset controllers do, reduced to what running a controller Deployment needs.

Why: ``kubectl apply -k configs/controller`` creates a Deployment; on a real cluster the
deployment controller turns it into a ReplicaSet named ``<deployment>-<pod-template-hash>``,
and the replicaset controller keeps that many pods, recreating one that is deleted. The
sandbox's Kueue emulation then binds each pod (it starts pods no queue manages), and the
kubelet (containers, when enabled) runs them.

What is modelled, after ``pkg/controller/deployment`` and ``pkg/controller/replicaset`` in
kubernetes/kubernetes:

* the ReplicaSet of the current template carries the ``pod-template-hash`` label (in its
  labels, selector and pod template) and a controller ``ownerReference`` to the Deployment;
  its pods carry one to the ReplicaSet (so deleting the Deployment collects both, through the
  store's garbage collection);
* a changed template gets a new ReplicaSet; older ones are scaled to zero at once (the
  Deployment's rolling-update pacing, maxSurge/maxUnavailable, is not modelled);
* a ReplicaSet counts its pods that are neither terminating nor finished: missing ones are
  created (``generateName: <replicaset>-``), extra ones deleted, pending ones first;
* status: ``replicas``, ``readyReplicas``, ``availableReplicas`` (Ready, no
  ``minReadySeconds``), ``updatedReplicas``, ``observedGeneration`` and the Deployment's
  ``Available``/``Progressing`` conditions.

Not modelled: ``paused``, ``revisionHistoryLimit`` pruning, rollbacks, ``minReadySeconds``,
``progressDeadlineSeconds``, adoption of orphans by selector (only owned objects count).

The reconciler wakes on every committed change of a Deployment, ReplicaSet or pod (a commit
hook that only sets a flag: hooks run under the store's lock) and also every
:data:`RESYNC_INTERVAL_SECONDS`, and reconciles everything (a sandbox has a handful of these).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

from sky_kueue.sandbox.apiserver.clock import format_timestamp
from sky_kueue.sandbox.apiserver.errors import ApiError
from sky_kueue.sandbox.apiserver.events import StoreEvent
from sky_kueue.sandbox.apiserver.store import ObjectStore

LOG = logging.getLogger(__name__)

Obj = dict[str, Any]

DEPLOYMENTS = "deployments.apps"
REPLICASETS = "replicasets.apps"
PODS = "pods"
#: The label (on ReplicaSets, their selectors and their pods) that tells template revisions apart.
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
#: The Deployment revision a ReplicaSet belongs to (the deployment controller's annotation).
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
#: How often everything is reconciled even without a change (a missed wake-up costs at most this).
RESYNC_INTERVAL_SECONDS = 1.0
#: The characters Kubernetes' ``rand.SafeEncodeString`` uses (no vowels, no look-alikes).
_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_HASH_LENGTH = 10
_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def pod_template_hash(template: Mapping[str, Any]) -> str:
    """A short, stable name for a pod template (ReplicaSet names and the hash label).

    Kubernetes hashes the template with FNV-32a and encodes it with ``SafeEncodeString``
    (``pkg/controller/controller_utils.go``, ``ComputeHash``); here SHA-256 over the template's
    canonical JSON, in the same alphabet: equal templates give equal hashes, which is all that
    matters for picking the current ReplicaSet.
    """
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, separators=(",", ":")).encode()).digest()
    number = int.from_bytes(digest[:8], "big")
    chars = []
    for _ in range(_HASH_LENGTH):
        number, index = divmod(number, len(_SAFE_ALPHABET))
        chars.append(_SAFE_ALPHABET[index])
    return "".join(chars)


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _owner_reference(owner: Mapping[str, Any]) -> Obj:
    meta = _meta(owner)
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controlled_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """``obj`` has a controller ownerReference to ``owner`` (by uid)."""
    uid = _meta(owner).get("uid")
    return any(ref.get("controller") and ref.get("uid") == uid for ref in _meta(obj).get("ownerReferences") or [])


def _desired_replicas(obj: Mapping[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 1


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's ``Ready`` condition is True (what a ReplicaSet counts as ready and available)."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])


def _active(pod: Mapping[str, Any]) -> bool:
    """Counts towards a ReplicaSet's replicas: not being deleted and not finished."""
    return not _meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in _TERMINAL_PHASES


class DeploymentController:
    """Reconciles Deployments into ReplicaSets and ReplicaSets into pods on one object store."""

    def __init__(self, store: ObjectStore, *, resync_interval_seconds: float = RESYNC_INTERVAL_SECONDS) -> None:
        self.store = store
        self._resync_interval_seconds = resync_interval_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unhooks: list[Callable[[], None]] = []

    # --- lifecycle --------------------------------------------------------------------

    def start(self) -> DeploymentController:
        """Follow changes and reconcile in a background thread; returns self."""
        if self._thread is not None:
            return self
        self._stop.clear()
        self._unhooks = [self.store.add_commit_hook(self._on_change, ref) for ref in (DEPLOYMENTS, REPLICASETS, PODS)]
        self._thread = threading.Thread(target=self._loop, name="sandbox-deployment-controller", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        for unhook in self._unhooks:
            unhook()
        self._unhooks = []
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _on_change(self, event: StoreEvent) -> None:
        # Under the store's lock: only note that there is work.
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._resync_interval_seconds)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.reconcile()
            except ApiError as exc:
                # A conflict with another writer (a user scaling, a pod deleted meanwhile):
                # the next pass sees the new state.
                LOG.debug("deployment reconcile pass ended early: %s", exc)
                self._wake.set()

    # --- reconciliation -----------------------------------------------------------------

    def reconcile(self) -> None:
        """One pass over every Deployment, then every ReplicaSet (callable directly in tests)."""
        for deployment in self.store.list(DEPLOYMENTS).items:
            if not _meta(deployment).get("deletionTimestamp"):
                self._reconcile_deployment(deployment)
        for replicaset in self.store.list(REPLICASETS).items:
            if not _meta(replicaset).get("deletionTimestamp"):
                self._reconcile_replicaset(replicaset)
        for deployment in self.store.list(DEPLOYMENTS).items:
            self._write_deployment_status(deployment)

    def _owned_replicasets(self, deployment: Mapping[str, Any]) -> list[Obj]:
        namespace = _meta(deployment).get("namespace")
        return [rs for rs in self.store.list(REPLICASETS, namespace).items if controlled_by(rs, deployment)]

    def _reconcile_deployment(self, deployment: Obj) -> None:
        meta, spec = _meta(deployment), deployment.get("spec") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        template = spec.get("template") or {}
        template_hash = pod_template_hash(template)
        owned = self._owned_replicasets(deployment)
        current = next((rs for rs in owned if _rs_hash(rs) == template_hash), None)
        replicas = _desired_replicas(deployment)
        if current is None:
            revision = 1 + max((_revision(rs) for rs in owned), default=0)
            current = self.store.create(
                REPLICASETS, _new_replicaset(deployment, template_hash, replicas, revision), namespace
            )
            LOG.info("deployment %s/%s: created replicaset %s", namespace, name, _meta(current).get("name"))
        elif _desired_replicas(current) != replicas:
            self._scale(current, replicas)
        for old in owned:
            if old is not current and _rs_hash(old) != template_hash and _desired_replicas(old) != 0:
                self._scale(old, 0)

    def _scale(self, replicaset: Mapping[str, Any], replicas: int) -> None:
        meta = _meta(replicaset)

        def change(obj: Obj) -> None:
            obj.setdefault("spec", {})["replicas"] = replicas

        self.store.mutate(REPLICASETS, str(meta.get("name")), change, meta.get("namespace"))

    def _reconcile_replicaset(self, replicaset: Obj) -> None:
        meta = _meta(replicaset)
        namespace = str(meta.get("namespace", ""))
        pods = [p for p in self.store.list(PODS, namespace).items if controlled_by(p, replicaset)]
        active = [p for p in pods if _active(p)]
        wanted = _desired_replicas(replicaset)
        for _ in range(wanted - len(active)):
            created = self.store.create(PODS, _new_pod(replicaset), namespace)
            LOG.info("replicaset %s/%s: created pod %s", namespace, meta.get("name"), _meta(created).get("name"))
        if len(active) > wanted:
            # Pending before running, then the newest: what the replicaset controller deletes first.
            doomed = sorted(active, key=lambda p: (pod_ready(p), str(_meta(p).get("creationTimestamp", ""))))
            for pod in doomed[: len(active) - wanted]:
                try:
                    self.store.delete(PODS, str(_meta(pod).get("name")), namespace)
                except ApiError as exc:
                    LOG.debug("pod %s already gone: %s", _meta(pod).get("name"), exc)
        fresh = [p for p in self.store.list(PODS, namespace).items if controlled_by(p, replicaset) and _active(p)]
        ready = sum(1 for p in fresh if pod_ready(p))
        status = {
            "replicas": len(fresh),
            "fullyLabeledReplicas": len(fresh),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": meta.get("generation", 1),
        }
        self._write_status(REPLICASETS, replicaset, status)

    def _write_deployment_status(self, deployment: Obj) -> None:
        meta = _meta(deployment)
        if meta.get("deletionTimestamp"):
            return
        template_hash = pod_template_hash((deployment.get("spec") or {}).get("template") or {})
        owned = self._owned_replicasets(deployment)
        total = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in owned)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas", 0)) for rs in owned)
        updated = sum(int((rs.get("status") or {}).get("replicas", 0)) for rs in owned if _rs_hash(rs) == template_hash)
        wanted = _desired_replicas(deployment)
        available = ready >= wanted
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "unavailableReplicas": max(wanted - ready, 0),
            "conditions": [
                {
                    "type": "Available",
                    "status": "True" if available else "False",
                    "reason": "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                },
                {
                    "type": "Progressing",
                    "status": "True",
                    "reason": "NewReplicaSetAvailable" if updated == wanted == total else "ReplicaSetUpdated",
                },
            ],
        }
        self._write_status(DEPLOYMENTS, deployment, status)

    def _write_status(self, resource: str, obj: Mapping[str, Any], status: Obj) -> None:
        """Write ``status`` through the status subresource unless it already says that."""
        meta = _meta(obj)
        if _same_status(obj.get("status") or {}, status):
            return

        def change(current: Obj) -> None:
            previous = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []}
            new = copy.deepcopy(status)
            stamp = format_timestamp(self.store.clock.now())
            for condition in new.get("conditions") or []:
                old = previous.get(condition["type"]) or {}
                same = old.get("status") == condition["status"]
                condition["lastTransitionTime"] = old.get("lastTransitionTime", stamp) if same else stamp
                condition["lastUpdateTime"] = stamp
            current["status"] = new

        try:
            self.store.mutate(resource, str(meta.get("name")), change, meta.get("namespace"), subresource="status")
        except ApiError as exc:
            if exc.code != 404:  # deleted meanwhile: nothing to report
                raise


def _same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Equal apart from condition timestamps (which a rewrite would only bump)."""

    def strip(status: Mapping[str, Any]) -> Obj:
        result = dict(status)
        result["conditions"] = [
            {k: v for k, v in c.items() if k not in ("lastTransitionTime", "lastUpdateTime")}
            for c in status.get("conditions") or []
        ]
        return result

    return strip(old) == strip(new)


def _rs_hash(replicaset: Mapping[str, Any]) -> str:
    return str((_meta(replicaset).get("labels") or {}).get(POD_TEMPLATE_HASH_LABEL, ""))


def _revision(replicaset: Mapping[str, Any]) -> int:
    value = (_meta(replicaset).get("annotations") or {}).get(REVISION_ANNOTATION, "0")
    return int(value) if str(value).isdigit() else 0


def _new_replicaset(deployment: Mapping[str, Any], template_hash: str, replicas: int, revision: int) -> Obj:
    meta, spec = _meta(deployment), deployment.get("spec") or {}
    template = copy.deepcopy(spec.get("template") or {})
    template_meta = template.setdefault("metadata", {})
    template_meta.setdefault("labels", {})[POD_TEMPLATE_HASH_LABEL] = template_hash
    selector = copy.deepcopy(spec.get("selector") or {})
    selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH_LABEL] = template_hash
    labels = dict(template_meta.get("labels") or {})
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"{meta.get('name')}-{template_hash}",
            "namespace": meta.get("namespace"),
            "labels": labels,
            "annotations": {REVISION_ANNOTATION: str(revision)},
            "ownerReferences": [_owner_reference(deployment)],
        },
        "spec": {"replicas": replicas, "selector": selector, "template": template},
    }


def _new_pod(replicaset: Mapping[str, Any]) -> Obj:
    meta = _meta(replicaset)
    template = copy.deepcopy((replicaset.get("spec") or {}).get("template") or {})
    template_meta = template.get("metadata") or {}
    pod_meta: Obj = {
        "generateName": f"{meta.get('name')}-",
        "namespace": meta.get("namespace"),
        "labels": dict(template_meta.get("labels") or {}),
        "ownerReferences": [_owner_reference(replicaset)],
    }
    if template_meta.get("annotations"):
        pod_meta["annotations"] = dict(template_meta["annotations"])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template.get("spec") or {}}

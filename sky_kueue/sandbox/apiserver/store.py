"""The versioned object store: the API server's semantics, without HTTP.

Why this is the heart of the sandbox: every behaviour a Kubernetes client depends on lives in
storage, not in the transport — a global, monotonically increasing resourceVersion that starts
well above 0 (a list must never report "0", which means "any version" and makes a watch
replay everything); optimistic concurrency (409 on a stale resourceVersion); status isolation;
finalizers and deletionTimestamp; ordered, resumable watches with 410 after compaction;
cascading deletion through ownerReferences and through namespaces. The HTTP server is a thin
translation onto the methods here, and in-process code (the sandbox's Kueue emulation) uses
the very same methods, so it cannot take shortcuts the real apiserver would not allow.

Concurrency: one re-entrant lock guards all state. Every write assigns the next
resourceVersion, appends to the event log and hands the event to the interested watchers while
holding it, so each watcher receives a gap-free, ordered stream. Stored objects are never
modified after they are stored (every write builds a new dict), which lets readers that pass
``shared=True`` serialize them without copying or locking.

Extension points for in-process code:

* admission hooks (:meth:`ObjectStore.add_admission_hook`) see every create and update before
  it is committed, may modify the candidate object or reject it by raising
  :class:`~sky_kueue.sandbox.apiserver.errors.ApiError` (what Kueue's webhooks do);
* commit hooks (:meth:`ObjectStore.add_commit_hook`) see every committed event, in order,
  while the lock is held; they must be quick and must not write;
* watches (:meth:`ObjectStore.watch`) are the way to react to changes with writes of one's
  own (what a controller does).

Simplifications (no kubelet, no controllers): a delete without finalizers removes the object at
once whatever its grace period (a pod kept by finalizers records its grace period in
``deletionGracePeriodSeconds``, as the real apiserver does, for the Kueue emulation to run
out; its ``deletionTimestamp`` is the time of the delete, not the end of the grace period);
foreground deletion behaves like background; garbage collection of dependents runs
synchronously inside the owner's deletion.
"""

from __future__ import annotations

import base64
import binascii
import builtins
import collections
import copy
import dataclasses
import enum
import json
import random
import threading
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from sky_kueue.sandbox.apiserver import errors, objects
from sky_kueue.sandbox.apiserver.clock import Clock, SystemClock, format_timestamp
from sky_kueue.sandbox.apiserver.events import (
    WATCH_EVENT_LOG_CAPACITY_EVENTS,
    EventLog,
    EventType,
    StoreEvent,
)
from sky_kueue.sandbox.apiserver.objects import ObjectKey
from sky_kueue.sandbox.apiserver.patch import PatchType, apply_patch
from sky_kueue.sandbox.apiserver.resources import (
    STATUS_SUBRESOURCE,
    GroupResource,
    ResourceRegistry,
    ResourceType,
    default_resources,
)
from sky_kueue.sandbox.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    parse_field_selector,
    parse_label_selector,
)
from sky_kueue.sandbox.apiserver.watch import InitialEventsEnd, Watcher

Obj = dict[str, Any]
ResourceRef = ResourceType | GroupResource | str

#: The first resourceVersion the store hands out. Far from 0 on purpose (see module docstring).
FIRST_RESOURCE_VERSION = 1000
#: Namespaces every cluster has.
DEFAULT_NAMESPACES: tuple[str, ...] = ("default", "kube-system", "kube-public", "kube-node-lease")
NAMESPACES = GroupResource("", "namespaces")
PODS = GroupResource("", "pods")
#: Kubernetes' default ``terminationGracePeriodSeconds`` (``k8s.io/api/core/v1`` defaults).
DEFAULT_POD_GRACE_SECONDS = 30


class Operation(str, enum.Enum):
    CREATE = "CREATE"
    UPDATE = "UPDATE"


class Propagation(str, enum.Enum):
    """``DeleteOptions.propagationPolicy``."""

    BACKGROUND = "Background"
    FOREGROUND = "Foreground"
    ORPHAN = "Orphan"


@dataclasses.dataclass
class AdmissionRequest:
    """A write about to be committed, as an admission hook sees it.

    ``obj`` is the candidate in storage form; a hook may modify it in place. ``old`` is the
    current object for updates (read-only).
    """

    operation: Operation
    resource: ResourceType
    subresource: str | None
    obj: Obj
    old: Obj | None
    dry_run: bool


AdmissionHook = Callable[[AdmissionRequest], None]
CommitHook = Callable[[StoreEvent], None]


@dataclasses.dataclass(frozen=True)
class Preconditions:
    """``DeleteOptions.preconditions``: delete only if the object still has these."""

    uid: str | None = None
    resource_version: str | None = None


@dataclasses.dataclass(frozen=True)
class ListResult:
    """A list response: items (storage form), the list's resourceVersion, and paging state."""

    items: list[Obj]
    resource_version: int
    continue_token: str | None = None
    remaining_item_count: int | None = None


def _selector(value: LabelSelector | str | None) -> LabelSelector:
    return value if isinstance(value, LabelSelector) else parse_label_selector(value)


def _field_selector(value: FieldSelector | str | None) -> FieldSelector:
    return value if isinstance(value, FieldSelector) else parse_field_selector(value)


def _sort_key(item: tuple[ObjectKey, Obj]) -> tuple[str, str]:
    return (item[0].namespace, item[0].name)


class ObjectStore:
    """All objects of all served resources, with Kubernetes API semantics.

    Resources are named by :class:`ResourceType`, :class:`GroupResource` or a kubectl-style
    string (``"pods"``, ``"jobs.batch"``, ``workloads.kueue.x-k8s.io``, ``"cq"``).
    Objects go in and come out in the resource's storage version (Kueue: ``v1beta2``).
    Methods return deep copies unless ``shared=True`` is passed, in which case the store's
    own object is returned and must not be modified.

    Every method raises :class:`~sky_kueue.sandbox.apiserver.errors.ApiError` with the code
    the real apiserver would use (404, 409, 410, 422, ...), and ``KeyError`` for an unknown
    resource name.
    """

    def __init__(
        self,
        registry: ResourceRegistry | None = None,
        *,
        clock: Clock | None = None,
        event_log_capacity_events: int = WATCH_EVENT_LOG_CAPACITY_EVENTS,
        first_resource_version: int = FIRST_RESOURCE_VERSION,
        rng: random.Random | None = None,
        default_namespaces: Iterable[str] = DEFAULT_NAMESPACES,
    ) -> None:
        self.registry = registry or ResourceRegistry(default_resources())
        self.clock: Clock = clock or SystemClock()
        self._rng = rng or random.Random()
        self._lock = threading.RLock()
        self._resource_version = first_resource_version - 1
        self._log = EventLog(event_log_capacity_events)
        self._objects: dict[GroupResource, dict[ObjectKey, Obj]] = collections.defaultdict(dict)
        self._uids: dict[str, tuple[ResourceType, ObjectKey]] = {}
        self._dependents: dict[str, set[tuple[GroupResource, ObjectKey]]] = collections.defaultdict(set)
        self._namespace_population: collections.Counter[str] = collections.Counter()
        self._watchers: dict[GroupResource | None, list[Watcher]] = collections.defaultdict(list)
        self._admission_hooks: list[tuple[GroupResource | None, AdmissionHook]] = []
        self._commit_hooks: list[tuple[GroupResource | None, CommitHook]] = []
        for name in default_namespaces:
            self.create(NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    # ---- introspection ---------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        """The resourceVersion of the latest committed write."""
        with self._lock:
            return self._resource_version

    @property
    def compacted_through(self) -> int:
        """Watches and exact lists from a resourceVersion below this get 410."""
        with self._lock:
            return self._log.compacted_through

    def resource(self, ref: ResourceRef) -> ResourceType:
        return self.registry.resolve(ref)

    # ---- reads -------------------------------------------------------------------------------

    def try_get(self, ref: ResourceRef, name: str, namespace: str | None = None, *, shared: bool = False) -> Obj | None:
        """The object, or None if it does not exist."""
        resource = self.resource(ref)
        with self._lock:
            found = self._objects[resource.key].get(self._key(resource, name, namespace))
        if found is None or shared:
            return found
        return copy.deepcopy(found)

    def get(self, ref: ResourceRef, name: str, namespace: str | None = None, *, shared: bool = False) -> Obj:
        """The object.

        Raises:
            ApiError: 404 if it does not exist.
        """
        found = self.try_get(ref, name, namespace, shared=shared)
        if found is None:
            resource = self.resource(ref)
            raise errors.not_found(resource.plural, resource.group, name)
        return found

    def list(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | str | None = None,
        field_selector: FieldSelector | str | None = None,
        limit: int | None = None,
        continue_token: str | None = None,
        resource_version: int | None = None,
        shared: bool = False,
    ) -> ListResult:
        """Objects of a resource, ordered by namespace and name.

        Args:
            namespace: only this namespace (None or "" for all).
            limit: page size; the result then carries a continue token if more remain.
            continue_token: from a previous page; the list continues from the same snapshot.
            resource_version: list the state exactly as of this resourceVersion.

        Raises:
            ApiError: 410 if the requested resourceVersion or the continue token's snapshot
                has been compacted away; 400 for a malformed continue token or selector.
        """
        resource = self.resource(ref)
        labels = _selector(label_selector)
        fields = _field_selector(field_selector)
        start: tuple[str, str] | None = None
        with self._lock:
            if continue_token:
                snapshot, start = self._decode_continue(continue_token)
            elif resource_version is not None:
                snapshot = min(resource_version, self._resource_version)
            else:
                snapshot = self._resource_version
            state = self._state_at(resource, snapshot, for_continue=bool(continue_token))
        entries = sorted(state.items(), key=_sort_key)
        matching = [
            obj
            for key, obj in entries
            if (not namespace or key.namespace == namespace)
            and (start is None or (key.namespace, key.name) > start)
            and labels.matches(obj)
            and fields.matches(obj)
        ]
        token = None
        remaining = None
        if limit is not None and 0 < limit < len(matching):
            last = objects.key_of(matching[limit - 1])
            token = self._encode_continue(snapshot, (last.namespace, last.name))
            remaining = len(matching) - limit
            matching = matching[:limit]
        items = matching if shared else copy.deepcopy(matching)
        return ListResult(items, snapshot, token, remaining)

    # ---- writes ------------------------------------------------------------------------------

    def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None, *, dry_run: bool = False) -> Obj:
        """Creates an object; ``namespace`` (if given) overrides an empty ``metadata.namespace``.

        The store sets uid, creationTimestamp, generation 1, resourceVersion, and a name from
        ``metadata.generateName`` if no name is given; ``status`` is reset where the resource
        has a status subresource.

        Raises:
            ApiError: 400 if the namespaces disagree or a resourceVersion is set; 404 if the
                namespace does not exist; 403 if it is terminating; 409 AlreadyExists; 422
                for a missing or invalid name, or from an admission hook.
        """
        resource = self.resource(ref)
        candidate = copy.deepcopy(obj)
        meta = candidate.get("metadata")
        if meta is None:
            meta = candidate["metadata"] = {}
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if meta.get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        with self._lock:
            self._place_in_namespace(resource, meta, namespace)
            if not meta.get("name"):
                prefix = meta.get("generateName")
                if not prefix:
                    raise errors.invalid(
                        resource.kind,
                        resource.group,
                        "",
                        "metadata.name: Required value: name or generateName is required",
                    )
                meta["name"] = self._free_generated_name(resource, prefix, meta.get("namespace", ""))
            objects.validate_name(
                resource.kind, resource.group, meta["name"], namespace_name=resource.key == NAMESPACES
            )
            for server_field in ("uid", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
                meta.pop(server_field, None)
            meta["uid"] = str(uuid.UUID(int=self._rng.getrandbits(128), version=4))
            meta["creationTimestamp"] = format_timestamp(self.clock.now())
            meta["generation"] = 1
            candidate["apiVersion"] = resource.api_version()
            candidate["kind"] = resource.kind
            if resource.status_subresource and resource.reset_status_on_create:
                if resource.initial_status is None:
                    candidate.pop("status", None)
                else:
                    candidate["status"] = copy.deepcopy(dict(resource.initial_status))
            self._admit(AdmissionRequest(Operation.CREATE, resource, None, candidate, None, dry_run))
            key = objects.key_of(candidate)
            if key in self._objects[resource.key]:
                raise errors.already_exists(resource.plural, resource.group, key.name)
            if dry_run:
                return candidate
            return copy.deepcopy(self._commit(EventType.ADDED, resource, key, candidate, None))

    def update(
        self,
        ref: ResourceRef,
        obj: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Replaces an object (PUT); ``obj`` carries the name and, normally, the resourceVersion.

        With ``subresource="status"`` only ``status`` is taken from ``obj``; otherwise
        ``status`` is kept from the stored object when the resource has a status subresource.
        An update that changes nothing is not committed (no new resourceVersion, no event).

        Raises:
            ApiError: 404 if absent; 409 if ``metadata.resourceVersion`` is stale; 422 if a
                custom resource is updated without resourceVersion, or a finalizer is added
                to an object being deleted, or an admission hook rejects it.
        """
        resource = self.resource(ref)
        meta = objects.metadata(obj)
        name = meta.get("name") or ""
        with self._lock:
            current = self.get(resource, name, namespace or meta.get("namespace"), shared=True)
            return copy.deepcopy(
                self._update(
                    resource,
                    current,
                    copy.deepcopy(obj),
                    subresource,
                    dry_run=dry_run,
                    require_resource_version=resource.custom,
                )
            )

    def update_status(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        """``update`` of the status subresource."""
        return self.update(ref, obj, namespace, subresource=STATUS_SUBRESOURCE)

    def mutate(
        self,
        ref: ResourceRef,
        name: str,
        change: Callable[[Obj], Obj | None],
        namespace: str | None = None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Atomic read-modify-write: ``change`` gets a copy of the current object and returns
        the new one (or modifies it in place and returns None).

        Runs under the store lock, so it cannot conflict with other writers; ``change`` must
        not block. If ``change`` sets ``metadata.resourceVersion`` to another value than the
        current one, the write fails with 409 (how a PATCH carrying a stale resourceVersion
        fails).

        Raises:
            ApiError: as :meth:`update`, and whatever ``change`` raises.
        """
        resource = self.resource(ref)
        with self._lock:
            current = self.get(resource, name, namespace, shared=True)
            working = copy.deepcopy(current)
            changed = change(working)
            candidate = working if changed is None else changed
            return copy.deepcopy(
                self._update(resource, current, candidate, subresource, dry_run=dry_run, require_resource_version=False)
            )

    def patch(
        self,
        ref: ResourceRef,
        name: str,
        body: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Obj:
        """Applies a patch to the storage form of an object.

        Raises:
            ApiError: as :meth:`mutate`; 400/422 for a malformed or failing patch.
        """
        return self.mutate(
            ref,
            name,
            lambda current: apply_patch(current, body, patch_type),
            namespace,
            subresource=subresource,
            dry_run=dry_run,
        )

    def delete(
        self,
        ref: ResourceRef,
        name: str,
        namespace: str | None = None,
        *,
        preconditions: Preconditions | None = None,
        propagation: Propagation = Propagation.BACKGROUND,
        dry_run: bool = False,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        """Deletes an object: at once if it has no finalizers, else by setting
        ``deletionTimestamp`` (it disappears when its last finalizer is removed). Deleting a
        namespace deletes its contents; deleting an owner deletes dependents that have no
        other live owner (unless ``propagation`` is Orphan). A pod's grace period
        (``grace_period_seconds``, else its ``terminationGracePeriodSeconds``, else 30) is
        recorded in ``deletionGracePeriodSeconds``.

        Returns the object's last state.

        Raises:
            ApiError: 404 if absent; 409 if a precondition does not hold.
        """
        resource = self.resource(ref)
        with self._lock:
            current = self.get(resource, name, namespace, shared=True)
            return copy.deepcopy(
                self._delete(resource, current, preconditions, propagation, dry_run, grace_period_seconds)
            )

    def delete_collection(
        self,
        ref: ResourceRef,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | str | None = None,
        field_selector: FieldSelector | str | None = None,
        propagation: Propagation = Propagation.BACKGROUND,
        dry_run: bool = False,
    ) -> builtins.list[Obj]:
        """Deletes every matching object; returns their last states."""
        resource = self.resource(ref)
        with self._lock:
            listed = self.list(
                resource, namespace, label_selector=label_selector, field_selector=field_selector, shared=True
            )
            deleted = []
            for obj in listed.items:
                key = objects.key_of(obj)
                current = self._objects[resource.key].get(key)
                if current is not None:
                    deleted.append(self._delete(resource, current, None, propagation, dry_run))
            return copy.deepcopy(deleted)

    # ---- watches and hooks ---------------------------------------------------------------

    def watch(
        self,
        ref: ResourceRef | None = None,
        namespace: str | None = None,
        *,
        label_selector: LabelSelector | str | None = None,
        field_selector: FieldSelector | str | None = None,
        since: int | None = None,
        initial_events: bool = False,
        initial_events_end: bool = False,
        shared: bool = False,
    ) -> Watcher:
        """Starts a watch on one resource (or on all with ``ref=None``).

        Args:
            since: replay committed events newer than this resourceVersion first; None
                starts from now.
            initial_events: first yield a synthetic ADDED for each existing object (ignores
                ``since``), then changes.
            initial_events_end: after the initial events, yield a BOOKMARK with
                ``initial_events_end`` set.
            shared: yield the store's own objects instead of copies (read-only).

        Raises:
            ApiError: 410 if ``since`` is older than the retained history; 504 if it is newer
                than anything this store has committed (a client from before a restart).
        """
        resource = None if ref is None else self.resource(ref)
        if since is not None and not initial_events and since > self._resource_version:
            raise errors.resource_version_too_large(since, self._resource_version)
        watcher = Watcher(
            resource,
            namespace or None,
            _selector(label_selector),
            _field_selector(field_selector),
            copy_objects=not shared,
            on_close=self._unregister,
        )
        with self._lock:
            if initial_events:
                for resource_type in [resource] if resource is not None else list(self.registry):
                    for key, obj in sorted(self._objects[resource_type.key].items(), key=_sort_key):
                        if watcher.namespace and key.namespace != watcher.namespace:
                            continue
                        version = int(objects.resource_version(obj))
                        watcher.offer(StoreEvent(version, EventType.ADDED, resource_type, key, obj, None))
                if initial_events_end:
                    watcher.offer(InitialEventsEnd(self._resource_version))
            elif since is not None:
                for event in self._log.after(since):
                    if watcher.wants(event):
                        watcher.offer(event)
            self._watchers[resource.key if resource is not None else None].append(watcher)
        return watcher

    def bookmark_resource_version(self, watcher: Watcher) -> int | None:
        """The resourceVersion a BOOKMARK for ``watcher`` may carry now: the current one if the
        watcher has consumed every event queued for it, else None (bookmark later)."""
        with self._lock:
            return self._resource_version if watcher.is_drained() else None

    def close_watchers(self) -> None:
        """Closes every watcher (server shutdown)."""
        with self._lock:
            watchers = [watcher for group in self._watchers.values() for watcher in group]
        for watcher in watchers:
            watcher.close()

    def watcher_count(self) -> int:
        with self._lock:
            return sum(len(group) for group in self._watchers.values())

    def add_admission_hook(self, hook: AdmissionHook, ref: ResourceRef | None = None) -> Callable[[], None]:
        """Registers a hook run on every create and update (of one resource, or all).

        Returns a function that removes the hook.
        """
        entry = (None if ref is None else self.resource(ref).key, hook)
        with self._lock:
            self._admission_hooks.append(entry)
        return lambda: self._remove_hook(self._admission_hooks, entry)

    def add_commit_hook(self, hook: CommitHook, ref: ResourceRef | None = None) -> Callable[[], None]:
        """Registers a hook called with every committed event, in order, under the store lock.

        Returns a function that removes the hook.
        """
        entry = (None if ref is None else self.resource(ref).key, hook)
        with self._lock:
            self._commit_hooks.append(entry)
        return lambda: self._remove_hook(self._commit_hooks, entry)

    def compact(self, through_resource_version: int | None = None) -> int:
        """Forgets change history up to a resourceVersion (default: all of it), as etcd
        compaction does: afterwards, watches and exact lists from older versions get 410.
        Returns the resourceVersion compacted through."""
        with self._lock:
            through = self._resource_version if through_resource_version is None else through_resource_version
            self._log.compact(through)
            return through

    def restore(self, resource_version: int) -> None:
        """Rolls every object back to its state at ``resource_version``, as restoring an etcd
        snapshot taken then does (``etcdutl snapshot restore`` without ``--bump-revision``):
        UIDs and resourceVersions are the snapshot's, the next write reuses the numbers the
        undone writes had, and open watches end (the API server restarts on a restore).

        Raises:
            ApiError: 410 if history back to ``resource_version`` was compacted away.
        """
        with self._lock:
            if resource_version >= self._resource_version:
                return
            states = {
                resource.key: self._state_at(resource, resource_version, for_continue=False)
                for resource in self.registry
            }
            self._log.truncate_after(resource_version)
            self._resource_version = resource_version
            self._objects = collections.defaultdict(dict, {key: state for key, state in states.items() if state})
            self._uids = {}
            self._dependents = collections.defaultdict(set)
            self._namespace_population = collections.Counter()
            for resource in self.registry:
                for key, obj in self._objects.get(resource.key, {}).items():
                    self._uids[str(objects.metadata(obj).get("uid", ""))] = (resource, key)
                    self._namespace_population[key.namespace] += 1
                    for owner in objects.owner_uids(obj):
                        self._dependents[owner].add((resource.key, key))
        self.close_watchers()

    # ---- internals ---------------------------------------------------------------------------

    def _remove_hook(self, hooks: builtins.list[Any], entry: Any) -> None:
        with self._lock:
            if entry in hooks:
                hooks.remove(entry)

    def _unregister(self, watcher: Watcher) -> None:
        with self._lock:
            group = self._watchers.get(watcher.resource.key if watcher.resource is not None else None, [])
            if watcher in group:
                group.remove(watcher)

    def _key(self, resource: ResourceType, name: str, namespace: str | None) -> ObjectKey:
        return ObjectKey((namespace or "") if resource.namespaced else "", name)

    def _place_in_namespace(self, resource: ResourceType, meta: dict[str, Any], namespace: str | None) -> None:
        if not resource.namespaced:
            meta.pop("namespace", None)
            return
        given = meta.get("namespace")
        if namespace and given and given != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        chosen = namespace or given
        if not chosen:
            raise errors.bad_request(f"a namespace is required to create {resource.plural}")
        meta["namespace"] = chosen
        owner = self._objects[NAMESPACES].get(ObjectKey("", chosen))
        if owner is None:
            raise errors.not_found("namespaces", "", chosen)
        if objects.is_deleting(owner):
            raise errors.forbidden(
                f"{resource.plural} is forbidden: unable to create new content in namespace {chosen} "
                "because it is being terminated"
            )

    def _free_generated_name(self, resource: ResourceType, prefix: str, namespace: str) -> str:
        table = self._objects[resource.key]
        while True:
            name = objects.generated_name(prefix, self._rng)
            if ObjectKey(namespace, name) not in table:
                return name

    def _admit(self, request: AdmissionRequest) -> None:
        for key, hook in list(self._admission_hooks):
            if key is None or key == request.resource.key:
                hook(request)

    def _state_at(self, resource: ResourceType, snapshot: int, *, for_continue: bool) -> dict[ObjectKey, Obj]:
        """The resource's objects as of resourceVersion ``snapshot``, rebuilt by undoing newer events."""
        table = self._objects[resource.key]
        if snapshot >= self._resource_version:
            return dict(table)
        if snapshot < self._log.compacted_through:
            if for_continue:
                raise errors.gone(
                    "The provided continue parameter is too old to display a consistent list result. "
                    "You can start a new list without the continue parameter."
                )
            raise errors.too_old_resource_version(snapshot, self._log.compacted_through + 1)
        state = dict(table)
        for event in self._log.newest_first_after(snapshot):
            if event.resource.key != resource.key:
                continue
            if event.type is EventType.ADDED:
                state.pop(event.key, None)
            elif event.old is not None:
                state[event.key] = event.old
        return state

    @staticmethod
    def _encode_continue(snapshot: int, start: tuple[str, str]) -> str:
        payload = json.dumps({"rv": snapshot, "start": list(start)}).encode()
        return base64.urlsafe_b64encode(payload).decode()

    @staticmethod
    def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
        try:
            payload = json.loads(base64.urlsafe_b64decode(token.encode()))
            namespace, name = payload["start"]
            return int(payload["rv"]), (str(namespace), str(name))
        except (ValueError, KeyError, TypeError, binascii.Error) as failure:
            raise errors.bad_request(f"continue key is not valid: {failure}") from failure

    def _update(
        self,
        resource: ResourceType,
        current: Obj,
        candidate: Obj,
        subresource: str | None,
        *,
        dry_run: bool,
        require_resource_version: bool,
    ) -> Obj:
        key = objects.key_of(current)
        if not isinstance(candidate.get("metadata"), dict):
            raise errors.bad_request("metadata must be an object")
        given_version = objects.resource_version(candidate)
        if given_version:
            if given_version != objects.resource_version(current):
                raise errors.stale(resource.plural, resource.group, key.name)
        elif require_resource_version:
            raise errors.invalid(
                resource.kind,
                resource.group,
                key.name,
                "metadata.resourceVersion: Invalid value: 0x0: must be specified for an update",
            )
        if objects.metadata(candidate).get("name", key.name) != key.name:
            raise errors.bad_request(
                f"the name of the object ({objects.metadata(candidate).get('name')}) does not match the name "
                f"on the URL ({key.name})"
            )
        given_uid = objects.metadata(candidate).get("uid")
        if given_uid and given_uid != objects.metadata(current).get("uid"):
            # The apiserver treats a uid in an update (or patch) as a precondition: a write
            # meant for one object never lands on a same-named successor.
            raise errors.conflict(
                resource.plural,
                resource.group,
                key.name,
                f"Precondition failed: UID in precondition: {given_uid}, "
                f"UID in object meta: {objects.metadata(current).get('uid')}",
            )
        if subresource == STATUS_SUBRESOURCE:
            if not resource.status_subresource:
                raise errors.not_found(f"{resource.plural}/status", resource.group, key.name)
            new = copy.deepcopy(current)
            if "status" in candidate:
                new["status"] = candidate["status"]
            else:
                new.pop("status", None)
        elif subresource:
            raise errors.not_found(f"{resource.plural}/{subresource}", resource.group, key.name)
        else:
            new = candidate
            meta = new["metadata"]
            old_meta = objects.metadata(current)
            for frozen in ("uid", "creationTimestamp", "namespace", "name", "generation"):
                if frozen in old_meta:
                    meta[frozen] = old_meta[frozen]
                else:
                    meta.pop(frozen, None)
            for deletion_field in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                if deletion_field in old_meta:
                    meta[deletion_field] = old_meta[deletion_field]
                else:
                    meta.pop(deletion_field, None)
            if resource.status_subresource:
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
                else:
                    new.pop("status", None)
            if objects.is_deleting(current):
                added = set(objects.finalizers(new)) - set(objects.finalizers(current))
                if added:
                    raise errors.invalid(
                        resource.kind,
                        resource.group,
                        key.name,
                        "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted",
                    )
        new["apiVersion"] = resource.api_version()
        new["kind"] = resource.kind
        new["metadata"]["resourceVersion"] = objects.resource_version(current)
        self._admit(AdmissionRequest(Operation.UPDATE, resource, subresource, new, current, dry_run))
        generation = int(objects.metadata(current).get("generation") or 1)
        new["metadata"]["generation"] = generation + 1 if objects.spec_changed(current, new) else generation
        if objects.same_content(current, new) or dry_run:
            return new if dry_run else current
        if objects.is_deleting(new) and not objects.finalizers(new):
            return self._remove(resource, new, Propagation.BACKGROUND)
        return self._commit(EventType.MODIFIED, resource, key, new, current)

    def _delete(
        self,
        resource: ResourceType,
        current: Obj,
        preconditions: Preconditions | None,
        propagation: Propagation,
        dry_run: bool,
        grace_period_seconds: int | None = None,
    ) -> Obj:
        meta = objects.metadata(current)
        if preconditions is not None:
            if preconditions.uid is not None and preconditions.uid != meta.get("uid"):
                raise errors.conflict(
                    resource.plural,
                    resource.group,
                    meta.get("name", ""),
                    f"Precondition failed: UID in precondition: {preconditions.uid}, "
                    f"UID in object meta: {meta.get('uid')}",
                )
            if (
                preconditions.resource_version is not None
                and preconditions.resource_version != objects.resource_version(current)
            ):
                raise errors.conflict(
                    resource.plural,
                    resource.group,
                    meta.get("name", ""),
                    "Precondition failed: ResourceVersion in precondition: "
                    f"{preconditions.resource_version}, "
                    f"ResourceVersion in object meta: {objects.resource_version(current)}",
                )
        if dry_run:
            return current
        if resource.key == NAMESPACES:
            return self._delete_namespace(current, propagation)
        if objects.finalizers(current):
            if objects.is_deleting(current):
                return current
            marked = self._marked(current)
            if resource.key == PODS:
                marked["metadata"]["deletionGracePeriodSeconds"] = _pod_grace_seconds(current, grace_period_seconds)
            return self._commit(EventType.MODIFIED, resource, objects.key_of(current), marked, current)
        return self._remove(resource, current, propagation)

    def _marked(self, current: Obj) -> Obj:
        """A copy of ``current`` with deletionTimestamp set."""
        new = copy.deepcopy(current)
        new["metadata"]["deletionTimestamp"] = format_timestamp(self.clock.now())
        new["metadata"]["deletionGracePeriodSeconds"] = 0
        return new

    def _delete_namespace(self, current: Obj, propagation: Propagation) -> Obj:
        name = objects.metadata(current)["name"]
        namespaces = self.registry.resolve(NAMESPACES)
        latest = current
        if not objects.is_deleting(current):
            marked = self._marked(current)
            marked.setdefault("status", {})["phase"] = "Terminating"
            latest = self._commit(EventType.MODIFIED, namespaces, ObjectKey("", name), marked, current)
        for resource in self.registry:
            if not resource.namespaced:
                continue
            contents = [obj for key, obj in self._objects[resource.key].items() if key.namespace == name]
            for obj in contents:
                still_there = self._objects[resource.key].get(objects.key_of(obj))
                if still_there is not None:
                    self._delete(resource, still_there, None, propagation, False)
        return self._finish_namespace(name) or latest

    def _finish_namespace(self, name: str) -> Obj | None:
        """Removes a terminating namespace once it is empty and has no finalizers; returns its
        last state if it was removed."""
        namespace = self._objects[NAMESPACES].get(ObjectKey("", name))
        if (
            namespace is None
            or not objects.is_deleting(namespace)
            or objects.finalizers(namespace)
            or self._namespace_population[name] > 0
        ):
            return None
        return self._remove(self.registry.resolve(NAMESPACES), namespace, Propagation.BACKGROUND)

    def _remove(self, resource: ResourceType, last: Obj, propagation: Propagation) -> Obj:
        key = objects.key_of(last)
        final = self._commit(EventType.DELETED, resource, key, last, self._objects[resource.key].get(key))
        uid = objects.metadata(final).get("uid")
        if uid and propagation is not Propagation.ORPHAN:
            self._collect_garbage(uid)
        if resource.namespaced:
            self._finish_namespace(key.namespace)
        return final

    def _collect_garbage(self, owner_uid: str) -> None:
        for group_resource, key in sorted(self._dependents.pop(owner_uid, set()), key=lambda item: str(item)):
            dependent = self._objects[group_resource].get(key)
            if dependent is None or any(uid in self._uids for uid in objects.owner_uids(dependent)):
                continue
            self._delete(self.registry.resolve(group_resource), dependent, None, Propagation.BACKGROUND, False)

    def _commit(self, kind: EventType, resource: ResourceType, key: ObjectKey, new: Obj, old: Obj | None) -> Obj:
        """Stores (or removes, for DELETED) ``new`` under the next resourceVersion and
        publishes the event. ``new`` must be a dict the store may own."""
        self._resource_version += 1
        stored = dict(new)
        stored["metadata"] = dict(objects.metadata(new), resourceVersion=str(self._resource_version))
        table = self._objects[resource.key]
        uid = stored["metadata"].get("uid", "")
        if old is not None:
            for owner in objects.owner_uids(old):
                dependents = self._dependents.get(owner)
                if dependents is not None:
                    dependents.discard((resource.key, key))
                    if not dependents:
                        del self._dependents[owner]
        if kind is EventType.DELETED:
            del table[key]
            self._uids.pop(uid, None)
            self._namespace_population[key.namespace] -= 1
        else:
            table[key] = stored
            self._uids[uid] = (resource, key)
            if old is None:
                self._namespace_population[key.namespace] += 1
            for owner in objects.owner_uids(stored):
                self._dependents[owner].add((resource.key, key))
        event = StoreEvent(self._resource_version, kind, resource, key, stored, old)
        self._log.append(event)
        for group in (self._watchers.get(resource.key), self._watchers.get(None)):
            for watcher in group or ():
                if watcher.wants(event):
                    watcher.offer(event)
        for hook_key, hook in list(self._commit_hooks):
            if hook_key is None or hook_key == resource.key:
                hook(event)
        return stored


def _pod_grace_seconds(pod: Obj, requested: int | None) -> int:
    """A deleted pod's grace period: the delete's, else the pod's own, else Kubernetes' 30 s."""
    if requested is not None:
        return max(0, requested)
    value = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    return int(value) if isinstance(value, int) and value >= 0 else DEFAULT_POD_GRACE_SECONDS

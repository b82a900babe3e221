"""A container's volumes, as the kubelet sets them up: files and directories, no plugins.

Why: the controller's Deployment (``configs/controller/deployment.yaml``) reads its config
from a ConfigMap volume and writes to an ``emptyDir`` ``/tmp``; SkyPilot's pods mount an
``emptyDir`` (``medium: Memory``) at ``/dev/shm``. Supported:

* ``configMap`` and ``secret``: their keys (or ``items``) written as files under the mount
  path when the container starts (not updated afterwards; a real kubelet refreshes them);
* ``emptyDir``: a directory of the pod's (shared by its containers) bind-mounted at the mount
  path, or a tmpfs for ``medium: Memory``.

Anything else (``hostPath``, ``persistentVolumeClaim``, ...) is skipped and named in the
returned notes; ``projected`` service account tokens come from the runtime's ``extra_files``
hook. Pure: objects are looked up through a callable.
"""

from __future__ import annotations

import base64
import binascii
import pathlib
import posixpath
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

#: ``(resource, name, namespace) -> object or None``
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]


@dataclass(frozen=True)
class Mount:
    """A mount the container's init makes: ``source`` bound at ``target``, or a tmpfs."""

    target: str
    source: pathlib.Path | None  # None = tmpfs

    def spec_line(self) -> str:
        """One line of the init script's mount list: ``bind<TAB>source<TAB>target`` or ``tmpfs<TAB>-<TAB>target``."""
        if self.source is None:
            return f"tmpfs\t-\t{self.target}"
        return f"bind\t{self.source}\t{self.target}"


@dataclass
class VolumeSetup:
    files: dict[str, bytes] = field(default_factory=dict)
    mounts: list[Mount] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _data(obj: Mapping[str, Any], secret: bool) -> dict[str, bytes]:
    result: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        if secret:
            try:
                result[str(key)] = base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                continue  # the API server validated it; an undecodable value is skipped
        else:
            result[str(key)] = str(value).encode()
    if not secret:
        for key, value in (obj.get("binaryData") or {}).items():
            try:
                result[str(key)] = base64.b64decode(str(value), validate=True)
            except (binascii.Error, ValueError):
                continue
    for key, value in (obj.get("stringData") or {}).items():  # secrets written with stringData
        result[str(key)] = str(value).encode()
    return result


def setup(pod: Mapping[str, Any], container: Mapping[str, Any], pod_dir: pathlib.Path, lookup: Lookup) -> VolumeSetup:
    """Files and mounts for ``container``'s ``volumeMounts``."""
    namespace = str((pod.get("metadata") or {}).get("namespace", ""))
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    result = VolumeSetup()
    for mount in container.get("volumeMounts") or []:
        name, target = str(mount.get("name", "")), str(mount.get("mountPath", ""))
        volume = volumes.get(name)
        if volume is None or not target.startswith("/"):
            result.notes.append(f"volume {name!r}: not defined in the pod, or mount path {target!r} not absolute")
            continue
        sub_path = str(mount.get("subPath") or "")
        if "emptyDir" in volume:
            if (volume.get("emptyDir") or {}).get("medium") == "Memory" and not sub_path:
                result.mounts.append(Mount(target, None))
            else:
                source = pod_dir / "volumes" / name / sub_path
                source.mkdir(parents=True, exist_ok=True)
                source.chmod(0o1777)
                result.mounts.append(Mount(target, source))
            continue
        kind = "configMap" if "configMap" in volume else "secret" if "secret" in volume else None
        if kind is None:
            result.notes.append(f"volume {name!r}: only configMap, secret and emptyDir are served")
            continue
        ref = volume[kind] or {}
        object_name = str(ref.get("name") or ref.get("secretName") or "")
        found = lookup("configmaps" if kind == "configMap" else "secrets", object_name, namespace)
        if found is None:
            if not ref.get("optional"):
                result.notes.append(f"volume {name!r}: {kind} {object_name!r} not found")
            continue
        data = _data(found, secret=kind == "secret")
        items = ref.get("items")
        paths = {str(i.get("key")): str(i.get("path")) for i in items} if items else {k: k for k in data}
        for key, relative in paths.items():
            if key not in data:
                continue
            if sub_path:
                if relative == sub_path:
                    result.files[target] = data[key]
                continue
            result.files[posixpath.join(target, relative)] = data[key]
    return result

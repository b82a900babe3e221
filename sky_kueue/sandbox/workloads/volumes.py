"""ConfigMap and Secret volumes for the sandbox's containers, as files.

Why: the controller's Deployment reads its plugin config from a ConfigMap volume
(``/etc/sky-kueue/sky-kueue.yaml``, ``configs/controller/deployment.yaml``); a kubelet projects
each key of the ConfigMap (or Secret) as a file under the container's ``volumeMount``.

What is modelled (``pkg/volume/configmap``, ``pkg/volume/secret``): every key, or only the
``items`` listed (``key`` -> ``path``); ``subPath`` mounts of one key; ``binaryData`` and
Secrets' base64 ``data`` decoded; an ``optional`` source that is missing gives no files. The
files are written when the container starts (the runtime's per-container files hook): a
later change to the ConfigMap is not propagated, nor are ``defaultMode`` and read-only mounts
enforced. A missing non-optional source raises, so the container does not start (a kubelet
reports ``CreateContainerConfigError``).
"""

from __future__ import annotations

import base64
import binascii
import posixpath
from collections.abc import Mapping
from typing import Any

from sky_kueue.sandbox.apiserver.store import ObjectStore


class VolumeSourceMissing(LookupError):
    """A container's ConfigMap or Secret volume names an object that does not exist."""


def _decoded(obj: Mapping[str, Any], kind: str) -> dict[str, bytes]:
    """Key -> bytes: a ConfigMap's ``data`` and ``binaryData``, a Secret's ``data`` and ``stringData``."""
    values: dict[str, bytes] = {}
    encoded = obj.get("binaryData") if kind == "configmaps" else obj.get("data")
    plain = obj.get("data") if kind == "configmaps" else obj.get("stringData")
    for key, value in (plain or {}).items():
        values[str(key)] = str(value).encode()
    for key, value in (encoded or {}).items():
        try:
            values[str(key)] = base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise VolumeSourceMissing(f"{kind} key {key!r} is not valid base64: {exc}") from exc
    return values


class VolumeFiles:
    """The files of a container's ConfigMap and Secret volumes (the runtime's files hook)."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store

    def __call__(self, pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, bytes]:
        """Container path -> contents for each ConfigMap/Secret volume the container mounts.

        Raises:
            VolumeSourceMissing: a non-optional source does not exist.
        """
        namespace = str((pod.get("metadata") or {}).get("namespace", ""))
        volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
        files: dict[str, bytes] = {}
        for mount in container.get("volumeMounts") or []:
            volume = volumes.get(str(mount.get("name")))
            if volume is None:
                continue
            projected = self._volume_files(volume, namespace)
            if projected is None:
                continue
            mount_path = str(mount.get("mountPath", ""))
            sub_path = str(mount.get("subPath") or "")
            if sub_path:
                if sub_path in projected:
                    files[mount_path] = projected[sub_path]
                continue
            for relative, content in projected.items():
                files[posixpath.join(mount_path, relative)] = content
        return files

    def _volume_files(self, volume: Mapping[str, Any], namespace: str) -> dict[str, bytes] | None:
        """Relative path -> contents for a ConfigMap or Secret volume; None for other kinds."""
        if volume.get("configMap") is not None:
            source, kind, name_field = volume["configMap"], "configmaps", "name"
        elif volume.get("secret") is not None:
            source, kind, name_field = volume["secret"], "secrets", "secretName"
        else:
            return None
        name = str(source.get(name_field) or "")
        obj = self.store.try_get(kind, name, namespace)
        if obj is None:
            if source.get("optional"):
                return {}
            singular = "configmap" if kind == "configmaps" else "secret"
            raise VolumeSourceMissing(f'{singular} "{name}" not found (volume {volume.get("name")})')
        values = _decoded(obj, kind)
        items = source.get("items")
        if not items:
            return values
        chosen: dict[str, bytes] = {}
        for item in items:
            key = str(item.get("key", ""))
            if key in values:
                chosen[str(item.get("path") or key)] = values[key]
            elif not source.get("optional"):
                raise VolumeSourceMissing(f"{kind} {name}: no key {key!r} (volume {volume.get('name')})")
        return chosen

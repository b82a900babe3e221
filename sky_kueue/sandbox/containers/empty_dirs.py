"""A container's ``emptyDir`` volumes, as the kubelet mounts them.

Why: the controller's Deployment (``configs/controller/deployment.yaml``) writes to an
``emptyDir`` at ``/tmp``, and SkyPilot's pods mount one with ``medium: Memory`` at ``/dev/shm``
(``sky/templates/kubernetes-ray.yml.j2``). An ``emptyDir`` is a directory of the pod's, shared
by its containers and bind-mounted at each mount path (``pkg/volume/emptydir``); with
``medium: Memory`` it is a tmpfs (here: one per container, not shared).

ConfigMap, Secret and projected ServiceAccount volumes are files, written into the container
by the runtime's ``extra_files`` hooks (:mod:`sky_kueue.sandbox.workloads.volumes`); anything
else (``hostPath``, ``persistentVolumeClaim``, ...) is not mounted, and named in the notes.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Volume kinds served as files by the runtime's hooks, not as mounts.
FILE_VOLUME_KINDS = ("configMap", "secret", "projected", "downwardAPI")


@dataclass(frozen=True)
class Mount:
    """A mount the container's init makes: ``source`` bound at ``target``, or a tmpfs."""

    target: str
    source: pathlib.Path | None  # None = tmpfs

    def spec_line(self) -> str:
        """A line of the init script's mount list: ``bind|tmpfs<TAB>source or -<TAB>target``."""
        return f"tmpfs\t-\t{self.target}" if self.source is None else f"bind\t{self.source}\t{self.target}"


@dataclass
class MountPlan:
    mounts: list[Mount] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def plan(pod: Mapping[str, Any], container: Mapping[str, Any], pod_dir: pathlib.Path) -> MountPlan:
    """The mounts of ``container``'s ``emptyDir`` volumeMounts (creating their directories)."""
    volumes = {str(v.get("name")): v for v in (pod.get("spec") or {}).get("volumes") or []}
    result = MountPlan()
    for mount in container.get("volumeMounts") or []:
        name, target = str(mount.get("name", "")), str(mount.get("mountPath", ""))
        volume = volumes.get(name)
        if volume is None or not target.startswith("/") or ".." in target.split("/"):
            result.notes.append(f"volume {name!r}: not defined in the pod, or mount path {target!r} unusable")
            continue
        if any(kind in volume for kind in FILE_VOLUME_KINDS):
            continue
        if "emptyDir" not in volume:
            result.notes.append(f"volume {name!r}: only emptyDir, configMap, secret and projected are served")
            continue
        sub_path = str(mount.get("subPath") or "")
        if (volume.get("emptyDir") or {}).get("medium") == "Memory" and not sub_path:
            result.mounts.append(Mount(target, None))
            continue
        source = pod_dir / "volumes" / name / sub_path
        source.mkdir(parents=True, exist_ok=True)
        source.chmod(0o1777)  # any user of the pod's containers may write, as in an emptyDir
        result.mounts.append(Mount(target, source))
    return result

"""The project's locally built images as OCI image layouts, for the real node's containerd.

Why: no container registry is reachable from this machine, so the images the project builds
(:mod:`sky_kueue.sandbox.containers.images`: the Debian base, SkyPilot's default image, the
controller's image) and the real node's pause image reach containerd as OCI image layouts
(the OCI image-layout specification: ``oci-layout``, ``index.json``, ``blobs/sha256/``), which
``ctr images import`` reads as a tar stream and :mod:`.registry` serves to containerd's pulls.

One layout per image, cached beside the image store's rootfs under ``<cache>/oci/<rootfs
name>/`` (the rootfs name is the image's cache key, so a rebuilt image gets a new layout).
Each layout holds one uncompressed layer (the rootfs as a tar; its digest is also its diff
ID), one config and one manifest; ``index.json`` names the manifest once per reference with
``io.containerd.image.name`` (the full name containerd stores the image under) and
``org.opencontainers.image.ref.name`` (its tag). A layout is written into a temporary
directory and renamed into place, so one that exists is complete.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Media types of the OCI image specification.
MANIFEST_MEDIA_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_MEDIA_TYPE = "application/vnd.oci.image.config.v1+json"
LAYER_MEDIA_TYPE = "application/vnd.oci.image.layer.v1.tar"
INDEX_MEDIA_TYPE = "application/vnd.oci.image.index.v1+json"
#: The annotation containerd's importer names an image by (``images.AnnotationImageName``).
CONTAINERD_NAME_ANNOTATION = "io.containerd.image.name"
REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name"
#: What an image without its own ``PATH`` gets (a Dockerfile base image's usual value).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Docker Hub's canonical host and its implicit ``library/`` namespace (how containerd's CRI
#: normalizes ``debian:bookworm`` to ``docker.io/library/debian:bookworm``).
DOCKER_HUB = "docker.io"
CHUNK_BYTES = 1024 * 1024


class LayoutError(RuntimeError):
    """An image could not be turned into a layout (one line: which image, why)."""


@dataclass(frozen=True)
class ImageSpec:
    """What a layout is made of: a root filesystem and the config a Containerfile would set."""

    #: Full references containerd stores the image under (``normalize_reference`` applied).
    references: tuple[str, ...]
    rootfs: Path
    env: Mapping[str, str]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    workdir: str = "/"


def normalize_reference(reference: str) -> str:
    """The name containerd's CRI gives ``reference`` (docker.io's ``library/`` and ``:latest`` added).

    A first path component with a dot, a colon or ``localhost`` is a registry host, as in the
    Docker reference grammar (``github.com/distribution/reference`` ``splitDockerDomain``).
    """
    ref = reference.strip().split("@", 1)[0]
    first, _, rest = ref.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        ref = f"{DOCKER_HUB}/{ref}"
        first, _, rest = ref.partition("/")
    if first == DOCKER_HUB and "/" not in rest:
        ref = f"{DOCKER_HUB}/library/{rest}"
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last else f"{ref}:latest"


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _write_blob(blobs: Path, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    (blobs / digest).write_bytes(data)
    return f"sha256:{digest}", len(data)


def _tar_layer(rootfs: Path, target: Path) -> None:
    """The rootfs as one tar (numeric owners, sorted names: the same rootfs gives the same bytes)."""
    argv = ["tar", "--numeric-owner", "--sort=name", "--xattrs", "-C", str(rootfs), "-cf", str(target), "."]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LayoutError(f"tar of {rootfs} failed with exit code {done.returncode}: {done.stderr.strip()[-500:]}")


def config_document(spec: ImageSpec, diff_id: str) -> dict[str, object]:
    """The image config (OCI image spec ``config.md``) of a one-layer image."""
    env = dict(spec.env)
    env.setdefault("PATH", DEFAULT_PATH)
    config: dict[str, object] = {"Env": [f"{k}={v}" for k, v in env.items()], "WorkingDir": spec.workdir}
    if spec.entrypoint:
        config["Entrypoint"] = list(spec.entrypoint)
    if spec.cmd:
        config["Cmd"] = list(spec.cmd)
    return {
        "architecture": "amd64",
        "os": "linux",
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created_by": "sky-kueue image store (sky_kueue/realcluster/oci_layout.py)"}],
    }


def write_layout(spec: ImageSpec, target: Path) -> Path:
    """Write ``spec`` as an OCI image layout at ``target`` (atomically); returns ``target``.

    Raises:
        LayoutError: the rootfs is missing or could not be archived.
    """
    if not spec.rootfs.is_dir():
        raise LayoutError(f"image {spec.references[0]}: no root filesystem at {spec.rootfs}")
    work = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    blobs = work / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    try:
        layer_tmp = work / "layer.tar"
        _tar_layer(spec.rootfs, layer_tmp)
        layer_digest = _sha256_file(layer_tmp)
        layer_size = layer_tmp.stat().st_size
        layer_tmp.replace(blobs / layer_digest)
        layer_ref = f"sha256:{layer_digest}"
        config_ref, config_size = _write_blob(blobs, _canonical(config_document(spec, layer_ref)))
        manifest = {
            "schemaVersion": 2,
            "mediaType": MANIFEST_MEDIA_TYPE,
            "config": {"mediaType": CONFIG_MEDIA_TYPE, "digest": config_ref, "size": config_size},
            "layers": [{"mediaType": LAYER_MEDIA_TYPE, "digest": layer_ref, "size": layer_size}],
        }
        manifest_ref, manifest_size = _write_blob(blobs, _canonical(manifest))
        (work / "oci-layout").write_text(json.dumps({"imageLayoutVersion": "1.0.0"}), encoding="utf-8")
        (work / "index.json").write_bytes(_canonical(index_document(manifest_ref, manifest_size, spec.references)))
        shutil.rmtree(target, ignore_errors=True)
        work.rename(target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return target


def index_document(manifest_digest: str, manifest_size: int, references: Iterable[str]) -> dict[str, object]:
    """``index.json``: the one manifest, once per reference it is imported under."""
    manifests = []
    for reference in references:
        tag = reference.rsplit(":", 1)[1]
        manifests.append(
            {
                "mediaType": MANIFEST_MEDIA_TYPE,
                "digest": manifest_digest,
                "size": manifest_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {CONTAINERD_NAME_ANNOTATION: reference, REF_NAME_ANNOTATION: tag},
            }
        )
    return {"schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": manifests}


def _canonical(doc: Mapping[str, object]) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


@contextlib.contextmanager
def _locked(lock: Path) -> Iterator[None]:
    lock.parent.mkdir(parents=True, exist_ok=True)
    with lock.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_layout(spec: ImageSpec, cache: Path, key: str) -> tuple[Path, bool]:
    """The layout of ``spec`` under ``cache/key``, written if missing; (path, whether written).

    Two processes asking for the same key share one write (a ``flock`` on ``cache/.key.lock``).
    """
    target = cache / key
    if (target / "index.json").is_file():
        return target, False
    with _locked(cache / f".{key}.lock"):
        if (target / "index.json").is_file():
            return target, False
        return write_layout(spec, target), True


def prune_orphans(layouts: Path, rootfs_cache: Path) -> list[Path]:
    """Remove the layouts under ``layouts`` whose image (``rootfs_cache/<key>``) no longer
    exists (the image store pruned or rebuilt it); returns what was removed. Layouts of no
    image-store image (the pause image's) are kept."""
    removed = []
    for layout in sorted(layouts.glob("*")):
        if not layout.is_dir() or layout.name.startswith((".", "pause")):
            continue
        if not (rootfs_cache / layout.name).is_dir():
            shutil.rmtree(layout, ignore_errors=True)
            removed.append(layout)
    return removed


@dataclass(frozen=True)
class LayoutManifest:
    """One reference of a layout, as a registry serves it."""

    reference: str
    digest: str
    size: int
    layout: Path


def manifests_of(layout: Path) -> list[LayoutManifest]:
    """Every (reference, manifest) ``index.json`` of ``layout`` names."""
    index = json.loads((layout / "index.json").read_text(encoding="utf-8"))
    return [
        LayoutManifest(m["annotations"][CONTAINERD_NAME_ANNOTATION], m["digest"], int(m["size"]), layout)
        for m in index.get("manifests", [])
    ]


def tar_stream_argv(layout: Path) -> Sequence[str]:
    """The command that writes ``layout`` as the tar stream ``ctr images import -`` reads."""
    return ["tar", "-C", str(layout), "-cf", "-", "oci-layout", "index.json", "blobs"]

"""OCI layouts of the image store's images, and the read-only registry that serves them."""

from __future__ import annotations

import hashlib
import http.client
import json
import tarfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sky_kueue.realcluster import oci_layout
from sky_kueue.realcluster.registry import RegistryServer


@pytest.mark.parametrize(
    ("reference", "full"),
    [
        ("debian:bookworm", "docker.io/library/debian:bookworm"),
        ("debian", "docker.io/library/debian:latest"),
        ("docker.io/library/python:3.11-slim", "docker.io/library/python:3.11-slim"),
        ("skypilot-sandbox/cpu:offline", "docker.io/skypilot-sandbox/cpu:offline"),
        ("ghcr.io/sky-kueue/sky-kueue:0.1.0", "ghcr.io/sky-kueue/sky-kueue:0.1.0"),
        ("localhost:5000/x", "localhost:5000/x:latest"),
        ("us-docker.pkg.dev/a/b/skypilot:latest@sha256:" + "0" * 64, "us-docker.pkg.dev/a/b/skypilot:latest"),
    ],
)
def test_references_are_named_as_containerds_cri_names_them(reference: str, full: str) -> None:
    assert oci_layout.normalize_reference(reference) == full


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    rootfs = tmp_path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    (rootfs / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    spec = oci_layout.ImageSpec(
        references=("docker.io/library/debian:bookworm", "docker.io/library/debian:12"),
        rootfs=rootfs,
        env={"LANG": "C.UTF-8"},
        cmd=("bash",),
    )
    path, written = oci_layout.ensure_layout(spec, tmp_path / "oci", "debian-key")
    assert written
    assert oci_layout.ensure_layout(spec, tmp_path / "oci", "debian-key") == (path, False)
    return path


def _blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()


def test_a_layout_holds_one_layer_config_and_manifest_named_per_reference(layout: Path) -> None:
    index = json.loads((layout / "index.json").read_text())
    names = [m["annotations"][oci_layout.CONTAINERD_NAME_ANNOTATION] for m in index["manifests"]]
    assert names == ["docker.io/library/debian:bookworm", "docker.io/library/debian:12"]
    assert {m["annotations"][oci_layout.REF_NAME_ANNOTATION] for m in index["manifests"]} == {"bookworm", "12"}
    digest = index["manifests"][0]["digest"]
    manifest = json.loads(_blob(layout, digest))
    assert hashlib.sha256(_blob(layout, digest)).hexdigest() == digest.split(":")[1]
    config = json.loads(_blob(layout, manifest["config"]["digest"]))
    layer = manifest["layers"][0]
    assert layer["mediaType"] == oci_layout.LAYER_MEDIA_TYPE
    assert config["rootfs"]["diff_ids"] == [layer["digest"]]  # uncompressed: digest = diff ID
    assert "PATH=" + oci_layout.DEFAULT_PATH in config["config"]["Env"]
    assert config["config"]["Cmd"] == ["bash"]
    with tarfile.open(layout / "blobs" / "sha256" / layer["digest"].split(":")[1]) as tar:
        assert tar.extractfile("./bin/hello").read() == b"#!/bin/sh\necho hi\n"  # type: ignore[union-attr]


def test_a_missing_rootfs_is_one_line(tmp_path: Path) -> None:
    spec = oci_layout.ImageSpec(references=("docker.io/library/x:1",), rootfs=tmp_path / "none", env={})
    with pytest.raises(oci_layout.LayoutError, match="no root filesystem"):
        oci_layout.write_layout(spec, tmp_path / "out")


@pytest.fixture
def registry(layout: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    links = tmp_path / "links"
    links.mkdir()
    server = RegistryServer(0, links)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], links
    finally:
        server.shutdown()
        server.server_close()


def _get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request(method, path)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    return response.status, dict(response.getheaders()), body


def test_the_registry_serves_what_was_imported_and_nothing_else(registry: tuple[int, Path], layout: Path) -> None:
    port, links = registry
    assert _get(port, "/v2/")[0] == 200
    path = "/v2/library/debian/manifests/bookworm?ns=docker.io"
    assert _get(port, path)[0] == 404  # not linked yet: an image not imported
    (links / "debian").symlink_to(layout)
    status, headers, body = _get(port, path)
    assert status == 200
    digest = headers["Docker-Content-Digest"]
    assert hashlib.sha256(body).hexdigest() == digest.split(":")[1]
    assert _get(port, f"/v2/library/debian/manifests/{digest}?ns=docker.io", "HEAD")[0] == 200
    layer = json.loads(body)["layers"][0]["digest"]
    status, headers, _ = _get(port, f"/v2/library/debian/blobs/{layer}?ns=docker.io", "HEAD")
    assert (status, headers["Docker-Content-Digest"]) == (200, layer)
    assert _get(port, "/v2/library/debian/manifests/bookworm?ns=ghcr.io")[0] == 404  # another registry's
    assert _get(port, "/v2/library/nginx/manifests/latest?ns=docker.io")[0] == 404
    assert _get(port, "/v2/library/debian/blobs/sha256:" + "0" * 64)[0] == 404

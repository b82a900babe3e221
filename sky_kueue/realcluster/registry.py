"""A read-only registry on 127.0.0.1 serving the real node's imported images, for ``Always`` pulls.

Why a registry at all when the images are imported: SkyPilot's pod template says
``imagePullPolicy: Always`` for its ``ray-node`` container (``sky/templates/
kubernetes-ray.yml.j2``), so the kubelet asks containerd to pull it at every container start
(``pkg/kubelet/images/image_manager.go`` ``EnsureImageExists``), and containerd's pull resolves
the reference at a registry even when the image is present. On a user's cluster that
registry is reachable; here none is, so containerd's CRI is configured with this server as
the mirror of every registry the project's images are named in (:mod:`.node`). A pull of one
of them resolves here to the manifest of the layout that was imported (so nothing is
downloaded), and a pull of any other image fails with 404 (the kubelet's ``ErrImagePull``).

It implements the read side of the OCI distribution specification that a pull uses:
``GET /v2/``, ``HEAD``/``GET /v2/<name>/manifests/<tag or digest>`` and
``HEAD``/``GET /v2/<name>/blobs/<digest>``, where containerd's mirror request names the
upstream registry in the ``ns`` query parameter (containerd's ``docker`` resolver).
Run as ``python -m sky_kueue.realcluster.registry --port P DIR``, where ``DIR`` holds one
symbolic link per imported layout; it is read again at every manifest request, so an image
imported after the node started is served too.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from sky_kueue.realcluster.oci_layout import MANIFEST_MEDIA_TYPE, LayoutManifest, manifests_of

#: ``/v2/<name>/(manifests|blobs)/<reference>`` (a name has slashes; a reference has none).
_PATH = re.compile(r"^/v2/(?P<name>.+)/(?P<kind>manifests|blobs)/(?P<ref>[^/]+)$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
CHUNK_BYTES = 1024 * 1024


class Catalog:
    """Which manifest each full reference names, and where every blob of those layouts is."""

    def __init__(self, layouts: Iterable[Path]) -> None:
        self.by_reference: dict[str, LayoutManifest] = {}
        self.layouts: list[Path] = []
        for layout in layouts:
            self.layouts.append(layout)
            for entry in manifests_of(layout):
                self.by_reference[entry.reference] = entry

    def manifest(self, registry: str, name: str, ref: str) -> LayoutManifest | None:
        """The manifest of ``registry/name`` at tag or digest ``ref``."""
        if _DIGEST.match(ref):
            wanted = (registry, name)
            return next(
                (m for m in self.by_reference.values() if m.digest == ref and _repository(m.reference) == wanted), None
            )
        return self.by_reference.get(f"{registry}/{name}:{ref}")

    def blob(self, digest: str) -> Path | None:
        if not _DIGEST.match(digest):
            return None
        hexdigest = digest.split(":", 1)[1]
        return next((p for layout in self.layouts if (p := layout / "blobs" / "sha256" / hexdigest).is_file()), None)


def _repository(reference: str) -> tuple[str, str]:
    registry, _, rest = reference.partition("/")
    return registry, rest.rsplit(":", 1)[0]


class _Handler(BaseHTTPRequestHandler):
    server: RegistryServer

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def _serve(self, *, body: bool) -> None:
        url = urlsplit(self.path)
        if url.path in ("/v2", "/v2/"):
            self._send(200, b"{}", "application/json", body=body)
            return
        match = _PATH.match(url.path)
        if match is None:
            self._send(404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}', "application/json", body=body)
            return
        registry = (parse_qs(url.query).get("ns") or ["docker.io"])[0]
        if match["kind"] == "manifests":
            self.server.refresh()
        catalog = self.server.catalog
        if match["kind"] == "manifests":
            found = catalog.manifest(registry, match["name"], match["ref"])
            path = catalog.blob(found.digest) if found else None
            if found is None or path is None:
                self._send(404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', "application/json", body=body)
                return
            self._send_file(path, MANIFEST_MEDIA_TYPE, found.digest, body=body)
            return
        blob = catalog.blob(match["ref"])
        if blob is None:
            self._send(404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', "application/json", body=body)
            return
        self._send_file(blob, "application/octet-stream", match["ref"], body=body)

    def _send(self, status: int, data: bytes, content_type: str, *, body: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _send_file(self, path: Path, content_type: str, digest: str, *, body: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(path.stat().st_size))
        self.send_header("Docker-Content-Digest", digest)
        self.send_header("Docker-Distribution-API-Version", "registry/2.0")
        self.end_headers()
        if body:
            with path.open("rb") as handle:
                while chunk := handle.read(CHUNK_BYTES):
                    self.wfile.write(chunk)

    def log_message(self, format: str, *args: object) -> None:
        sys.stderr.write(f"registry: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}\n")


class RegistryServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, links: Path, host: str = "127.0.0.1") -> None:
        self.links = links
        self.catalog = Catalog([])
        self.refresh()
        super().__init__((host, port), _Handler)

    def refresh(self) -> None:
        """Read the layouts ``links`` names again (an image imported since is served from now on)."""
        self.catalog = Catalog(sorted(p.resolve() for p in self.links.iterdir() if (p / "index.json").is_file()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sky_kueue.realcluster.registry", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("links", type=Path, help="a directory of links to OCI image layouts")
    args = parser.parse_args(argv)
    if not args.links.is_dir():
        print(f"registry: {args.links} is not a directory", file=sys.stderr)
        return 2
    server = RegistryServer(args.port, args.links)
    print(f"registry: serving {len(server.catalog.by_reference)} references on 127.0.0.1:{args.port}", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

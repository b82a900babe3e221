"""Build the real cluster's upstream components from their Go modules, cached by version.

Each component is built in a throwaway wrapper module (``go get PKG@VERSION`` then ``go
build``) under the cache, never in the repository: ``go install PKG@VERSION`` refuses modules
whose go.mod has replace directives (etcd's server module points at its siblings), and
``k8s.io/kubernetes`` requires its staging modules at ``v0.0.0`` with replace directives that
only apply inside its own repository, so the wrapper pins each staging module to the release's
``v0.<minor>.<patch>`` tag, as any consumer of ``k8s.io/kubernetes`` must.

The real node's kubelet comes from the same ``k8s.io/kubernetes`` wrapper as the control plane
(a step of its own, so a cache built before it gains only the kubelet), and its pause binary
from the Go source shipped in ``sky_kueue/data/pause`` (keyed by the source's hash).

Layout: ``<cache>/<component>-<version>/bin/<binary>``, plus the data files the cluster reads
from the same module (Kueue's CRDs, RBAC and webhook manifests; KWOK's stages) copied to
``<cache>/<component>-<version>/assets/`` so a cleaned Go module cache does not break a
cached build. A component whose binaries and assets are present is not rebuilt. The cache
(default ``~/.cache/sky-kueue/upstream``, or ``$SKY_KUEUE_UPSTREAM_CACHE``) is locked while
building, so two builders (CI's stages, a test run) share one build.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sky_kueue.realcluster.versions import Pins

#: Environment variable naming the build cache directory.
CACHE_ENV = "SKY_KUEUE_UPSTREAM_CACHE"
#: The Go toolchain Kueue v0.17.0's and KWOK v0.8.0's go.mod files require at least.
MIN_GO_MINOR = 25

#: Kueue's data files the cluster applies, relative to the module root.
KUEUE_ASSETS = (
    "config/components/crd/bases",
    "config/components/rbac",
    "config/components/webhook/manifests.yaml",
    "config/components/visibility/role_binding.yaml",
)
#: KWOK's stage files the cluster uses, relative to the module root.
KWOK_ASSETS = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/general/pod-delete.yaml",
)
KUBERNETES_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: The real node's agent, from the same ``k8s.io/kubernetes`` release as the control plane.
KUBELET = "kubelet"
#: The pause program of the real node's sandbox image (its Go source ships in the package).
PAUSE_SOURCE = "pause/main.go"

Log = Callable[[str], None]


class BuildError(RuntimeError):
    """A component could not be built; the message names it and the failing command's output."""


def cache_root() -> Path:
    """The build cache directory (created on demand)."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "sky-kueue" / "upstream"


@dataclass(frozen=True)
class Binaries:
    """Where every built binary and data directory of one set of pins is."""

    root: Path
    pins: Pins

    def component(self, name: str, version: str) -> Path:
        return self.root / f"{name}-{version}"

    @property
    def etcd(self) -> Path:
        return self.component("etcd", self.pins.etcd) / "bin" / "etcd"

    @property
    def kwok(self) -> Path:
        return self.component("kwok", self.pins.kwok) / "bin" / "kwok"

    @property
    def kueue(self) -> Path:
        return self.component("kueue", self.pins.kueue) / "bin" / "kueue"

    def kubernetes(self, binary: str) -> Path:
        return self.component("kubernetes", self.pins.kubernetes) / "bin" / binary

    @property
    def kubelet(self) -> Path:
        return self.kubernetes(KUBELET)

    @property
    def pause(self) -> Path:
        """The pause binary, keyed by its source's hash (an edited source builds a new one)."""
        return self.component("pause", pause_source_hash()) / "bin" / "pause"

    @property
    def kueue_assets(self) -> Path:
        return self.component("kueue", self.pins.kueue) / "assets"

    @property
    def kwok_assets(self) -> Path:
        return self.component("kwok", self.pins.kwok) / "assets"

    def missing(self) -> list[Path]:
        """Binaries and asset directories not yet built."""
        wanted = [self.etcd, self.kwok, self.kueue, self.kueue_assets, self.kwok_assets]
        wanted += [self.kubernetes(b) for b in KUBERNETES_BINARIES]
        wanted += [self.kubelet, self.pause]
        return [path for path in wanted if not path.exists()]


def _run(command: list[str], cwd: Path, what: str, env: dict[str, str]) -> str:
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise BuildError(f"building {what}: `{' '.join(command)}` exited {proc.returncode}:\n{tail}")
    return proc.stdout


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    env["CGO_ENABLED"] = "0"
    flags = env.get("GOFLAGS", "").split()
    for flag in ("-buildvcs=false", "-trimpath"):
        if flag not in flags:
            flags.append(flag)
    env["GOFLAGS"] = " ".join(flags)
    return env


def check_go() -> str:
    """The Go toolchain's version; raises :class:`BuildError` when Go is missing or too old."""
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            f"Go is not installed: the real cluster is built from Go modules (need Go >= 1.{MIN_GO_MINOR})"
        )
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True, check=False).stdout.strip()
    try:
        minor = int(out.removeprefix("go").split(".")[1])
    except (IndexError, ValueError):
        raise BuildError(f"cannot read the Go version from `go env GOVERSION`: {out!r}") from None
    if minor < MIN_GO_MINOR:
        raise BuildError(f"Go {out} is too old: the pinned modules need Go >= 1.{MIN_GO_MINOR}")
    return out


def module_dir(module: str, version: str, env: dict[str, str], scratch: Path) -> Path:
    """The module's source directory in Go's module cache, downloading it if needed."""
    out = _run(["go", "mod", "download", "-json", f"{module}@{version}"], scratch, module, env)
    info = json.loads(out)
    if "Dir" not in info:
        raise BuildError(f"go mod download {module}@{version}: {info.get('Error', 'no directory reported')}")
    return Path(info["Dir"])


def _wrapper(work: Path, name: str, requires: str = "", replaces: list[str] | None = None) -> None:
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    lines = [f"module sky-kueue.invalid/{name}-build", "", "go 1.25.0", ""]
    if requires:
        lines.append(f"require {requires}")
    if replaces:
        lines.append("replace (")
        lines += [f"\t{line}" for line in replaces]
        lines.append(")")
    (work / "go.mod").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _build_packages(
    work: Path, what: str, packages: dict[str, Path], version: str, ldflags: str, env: dict[str, str]
) -> None:
    for package in packages:
        _run(["go", "get", f"{package}@{version}"], work, what, env)
    for package, output in packages.items():
        output.parent.mkdir(parents=True, exist_ok=True)
        tmp = output.with_name(output.name + ".partial")
        _run(["go", "build", "-ldflags", f"-s -w {ldflags}".strip(), "-o", str(tmp), package], work, what, env)
        tmp.replace(output)


def _copy_assets(source: Path, names: tuple[str, ...], target: Path) -> None:
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for name in names:
        src = source / name
        dst = partial / name
        if src.is_dir():
            shutil.copytree(src, dst)
        else:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
    for path in partial.rglob("*"):  # the module cache is read-only; our copy need not be
        path.chmod(0o755 if path.is_dir() else 0o644)
    shutil.rmtree(target, ignore_errors=True)
    partial.replace(target)


def _kubernetes_replaces(go_mod: str, staging_tag: str) -> list[str]:
    """One replace line per staging module that k8s.io/kubernetes's go.mod requires at v0.0.0."""
    modules: set[str] = set()
    for raw in go_mod.splitlines():
        fields = raw.split()
        if len(fields) >= 2 and fields[0].startswith("k8s.io/") and fields[1] == "v0.0.0":
            modules.add(fields[0])
    return [f"{module} => {module} {staging_tag}" for module in sorted(modules)]


@contextmanager
def _locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_built(pins: Pins, log: Log = print, root: Path | None = None) -> Binaries:
    """Build whatever of ``pins`` the cache lacks; return where everything is.

    Prints one line per component: ``cached`` or its build time in seconds.

    Raises:
        BuildError: Go is missing or too old, or a component failed to download or build.
    """
    binaries = Binaries(root or cache_root(), pins)
    if not binaries.missing():
        log(f"real cluster binaries: cached in {binaries.root}")
        return binaries
    check_go()
    env = _go_env()
    with _locked(binaries.root):
        scratch = binaries.root / "scratch"
        scratch.mkdir(exist_ok=True)
        steps: list[tuple[str, list[Path], Callable[[], None]]] = [
            ("etcd " + pins.etcd, [binaries.etcd], lambda: _build_etcd(binaries, env)),
            ("kwok " + pins.kwok, [binaries.kwok, binaries.kwok_assets], lambda: _build_kwok(binaries, env, scratch)),
            (
                "kueue " + pins.kueue,
                [binaries.kueue, binaries.kueue_assets],
                lambda: _build_kueue(binaries, env, scratch),
            ),
            (
                "kubernetes " + pins.kubernetes,
                [binaries.kubernetes(b) for b in KUBERNETES_BINARIES],
                lambda: _build_kubernetes(binaries, env, scratch, KUBERNETES_BINARIES),
            ),
            (
                "kubelet " + pins.kubernetes,
                [binaries.kubelet],
                lambda: _build_kubernetes(binaries, env, scratch, (KUBELET,)),
            ),
            ("pause " + pause_source_hash(), [binaries.pause], lambda: _build_pause(binaries, env)),
        ]
        for what, outputs, step in steps:
            if all(path.exists() for path in outputs):
                log(f"{what}: cached")
                continue
            started = time.monotonic()
            step()
            log(f"{what}: built in {time.monotonic() - started:.0f} s")
    return binaries


def _build_etcd(binaries: Binaries, env: dict[str, str]) -> None:
    pins = binaries.pins
    work = binaries.component("etcd", pins.etcd) / "work"
    _wrapper(work, "etcd")
    _build_packages(work, "etcd", {"go.etcd.io/etcd/server/v3": binaries.etcd}, pins.etcd, "", env)
    shutil.rmtree(work, ignore_errors=True)


def _build_kwok(binaries: Binaries, env: dict[str, str], scratch: Path) -> None:
    pins = binaries.pins
    if not binaries.kwok.exists():
        work = binaries.component("kwok", pins.kwok) / "work"
        _wrapper(work, "kwok")
        _build_packages(work, "kwok", {"sigs.k8s.io/kwok/cmd/kwok": binaries.kwok}, pins.kwok, "", env)
        shutil.rmtree(work, ignore_errors=True)
    source = module_dir("sigs.k8s.io/kwok", pins.kwok, env, scratch)
    _copy_assets(source, KWOK_ASSETS, binaries.kwok_assets)


def _build_kueue(binaries: Binaries, env: dict[str, str], scratch: Path) -> None:
    pins = binaries.pins
    if not binaries.kueue.exists():
        work = binaries.component("kueue", pins.kueue) / "work"
        _wrapper(work, "kueue")
        ldflags = f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={pins.kueue}"
        _build_packages(work, "kueue", {"sigs.k8s.io/kueue/cmd/kueue": binaries.kueue}, pins.kueue, ldflags, env)
        shutil.rmtree(work, ignore_errors=True)
    source = module_dir("sigs.k8s.io/kueue", pins.kueue, env, scratch)
    _copy_assets(source, KUEUE_ASSETS, binaries.kueue_assets)


def _build_kubernetes(binaries: Binaries, env: dict[str, str], scratch: Path, names: tuple[str, ...]) -> None:
    pins = binaries.pins
    source = module_dir("k8s.io/kubernetes", pins.kubernetes, env, scratch)
    replaces = _kubernetes_replaces((source / "go.mod").read_text(encoding="utf-8"), pins.kubernetes_staging)
    work = binaries.component("kubernetes", pins.kubernetes) / "work"
    _wrapper(work, "kubernetes", f"k8s.io/kubernetes {pins.kubernetes}", replaces)
    version_vars = {
        "k8s.io/component-base/version.gitVersion": pins.kubernetes,
        "k8s.io/component-base/version.gitMajor": "1",
        "k8s.io/component-base/version.gitMinor": pins.kubernetes_minor,
        "k8s.io/component-base/version.gitTreeState": "clean",
        "k8s.io/client-go/pkg/version.gitVersion": pins.kubernetes,
    }
    ldflags = " ".join(f"-X {name}={value}" for name, value in version_vars.items())
    packages = {f"k8s.io/kubernetes/cmd/{b}": binaries.kubernetes(b) for b in names}
    _build_packages(work, "kubernetes", packages, pins.kubernetes, ldflags, env)
    shutil.rmtree(work, ignore_errors=True)


def pause_source() -> Path:
    """The pause program's Go source, shipped in the package (``sky_kueue/data/pause``)."""
    return Path(str(resources.files("sky_kueue.data").joinpath(PAUSE_SOURCE)))


def pause_source_hash() -> str:
    return hashlib.sha256(pause_source().read_bytes()).hexdigest()[:12]


def _build_pause(binaries: Binaries, env: dict[str, str]) -> None:
    """A static pause binary from :func:`pause_source` (standard library only: nothing to fetch)."""
    work = binaries.pause.parent.parent / "work"
    _wrapper(work, "pause")
    shutil.copyfile(pause_source(), work / "main.go")
    output = binaries.pause
    output.parent.mkdir(parents=True, exist_ok=True)
    tmp = output.with_name(output.name + ".partial")
    _run(["go", "build", "-ldflags", "-s -w", "-o", str(tmp), "."], work, "pause", env)
    tmp.replace(output)
    shutil.rmtree(work, ignore_errors=True)

"""Fixtures for the container tests: a sandbox with containers (root and tools required)."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sky_kueue.sandbox.containers import node
from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.recipe import ImageRecipe
from sky_kueue.sandbox.sandbox import Sandbox

KUBECTL_TIMEOUT_SECONDS = 60
#: Long enough for the first build of the Debian base (about 2-3 minutes here).
IMAGE_BUILD_TIMEOUT_SECONDS = 900.0
WAIT_TIMEOUT_SECONDS = 30.0
POLL_SECONDS = 0.05
#: An image with a file the host does not have (``kubectl exec`` must see the image's root).
MARKER_IMAGE = recipes.register(
    ImageRecipe(
        name="sky-kueue-test-marker",
        references=("sky-kueue-test/marker",),
        base=recipes.BASE_NAME,
        steps=("echo from-the-image > /sky-kueue-image-marker",),
    )
)


def why_not_containers() -> str | None:
    """Why container tests cannot run here, or None."""
    if os.geteuid() != 0:
        return "containers need root (network namespaces, mounts)"
    missing = [tool for tool in ("ip", "unshare", "nsenter", "debootstrap", "kubectl") if shutil.which(tool) is None]
    if missing:
        return f"missing tools: {', '.join(missing)} (scripts/host-tools.sh installs them)"
    return None


needs_containers = pytest.mark.skipif(why_not_containers() is not None, reason=why_not_containers() or "")


def wait_for(predicate: Callable[[], Any], timeout_seconds: float = WAIT_TIMEOUT_SECONDS, what: str = "") -> Any:
    """The predicate's first truthy value, polling; fails the test on timeout."""
    deadline = time.monotonic() + timeout_seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout_seconds} s waiting for {what or predicate}")
        time.sleep(POLL_SECONDS)


def pod(name: str, command: list[str] | None, image: str = "debian:bookworm", **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": image}
    if command is not None:
        container["command"] = command
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], "terminationGracePeriodSeconds": 1, **spec},
    }


def kubectl(box: Sandbox, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", str(box.kubeconfig_path), *args],
        capture_output=True,
        text=True,
        timeout=KUBECTL_TIMEOUT_SECONDS,
        check=False,
    )


def status(box: Sandbox, name: str) -> dict[str, Any]:
    found = box.store.try_get("pods", name, "default")
    return dict((found or {}).get("status") or {})


def mounts_mentioning(path: pathlib.Path) -> list[str]:
    text = str(path.resolve())
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        return [line for line in handle if text in line]


def netns_names() -> set[str]:
    done = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {line.split()[0] for line in done.stdout.splitlines() if line.strip()}


def links() -> str:
    return subprocess.run(["ip", "-o", "link"], capture_output=True, text=True, check=False).stdout


def stable_root(purpose: str) -> pathlib.Path:
    """A sandbox root that is the same for every run of this test worker: a run killed midway
    (a timeout) leaves namespaces behind, and the next run's start removes them."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    return (node.DEFAULT_STATE_ROOT / f"pytest-{purpose}-{worker}").expanduser()


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    reason = why_not_containers()
    if reason is not None:
        pytest.skip(reason)
    sandbox = Sandbox(containers=True, kubelet_root=stable_root("box"), name=f"ctest-{os.getpid()}")
    sandbox.start()
    assert sandbox.containers is not None
    # build the images once, up front (minutes the first time; then cached)
    sandbox.containers.images.ensure("debian:bookworm")
    sandbox.containers.images.ensure("sky-kueue-test/marker")
    try:
        yield sandbox
    finally:
        sandbox.stop()

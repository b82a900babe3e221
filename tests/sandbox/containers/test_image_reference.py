"""A reference a kubelet cannot parse is ``InvalidImageName`` in the sandbox too, never a pull.

The real node found SkyPilot's offline catalog naming ``docker:skypilot-sandbox/cpu:offline``:
a kubelet refuses it before any pull, the sandbox had run it.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import pytest

from sky_kueue.sandbox.apiserver.clock import SystemClock
from sky_kueue.sandbox.apiserver.events import StoreEvent
from sky_kueue.sandbox.apiserver.store import ObjectStore
from sky_kueue.sandbox.containers.image_reference import NAME_MAX_CHARS, invalid_reason
from sky_kueue.sandbox.containers.images import ImageStore
from sky_kueue.sandbox.containers.network import PodNetwork
from sky_kueue.sandbox.containers.recipes_skypilot import UPSTREAM_REFERENCES
from sky_kueue.sandbox.containers.runtime import PodRuntime
from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES

#: The runtime writes a pod's first waiting state within this (it builds nothing here).
WAIT_SECONDS = 20.0
POLL_SECONDS = 0.02
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.mark.parametrize(
    "reference",
    [
        "ubuntu",
        "ubuntu:22.04",
        "docker.io/library/ubuntu:22.04",
        "localhost:5000/team/app:v1.2-rc_3",
        "127.0.0.1:32000/sky-kueue.invalid/pause:6b54629d1f56",
        "Registry.Example.com/team/app",
        "[::1]:5000/app",
        f"ubuntu@{DIGEST}",
        f"ghcr.io/org/app:Latest@{DIGEST}",
        "a__b/c.d/e---f",
        *UPSTREAM_REFERENCES,
        *(image for _, image in KUBERNETES_IMAGES),
    ],
)
def test_references_a_kubelet_accepts_pass(reference: str) -> None:
    assert invalid_reason(reference) is None


@pytest.mark.parametrize(
    ("reference", "detail"),
    [
        ("docker:skypilot-sandbox/cpu:offline", "invalid reference format"),
        ("BUSYBOX", "invalid reference format: repository name must be lowercase"),
        ("team/App:v1", "invalid reference format: repository name must be lowercase"),
        ("", "invalid reference format"),
        ("team//app", "invalid reference format"),
        ("app:", "invalid reference format"),
        ("app:-tag", "invalid reference format"),
        ("app:" + "t" * 129, "invalid reference format"),
        ("app@sha256:abc", "invalid reference format"),
        ("-app", "invalid reference format"),
        ("team/app_", "invalid reference format"),
        ("a" * (NAME_MAX_CHARS + 1), f"repository name must not be more than {NAME_MAX_CHARS} characters"),
    ],
)
def test_references_a_kubelet_refuses_say_why_as_it_does(reference: str, detail: str) -> None:
    reason = invalid_reason(reference)
    assert reason == (
        f'Failed to apply default image tag "{reference}": couldn\'t parse image reference "{reference}": {detail}'
    )


def test_a_pod_naming_an_unparsable_image_waits_as_invalid_image_name_and_builds_nothing(
    tmp_path: pathlib.Path,
) -> None:
    bad = "docker:skypilot-sandbox/cpu:offline"
    store = ObjectStore()
    pod = store.create(
        "pods",
        {
            "metadata": {"name": "prefixed", "namespace": "default"},
            "spec": {"containers": [{"name": "ray", "image": bad}]},
        },
    )
    waiting: list[dict[str, Any]] = []

    def record(event: StoreEvent) -> None:
        for status in (event.obj.get("status") or {}).get("containerStatuses") or []:
            state = status["state"].get("waiting")
            if state:
                waiting.append(dict(state))

    store.add_commit_hook(record, "pods")
    runtime = PodRuntime(
        store, tmp_path / "pods", ImageStore(tmp_path / "images"), PodNetwork(tmp_path), SystemClock(), lambda p, c: {}
    )
    try:
        runtime.start_pod(pod, None)
        deadline = time.monotonic() + WAIT_SECONDS
        while len(waiting) < 2 and time.monotonic() < deadline:
            time.sleep(POLL_SECONDS)
    finally:
        runtime.shutdown()
    refused = [w for w in waiting if w["reason"] != "ContainerCreating"]
    assert refused, waiting
    assert {w["reason"] for w in refused} == {"InvalidImageName"}, waiting  # never ErrImagePull or a back-off
    assert refused[0]["message"] == invalid_reason(bad)
    assert not (tmp_path / "images").exists()  # nothing was looked up or built

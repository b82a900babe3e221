"""A reference a kubelet cannot parse is ``InvalidImageName`` in the sandbox too, never a pull.

The real node found SkyPilot's offline catalog naming ``docker:skypilot-sandbox/cpu:offline``:
a kubelet refuses it before any pull, the sandbox had run it.
"""

from __future__ import annotations

import pathlib

import pytest

from sky_kueue.sandbox.containers.image_reference import NAME_MAX_CHARS, invalid_reason
from sky_kueue.sandbox.containers.recipes_skypilot import UPSTREAM_REFERENCES
from sky_kueue.sandbox.skypilot_home import KUBERNETES_IMAGES
from tests.sandbox.containers.pod_waiting import waiting_states

#: Past the runtime's first three image retries (0.5 s, 1 s, 2 s after each other).
RETRIES_SECONDS = 4.0
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
    # past three of the runtime's image retries (0.5 s, then doubling): never a pull
    waiting = waiting_states(
        tmp_path, bad, lambda seen: any(w["reason"] != "ContainerCreating" for w in seen), then_seconds=RETRIES_SECONDS
    )
    refused = [w for w in waiting if w["reason"] != "ContainerCreating"]
    assert refused, waiting
    assert refused == [{"reason": "InvalidImageName", "message": invalid_reason(bad)}], waiting
    assert not (tmp_path / "images").exists()  # nothing was looked up or built

"""The image store: named images are built on their parent, atomically; a failing step names
itself and leaves no half-built rootfs; an unknown reference is ErrImagePull's message."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.images import ImageError, ImageNotFound, ImageStore, cache_dir
from sky_kueue.sandbox.containers.recipe import ImageRecipe
from tests.sandbox.containers.conftest import needs_containers


def test_the_cache_directory_comes_from_the_parameter_then_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SKY_KUEUE_IMAGE_CACHE", "/tmp/from-env")
    assert cache_dir() == pathlib.Path("/tmp/from-env")
    assert cache_dir("/tmp/given") == pathlib.Path("/tmp/given")
    monkeypatch.delenv("SKY_KUEUE_IMAGE_CACHE")
    assert cache_dir() == pathlib.Path("~/.cache/sky-kueue/images").expanduser()


def test_an_unknown_reference_says_which_images_exist(tmp_path: pathlib.Path) -> None:
    store = ImageStore(tmp_path)
    with pytest.raises(ImageNotFound, match=r'failed to pull image "nope:1".*debian-bookworm'):
        store.ensure("nope:1")
    assert not store.cached("nope:1")


@pytest.fixture
def failing() -> Iterator[ImageRecipe]:
    made = recipes.register(
        ImageRecipe("test-failing", ("test/failing",), recipes.BASE_NAME, ("echo partial > /p", "exit 7"))
    )
    yield made
    recipes.unregister("test-failing")


@pytest.mark.slow
@needs_containers
def test_a_failing_step_names_itself_and_leaves_nothing_half_built(failing: ImageRecipe) -> None:
    store = ImageStore()
    store.ensure("debian:bookworm")  # the base (cached after the first build)
    with pytest.raises(ImageError, match=r"image test-failing: step 'exit 7'.*exit code 7"):
        store.ensure("test/failing")
    assert not store.path(failing).exists()
    assert list(store.cache.glob(f".building-{store.path(failing).name}-*")) == []

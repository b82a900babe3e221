"""The image store: named images are built on their parent, atomically; a failing step names
itself and leaves no half-built rootfs; an unknown reference is ErrImagePull's message, which
says how to get the image when a hint is registered for it (the controller's, without sources)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from sky_kueue.sandbox.containers import images, recipes_controller
from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.images import ImageError, ImageNotFound, ImageStore, cache_dir
from sky_kueue.sandbox.containers.recipe import ImageRecipe
from tests.sandbox.containers.conftest import needs_containers
from tests.sandbox.containers.pod_waiting import waiting_states


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


def test_a_hint_ends_the_no_recipe_message_of_its_repository_whatever_the_tag(tmp_path: pathlib.Path) -> None:
    store = ImageStore(tmp_path)
    images.explain_missing("registry.example.com/hinted", "built elsewhere: see the docs")
    try:
        for reference in ("registry.example.com/hinted:2.0", "registry.example.com/hinted@sha256:ab"):
            with pytest.raises(ImageNotFound) as raised:
                store.resolve(reference)
            message = str(raised.value)
            assert message.startswith(f'failed to pull image "{reference}"')
            assert message.endswith("; built elsewhere: see the docs") and "\n" not in message
        with pytest.raises(ImageNotFound) as other:
            store.resolve("registry.example.com/unhinted:2.0")
        assert "built elsewhere" not in str(other.value)
    finally:
        images._MISSING_HINTS.pop("registry.example.com/hinted", None)


def test_a_hint_of_several_lines_is_refused() -> None:
    with pytest.raises(ValueError, match="must be one line"):
        images.explain_missing("registry.example.com/multi", "first\nsecond")
    assert images.missing_hint("registry.example.com/multi:1") is None


@pytest.fixture
def no_controller_recipe() -> Iterator[None]:
    """The controller's recipe unregistered, as from an installed wheel (no sources to build it)."""
    saved = recipes.get(recipes_controller.CONTROLLER_IMAGE)
    recipes.unregister(recipes_controller.CONTROLLER_IMAGE)
    yield
    if saved is not None:
        recipes.register(saved)


def test_without_the_controller_recipe_the_pods_waiting_message_says_why(
    no_controller_recipe: None, tmp_path: pathlib.Path
) -> None:
    # The runtime's kubelet side only: the image fails before any network or container is made.
    waiting = waiting_states(
        tmp_path,
        recipes_controller.CONTROLLER_IMAGE_REFERENCE,
        lambda seen: any(w["reason"] == "ImagePullBackOff" for w in seen),
    )
    reasons = [w["reason"] for w in waiting]
    assert "ErrImagePull" in reasons and "ImagePullBackOff" in reasons, waiting
    for state in waiting:
        if state["reason"] in ("ErrImagePull", "ImagePullBackOff"):
            assert state["message"].endswith("; " + recipes_controller.MISSING_HINT), state
    back_off = next(w for w in waiting if w["reason"] == "ImagePullBackOff")
    assert back_off["message"].startswith(
        f'Back-off pulling image "{recipes_controller.CONTROLLER_IMAGE_REFERENCE}": ErrImagePull: failed to pull image'
    )
    assert not (tmp_path / "images").exists()  # nothing was built

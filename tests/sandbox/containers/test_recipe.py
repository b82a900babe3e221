"""Image recipes are data: references map to them by name, tag and registry prefix; their
chain digest changes when a step does, and conflicting registrations fail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sky_kueue.sandbox.containers import recipe as recipes
from sky_kueue.sandbox.containers.recipe import ImageRecipe, RecipeError


@pytest.fixture
def child() -> Iterator[ImageRecipe]:
    made = recipes.register(
        ImageRecipe(
            name="test-child",
            references=("ghcr.io/example/tool:1.0", "example/other"),
            base=recipes.BASE_NAME,
            steps=("echo one > /one",),
            env=(("TOOL", "1"),),
        )
    )
    yield made
    recipes.unregister("test-child")


@pytest.mark.parametrize(
    "reference",
    ["debian:bookworm", "docker.io/library/debian:bookworm", "python:3.11-slim", "debian", "debian-bookworm"],
)
def test_debian_and_python_references_map_to_the_base(reference: str) -> None:
    found = recipes.lookup(reference)
    assert found is not None and found.name == recipes.BASE_NAME


def test_tags_and_registries_are_matched_exactly_where_given(child: ImageRecipe) -> None:
    assert recipes.lookup("ghcr.io/example/tool:1.0") == child
    assert recipes.lookup("ghcr.io/example/tool:2.0") is None  # the recipe names tag 1.0
    assert recipes.lookup("example/other:any-tag") == child  # no tag in the recipe: any tag
    assert recipes.lookup("docker.io/example/other") == child
    assert recipes.lookup("nosuchimage:1") is None


def test_a_registry_port_is_not_a_tag() -> None:
    assert recipes.split_tag("localhost:5000/img") == ("localhost:5000/img", None)
    assert recipes.split_tag("localhost:5000/img:v1") == ("localhost:5000/img", "v1")


def test_the_chain_runs_from_the_base_and_its_digest_follows_the_steps(child: ImageRecipe) -> None:
    assert [r.name for r in recipes.chain(child)] == [recipes.BASE_NAME, "test-child"]
    before = recipes.chain_digest(child)
    recipes.unregister("test-child")
    changed = recipes.register(ImageRecipe("test-child", child.references, child.base, ("echo two > /two",)))
    assert recipes.chain_digest(changed) != before


def test_conflicting_registrations_and_missing_bases_fail_with_the_name(child: ImageRecipe) -> None:
    recipes.register(child)  # the same recipe again is fine
    with pytest.raises(RecipeError, match="test-child"):
        recipes.register(ImageRecipe("test-child", (), recipes.BASE_NAME, ("true",)))
    orphan = ImageRecipe("test-orphan", (), "no-such-parent", ())
    with pytest.raises(RecipeError, match="no-such-parent"):
        recipes.chain(orphan)

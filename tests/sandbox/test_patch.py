"""Patch algorithms: RFC 7386 merge patch, RFC 6902 JSON patch, strategic merge approximation."""

from __future__ import annotations

from typing import Any

import pytest

from sky_kueue.sandbox.apiserver import ApiError, PatchType
from sky_kueue.sandbox.apiserver.patch import apply_patch, json_patch, merge_patch, patch_type_for


def test_merge_patch_follows_rfc_7386_examples() -> None:
    target = {"a": "b", "c": {"d": "e", "f": "g"}}

    assert merge_patch(target, {"a": "z", "c": {"f": None}}) == {"a": "z", "c": {"d": "e"}}
    assert merge_patch({"a": ["b"]}, {"a": "c"}) == {"a": "c"}
    assert merge_patch({"a": [{"b": "c"}]}, {"a": [1]}) == {"a": [1]}
    assert merge_patch({}, {"a": {"bb": {"ccc": None}}}) == {"a": {"bb": {}}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}}


@pytest.mark.parametrize(
    ("operations", "expected"),
    [
        ([{"op": "add", "path": "/a/1", "value": "x"}], {"a": [1, "x", 2], "b": {"c~d/e": 3}}),
        ([{"op": "add", "path": "/a/-", "value": 9}], {"a": [1, 2, 9], "b": {"c~d/e": 3}}),
        ([{"op": "remove", "path": "/b/c~0d~1e"}], {"a": [1, 2], "b": {}}),
        ([{"op": "replace", "path": "/a/0", "value": 7}], {"a": [7, 2], "b": {"c~d/e": 3}}),
        ([{"op": "move", "from": "/a", "path": "/z"}], {"z": [1, 2], "b": {"c~d/e": 3}}),
        ([{"op": "copy", "from": "/a/1", "path": "/b/n"}], {"a": [1, 2], "b": {"c~d/e": 3, "n": 2}}),
        ([{"op": "test", "path": "/a", "value": [1, 2]}], {"a": [1, 2], "b": {"c~d/e": 3}}),
    ],
)
def test_json_patch_operations(operations: list[dict[str, Any]], expected: dict[str, Any]) -> None:
    assert json_patch({"a": [1, 2], "b": {"c~d/e": 3}}, operations) == expected


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "test", "path": "/a", "value": 2},
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/missing", "value": 1},
        {"op": "add", "path": "/x/y", "value": 1},
        {"op": "add", "path": "/a/5", "value": 1},
        {"op": "frobnicate", "path": "/a"},
        {"op": "add", "path": "a", "value": 1},
    ],
)
def test_failing_json_patch_operations_are_422(operation: dict[str, Any]) -> None:
    with pytest.raises(ApiError) as failure:
        json_patch({"a": 1}, [operation])

    assert failure.value.code == 422


def test_strategic_merge_drops_directives() -> None:
    patched = apply_patch(
        {"metadata": {"labels": {"a": "1"}}, "spec": {"x": 1}},
        {"metadata": {"labels": {"b": "2"}}, "$setElementOrder/containers": [], "spec": {"$patch": "delete"}},
        PatchType.STRATEGIC,
    )

    assert patched == {"metadata": {"labels": {"a": "1", "b": "2"}}}


def test_patch_type_from_content_type() -> None:
    assert patch_type_for("application/merge-patch+json; charset=utf-8", strategic_allowed=False) is PatchType.MERGE
    assert patch_type_for("application/strategic-merge-patch+json", strategic_allowed=True) is PatchType.STRATEGIC
    for refused, strategic_allowed in (
        ("application/strategic-merge-patch+json", False),
        ("application/apply-patch+yaml", True),
        ("application/json", True),
    ):
        with pytest.raises(ApiError) as failure:
            patch_type_for(refused, strategic_allowed=strategic_allowed)
        assert failure.value.code == 415

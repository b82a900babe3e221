"""Label and field selector grammar."""

from __future__ import annotations

import pytest

from sky_kueue.sandbox.apiserver import ApiError
from sky_kueue.sandbox.apiserver.selectors import (
    from_label_selector_dict,
    parse_field_selector,
    parse_label_selector,
)

LABELLED = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "team-a-lq", "tier": "gpu"}}}
UNLABELLED: dict[str, dict[str, str]] = {"metadata": {}}


@pytest.mark.parametrize(
    ("selector", "labelled", "unlabelled"),
    [
        ("", True, True),
        ("kueue.x-k8s.io/queue-name=team-a-lq", True, False),
        ("kueue.x-k8s.io/queue-name==team-a-lq", True, False),
        ("kueue.x-k8s.io/queue-name!=team-a-lq", False, True),
        ("tier in (cpu, gpu)", True, False),
        ("tier notin (gpu)", False, True),
        ("tier", True, False),
        ("!tier", False, True),
        ("tier=gpu, !missing", True, False),
        ("tier in (gpu),kueue.x-k8s.io/queue-name", True, False),
    ],
)
def test_label_selector_operators(selector: str, labelled: bool, unlabelled: bool) -> None:
    parsed = parse_label_selector(selector)

    assert parsed.matches(LABELLED) is labelled
    assert parsed.matches(UNLABELLED) is unlabelled


@pytest.mark.parametrize("selector", ["tier in (gpu", "tier in gpu)", "bad key!=x", "a=b,,c=d"])
def test_malformed_label_selectors_are_400(selector: str) -> None:
    with pytest.raises(ApiError) as failure:
        parse_label_selector(selector)

    assert failure.value.code == 400


def test_field_selector_on_nested_paths_and_booleans() -> None:
    event = {"involvedObject": {"name": "wl"}, "spec": {"suspend": True}, "metadata": {"name": "e1"}}

    assert parse_field_selector("involvedObject.name=wl,metadata.name==e1").matches(event)
    assert parse_field_selector("spec.suspend=true").matches(event)
    assert not parse_field_selector("involvedObject.name!=wl").matches(event)
    assert parse_field_selector("spec.nodeName=").matches(event)


def test_field_selector_without_operator_is_400() -> None:
    with pytest.raises(ApiError) as failure:
        parse_field_selector("metadata.name")

    assert failure.value.code == 400


def test_structured_label_selector() -> None:
    selector = from_label_selector_dict(
        {"matchLabels": {"tier": "gpu"}, "matchExpressions": [{"key": "zone", "operator": "DoesNotExist"}]}
    )

    assert selector.matches(LABELLED)
    assert not selector.matches(UNLABELLED)
    assert from_label_selector_dict({}).matches(UNLABELLED)

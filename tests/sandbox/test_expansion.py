"""``$(VAR)`` expansion in container commands, as the kubelet does it."""

from __future__ import annotations

import pytest

from sky_kueue.sandbox.workloads.expansion import expand, expand_all

ENV = {"POD_NAME": "controller-7d9-abcde", "POD_NAMESPACE": "sky-kueue-system", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("--identity=$(POD_NAME)", "--identity=controller-7d9-abcde"),
        ("$(POD_NAMESPACE)/$(POD_NAME)", "sky-kueue-system/controller-7d9-abcde"),
        ("$(UNDEFINED)", "$(UNDEFINED)"),  # an undefined reference stays as written
        ("x$(EMPTY)y", "xy"),
        ("$$(POD_NAME)", "$(POD_NAME)"),  # $$ escapes
        ("cost: $5", "cost: $5"),
        ("trailing $", "trailing $"),
        ("$(unterminated", "$(unterminated"),
        ("$POD_NAME", "$POD_NAME"),  # shell syntax is not Kubernetes'
    ],
)
def test_expand(text: str, expanded: str) -> None:
    assert expand(text, ENV) == expanded


def test_expand_all_keeps_order() -> None:
    assert expand_all(["run", "--lease-namespace=$(POD_NAMESPACE)"], ENV) == [
        "run",
        "--lease-namespace=sky-kueue-system",
    ]

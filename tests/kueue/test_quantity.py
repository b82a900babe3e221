"""Quantities: exact parsing (as the kubernetes client parses) and Kueue's message format."""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubernetes.utils.quantity import parse_quantity as client_parse_quantity

from sky_kueue.kueue import quantity

INPUTS = [
    "0",
    "1",
    "500m",
    "1.5",
    "2k",
    "4Gi",
    "1536Mi",
    "0.25",
    "100M",
    "1e3",
    "3E2",
    "1Ki",
    "12345678901",
    ".5",
    "7Ti",
]


@pytest.mark.parametrize("text", INPUTS)
def test_parser_agrees_with_the_kubernetes_client(text: str) -> None:
    assert quantity.parse_quantity(text) == client_parse_quantity(text)


@pytest.mark.parametrize("bad", ["", "abc", "1.2.3", "5Xi", "1e", "--1", True, None, [1]])
def test_parser_rejects_what_is_not_a_quantity(bad: object) -> None:
    with pytest.raises(quantity.QuantityError):
        quantity.parse_quantity(bad)


def test_amounts_round_up_like_kubernetes() -> None:
    assert quantity.parse_amount("cpu", "1.5") == 1500
    assert quantity.parse_amount("cpu", "0.0001") == 1  # MilliValue rounds up
    assert quantity.parse_amount("memory", "1.5") == 2  # Value rounds up
    assert quantity.parse_amount("nvidia.com/gpu", 2) == 2
    assert quantity.parse_quantity(0.5) == Decimal("0.5")


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 2000, "2"),
        ("cpu", 500, "500m"),
        ("cpu", 1500, "1500m"),
        ("cpu", 10000, "10"),
        ("cpu", 0, "0"),
        ("cpu", 1_000_000, "1k"),
        ("memory", 1024**3, "1Gi"),
        ("memory", 1536 * 1024**2, "1536Mi"),
        ("memory", 10**9, "1G"),
        ("memory", 1500, "1500"),
        ("memory", 2000, "2k"),
        ("memory", 1000, "1k"),
        ("memory", 512, "512"),
        ("nvidia.com/gpu", 3, "3"),
        ("nvidia.com/gpu", 1000, "1k"),
    ],
)
def test_messages_print_quantities_in_kueues_canonical_form(resource: str, amount: int, text: str) -> None:
    assert quantity.format_amount(resource, amount) == text

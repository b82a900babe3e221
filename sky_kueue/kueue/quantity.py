"""Kubernetes resource quantities, exactly.

Kueue does all of its quota arithmetic on integers: CPU in millicores, everything else
(memory, GPUs, ``pods``) in base units (``pkg/resources/requests.go``), rounding a
fractional value *up*, as ``resource.Quantity.Value()`` does. We do the same, so a
prediction never differs from Kueue by a rounding error. Parsing goes through
:class:`decimal.Decimal`, never floats.

Why not ``kubernetes.utils.parse_quantity``: importing ``kubernetes.utils`` pulls in the
whole generated client (about half a second), and the ``sky-kueue predict`` command must
start fast. The grammar is small and fixed; the tests cross-check this parser against the
client's on a table of inputs.

Formatting (:func:`format_amount`) reproduces the canonical string form that Kueue puts
into its pending messages (``resource.Quantity.String()`` as used by Kueue's
``ResourceFormatter``), which no Python library provides.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import ROUND_CEILING, Decimal, InvalidOperation

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
HUGEPAGES_PREFIX = "hugepages-"

_BINARY_SUFFIXES: dict[str, int] = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
#: Largest magnitude of a quantity, in base units: the API server caps quantities at the
#: int64 maximum (``resource.Quantity``'s ``maxAllowed``), and Kueue's quota arithmetic is
#: int64. Anything larger is refused here instead of being carried as a huge integer.
MAX_QUANTITY_BASE_UNITS = 2**63 - 1
#: Longest quantity text accepted; canonical quantities are a few characters, and a bound
#: keeps a pasted 4,000-digit number from reaching the decimal arithmetic.
MAX_QUANTITY_CHARS = 64
#: Decimal exponent bound of a value written with an ``e`` suffix, checked before any
#: arithmetic (``1E+999999`` once took 22 s of CPU, and beyond ``decimal``'s range it raises
#: ``decimal.Overflow``): above ``10**MAX_QUANTITY_EXPONENT`` is far beyond
#: :data:`MAX_QUANTITY_BASE_UNITS`; below ``10**-MAX_QUANTITY_EXPONENT`` every value rounds
#: up to the same smallest amount, as Kubernetes rounds up to a nano unit.
MAX_QUANTITY_EXPONENT = 64
_QUANTITY_RE = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$")


class QuantityError(ValueError):
    """A string that is not a valid Kubernetes quantity."""


#: Quantity texts whose parse is kept: a snapshot repeats a handful of texts (``"500m"``,
#: ``"4Gi"``) thousands of times, and the schema check and the conversion both parse each one.
QUANTITY_TEXTS_CACHED = 4096


def parse_quantity(value: object) -> Decimal:
    """Parse a Kubernetes quantity (``"500m"``, ``"4Gi"``, ``"1e3"``, ``2``) into a Decimal.

    Raises:
        QuantityError: if ``value`` is not a quantity.
    """
    if type(value) is str:
        return _parse_quantity_text(value)
    return _parse_quantity(value)


@functools.lru_cache(maxsize=QUANTITY_TEXTS_CACHED)
def _parse_quantity_text(value: str) -> Decimal:
    return _parse_quantity(value)


def _parse_quantity(value: object) -> Decimal:
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        if abs(value) > MAX_QUANTITY_BASE_UNITS:
            raise QuantityError(f"invalid quantity: larger than {MAX_QUANTITY_BASE_UNITS}")
        return Decimal(value)
    if isinstance(value, float):
        # YAML may give us 0.5 for an unquoted cpu request; repr() keeps its exact text.
        return parse_quantity(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"invalid quantity {value!r}")
    text = value.strip()
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(f"invalid quantity {text[:20]!r}...: longer than {MAX_QUANTITY_CHARS} characters")
    match = _QUANTITY_RE.match(text)
    if not match:
        raise QuantityError(f"invalid quantity {value!r}")
    number_text, suffix = match.groups()
    try:
        number = Decimal(number_text)
    except InvalidOperation as exc:  # pragma: no cover - regex already restricts the text
        raise QuantityError(f"invalid quantity {value!r}") from exc
    if suffix in _BINARY_SUFFIXES:
        result = number * (Decimal(1024) ** _BINARY_SUFFIXES[suffix])
    elif suffix in _DECIMAL_SUFFIXES:
        result = number.scaleb(_DECIMAL_SUFFIXES[suffix])
    elif suffix[:1] in ("e", "E") and re.fullmatch(r"[+-]?[0-9]+", suffix[1:]):
        exponent = int(suffix[1:])
        magnitude = number.adjusted() + exponent if number != 0 else 0
        if number == 0:
            result = Decimal(0)
        elif magnitude > MAX_QUANTITY_EXPONENT:
            raise QuantityError(f"invalid quantity {value!r}: larger than {MAX_QUANTITY_BASE_UNITS}")
        elif magnitude < -MAX_QUANTITY_EXPONENT:
            # Far below a nano unit: every such value rounds up to the same smallest amount.
            result = Decimal(1 if number > 0 else -1).scaleb(-MAX_QUANTITY_EXPONENT)
        else:
            result = number.scaleb(exponent)
    elif suffix[:1] in ("e", "E"):
        raise QuantityError(f"invalid quantity {value!r}")
    else:
        raise QuantityError(f"invalid quantity {value!r}: unknown suffix {suffix!r}")
    return _bounded(result, value)


def _bounded(result: Decimal, value: object) -> Decimal:
    if abs(result) > MAX_QUANTITY_BASE_UNITS:
        raise QuantityError(f"invalid quantity {value!r}: larger than {MAX_QUANTITY_BASE_UNITS}")
    return result


def to_amount(resource: str, quantity: Decimal) -> int:
    """Convert a quantity to Kueue's integer amount for ``resource``.

    CPU becomes millicores (``MilliValue``), everything else base units (``Value``); both
    round up, as Kubernetes does.
    """
    return _to_amount(resource == CPU, quantity)


def _to_amount(cpu: bool, quantity: Decimal) -> int:
    scaled = quantity * 1000 if cpu else quantity
    return int(scaled.to_integral_value(rounding=ROUND_CEILING))


def parse_amount(resource: str, value: object) -> int:
    """Parse ``value`` and convert it to the integer amount Kueue uses for ``resource``."""
    if type(value) is str:
        return _amount_of_text(resource == CPU, value)
    return to_amount(resource, parse_quantity(value))


@functools.lru_cache(maxsize=QUANTITY_TEXTS_CACHED)
def _amount_of_text(cpu: bool, value: str) -> int:
    """The amount of a quantity text: millicores for CPU, base units otherwise (all that
    :func:`to_amount` tells resources apart by)."""
    return _to_amount(cpu, _parse_quantity_text(value))


def _remove_factors(value: int, base: int) -> tuple[int, int]:
    times = 0
    while value != 0 and value % base == 0:
        value //= base
        times += 1
    return value, times


def _decimal_string(mantissa: int, exponent: int) -> str:
    """Canonical DecimalSI form of ``mantissa * 10**exponent`` (exponent a multiple of 3)."""
    amount, times = _remove_factors(mantissa, 10)
    exponent += times
    remainder = exponent % 3
    if remainder:
        amount *= 10**remainder
        exponent -= remainder
    if amount == 0:
        return "0"
    suffix = {v: k for k, v in _DECIMAL_SUFFIXES.items()}.get(exponent)
    if suffix is None:
        return f"{amount}e{exponent}"
    return f"{amount}{suffix}"


def _binary_string(value: int) -> str:
    if -1024 < value < 1024:
        return _decimal_string(value, 0)
    amount, times = _remove_factors(value, 1024)
    if times == 0:
        # Kueue re-parses the plain number, which turns it into DecimalSI form.
        return _decimal_string(value, 0)
    suffixes = {v: k for k, v in _BINARY_SUFFIXES.items()}
    while times > 6:
        amount *= 1024
        times -= 1
    return f"{amount}{suffixes[times]}"


#: Resources Kueue formats with binary (Ki/Mi/Gi) suffixes.
BINARY_RESOURCES = frozenset({MEMORY, EPHEMERAL_STORAGE})


def format_amount(resource: str, amount: int | float) -> str:
    """Format an integer amount of ``resource`` the way Kueue's messages print it.

    ``math.inf`` (an unlimited amount) prints as Kueue's "unlimited" marker.
    """
    if isinstance(amount, float):
        if math.isinf(amount):
            return "+Inf" if amount > 0 else "-Inf"
        amount = int(amount)
    if resource == CPU:
        return _decimal_string(amount, -3)
    if resource in BINARY_RESOURCES or resource.startswith(HUGEPAGES_PREFIX):
        return _binary_string(amount)
    return _decimal_string(amount, 0)

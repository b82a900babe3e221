"""One row of a CSV trace, as a declared schema (see :mod:`sky_kueue.sim.csv_trace`).

Why a schema: every cell is text, and each column has its own grammar (seconds or RFC 3339
timestamps, Go durations, Kubernetes quantities, whole GPUs). Declaring them in one model
keeps every rule, and its bound, in one place, and every bad cell gets the same one-line
error (``FILE:LINE: column 'NAME': expected ..., got 'VALUE'``). Values are bounded so the
simulator's float arithmetic can never overflow: ``memory=1e400`` once raised
``OverflowError`` deep inside a run (issue 17). Cross-row rules (one form of
``submit_time`` for the whole file, unique ``job_id``, a known ``priority_class``) stay in
the loader, which sees all rows.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, ValidationError

from sky_kueue.kueue import parse, quantity
from sky_kueue.kueue.errors import ModelError

#: Longest time span a trace may describe (submit offsets and run times): 100 years.
MAX_TRACE_SECONDS = 100 * 365 * 24 * 3600.0
#: Most GPUs one job may request.
MAX_JOB_GPUS = 1_000_000
_WHOLE_NUMBER_RE = re.compile(r"[0-9]{1,9}")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0", ""})


class RowError(ValueError):
    """A bad cell: ``column`` and what was expected (``expected ...``)."""

    def __init__(self, column: str, expected: str) -> None:
        self.column = column
        self.expected = expected
        super().__init__(f"column {column!r}: expected {expected}")


@dataclass(frozen=True)
class SubmitTime:
    """``submit_time`` in seconds; ``absolute`` when written as a timestamp."""

    seconds: float
    absolute: bool


def _seconds(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _submit_time(value: Any) -> SubmitTime:
    text = str(value)
    seconds = _seconds(text)
    if seconds is not None:
        if not 0 <= seconds <= MAX_TRACE_SECONDS:
            raise ValueError(f"seconds between 0 and {MAX_TRACE_SECONDS:.0f}")
        return SubmitTime(seconds, absolute=False)
    candidate = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        parsed = datetime.fromisoformat(candidate)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return SubmitTime(parsed.timestamp(), absolute=True)
    except (ValueError, OverflowError):
        raise ValueError("seconds or an RFC 3339 timestamp") from None


def _duration(value: Any) -> float:
    text = str(value)
    seconds = _seconds(text)
    if seconds is None:
        try:
            seconds = float(parse.parse_duration_seconds(text))
        except ModelError:
            seconds = None
    if seconds is None or not 0 < seconds <= MAX_TRACE_SECONDS:
        raise ValueError("a positive number of seconds or a duration like 1h30m")
    return seconds


def _gpus(value: Any) -> int:
    text = str(value)
    if not _WHOLE_NUMBER_RE.fullmatch(text) or int(text) > MAX_JOB_GPUS:
        raise ValueError("a whole number of GPUs >= 0")
    return int(text)


def _amount(resource: str, expected: str) -> Any:
    def convert(value: Any) -> int | None:
        text = str(value)
        if not text:
            return None
        try:
            parsed = quantity.parse_quantity(text)
        except quantity.QuantityError:
            raise ValueError(expected) from None
        if parsed < 0:
            raise ValueError(expected)
        return quantity.to_amount(resource, Decimal(parsed))

    return convert


def _failed(value: Any) -> bool:
    text = str(value).lower()
    if text not in _TRUE | _FALSE:
        raise ValueError("true or false")
    return text in _TRUE


def _non_empty(expected: str) -> Any:
    def check(value: Any) -> str:
        if not str(value):
            raise ValueError(expected)
        return str(value)

    return check


class TraceRow(BaseModel):
    """The cells of one row, converted; fields in column-check order (the first error wins)."""

    model_config = ConfigDict(extra="ignore", frozen=True, arbitrary_types_allowed=True)

    submit_time: Annotated[SubmitTime, BeforeValidator(_submit_time)]
    duration: Annotated[float, BeforeValidator(_duration)]
    gpus: Annotated[int, BeforeValidator(_gpus)]
    cpus: Annotated[int | None, BeforeValidator(_amount(quantity.CPU, "cores (8, 0.5) or a quantity (500m)"))] = None
    memory: Annotated[int | None, BeforeValidator(_amount(quantity.MEMORY, "bytes or a quantity (64Gi)"))] = None
    priority_class: str = ""
    team: Annotated[str, BeforeValidator(_non_empty("a team name"))] = ""
    job_id: str = ""
    failed: Annotated[bool, BeforeValidator(_failed)] = False


#: Columns a row may leave empty (or omit) without an error.
_OPTIONAL = ("cpus", "memory", "priority_class", "job_id", "failed")


def parse_row(values: dict[str, str]) -> TraceRow:
    """Convert one row's cells.

    Raises:
        RowError: the first bad cell, in column-check order.
    """
    cells: dict[str, str] = {k: v for k, v in values.items() if not (k in _OPTIONAL and v == "")}
    for required in ("submit_time", "duration", "gpus", "team"):
        cells.setdefault(required, "")
    try:
        return TraceRow.model_validate(cells)
    except ValidationError as exc:
        first = exc.errors()[0]
        column = str(first["loc"][0]) if first["loc"] else "row"
        expected = str(first.get("msg", "")).removeprefix("Value error, ")
        raise RowError(column, expected) from None

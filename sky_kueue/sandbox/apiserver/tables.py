"""Server-side printing: ``meta.k8s.io/v1`` Table responses for ``kubectl get``.

Why: ``kubectl get`` asks for a Table and prints the server's columns; a server that ignores
the request makes kubectl fall back to bare names, which hides exactly what a user of the
sandbox wants to see (a Workload's queue and admission, a ClusterQueue's cohort and pending
count). Columns come from the resource table (Kueue's ``additionalPrinterColumns``). The
JSONPath subset understood is what those columns use: dotted fields and one
``[?(@.field=='value')]`` filter per list.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Iterable
from typing import Any

from sky_kueue.sandbox.apiserver.clock import parse_timestamp
from sky_kueue.sandbox.apiserver.resources import PrinterColumn, ResourceType

TABLE_MEDIA_MARKER = "as=Table"
_FILTER = re.compile(r"^(?P<field>[^\[]+)\[\?\(@\.(?P<key>[^=]+)==['\"](?P<value>[^'\"]*)['\"]\)\]$")


def wants_table(accept: str) -> bool:
    """Whether an Accept header asks for a Table (kubectl's ``get`` does)."""
    return TABLE_MEDIA_MARKER in accept.replace(" ", "")


def _segments(json_path: str) -> list[str]:
    path = json_path.strip().lstrip("{").rstrip("}").lstrip(".")
    segments: list[str] = []
    depth = 0
    current = ""
    for char in path:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        if char == "." and depth == 0:
            segments.append(current)
            current = ""
        else:
            current += char
    if current:
        segments.append(current)
    return segments


def evaluate(obj: Any, json_path: str) -> Any:
    """The value at a printer-column JSONPath, or None if absent."""
    current = obj
    for segment in _segments(json_path):
        filtered = _FILTER.match(segment)
        if filtered:
            items = current.get(filtered["field"]) if isinstance(current, dict) else None
            if not isinstance(items, list):
                return None
            current = next(
                (
                    item
                    for item in items
                    if isinstance(item, dict) and str(item.get(filtered["key"])) == filtered["value"]
                ),
                None,
            )
        elif isinstance(current, dict):
            current = current.get(segment)
        else:
            return None
        if current is None:
            return None
    return current


def _age(timestamp: str, now: datetime.datetime) -> str:
    seconds = max(0, int((now - parse_timestamp(timestamp)).total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def _cell(obj: dict[str, Any], column: PrinterColumn, now: datetime.datetime) -> Any:
    value = evaluate(obj, column.json_path)
    if value is None:
        return "<unknown>" if column.type == "date" else ""
    if column.type == "date" and isinstance(value, str):
        return _age(value, now)
    if column.type == "integer" and isinstance(value, int):
        return value
    return value if isinstance(value, (str, int, float, bool)) else str(value)


def partial_metadata(item: dict[str, Any]) -> dict[str, Any]:
    """The ``PartialObjectMetadata`` a Table row carries by default (``includeObject=Metadata``)."""
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": item.get("metadata", {}),
    }


def column_definitions(resource: ResourceType, version: str) -> list[dict[str, Any]]:
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name must be unique within a namespace.",
            "priority": 0,
        }
    ]
    for column in resource.columns(version):
        definitions.append(
            {
                "name": column.name,
                "type": column.type,
                "format": "",
                "description": column.description,
                "priority": column.priority,
            }
        )
    return definitions


def table(
    resource: ResourceType,
    version: str,
    items: Iterable[dict[str, Any]],
    now: datetime.datetime,
    *,
    resource_version: str = "",
    continue_token: str = "",
    with_definitions: bool = True,
    row_object: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A Table of ``items`` (already in ``version``).

    Each row carries ``row_object(item)``, or the whole item when ``row_object`` is None
    (``includeObject=Object``).
    """
    columns = resource.columns(version)
    rows = [
        {
            "cells": [
                item.get("metadata", {}).get("name", ""),
                *[_cell(item, column, now) for column in columns],
            ],
            "object": item if row_object is None else row_object(item),
        }
        for item in items
    ]
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    result: dict[str, Any] = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "rows": rows,
    }
    result["columnDefinitions"] = column_definitions(resource, version) if with_definitions else []
    return result

"""Structured logs for the controller: one JSON object per line, secrets never printed.

Why JSON lines: the controller runs as a Deployment whose logs go to a collector; a field
per fact (``job``, ``workload``, ``boost``, ``step``) is searchable without regular
expressions, and the same lines read fine with ``jq``. Fields travel in the standard
``extra={"fields": {...}}`` of a logging call, so modules stay on the standard library's
``logging`` and the text format (``--log-format text``) shows the same facts.

Why a redaction filter: a log line must never carry a credential. The controller logs no
kubeconfig content itself, but an exception from a client library can quote request headers
or URLs; the filter masks bearer tokens, basic-auth URLs and fields whose names say secret.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any, TextIO

#: Field names whose values are replaced by :data:`REDACTED`.
SECRET_FIELD_PATTERN = re.compile(r"token|password|passwd|secret|authorization|credential|client[-_]key", re.I)
REDACTED = "<redacted>"
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+")
_URL_USERINFO = re.compile(r"(?i)\b(https?://)[^/\s:@]+:[^/\s@]+@")
_STANDARD_ATTRIBUTES = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def redact_text(text: str) -> str:
    """Masks bearer/basic credentials and ``user:password@`` in URLs."""
    text = _BEARER.sub(lambda m: f"{m.group(1)} {REDACTED}", text)
    return _URL_USERINFO.sub(lambda m: f"{m.group(1)}{REDACTED}@", text)


def redact_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``fields`` with secret-looking keys masked and strings scrubbed."""
    clean: dict[str, Any] = {}
    for key, value in fields.items():
        if SECRET_FIELD_PATTERN.search(str(key)):
            clean[key] = REDACTED
        elif isinstance(value, str):
            clean[key] = redact_text(value)
        elif isinstance(value, dict):
            clean[key] = redact_fields(value)
        else:
            clean[key] = value
    return clean


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    fields = getattr(record, "fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


class JsonFormatter(logging.Formatter):
    """``{"ts", "level", "logger", "msg", ...fields}`` per line; exceptions as one string."""

    def format(self, record: logging.LogRecord) -> str:
        document: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact_text(record.getMessage()),
        }
        document.update(redact_fields(_fields(record)))
        for key, value in record.__dict__.items():
            if key not in _STANDARD_ATTRIBUTES and key != "fields" and key not in document:
                document[key] = REDACTED if SECRET_FIELD_PATTERN.search(key) else value
        if record.exc_info:
            document["error"] = redact_text(self.formatException(record.exc_info))
        return json.dumps(document, default=str, sort_keys=False)


class TextFormatter(logging.Formatter):
    """``time level logger: message key=value ...`` for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, tz=timezone.utc).strftime("%H:%M:%S")
        fields = " ".join(f"{k}={v}" for k, v in redact_fields(_fields(record)).items())
        line = f"{stamp} {record.levelname.lower():7s} {record.name}: {redact_text(record.getMessage())}"
        if fields:
            line += f" {fields}"
        if record.exc_info:
            line += "\n" + redact_text(self.formatException(record.exc_info))
        return line


def configure(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> logging.Handler:
    """Routes the ``sky_kueue`` loggers to ``stream`` (stderr) in ``fmt`` (json or text).

    Returns:
        The installed handler (remove it to undo).

    Raises:
        ValueError: unknown format or level.
    """
    if fmt not in ("json", "text"):
        raise ValueError(f"log format must be json or text, got {fmt!r}")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger("sky_kueue")
    root.addHandler(handler)
    root.setLevel(numeric)
    root.propagate = False
    return handler


def install(fmt: str = "json", level: str = "info", stream: TextIO | None = None) -> Callable[[], None]:
    """:func:`configure`, returning a function that undoes it (handler, level, propagation),
    so a command run in-process (click's ``CliRunner``) leaves logging as it found it.

    Raises:
        ValueError: unknown format or level.
    """
    root = logging.getLogger("sky_kueue")
    level_before, propagate_before = root.level, root.propagate
    handler = configure(fmt, level, stream)

    def undo() -> None:
        root.removeHandler(handler)
        root.setLevel(level_before)
        root.propagate = propagate_before

    return undo

"""Label and field selectors, parsed from query strings and evaluated on stored objects.

Why exact grammar matters: the mirror and the controller narrow their lists and watches with
selectors (``kueue.x-k8s.io/queue-name in (a,b)``, ``involvedObject.name=wl``); a fake that
ignored them would let a client bug (a missing selector, a wrong operator) pass every test.
The grammar is the one of ``k8s.io/apimachinery/pkg/labels``: comma-separated requirements,
``=``/``==``/``!=``, ``in (...)``/``notin (...)``, ``key`` (exists) and ``!key`` (absent).
Field selectors take ``=``/``==``/``!=`` on dotted paths into the object. Unlike the real
server, any field path is accepted for any resource (the real one allows a per-kind set).

A structured ``metav1.LabelSelector`` (``matchLabels``/``matchExpressions``) can be turned
into the same representation with :func:`from_label_selector_dict`, for in-process users.
"""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterable, Mapping
from typing import Any

from sky_kueue.sandbox.apiserver import errors


class Operator(str, enum.Enum):
    EQUALS = "="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"


@dataclasses.dataclass(frozen=True)
class Requirement:
    """One clause of a selector: ``key <operator> values``."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.operator is Operator.EXISTS:
            return present
        if self.operator is Operator.DOES_NOT_EXIST:
            return not present
        if self.operator in (Operator.EQUALS, Operator.IN):
            return present and labels[self.key] in self.values
        # != and notin match objects without the key, as in Kubernetes.
        return not present or labels[self.key] not in self.values


@dataclasses.dataclass(frozen=True)
class LabelSelector:
    """A conjunction of label requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        labels = obj.get("metadata", {}).get("labels") or {}
        return all(requirement.matches(labels) for requirement in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements


@dataclasses.dataclass(frozen=True)
class FieldRequirement:
    path: tuple[str, ...]
    value: str
    negated: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        found = field_value(obj, self.path)
        equal = found == self.value
        return equal != self.negated


@dataclasses.dataclass(frozen=True)
class FieldSelector:
    """A conjunction of ``path=value`` / ``path!=value`` requirements."""

    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(requirement.matches(obj) for requirement in self.requirements)

    @property
    def is_empty(self) -> bool:
        return not self.requirements


EVERYTHING = LabelSelector()
ALL_FIELDS = FieldSelector()

_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_SET_CLAUSE = re.compile(r"^\s*(\S+)\s+(in|notin)\s*\(([^)]*)\)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Splits on commas that are not inside ``( ... )``."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
            if depth < 0:
                raise errors.bad_request(f"unable to parse selector {text!r}: unbalanced ')'")
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise errors.bad_request(f"unable to parse selector {text!r}: unbalanced '('")
    parts.append("".join(current))
    return parts


def _checked_key(key: str, source: str) -> str:
    if not _LABEL_KEY.match(key):
        raise errors.bad_request(f"unable to parse requirement in {source!r}: invalid label key {key!r}")
    return key


def parse_label_selector(text: str | None) -> LabelSelector:
    """Parses a ``labelSelector`` query parameter.

    Raises:
        ApiError: 400 if the text is not a valid selector.
    """
    if not text or not text.strip():
        return EVERYTHING
    requirements: list[Requirement] = []
    for raw in _split_top_level(text):
        clause = raw.strip()
        if not clause:
            raise errors.bad_request(f"unable to parse selector {text!r}: empty requirement")
        set_match = _SET_CLAUSE.match(clause)
        if set_match:
            key, word, inner = set_match.groups()
            values = frozenset(value.strip() for value in inner.split(",") if value.strip())
            operator = Operator.IN if word == "in" else Operator.NOT_IN
            requirements.append(Requirement(_checked_key(key, text), operator, values))
        elif "!=" in clause:
            key, value = clause.split("!=", 1)
            requirements.append(
                Requirement(_checked_key(key.strip(), text), Operator.NOT_EQUALS, frozenset({value.strip()}))
            )
        elif "=" in clause:
            key, value = clause.split("==", 1) if "==" in clause else clause.split("=", 1)
            requirements.append(
                Requirement(_checked_key(key.strip(), text), Operator.EQUALS, frozenset({value.strip()}))
            )
        elif clause.startswith("!"):
            requirements.append(Requirement(_checked_key(clause[1:].strip(), text), Operator.DOES_NOT_EXIST))
        else:
            requirements.append(Requirement(_checked_key(clause, text), Operator.EXISTS))
    return LabelSelector(tuple(requirements))


def parse_field_selector(text: str | None) -> FieldSelector:
    """Parses a ``fieldSelector`` query parameter.

    Raises:
        ApiError: 400 if a clause has no operator.
    """
    if not text or not text.strip():
        return ALL_FIELDS
    requirements: list[FieldRequirement] = []
    for raw in text.split(","):
        clause = raw.strip()
        if "!=" in clause:
            path, value = clause.split("!=", 1)
            negated = True
        elif "==" in clause:
            path, value = clause.split("==", 1)
            negated = False
        elif "=" in clause:
            path, value = clause.split("=", 1)
            negated = False
        else:
            raise errors.bad_request(f"invalid field selector {text!r}: {clause!r} has no operator")
        path = path.strip()
        if not path:
            raise errors.bad_request(f"invalid field selector {text!r}: empty field path")
        requirements.append(FieldRequirement(tuple(path.split(".")), value.strip(), negated))
    return FieldSelector(tuple(requirements))


def field_value(obj: Mapping[str, Any], path: Iterable[str]) -> str:
    """The value at a dotted path rendered as a field selector compares it ("" if absent)."""
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping) or part not in current:
            return ""
        current = current[part]
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


def from_label_selector_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """Converts a structured ``metav1.LabelSelector`` into a :class:`LabelSelector`.

    A ``None`` selector matches everything here; callers for which ``nil`` means "nothing"
    must check that themselves.

    Raises:
        ApiError: 400 on an unknown ``matchExpressions`` operator.
    """
    if not selector:
        return EVERYTHING
    requirements = [
        Requirement(key, Operator.EQUALS, frozenset({str(value)}))
        for key, value in (selector.get("matchLabels") or {}).items()
    ]
    operators = {
        "In": Operator.IN,
        "NotIn": Operator.NOT_IN,
        "Exists": Operator.EXISTS,
        "DoesNotExist": Operator.DOES_NOT_EXIST,
    }
    for expression in selector.get("matchExpressions") or []:
        operator = operators.get(expression.get("operator", ""))
        if operator is None:
            raise errors.bad_request(f"invalid label selector operator {expression.get('operator')!r}")
        values = frozenset(str(value) for value in expression.get("values") or [])
        requirements.append(Requirement(expression["key"], operator, values))
    return LabelSelector(tuple(requirements))

"""A seeded mutator for structured inputs, where every mutant knows whether it is valid.

Why validity by construction: a fuzzer that decides "invalid" by looking at the program's
answer cannot catch a silent accept. Here each operator states what its mutation does to
the input's validity under the contract (Kubernetes' types and value rules, the declared
input limits); the test then checks the program against that verdict.

A mutation works on the parsed documents (plain dicts) and on the text they are dumped to.
Values that YAML cannot round-trip through a dict (an unquoted out-of-range timestamp, a
4,301-digit integer, ``.nan``) are placed as :class:`Raw` markers and substituted into the
dumped text verbatim.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from sky_kueue.inputs.yaml_reader import MAX_YAML_ALIAS_EXPANSION_NODES, MAX_YAML_ALIASES, MAX_YAML_DEPTH


@dataclass(frozen=True)
class Raw:
    """A value written into the YAML text exactly as ``text``."""

    text: str


@dataclass
class Mutant:
    """One fuzzed input: its bytes, whether the contract accepts it, and how it was made."""

    data: bytes
    valid: bool
    label: str
    extra: dict[str, Any] = field(default_factory=dict)


_BaseDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _RawDumper(_BaseDumper):
    """The safe dumper (libyaml's emitter when available: dumping is most of the fuzzer's time)."""


def _represent_raw(dumper: Any, raw: Raw) -> Any:
    # A unique plain token, replaced by the raw text after dumping.
    values: list[str] = dumper.raw_values
    values.append(raw.text)
    return dumper.represent_scalar("tag:yaml.org,2002:str", f"RAWTOKEN{len(values) - 1}X")


_RawDumper.add_representer(Raw, _represent_raw)


def dump_yaml(docs: Sequence[Any], header: str = "") -> str:
    """Dump documents (with :class:`Raw` values) to multi-document YAML text."""
    raws: list[str] = []

    class Dumper(_RawDumper):
        raw_values = raws

    text = yaml.dump_all(list(docs), Dumper=Dumper, sort_keys=False, default_flow_style=False, width=10**9)
    for index in range(len(raws) - 1, -1, -1):
        text = text.replace(f"RAWTOKEN{index}X", raws[index])
    return header + text


# --- paths into documents ---------------------------------------------------------------

Path = tuple[str, ...]


def _split(pattern: str) -> Path:
    return tuple(pattern.replace("[*]", ".*").split("."))


def instances(doc: Any, pattern: str, create: bool = True) -> list[tuple[Any, Path]]:
    """Where ``pattern`` matches in ``doc``: (container, keys below it to set).

    ``*`` matches any list index or mapping key of an existing node. A path whose plain
    keys do not exist yet matches too; :func:`assign` creates them, on the chosen spot only.
    """
    parts = _split(pattern)
    found: list[tuple[Any, Path]] = []

    def walk(node: Any, depth: int) -> None:
        part = parts[depth]
        last = depth == len(parts) - 1
        if part == "*":
            keys: list[Any] = (
                list(range(len(node))) if isinstance(node, list) else list(node) if isinstance(node, dict) else []
            )
            for key in keys:
                if last:
                    found.append((node, (key,)))
                else:
                    walk(node[key], depth + 1)
            return
        if not isinstance(node, dict):
            return
        if last:
            found.append((node, (part,)))
        elif part in node:
            walk(node[part], depth + 1)
        elif create and "*" not in parts[depth:]:
            found.append((node, parts[depth:]))

    walk(doc, 0)
    return found


def assign(container: Any, keys: Path, value: Any) -> None:
    """Set ``value`` at ``keys`` below ``container``, creating missing mappings."""
    for key in keys[:-1]:
        container = container.setdefault(key, {})
    container[keys[-1]] = value


@dataclass(frozen=True)
class Field:
    """A typed field of an input: documents it applies to, its path, and its type name."""

    path: str
    kind: str
    applies: Callable[[Any], bool] = lambda doc: True
    #: whether missing mappings on the path may be created (not where that alone is invalid)
    create: bool = True


@dataclass(frozen=True)
class Values:
    """Replacement values for one field type: each known to be invalid, or valid."""

    invalid: tuple[Any, ...]
    valid: tuple[Any, ...] = ()


# --- text-level operators ----------------------------------------------------------------


def deep_flow(depth: int) -> Raw:
    """A flow sequence nested ``depth`` levels: ``[[[...]]]``."""
    return Raw("[" * depth + "]" * depth)


def alias_bomb(levels: int, fan_out: int = 10) -> tuple[Raw, bool]:
    """A "billion laughs" flow value, and whether it stays within the alias limits."""
    parts = ["&l0 [" + ", ".join(["x"] * fan_out) + "]"]
    size = fan_out + 1
    expanded = 0
    aliases = 0
    for level in range(1, levels):
        parts.append(f"&l{level} [" + ", ".join([f"*l{level - 1}"] * fan_out) + "]")
        aliases += fan_out
        expanded += fan_out * size
        size = 1 + fan_out * size
    within = aliases <= MAX_YAML_ALIASES and expanded <= MAX_YAML_ALIAS_EXPANSION_NODES
    return Raw("[" + ", ".join(parts) + "]"), within


def recursive_alias() -> Raw:
    return Raw("&self [*self]")


def too_deep() -> int:
    return MAX_YAML_DEPTH + 1


@dataclass(frozen=True)
class ByteMutation:
    """An encoding-level mutation of the final bytes."""

    label: str
    apply: Callable[[random.Random, bytes], bytes]
    valid: bool


def _insert(byte: bytes) -> Callable[[random.Random, bytes], bytes]:
    def apply(rng: random.Random, data: bytes) -> bytes:
        at = rng.randrange(len(data) + 1)
        return data[:at] + byte + data[at:]

    return apply


BYTE_MUTATIONS = (
    ByteMutation("encoding: UTF-16", lambda rng, data: data.decode("utf-8").encode("utf-16"), valid=False),
    ByteMutation("encoding: invalid byte 0xFF", _insert(b"\xff"), valid=False),
    ByteMutation("encoding: truncated UTF-8 sequence", _insert(b"\xe2\x82"), valid=False),
    ByteMutation("encoding: UTF-8 byte-order mark", lambda rng, data: b"\xef\xbb\xbf" + data, valid=True),
)
#: Byte mutations that YAML (not CSV) refuses: control characters are not YAML text.
YAML_ONLY_BYTE_MUTATIONS = (ByteMutation("encoding: NUL byte", _insert(b"\x00"), valid=False),)


def pick(rng: random.Random, items: Sequence[Any]) -> Any:
    return items[rng.randrange(len(items))]


def deep_copy(value: Any) -> Any:
    return copy.deepcopy(value)

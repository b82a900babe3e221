"""Mutation operators for YAML inputs (snapshots, plugin configs, team specs, task YAML).

Each operator returns the mutated documents (or text) and whether the result is still
valid input, decided by what the operator did, never by running the program.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.fuzz.mutator import (
    BYTE_MUTATIONS,
    YAML_ONLY_BYTE_MUTATIONS,
    Field,
    Mutant,
    Raw,
    Values,
    alias_bomb,
    assign,
    deep_copy,
    deep_flow,
    dump_yaml,
    instances,
    pick,
    recursive_alias,
    too_deep,
)

#: Values of the wrong type for each field type, under strict (Kubernetes) decoding.
WRONG_TYPES: dict[str, tuple[Any, ...]] = {
    "str": ({"a": "b"}, ["x"], 7, True, 1.5),
    "map": ("text", ["x"], 7, True),
    "strmap": ("text", ["x"], 7, {"k": {"nested": "map"}}, {"k": 5}, {"k": ["x"]}),
    "list": ("text", {"a": 1}, 7, True),
    "int": ("five", [1], {"a": 1}, 1.5, True),
    "bool": ("maybe", [1], {"a": 1}, 5),
    "quantity": ([1], {"a": 1}, True, "1Qi", "abc", "1e", "--1", "1..5"),
    "timestamp": (5, [1], {"a": 1}, "yesterday", "2026-02-30T00:00:00Z"),
}
for _kind in ("request", "quota", "weight"):
    WRONG_TYPES[_kind] = WRONG_TYPES["quantity"]
for _kind in ("int32", "count"):
    WRONG_TYPES[_kind] = WRONG_TYPES["int"]

#: Out-of-range magnitudes per field type (invalid), and in-range oddities (valid).
MAGNITUDES: dict[str, Values] = {
    "request": Values(
        invalid=(
            "1E+999999",
            "-1",
            "-500m",
            "1e400",
            Raw(".inf"),
            Raw("-.inf"),
            Raw(".nan"),
            10**30,
            Raw("9" * 4301),
            "9223372036854775808",
            "1" * 70,
            "1e99999999",
        ),
        valid=("1e-999999", "0", "0.001m"),
    ),
    "quota": Values(
        invalid=("1E+999999", "-1", "1e400", Raw(".inf"), Raw(".nan"), 10**30, Raw("9" * 4301), "1e99999999"),
        valid=("0",),
    ),
    "weight": Values(
        invalid=("-1", Raw(".nan"), Raw(".inf"), Raw("-.inf"), "NaN", "Infinity", "1E+999999", "-0.5", -1),
        valid=("0", "0.5", 2),
    ),
    "int32": Values(invalid=(2**31, -(2**31) - 1, 10**30, Raw("9" * 4301)), valid=(0, -5)),
    "count": Values(invalid=(-1, 2**31, 10**30, Raw("9" * 4301))),
    "timestamp": Values(
        invalid=(Raw("2026-13-45T25:61:00Z"), Raw("2026-02-30 10:00:00"), "99999-01-01T00:00:00Z"),
        valid=("2020-01-01T00:00:00Z",),
    ),
}


@dataclass(frozen=True)
class YamlTarget:
    """What the mutator needs to know about one YAML input format.

    Attributes:
        fields: the typed fields (path patterns) of the format.
        wrong_types: wrong-type values per field type (strict or lax decoding).
        extra_allowed: whether an unknown top-level field is accepted (Kubernetes prunes
            unknown fields of an object; the plugin config and team spec refuse them).
        duplicate: makes a duplicate that the format forbids (object, team...), or None.
        structural: operators that break the format's shape (each invalid).
        valid_rewrites: operators that keep the input valid.
        header_mutations: comment-header lines to prepend, each with its validity.
        magnitudes: out-of-range (and in-range) values per field type.
    """

    fields: tuple[Field, ...]
    wrong_types: dict[str, tuple[Any, ...]] = field(default_factory=lambda: WRONG_TYPES)
    extra_allowed: bool = False
    duplicate: Callable[[random.Random, list[Any]], list[Any] | None] | None = None
    structural: tuple[Callable[[random.Random, list[Any]], list[Any] | None], ...] = ()
    valid_rewrites: tuple[Callable[[random.Random, list[Any]], list[Any] | None], ...] = ()
    header_mutations: tuple[tuple[str, bool], ...] = ()
    magnitudes: dict[str, Values] = field(default_factory=lambda: MAGNITUDES)


def _set_field(
    rng: random.Random, docs: list[Any], fields: Sequence[Field], kinds: set[str], values: Any
) -> str | None:
    """Set one random instance of a field of a type in ``kinds``; return its description."""
    candidates = [f for f in fields if f.kind in kinds]
    rng.shuffle(candidates)
    for fld in candidates:
        order = list(range(len(docs)))
        rng.shuffle(order)
        for index in order:
            doc = docs[index]
            if not isinstance(doc, dict) or not fld.applies(doc):
                continue
            spots = instances(doc, fld.path, fld.create)
            if not spots:
                continue
            container, keys = pick(rng, spots)
            value = values(fld.kind)
            assign(container, keys, value)
            return f"{fld.path} = {value if not isinstance(value, Raw) else value.text[:30]!r}"
    return None


def mutate_yaml(rng: random.Random, docs: list[Any], target: YamlTarget, header: str = "") -> Mutant:
    """One mutant of ``docs`` (a parsed base input)."""
    docs = deep_copy(docs)
    roll = rng.random()
    if roll < 0.30:
        label = _set_field(
            rng, docs, target.fields, set(target.wrong_types), lambda k: pick(rng, target.wrong_types[k])
        )
        if label is not None:
            return Mutant(dump_yaml(docs, header).encode(), False, f"wrong type: {label}")
    if roll < 0.50:
        chosen: dict[str, bool] = {}

        def magnitude(kind: str) -> Any:
            values = target.magnitudes[kind]
            use_valid = bool(values.valid) and rng.random() < 0.25
            chosen["valid"] = use_valid
            return pick(rng, values.valid if use_valid else values.invalid)

        label = _set_field(rng, docs, target.fields, set(target.magnitudes), magnitude)
        if label is not None:
            return Mutant(dump_yaml(docs, header).encode(), chosen["valid"], f"magnitude: {label}")
    if roll < 0.58 and target.duplicate is not None:
        mutated = target.duplicate(rng, docs)
        if mutated is not None:
            return Mutant(dump_yaml(mutated, header).encode(), False, "duplicate object")
    if roll < 0.62:
        return _duplicate_key(rng, docs, header)
    if roll < 0.70:
        return _nesting(rng, docs, target, header)
    if roll < 0.77:
        return _aliases(rng, docs, target, header)
    if roll < 0.85:
        mutations = BYTE_MUTATIONS + YAML_ONLY_BYTE_MUTATIONS
        mutation = pick(rng, mutations)
        return Mutant(mutation.apply(rng, dump_yaml(docs, header).encode()), mutation.valid, mutation.label)
    if roll < 0.90 and target.structural:
        mutated = pick(rng, target.structural)(rng, docs)
        if mutated is not None:
            return Mutant(dump_yaml(mutated, header).encode(), False, "structure")
    if roll < 0.93 and target.header_mutations:
        line, valid = pick(rng, target.header_mutations)
        return Mutant(dump_yaml(docs, line + "\n" + header).encode(), valid, f"header: {line[:60]}")
    if target.valid_rewrites:
        mutated = pick(rng, target.valid_rewrites)(rng, docs)
        if mutated is not None:
            return Mutant(dump_yaml(mutated, header).encode(), True, "valid rewrite")
    return Mutant(dump_yaml(docs, "# unchanged but for this comment\n" + header).encode(), True, "comment only")


def _first_mapping(rng: random.Random, docs: list[Any]) -> dict[str, Any] | None:
    mappings = [d for d in docs if isinstance(d, dict) and d]
    return pick(rng, mappings) if mappings else None


def _duplicate_key(rng: random.Random, docs: list[Any], header: str) -> Mutant:
    """A mapping that states one of its keys twice (strict decoding refuses it)."""
    doc = _first_mapping(rng, docs)
    assert doc is not None
    key = pick(rng, list(doc))
    doc["fuzzdupkey"] = Raw("dup")
    text = dump_yaml(docs, header).replace("fuzzdupkey: dup", f"{key}: dup", 1)
    return Mutant(text.encode(), False, f"duplicate key {key!r}")


def _extra_spot(docs: list[Any], target: YamlTarget) -> tuple[dict[str, Any], bool]:
    """Where to put an unknown top-level field, and whether the format accepts one there."""
    doc = next(d for d in docs if isinstance(d, dict))
    return doc, target.extra_allowed


def _nesting(rng: random.Random, docs: list[Any], target: YamlTarget, header: str) -> Mutant:
    container, allowed = _extra_spot(docs, target)
    if rng.random() < 0.7:
        depth = rng.choice([too_deep(), too_deep() + 50, 1000, 5000])
        container["fuzzExtra"] = deep_flow(depth)
        return Mutant(dump_yaml(docs, header).encode(), False, f"nesting {depth} deep")
    depth = rng.randint(1, 40)
    container["fuzzExtra"] = deep_flow(depth)
    return Mutant(dump_yaml(docs, header).encode(), allowed, f"nesting {depth} deep (within the limit)")


def _aliases(rng: random.Random, docs: list[Any], target: YamlTarget, header: str) -> Mutant:
    container, allowed = _extra_spot(docs, target)
    choice = rng.random()
    if choice < 0.5:
        levels = rng.randint(2, 9)
        bomb, within = alias_bomb(levels)
        container["fuzzExtra"] = bomb
        return Mutant(dump_yaml(docs, header).encode(), allowed and within, f"alias bomb, {levels} levels")
    if choice < 0.75:
        container["fuzzExtra"] = recursive_alias()
        return Mutant(dump_yaml(docs, header).encode(), False, "recursive alias")
    container["fuzzExtra"] = Raw("[&small [1, 2], *small]")
    return Mutant(dump_yaml(docs, header).encode(), allowed, "one small alias")

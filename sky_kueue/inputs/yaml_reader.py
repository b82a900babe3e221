"""YAML with limits checked before anything recursive runs.

Why: PyYAML's composer and constructor recurse once per nesting level (libyaml's composer
in C, so 100,000 nested ``[`` crash the interpreter instead of raising), aliases share one
Python object that every later walk expands ("billion laughs": nine levels of ten aliases
become 10^9 nodes), and a few scalars raise bare ``ValueError`` while being constructed (an
unquoted ``2026-13-45`` timestamp, an integer of more than 4,300 digits). So a document is
first scanned as a flat stream of parser events, which is iterative, checking nesting depth,
alias count, recursive aliases and the node count aliases expand to; only then is it built,
with constructors that turn bad scalars into located errors. Duplicate mapping keys are
refused too: Kubernetes' strict decoding rejects them, and keeping the last one silently
hides a mistake.

Every entry point (snapshots, ``--add``/``--task`` files, the plugin config, the team spec,
the policy server's request body) reads YAML through :func:`load_all` / :func:`load_one`.
"""

from __future__ import annotations

from typing import Any

import yaml

from sky_kueue.inputs.errors import InputError

#: Deepest nesting accepted. kubectl output of a Workload is about 20 levels deep (managed
#: fields included); a SkyPilot task about a dozen.
MAX_YAML_DEPTH = 100
#: Aliases accepted in one input. ``kubectl`` and SkyPilot never write any; a few
#: hand-written ones are harmless.
MAX_YAML_ALIASES = 64
#: Nodes that aliases may add when expanded (the size of what they refer to, summed).
MAX_YAML_ALIAS_EXPANSION_NODES = 10_000

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _where(mark: Any) -> str:
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def check_limits(text: str, source: str) -> None:
    """Scan the parser events of ``text`` and enforce the limits above, iteratively.

    Raises:
        InputError: too deep, too many aliases, a recursive alias, or an alias expansion
            beyond :data:`MAX_YAML_ALIAS_EXPANSION_NODES`; or invalid YAML syntax.
    """
    depth = 0
    aliases = 0
    expanded = 0
    nodes = 0
    sizes: dict[str, int] = {}
    open_anchors: list[tuple[str | None, int]] = []
    try:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise InputError(source, f"nested deeper than {MAX_YAML_DEPTH} levels{_where(event.start_mark)}")
                nodes += 1
                open_anchors.append((event.anchor, nodes))
            elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
                depth -= 1
                anchor, start = open_anchors.pop()
                if anchor is not None:
                    sizes[anchor] = nodes - start + 1
            elif isinstance(event, yaml.ScalarEvent):
                nodes += 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                aliases += 1
                if aliases > MAX_YAML_ALIASES:
                    raise InputError(source, f"more than {MAX_YAML_ALIASES} YAML aliases{_where(event.start_mark)}")
                size = sizes.get(event.anchor) if event.anchor is not None else None
                if size is None:
                    raise InputError(
                        source,
                        f"alias *{event.anchor} refers to an undefined or enclosing anchor{_where(event.start_mark)}",
                    )
                expanded += size
                nodes += size
                if expanded > MAX_YAML_ALIAS_EXPANSION_NODES:
                    raise InputError(
                        source,
                        f"YAML aliases expand to more than {MAX_YAML_ALIAS_EXPANSION_NODES} nodes"
                        f"{_where(event.start_mark)}",
                    )
            elif isinstance(event, yaml.DocumentStartEvent):
                sizes.clear()
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None


#: libyaml's scanner has its own flow-nesting limit (1,000), which it may reach while reading
#: ahead of the events this module checks; its message is replaced by ours, so a deep input
#: gets one message whichever check sees it first.
_LIBYAML_DEPTH_PROBLEM = "exceeded maximum nesting depth"


def _syntax_error(exc: yaml.YAMLError, source: str) -> InputError:
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or (str(exc).splitlines() or ["parse error"])[0]
    if problem == _LIBYAML_DEPTH_PROBLEM:
        return InputError(source, f"nested deeper than {MAX_YAML_DEPTH} levels{_where(mark)}")
    line = mark.line + 1 if mark is not None else None
    return InputError(source, f"invalid YAML{_where(mark)}: {problem}", line, f"not valid YAML: {problem}")


class _StrictConstructorLoader(_BaseLoader):
    """The safe loader with scalar constructors that fail with a location, not ``ValueError``."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode) and len(node.value) > 1:
            keys = [key.value for key, _ in node.value if type(key) is yaml.ScalarNode]
            if len(set(keys)) != len(keys):
                seen: set[str] = set()
                for key, _ in node.value:
                    if type(key) is yaml.ScalarNode and key.tag != "tag:yaml.org,2002:merge":
                        if key.value in seen:
                            raise yaml.constructor.ConstructorError(
                                None, None, f"duplicate key {key.value!r}", key.start_mark
                            )
                        seen.add(key.value)
        return super().construct_mapping(node, deep=deep)


def _checked(base: Any, what: str) -> Any:
    def construct(loader: Any, node: Any) -> Any:
        try:
            return base(loader, node)
        except (ValueError, OverflowError) as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise yaml.constructor.ConstructorError(
                None, None, f"invalid {what} {node.value[:40]!r} ({reason})", node.start_mark
            ) from None

    return construct


for _tag, _what in (
    ("tag:yaml.org,2002:int", "integer"),
    ("tag:yaml.org,2002:float", "number"),
    ("tag:yaml.org,2002:timestamp", "timestamp"),
):
    _StrictConstructorLoader.add_constructor(_tag, _checked(_BaseLoader.yaml_constructors[_tag], _what))


def load_all(text: str, source: str = "<input>") -> list[Any]:
    """Parse multi-document YAML within the limits; empty documents are dropped.

    Raises:
        InputError: invalid YAML, or beyond a limit (one line with the location).
    """
    check_limits(text, source)
    try:
        return [doc for doc in yaml.load_all(text, Loader=_StrictConstructorLoader) if doc is not None]
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None


def load_one(text: str, source: str = "<input>") -> Any:
    """Parse a single-document YAML text within the limits (``None`` when empty).

    Raises:
        InputError: invalid YAML, more than one document, or beyond a limit.
    """
    documents = load_all(text, source)
    if len(documents) > 1:
        raise InputError(source, f"expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None

"""YAML with limits checked before anything recursive runs, read in one pass on libyaml.

Why: PyYAML's composer and constructor recurse once per nesting level (libyaml's composer
in C, so 100,000 nested ``[`` crash the interpreter instead of raising), aliases share one
Python object that every later walk expands ("billion laughs": nine levels of ten aliases
become 10^9 nodes), and a few scalars raise bare ``ValueError`` while being constructed (an
unquoted ``2026-13-45`` timestamp, an integer of more than 4,300 digits). Duplicate mapping
keys are refused too: Kubernetes' strict decoding rejects them, and keeping the last one
silently hides a mistake.

How: libyaml's parser events are read once, iteratively, and each event is both checked
(nesting depth, alias count, recursive aliases, the node count aliases expand to) and built
into plain data (dicts, lists, and scalars resolved by the safe loader's own YAML 1.1 rules
and constructors). Nothing recurses, so a 100,000-deep input stops at level 101. The data
is what ``yaml.load_all`` with the safe loader would build, and every refusal is the same
located message as in the reference path below.

The reference path is PyYAML's own: :func:`check_limits` scans the whole event stream, then
``yaml.load_all`` constructs with a loader whose constructors refuse duplicate keys and turn
bad scalars into located errors. The one-pass reader hands over to it, from scratch, for
anything it does not build itself: explicit tags, merge keys (``<<``), keys that are not
strings, duplicate anchors, and every construction error (a duplicate key, a bad scalar).
So those inputs keep the exact reference behaviour, including which of several problems is
reported (a limit anywhere in the stream before a construction error), at the old speed.
A limit or syntax error found by the one-pass reader is raised directly: it is the first
one :func:`check_limits` would meet, at the same event.

Before both, a block fast path (:func:`_load_all_block`) reads the kubectl-style subset of
YAML (block mappings and sequences of one-line scalars) line by line, each distinct line
once, about 4x faster than the one-pass reader on a large snapshot; it hands over to the
one-pass reader for anything outside that subset, so the data and every error stay the
same (``tests/inputs`` checks it differentially on the oracle's scenarios and mutants).

Every entry point (snapshots, ``--add``/``--task`` files, the plugin config, the team spec,
the policy server's request body) reads YAML through :func:`load_all` / :func:`load_one`.
"""

from __future__ import annotations

import re
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


def _too_deep(source: str, mark: Any) -> InputError:
    return InputError(source, f"nested deeper than {MAX_YAML_DEPTH} levels{_where(mark)}")


def _too_many_aliases(source: str, mark: Any) -> InputError:
    return InputError(source, f"more than {MAX_YAML_ALIASES} YAML aliases{_where(mark)}")


def _unknown_alias(source: str, anchor: Any, mark: Any) -> InputError:
    return InputError(source, f"alias *{anchor} refers to an undefined or enclosing anchor{_where(mark)}")


def _too_much_expansion(source: str, mark: Any) -> InputError:
    return InputError(source, f"YAML aliases expand to more than {MAX_YAML_ALIAS_EXPANSION_NODES} nodes{_where(mark)}")


class _AliasBudget:
    """The alias limits, shared by both readers: how many aliases, and how many nodes they
    expand to (an alias costs the node count of what its anchor holds)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.aliases = 0
        self.expanded = 0

    def expand(self, anchor: str | None, mark: Any, sizes: dict[str, int]) -> int:
        """Count one alias of ``anchor``; returns the nodes it adds.

        Raises:
            InputError: too many aliases, an unknown (or enclosing) anchor, or too much expansion.
        """
        self.aliases += 1
        if self.aliases > MAX_YAML_ALIASES:
            raise _too_many_aliases(self.source, mark)
        size = sizes.get(anchor) if anchor is not None else None
        if size is None:
            raise _unknown_alias(self.source, anchor, mark)
        self.expanded += size
        if self.expanded > MAX_YAML_ALIAS_EXPANSION_NODES:
            raise _too_much_expansion(self.source, mark)
        return size


def check_limits(text: str, source: str) -> None:
    """Scan the parser events of ``text`` and enforce the limits above, iteratively.

    Raises:
        InputError: too deep, too many aliases, a recursive alias, or an alias expansion
            beyond :data:`MAX_YAML_ALIAS_EXPANSION_NODES`; or invalid YAML syntax.
    """
    depth = 0
    budget = _AliasBudget(source)
    nodes = 0
    sizes: dict[str, int] = {}
    open_anchors: list[tuple[str | None, int]] = []
    try:
        for event in yaml.parse(text, Loader=_BaseLoader):
            if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise _too_deep(source, event.start_mark)
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
                nodes += budget.expand(event.anchor, event.start_mark, sizes)
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
        return _too_deep(source, mark)
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


def _load_all_reference(text: str, source: str) -> list[Any]:
    """The reference path: the limits over the whole stream, then PyYAML's constructor."""
    check_limits(text, source)
    try:
        return [doc for doc in yaml.load_all(text, Loader=_StrictConstructorLoader) if doc is not None]
    except yaml.YAMLError as exc:
        raise _syntax_error(exc, source) from None


_STR_TAG = "tag:yaml.org,2002:str"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
#: Scalar tags the one-pass reader builds through the loader's own constructors (after the
#: loader's own implicit resolvers chose them); any other resolved tag hands over.
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "timestamp"))
#: The constructors the one-pass reader reproduces itself (a str is its raw value; a mapping a
#: dict filled in order; a sequence a list).
_STOCK = {
    _STR_TAG: yaml.constructor.SafeConstructor.construct_yaml_str,
    _SEQ_TAG: yaml.constructor.SafeConstructor.construct_yaml_seq,
    _MAP_TAG: yaml.constructor.SafeConstructor.construct_yaml_map,
}
_NO_KEY: Any = object()


class _HandOver(Exception):
    """The one-pass reader met something it leaves to the reference path."""


def _one_pass_applies() -> bool:
    """Whether the loader's resolution and constructors are the ones the one-pass reader copies."""
    loader = _StrictConstructorLoader
    return (
        not loader.yaml_path_resolvers
        and loader.DEFAULT_SCALAR_TAG == _STR_TAG
        and loader.DEFAULT_SEQUENCE_TAG == _SEQ_TAG
        and loader.DEFAULT_MAPPING_TAG == _MAP_TAG
        and all(loader.yaml_constructors.get(tag) is func for tag, func in _STOCK.items())
    )


def _load_all_one_pass(text: str, source: str) -> list[Any]:
    """Check the limits and build the documents from one iterative pass over the events.

    Raises:
        InputError: a limit or a syntax error (the first the reference path would meet).
        _HandOver: anything else, for the reference path to decide.
    """
    loader = _StrictConstructorLoader(text)
    try:
        return _build(loader, source)
    except yaml.YAMLError as exc:  # from the parser only: construction errors hand over
        raise _syntax_error(exc, source) from None
    finally:
        loader.dispose()


def _construct_plain(loader: Any, value: str, start_mark: Any = None, end_mark: Any = None, style: Any = None) -> Any:
    """A plain scalar as the loader builds it: its implicit resolvers, then its constructor.

    Raises:
        _HandOver: a tag the one-pass readers do not build, or a bad scalar (the reference
            path reports it in its turn).
    """
    resolvers = loader.yaml_implicit_resolvers
    tag = _STR_TAG
    for candidate, regexp in resolvers.get(value[0] if value else "", []) + resolvers.get(None, []):
        if regexp.match(value):
            tag = candidate
            break
    if tag == _STR_TAG:
        return value
    constructors = loader.yaml_constructors
    if tag not in _SCALAR_TAGS or tag not in constructors:
        raise _HandOver
    node = yaml.ScalarNode(tag, value, start_mark, end_mark, style)
    try:
        return constructors[tag](loader, node)
    except yaml.YAMLError:
        raise _HandOver from None


def _build(loader: Any, source: str) -> list[Any]:
    """The events of ``loader`` checked and built into documents (see :func:`_load_all_one_pass`)."""
    get_event = loader.get_event
    scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
    mapping_start, sequence_start = yaml.MappingStartEvent, yaml.SequenceStartEvent
    mapping_end, sequence_end = yaml.MappingEndEvent, yaml.SequenceEndEvent
    document_start, document_end = yaml.DocumentStartEvent, yaml.DocumentEndEvent
    stream_end = yaml.StreamEndEvent

    def construct_plain(value: str, event: Any) -> Any:
        return _construct_plain(loader, value, event.start_mark, event.end_mark, event.style)

    documents: list[Any] = []
    plain: dict[str, Any] = {}  # a plain scalar's text -> what it builds (all immutable)
    sizes: dict[str, int] = {}  # anchor -> node count, as in check_limits
    anchored: dict[str, Any] = {}  # anchor -> what it built, in this document
    # The open container (None at a document's top level), whether it is a mapping, and its
    # pending key; the enclosing ones are saved on ``stack`` with the anchor and the node
    # count at which each open container started.
    parent: Any = None
    in_mapping = False
    key: Any = _NO_KEY
    stack: list[tuple[Any, bool, Any, str | None, int]] = []
    root: Any = None
    budget = _AliasBudget(source)
    nodes = 0
    while True:
        event = get_event()
        kind = type(event)
        if kind is scalar_event:
            nodes += 1
            if event.tag is not None:
                raise _HandOver
            value = event.value
            if event.implicit[0]:
                try:
                    value = plain[value]
                except KeyError:
                    value = plain[value] = construct_plain(value, event)
            if event.anchor is not None:
                if event.anchor in anchored:
                    raise _HandOver  # a duplicate anchor: the composer's error
                sizes[event.anchor] = 1
                anchored[event.anchor] = value
            if in_mapping:
                if key is _NO_KEY:
                    if type(value) is not str or value in parent:
                        raise _HandOver  # a key that is not a string, or a repeated key
                    key = value
                else:
                    parent[key] = value
                    key = _NO_KEY
            elif parent is not None:
                parent.append(value)
            else:
                root = value
            continue
        if kind is mapping_end or kind is sequence_end:
            parent, in_mapping, key, anchor, start = stack.pop()
            if anchor is not None:
                sizes[anchor] = nodes - start + 1
            continue
        if kind is mapping_start or kind is sequence_start:
            if len(stack) >= MAX_YAML_DEPTH:
                raise _too_deep(source, event.start_mark)
            nodes += 1
            if event.tag is not None:
                raise _HandOver
            value = {} if kind is mapping_start else []
            if event.anchor is not None:
                if event.anchor in anchored:
                    raise _HandOver
                anchored[event.anchor] = value
        elif kind is alias_event:
            nodes += budget.expand(event.anchor, event.start_mark, sizes)
            value = anchored[event.anchor]
        elif kind is document_start:
            sizes.clear()
            anchored.clear()
            continue
        elif kind is document_end:
            if root is not None:
                documents.append(root)
            root = None
            continue
        elif kind is stream_end:
            return documents
        else:  # the stream's start
            continue
        # an alias, or a mapping or sequence that starts: placed like a scalar
        if in_mapping:
            if key is _NO_KEY:
                if type(value) is not str or value in parent:
                    raise _HandOver  # an alias to a non-string, a mapping or a sequence as a key
                key = value
            else:
                parent[key] = value
                key = _NO_KEY
        elif parent is not None:
            parent.append(value)
        else:
            root = value
        if kind is not alias_event:
            stack.append((parent, in_mapping, key, event.anchor, nodes))
            parent, in_mapping, key = value, kind is mapping_start, _NO_KEY


#: Characters a plain scalar of the block fast path may not start with (YAML indicators,
#: and a space: the line's shape is then not one the fast path knows).
_PLAIN_FIRST_REFUSED = frozenset("-?:,[]{}#&*!|>'\"%@` ")
#: One line of the block fast path: indentation, an optional sequence dash, then either a
#: simple key (``name:`` or ``name: value``) or a value.
_BLOCK_LINE = re.compile(r"( *)(- )?(?:([A-Za-z0-9_][A-Za-z0-9_./-]*):(?: +(.*))?|(.*))")
#: Text the block fast path leaves to libyaml whole: a carriage return, a tab, or any ASCII
#: control character (libyaml refuses some and treats the others specially).
_BLOCK_REFUSED_TEXT = re.compile(r"[\x00-\x09\x0b-\x1f\x7f]")


def _block_scalar(text: str, loader: Any, plain: dict[str, Any]) -> Any:
    """A one-line scalar as YAML builds it: quoted without escapes (a str), or plain."""
    first = text[0]
    if first == '"' or first == "'":
        if len(text) < 2 or text[-1] != first or first in text[1:-1] or "\\" in text:
            raise _HandOver
        return text[1:-1]
    if first in _PLAIN_FIRST_REFUSED or ": " in text or " #" in text or text[-1] == ":":
        raise _HandOver
    try:
        return plain[text]
    except KeyError:
        value = plain[text] = _construct_plain(loader, text)
        return value


#: What a line of the block fast path holds: a key whose value is on the next lines (or
#: null), a scalar, an empty mapping (``{}``), an empty sequence (``[]``).
_NESTED, _SCALAR, _EMPTY_MAPPING, _EMPTY_SEQUENCE = range(4)
#: A blank or comment line; a ``---`` line.
_SKIP: Any = object()
_DOCUMENT: Any = object()


def _block_value(text: str, loader: Any, plain: dict[str, Any]) -> tuple[int, Any]:
    if text == "{}":
        return _EMPTY_MAPPING, None
    if text == "[]":
        return _EMPTY_SEQUENCE, None
    return _SCALAR, _block_scalar(text, loader, plain)


def _block_line(line: str, loader: Any, plain: dict[str, Any]) -> Any:
    """One line of the block fast path: (indentation, whether it has a dash, key, what, value).

    The key is None for a sequence item that is a scalar; the indentation is that of the
    line's key, or of its dash when it has no key.

    Raises:
        _HandOver: a line outside the fast path's subset.
    """
    content = line.lstrip(" ")
    if not content or content[0] == "#":
        return _SKIP
    if line.startswith(("---", "...")):
        if line.rstrip(" ") != "---":
            raise _HandOver
        return _DOCUMENT
    match = _BLOCK_LINE.fullmatch(line)
    if match is None:
        raise _HandOver
    spaces, dash, key, key_value, value = match.groups()
    indent = len(spaces)
    if key is None:
        value = (value or "").rstrip(" ")
        if dash is None or not value:
            raise _HandOver  # a scalar alone on its line: a document that is one, or a continuation
        what, built = _block_value(value, loader, plain)
        return indent, True, None, what, built
    name = _block_scalar(key, loader, plain)
    if type(name) is not str:
        raise _HandOver
    if dash is not None:
        indent += 2
    key_value = (key_value or "").rstrip(" ")
    if not key_value:
        return indent, dash is not None, name, _NESTED, None
    what, built = _block_value(key_value, loader, plain)
    return indent, dash is not None, name, what, built


def _load_all_block(text: str) -> list[Any]:
    """The documents of ``text`` if it is plain block-style YAML, as ``kubectl`` writes it.

    Why: libyaml's events cost a Python object (and two marks) each, most of the time of a
    large snapshot. Block-style YAML of single-line scalars is read here line by line
    instead (a snapshot repeats a few thousand distinct lines, each read once): per line
    an indentation, an optional ``- ``, a simple key and a one-line value (plain, quoted
    without escapes, or an empty ``{}`` or ``[]``), or a full-line comment, a blank line or
    ``---``. Anything else (flow collections, anchors, aliases, tags, block and multi-line
    scalars, escapes, keys that are not simple strings, a repeated key, non-ASCII text,
    indentation YAML would read as a continuation or refuse, nesting near the depth limit)
    hands over to the one-pass reader from scratch, so what is built here is what it
    builds, and every error is its own. Scalars go through the same resolution and
    constructors.

    Raises:
        _HandOver: anything outside that subset.
    """
    if not text.isascii() or _BLOCK_REFUSED_TEXT.search(text):
        raise _HandOver
    loader = _StrictConstructorLoader("")
    try:
        return _block_documents(text, loader)
    finally:
        loader.dispose()


def _block_documents(text: str, loader: Any) -> list[Any]:
    documents: list[Any] = []
    plain: dict[str, Any] = {}
    lines: dict[str, Any] = {}
    max_open = MAX_YAML_DEPTH // 2
    # The innermost open container with its indentation (the column of its keys or dashes)
    # and whether it is a mapping; the enclosing ones on ``stack``. A key whose value is on
    # the next lines waits in ``pending``, with its mapping and its column.
    stack: list[tuple[int, Any, bool]] = []
    top: Any = None
    top_indent = 0
    top_mapping = False
    pending: Any = _NO_KEY
    pending_in: Any = None
    pending_indent = 0
    root: Any = None
    for line in text.split("\n"):
        parsed = lines.get(line)
        if parsed is None:
            parsed = lines[line] = _block_line(line, loader, plain)
        if parsed is _SKIP:
            continue
        if parsed is _DOCUMENT:
            if pending is not _NO_KEY:
                pending_in[pending] = _empty(loader, plain)
                pending = _NO_KEY
            if root is not None:
                documents.append(root)
            root = top = None
            stack = []
            continue
        indent, dash, name, what, value = parsed
        line_indent = indent - 2 if dash and name is not None else indent
        if pending is not _NO_KEY:
            if dash and line_indent >= pending_indent:
                opened: Any = []
                opened_mapping = False
            elif not dash and line_indent > pending_indent:
                opened = {}
                opened_mapping = True
            else:
                opened = None
            if opened is None:
                pending_in[pending] = _empty(loader, plain)
            else:
                if len(stack) >= max_open:
                    raise _HandOver
                pending_in[pending] = opened
                stack.append((top_indent, top, top_mapping))
                top, top_indent, top_mapping = opened, line_indent, opened_mapping
            pending = _NO_KEY
        elif top is None:
            if line_indent != 0 or root is not None:
                raise _HandOver
            root = top = [] if dash else {}
            top_indent, top_mapping = 0, not dash
        # close what this line ends: deeper containers, and at the same indentation a
        # sequence when the line is a key of the mapping around it
        while top_indent > line_indent or (not dash and top_indent == line_indent and not top_mapping):
            if not stack:
                raise _HandOver
            top_indent, top, top_mapping = stack.pop()
        if top_indent != line_indent:
            raise _HandOver
        if dash:
            if top_mapping:
                raise _HandOver
            if name is None:
                top.append(value if what == _SCALAR else {} if what == _EMPTY_MAPPING else [])
                continue
            if len(stack) >= max_open:
                raise _HandOver
            item: dict[Any, Any] = {}
            top.append(item)
            stack.append((top_indent, top, top_mapping))
            top, top_indent, top_mapping = item, indent, True
        elif not top_mapping:
            raise _HandOver
        if name in top:
            raise _HandOver
        if what == _SCALAR:
            top[name] = value
        elif what == _NESTED:
            pending, pending_in, pending_indent = name, top, indent
        else:
            top[name] = {} if what == _EMPTY_MAPPING else []
    if pending is not _NO_KEY:
        pending_in[pending] = _empty(loader, plain)
    if root is not None:
        documents.append(root)
    return documents


def _empty(loader: Any, plain: dict[str, Any]) -> Any:
    """What a key with no value builds (YAML's empty plain scalar: null)."""
    try:
        return plain[""]
    except KeyError:
        value = plain[""] = _construct_plain(loader, "")
        return value


def load_all(text: str, source: str = "<input>") -> list[Any]:
    """Parse multi-document YAML within the limits; empty documents are dropped.

    Raises:
        InputError: invalid YAML, or beyond a limit (one line with the location).
    """
    if _one_pass_applies():
        try:
            return _load_all_block(text)
        except _HandOver:
            pass
        try:
            return _load_all_one_pass(text, source)
        except _HandOver:
            pass
    return _load_all_reference(text, source)


def load_one(text: str, source: str = "<input>") -> Any:
    """Parse a single-document YAML text within the limits (``None`` when empty).

    Raises:
        InputError: invalid YAML, more than one document, or beyond a limit.
    """
    documents = load_all(text, source)
    if len(documents) > 1:
        raise InputError(source, f"expected one YAML document, found {len(documents)}")
    return documents[0] if documents else None

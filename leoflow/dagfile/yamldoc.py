"""Read one YAML document into plain Python values, within bounds a hostile file cannot break.

PyYAML's own composer would let a 600-byte file expand into billions of nodes
through aliases ("billion laughs"), silently keep the last of two equal keys,
and recurse once per nesting level. This reader builds the document from
libyaml's event stream instead, in one iterative pass that:

- counts every node, with an alias counting as the whole subtree it repeats,
  and stops at ``MAX_NODES`` (so the refusal is as fast as reading the file);
- stops at ``MAX_DEPTH`` levels of nesting;
- refuses a key that appears twice in one mapping, naming both lines
  (``<<`` merge keys are supported; keys a merge brings in may be overridden);
- refuses NUL and other control characters (tab, newline and carriage return
  are the only ones allowed, and only in values);
- records the line of every field path, for error messages.

An alias shares the anchored value instead of copying it, so a refused or
accepted file costs memory in proportion to its own size.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml

MAX_DOCUMENT_CHARS = 4 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 250_000

# C0 controls but tab, newline and carriage return; DEL; the C1 block (U+0080-U+009F),
# whose CSI (U+009B) many terminals honour like ESC [; lone UTF-16 surrogates, which
# libyaml refuses in a "\ud800" escape but PyYAML's pure-Python scanner lets through,
# and which no store or response can encode.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
_FORBIDDEN_IN_KEYS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_SEQ_TAGS = frozenset({None, "!", "tag:yaml.org,2002:seq"})
_MAP_TAGS = frozenset({None, "!", "tag:yaml.org,2002:map"})
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}"
    for name in ("str", "int", "float", "bool", "null", "timestamp", "binary")
)

# libyaml's parser when PyYAML was built with it: the event stream is the only part
# of PyYAML used, and the C parser is iterative and fast.
_Parser: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_resolver: Any = yaml.resolver.Resolver()
_constructor = yaml.constructor.SafeConstructor()

Path_ = tuple[str, ...]


def control_character(text: str, *, in_key: bool = False) -> str | None:
    """The first character of ``text`` a DAG may not contain, described, or None."""
    found = (_FORBIDDEN_IN_KEYS if in_key else _FORBIDDEN).search(text)
    if found is None:
        return None
    char = found.group()
    names = {"\x00": "NUL", "\x1b": "ESC", "\t": "tab", "\n": "newline", "\r": "carriage return"}
    name = names.get(char)
    code = f"U+{ord(char):04X}"
    return f"{code} ({name})" if name else code


class YamlDocError(ValueError):
    """The text is not a YAML document this reader accepts; ``line`` is 1-based."""

    def __init__(self, message: str, line: int | None = None, path: Path_ = ()) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.path = path


@dataclass
class _Frame:
    """An open mapping or sequence while its events arrive."""

    value: Any
    path: Path_
    line: int
    anchor: str | None
    nodes: int = 1
    height: int = 1  # levels of nesting at and below this node, aliased values included
    key: Any = None  # a mapping's pending key, once read
    key_line: int = 0
    has_key: bool = False
    key_lines: dict[str, int] | None = None  # a mapping's explicit keys -> their line
    merges: list[dict[Any, Any]] | None = None
    merging: bool = False  # the pending key is ``<<``


@dataclass(frozen=True)
class Document:
    value: Any
    lines: dict[Path_, int]
    # Keys set twice: reported, their second value dropped, so that the file's other
    # problems are found too (the first value stays, at the line ``lines`` gives).
    duplicates: tuple[YamlDocError, ...] = ()


# The pending key of a duplicate: its value goes nowhere. A NUL cannot be in a real key.
_DUPLICATE = "\x00duplicate"


_IMPLICIT: dict[str | None, Any] = _resolver.yaml_implicit_resolvers


def _scalar(event: Any) -> Any:
    tag = event.tag
    if tag is None or tag == "!":
        value = event.value
        # Most scalars are quoted or start with a letter no implicit type begins with.
        if not event.implicit[0] or (value and value[0] not in _IMPLICIT):
            return value
        tag = _resolver.resolve(yaml.ScalarNode, value, event.implicit)
    if tag == _STR_TAG:
        return event.value
    if tag == _MERGE_TAG:
        return _Merge
    if tag not in _SCALAR_TAGS:
        raise YamlDocError(
            f"unsupported YAML tag {tag!r} (plain values, lists and mappings only)",
            event.start_mark.line + 1,
        )
    node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
    constructor: Callable[[Any, Any], Any] = _constructor.yaml_constructors[tag]
    try:
        return constructor(_constructor, node)
    except (ValueError, yaml.YAMLError) as exc:
        raise YamlDocError(
            f"cannot read {event.value[:40]!r} as {tag.rsplit(':', 1)[-1]}: {exc}",
            event.start_mark.line + 1,
        ) from exc


class _MergeKey:
    __slots__ = ()


_Merge = _MergeKey()


def read_document(text: str) -> Document:
    """The single document in ``text`` (None when empty) and the line of each field path."""
    if len(text) > MAX_DOCUMENT_CHARS:
        raise YamlDocError(
            f"the file is {len(text):,} characters; a DAG file may have at most "
            f"{MAX_DOCUMENT_CHARS:,}"
        )
    lines: dict[Path_, int] = {(): 1}
    anchors: dict[str, tuple[Any, int, int]] = {}  # value, node count, height
    stack: list[_Frame] = []
    total = 0
    aliased = 0
    root: Any = None
    documents = 0
    duplicates: list[YamlDocError] = []

    def place(value: Any, nodes: int, height: int, line: int) -> None:
        """Put a finished node into the open container (or make it the root)."""
        nonlocal root
        if not stack:
            root = value
            return
        frame = stack[-1]
        frame.nodes += nodes
        frame.height = max(frame.height, height + 1)
        if isinstance(frame.value, list):
            frame.value.append(value)
            return
        if not frame.has_key:
            _take_key(frame, value, line)
            return
        frame.has_key = False
        if frame.merging:
            frame.merging = False
            frame.merges = frame.merges or []
            sources = value if isinstance(value, list) else [value]
            if not all(isinstance(s, dict) for s in sources):
                raise YamlDocError(
                    "a << merge takes a mapping or a list of mappings", line, frame.path
                )
            frame.merges.extend(sources)
            return
        if frame.key is not _DUPLICATE:
            frame.value[frame.key] = value

    def _take_key(frame: _Frame, key: Any, line: int) -> None:
        if key is _Merge:
            frame.merging = True
            frame.has_key = True
            return
        if isinstance(key, list | dict):
            raise YamlDocError("a mapping key must be a plain value", line, frame.path)
        name = str(key)
        if frame.key_lines is None:
            frame.key_lines = {}
        first = frame.key_lines.get(name)
        if first is not None or key in frame.value:
            duplicates.append(
                YamlDocError(
                    f"duplicate key {name!r}: also set at line {first}; a key may appear "
                    "once in a mapping",
                    line,
                    (*frame.path, name),
                )
            )
            frame.key, frame.has_key = _DUPLICATE, True
            return
        frame.key_lines[name] = line
        frame.key = key
        frame.key_line = line
        frame.has_key = True
        lines[(*frame.path, name)] = line

    def child_path() -> Path_:
        if not stack:
            return ()
        frame = stack[-1]
        if isinstance(frame.value, list):
            return (*frame.path, str(len(frame.value)))
        if frame.has_key and not frame.merging:
            return (*frame.path, str(frame.key))
        return frame.path

    def count(nodes: int, line: int, via_alias: bool) -> None:
        nonlocal total
        total += nodes
        if total > MAX_NODES:
            if via_alias or aliased:
                raise YamlDocError(
                    f"aliases expand this document beyond {MAX_NODES:,} values; "
                    "repeat less, or write the values out",
                    line,
                )
            raise YamlDocError(f"the document has more than {MAX_NODES:,} values", line)

    try:
        events: Iterator[Any] = yaml.parse(text, Loader=_Parser)
        for event in events:
            kind = type(event)
            if kind is yaml.ScalarEvent:
                line = event.start_mark.line + 1
                count(1, line, False)
                frame = stack[-1] if stack else None
                is_key = frame is not None and isinstance(frame.value, dict) and not frame.has_key
                value = _scalar(event)
                if isinstance(value, str):
                    bad = control_character(value, in_key=is_key)
                    if bad is not None:
                        where = (*frame.path, value) if frame and is_key else child_path()
                        what = "key" if is_key else "value"
                        raise YamlDocError(
                            f"control character {bad} is not allowed in a {what}"
                            + ("" if is_key else " (tab and newline are)"),
                            line,
                            where,
                        )
                if not is_key:
                    lines.setdefault(child_path(), line)
                if event.anchor is not None:
                    anchors[event.anchor] = (value, 1, 0)
                place(value, 1, 0, line)
            elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                line = event.start_mark.line + 1
                is_map = kind is yaml.MappingStartEvent
                if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                    raise YamlDocError(f"unsupported YAML tag {event.tag!r}", line)
                if stack and isinstance(stack[-1].value, dict) and not stack[-1].has_key:
                    raise YamlDocError("a mapping key must be a plain value", line, stack[-1].path)
                if len(stack) >= MAX_DEPTH:
                    raise YamlDocError(
                        f"nested more than {MAX_DEPTH} levels deep", line, child_path()
                    )
                count(1, line, False)
                path = child_path()
                lines.setdefault(path, line)
                stack.append(_Frame({} if is_map else [], path, line, event.anchor))
            elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                frame = stack.pop()
                if frame.merges:
                    for source in frame.merges:
                        for key, value in source.items():
                            frame.value.setdefault(key, value)
                if frame.anchor is not None:
                    anchors[frame.anchor] = (frame.value, frame.nodes, frame.height)
                place(frame.value, frame.nodes, frame.height, frame.line)
            elif kind is yaml.AliasEvent:
                line = event.start_mark.line + 1
                if event.anchor not in anchors:
                    if any(f.anchor == event.anchor for f in stack):
                        raise YamlDocError(
                            f"alias *{event.anchor} refers to a value that contains it", line
                        )
                    raise YamlDocError(f"unknown alias *{event.anchor}", line)
                value, nodes, height = anchors[event.anchor]
                aliased += nodes
                count(nodes, line, True)
                if len(stack) + height > MAX_DEPTH:
                    raise YamlDocError(
                        f"alias *{event.anchor} nests the document more than {MAX_DEPTH} "
                        "levels deep",
                        line,
                        child_path(),
                    )
                lines.setdefault(child_path(), line)
                place(value, nodes, height, line)
            elif kind is yaml.DocumentStartEvent:
                documents += 1
                if documents > 1:
                    raise YamlDocError(
                        "expected one YAML document, found a second (---)",
                        event.start_mark.line + 1,
                    )
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        raise YamlDocError(
            f"invalid YAML: {exc.problem or exc}", mark.line + 1 if mark else None
        ) from exc
    except yaml.YAMLError as exc:
        raise YamlDocError(f"invalid YAML: {exc}") from exc
    return Document(root, lines, tuple(duplicates))

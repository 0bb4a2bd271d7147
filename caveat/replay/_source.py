"""YAML text to plain Python data, with the line and column of every node.

ruamel.yaml's round-trip loader keeps positions on its ``CommentedMap`` and
``CommentedSeq`` nodes; this module copies the document into plain ``dict``,
``list``, ``str``, ``int``, ``float``, ``bool``, ``None`` and ``datetime``
values (so validation sees ordinary types) and records positions in a
``SourceMap`` keyed by the path to each node.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError

from predicates.errors import ScenarioError

__all__ = ["Path", "Pos", "SourceMap", "load_yaml", "scenario_error", "where"]

Path = tuple[str | int, ...]
_MAX_NODES = 200_000


@dataclass(frozen=True, order=True)
class Pos:
    """A 1-based line and column in the scenario file."""

    line: int
    column: int


_START = Pos(1, 1)


def scenario_error(filename: str, pos: Pos, reason: str) -> ScenarioError:
    """The one error of this package: ``str()`` is ``FILE:LINE:COL: reason``."""
    return ScenarioError(
        f"{filename}:{pos.line}:{pos.column}: {reason}",
        file=filename,
        line=pos.line,
        column=pos.column,
        reason=reason,
    )


_PLAIN_KEY = re.compile(r"[A-Za-z0-9_-]+")


def where(path: Path) -> str:
    """``steps[3].write.ref``: a path as a user would write it."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _PLAIN_KEY.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{part!r}]"
    return out or "scenario"


@dataclass
class SourceMap:
    """Positions of keys and values, by path from the document root."""

    keys: dict[Path, Pos] = field(default_factory=dict)
    values: dict[Path, Pos] = field(default_factory=dict)

    def key(self, path: Path) -> Pos | None:
        """Where the mapping key that leads to ``path`` is written, if anywhere."""
        return self.keys.get(path)

    def value(self, path: Path) -> Pos | None:
        """Where the node at ``path`` starts, if it exists."""
        return self.values.get(path)

    def locate(self, path: Path, *, prefer_key: bool = False) -> Pos:
        """The best position for ``path``: its key or value, else the nearest ancestor's."""
        while True:
            first, second = (
                (self.key(path), self.value(path))
                if prefer_key
                else (self.value(path), self.key(path))
            )
            found = first or second
            if found is not None:
                return found
            if not path:
                return _START
            path = path[:-1]


class _Constructor(RoundTripConstructor):
    """Round-trip constructor whose bad timestamps say where they are."""

    def construct_yaml_timestamp(self, node: Any, values: Any = None) -> Any:
        try:
            return super().construct_yaml_timestamp(node, values)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None, None, f"invalid timestamp {node.value!r}: {exc}", node.start_mark
            ) from exc


_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _Constructor.construct_yaml_timestamp)


def load_yaml(text: str, filename: str) -> tuple[object, SourceMap]:
    """Parse one YAML document into plain data and its ``SourceMap``.

    Raises ``ScenarioError`` for anything that is not a single well-formed
    document of plain data (syntax errors, duplicate keys, recursive aliases,
    non-string keys, tags without a plain-data meaning).
    """
    yaml = YAML(typ="rt")
    yaml.Constructor = _Constructor
    try:
        document = yaml.load(text)
    except MarkedYAMLError as exc:
        raise scenario_error(filename, _mark_pos(exc), _yaml_reason(exc)) from exc
    except YAMLError as exc:
        raise scenario_error(filename, _reader_pos(exc, text), f"invalid YAML: {exc}") from exc
    except RecursionError as exc:
        raise scenario_error(filename, _START, "invalid YAML: nested too deeply") from exc
    except Exception as exc:  # ruamel raises assorted builtins on odd input
        raise scenario_error(filename, _START, f"invalid YAML: {exc}") from exc
    converter = _Converter(filename)
    try:
        data = converter.convert(document, (), _node_pos(document))
    except RecursionError as exc:
        raise scenario_error(filename, _START, "invalid YAML: nested too deeply") from exc
    return data, converter.source


class _Converter:
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.source = SourceMap()
        self._active: set[int] = set()
        self._count = 0

    def convert(self, node: object, path: Path, pos: Pos | None) -> object:
        if pos is not None:
            self.source.values[path] = pos
        self._count += 1
        if self._count > _MAX_NODES:
            raise scenario_error(
                self.filename, pos or _START, f"document has more than {_MAX_NODES:,} nodes"
            )
        if node is None or isinstance(node, bool):
            return bool(node) if node is not None else None
        if isinstance(node, int):
            return int(node)
        if isinstance(node, float):
            return float(node)
        if isinstance(node, str):
            return str(node)
        if isinstance(node, datetime):
            return datetime(
                node.year,
                node.month,
                node.day,
                node.hour,
                node.minute,
                node.second,
                node.microsecond,
                tzinfo=node.tzinfo,
            )
        if isinstance(node, date):
            return date(node.year, node.month, node.day)
        if isinstance(node, Mapping):
            return self._guarded(node, path, pos, self._mapping)
        if isinstance(node, list):
            return self._guarded(node, path, pos, self._sequence)
        tag = getattr(node, "tag", None)
        tag_text = str(getattr(tag, "value", tag) or "") if tag is not None else ""
        what = f"tag {tag_text}" if tag_text else f"value of type {type(node).__name__}"
        raise scenario_error(
            self.filename, pos or _START, f"{where(path)}: unsupported YAML {what}; use plain data"
        )

    def _guarded(self, node: Any, path: Path, pos: Pos | None, convert: Any) -> object:
        if id(node) in self._active:
            raise scenario_error(
                self.filename, pos or _START, f"{where(path)}: recursive YAML alias"
            )
        self._active.add(id(node))
        try:
            result: object = convert(node, path, pos)
        finally:
            self._active.discard(id(node))
        return result

    def _mapping(self, node: Mapping[Any, Any], path: Path, pos: Pos | None) -> dict[str, object]:
        lc = getattr(node, "lc", None)
        out: dict[str, object] = {}
        for key, value in node.items():
            key_pos = _lc_pos(lc, "key", key) or pos
            if not isinstance(key, str):
                shown = "null" if key is None else repr(key)
                raise scenario_error(
                    self.filename,
                    key_pos or _START,
                    f"{where(path)}: mapping keys must be strings, got {shown}",
                )
            child: Path = (*path, key)
            if key_pos is not None:
                self.source.keys[child] = key_pos
            # an empty (null) value has no token of its own: point at its key
            value_pos = key_pos if value is None else _lc_pos(lc, "value", key) or key_pos
            out[str(key)] = self.convert(value, child, value_pos)
        return out

    def _sequence(self, node: Sequence[Any], path: Path, pos: Pos | None) -> list[object]:
        lc = getattr(node, "lc", None)
        return [
            self.convert(item, (*path, index), _lc_pos(lc, "item", index) or pos)
            for index, item in enumerate(node)
        ]


def _lc_pos(lc: Any, kind: str, key: object) -> Pos | None:
    if lc is None:
        return None
    try:
        line, column = getattr(lc, kind)(key)
        return Pos(int(line) + 1, int(column) + 1)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def _node_pos(node: object) -> Pos | None:
    lc = getattr(node, "lc", None)
    line, column = getattr(lc, "line", None), getattr(lc, "col", None)
    if isinstance(line, int) and isinstance(column, int):
        return Pos(line + 1, column + 1)
    return None


def _mark_pos(exc: MarkedYAMLError) -> Pos:
    mark = exc.problem_mark or exc.context_mark
    if mark is None:
        return _START
    return Pos(int(mark.line) + 1, int(mark.column) + 1)


def _yaml_reason(exc: MarkedYAMLError) -> str:
    problem = (exc.problem or "").strip() or "malformed document"
    if "duplicate key" in problem:
        return problem.split(" with value ", 1)[0].replace("found ", "", 1)
    context = (exc.context or "").strip()
    if context and exc.context_mark is not None and exc.context_mark is not exc.problem_mark:
        where = f"line {exc.context_mark.line + 1}, column {exc.context_mark.column + 1}"
        return f"invalid YAML: {problem} ({context} at {where})"
    return f"invalid YAML: {problem}" + (f" ({context})" if context else "")


def _reader_pos(exc: YAMLError, text: str) -> Pos:
    position = getattr(exc, "position", None)
    if not isinstance(position, int) or position < 0:
        return _START
    before = text[:position]
    line = before.count("\n") + 1
    return Pos(line, position - (before.rfind("\n") + 1) + 1)

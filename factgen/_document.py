"""Input documents (YAML, JSON) as plain data that remembers where each node was.

Every loader of factgen reads through here, so that a bad node is reported as
``DocumentError`` with the document's name and a 1-based line and column.
YAML is read with ruamel's round-trip loader (YAML 1.2: ``yes`` is a string,
duplicate keys are refused) and converted to plain Python types: ruamel's
boolean is an ``int`` subclass, and would otherwise pass for an integer.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, RoundTripConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scanner import RoundTripScanner, ScannerError

from predicates.errors import DocumentError

__all__ = ["Document", "Path", "load_json", "load_text", "load_yaml"]

Path = tuple[str | int, ...]
_MAX_NODES = 1_000_000
#: How deep YAML collections may nest (flow and block levels together).
_MAX_DEPTH = 100


@dataclass
class Document:
    """Plain data (dict, list, str, int, float, bool, None, datetime, date) and positions."""

    data: object
    source: str
    positions: dict[Path, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[Path, tuple[int, int]] = field(default_factory=dict)
    #: JSON text whose positions are computed only when an error needs them.
    lazy_text: str | None = None

    def where(self, path: Path, *, key: bool = False) -> tuple[int | None, int | None]:
        """Line and column of the node at ``path`` (its key with ``key``), else of a parent."""
        if self.lazy_text is not None:
            text, self.lazy_text = self.lazy_text, None
            try:  # JSON is YAML 1.2 flow style: ruamel knows where every node is
                located = load_yaml(text, source=self.source)
            except DocumentError:
                pass
            else:
                self.positions.update(located.positions)
                self.key_positions.update(located.key_positions)
        if key and path in self.key_positions:
            return self.key_positions[path]
        while True:
            if path in self.positions:
                return self.positions[path]
            if not path:
                return None, None
            path = path[:-1]

    def error(self, path: Path, message: str, *, key: bool = False, **detail: Any) -> DocumentError:
        """A ``DocumentError`` pointing at ``path``; the message is prefixed with the path."""
        line, column = self.where(path, key=key)
        shown = describe(path)
        return DocumentError(
            f"{shown}: {message}" if shown else message,
            source=self.source,
            line=line,
            column=column,
            **detail,
        )


def describe(path: Path) -> str:
    """``entities[2].aliases[0]`` for ``("entities", 2, "aliases", 0)``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


class _Constructor(RoundTripConstructor):
    def construct_yaml_timestamp(self, node: Any, values: Any = None) -> Any:
        try:
            return super().construct_yaml_timestamp(node, values)
        except (ValueError, OverflowError) as exc:
            raise ConstructorError(
                None, None, f"invalid timestamp {node.value!r}: {exc}", node.start_mark
            ) from exc


_Constructor.add_constructor("tag:yaml.org,2002:timestamp", _Constructor.construct_yaml_timestamp)


class _Scanner(RoundTripScanner):
    """ruamel's scanner, refusing collections nested deeper than ``_MAX_DEPTH``: its
    simple-key bookkeeping is quadratic in the flow depth (10,000 ``[`` took ten
    seconds to refuse) and its composer recurses once per level."""

    def _deeper(self) -> None:
        if self.flow_level + len(self.indents) >= _MAX_DEPTH:
            raise ScannerError(
                None,
                None,
                f"collections nested deeper than {_MAX_DEPTH} levels",
                self.reader.get_mark(),
            )

    def fetch_flow_collection_start(self, TokenClass: Any, to_push: str) -> None:
        self._deeper()
        super().fetch_flow_collection_start(TokenClass, to_push)

    def add_indent(self, column: int) -> bool:
        if self.indent < column:
            self._deeper()
        return bool(super().add_indent(column))


def load_yaml(text: str, *, source: str) -> Document:
    """Parse one YAML document; ``DocumentError`` with line and column when it is malformed."""
    yaml = YAML(typ="rt")
    yaml.Constructor = _Constructor
    yaml.Scanner = _Scanner
    try:
        raw = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = (exc.problem or "malformed document").strip()
        if "duplicate key" in problem:
            problem = problem.split(" with value ", 1)[0].replace("found ", "", 1)
        raise DocumentError(
            f"invalid YAML: {problem}",
            source=source,
            line=None if mark is None else int(mark.line) + 1,
            column=None if mark is None else int(mark.column) + 1,
        ) from exc
    except ReaderError as exc:  # a character YAML does not allow (a NUL byte, say)
        at = int(exc.position)
        raise DocumentError(
            f"invalid YAML: character #x{int(exc.character):04x} is not allowed in YAML text",
            source=source,
            line=text.count("\n", 0, at) + 1,
            column=at - (text.rfind("\n", 0, at) + 1) + 1,
        ) from exc
    except (YAMLError, RecursionError, ValueError, TypeError) as exc:
        raise DocumentError(f"invalid YAML: {exc}", source=source, line=1, column=1) from exc
    doc = Document(None, source)
    counter = [0]
    try:
        doc.data = _convert(doc, raw, (), _node_pos(raw), set(), counter)
    except RecursionError as exc:
        raise DocumentError("document nested too deeply", source=source) from exc
    return doc


def _node_pos(node: object) -> tuple[int, int] | None:
    lc = getattr(node, "lc", None)
    line, column = getattr(lc, "line", None), getattr(lc, "col", None)
    if isinstance(line, int) and isinstance(column, int):
        return line + 1, column + 1
    return None


def _lc(lc: Any, kind: str, key: object) -> tuple[int, int] | None:
    if lc is None:
        return None
    try:
        line, column = getattr(lc, kind)(key)
        return int(line) + 1, int(column) + 1
    except (KeyError, IndexError, TypeError, ValueError, AttributeError):
        return None


def _convert(
    doc: Document,
    node: object,
    path: Path,
    pos: tuple[int, int] | None,
    active: set[int],
    counter: list[int],
) -> object:
    if pos is not None:
        doc.positions[path] = pos
    counter[0] += 1
    if counter[0] > _MAX_NODES:
        raise doc.error(path, f"document has more than {_MAX_NODES:,} nodes")
    if node is None or isinstance(node, bool):
        return node
    if type(node).__name__ == "ScalarBoolean":
        return bool(node)
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
    if isinstance(node, Mapping | list):
        if id(node) in active:
            raise doc.error(path, "recursive YAML alias")
        active.add(id(node))
        try:
            lc = getattr(node, "lc", None)
            if isinstance(node, Mapping):
                out: dict[str, object] = {}
                for key, value in node.items():
                    key_pos = _lc(lc, "key", key) or pos
                    child: Path = (*path, str(key))
                    if not isinstance(key, str):
                        if key_pos is not None:
                            doc.positions[child] = key_pos
                        raise doc.error(child, f"mapping keys must be strings, got {key!r}")
                    if key_pos is not None:
                        doc.key_positions[child] = key_pos
                    value_pos = key_pos if value is None else _lc(lc, "value", key) or key_pos
                    out[key] = _convert(doc, value, child, value_pos, active, counter)
                return out
            return [
                _convert(doc, item, (*path, i), _lc(lc, "item", i) or pos, active, counter)
                for i, item in enumerate(node)
            ]
        finally:
            active.discard(id(node))
    tag = getattr(node, "tag", None)
    shown = str(getattr(tag, "value", tag) or type(node).__name__)
    raise doc.error(path, f"unsupported YAML value ({shown}); use plain data")


def load_json(text: str, *, source: str) -> Document:
    """Parse JSON strictly (no NaN/Infinity, no duplicate keys); errors with line and column."""

    def pairs(items: Sequence[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"duplicate key {key!r}")
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=constant)
    except json.JSONDecodeError as exc:
        raise DocumentError(
            f"invalid JSON: {exc.msg}", source=source, line=exc.lineno, column=exc.colno
        ) from exc
    except (ValueError, RecursionError) as exc:
        raise DocumentError(f"invalid JSON: {exc}", source=source) from exc
    return Document(data, source, {(): (1, 1)}, lazy_text=text)


def load_text(text: str, *, source: str, syntax: str | None = None) -> Document:
    """JSON or YAML: ``syntax`` is ``json`` or ``yaml``, or guessed when None.

    The guess is JSON for a ``.json`` source name or text starting with ``{``
    or ``[``, YAML otherwise.
    """
    if syntax not in (None, "json", "yaml"):
        raise DocumentError(f"unknown syntax {syntax!r}: json or yaml", source=source)
    if syntax is None:
        stripped = text.lstrip()
        syntax = "json" if source.endswith(".json") or stripped.startswith(("{", "[")) else "yaml"
    return load_json(text, source=source) if syntax == "json" else load_yaml(text, source=source)

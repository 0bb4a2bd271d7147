"""YAML text to plain Python data, with the line and column of every node.

factgen's document loader does the reading (ruamel's round-trip loader,
copied into plain ``dict``, ``list``, ``str``, ``int``, ``float``, ``bool``,
``None`` and ``datetime`` values); this module keeps the positions in a
``SourceMap`` keyed by the path to each node and speaks ``ScenarioError``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from factgen import load_yaml_document
from predicates.errors import DocumentError, ScenarioError

__all__ = ["Path", "Pos", "SourceMap", "load_yaml", "scenario_error", "where"]

Path = tuple[str | int, ...]


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


def load_yaml(text: str, filename: str) -> tuple[object, SourceMap]:
    """Parse one YAML document into plain data and its ``SourceMap``.

    The parsing is factgen's document loader (one YAML reader for every input
    of caveat); its ``DocumentError`` becomes a ``ScenarioError`` here. Raises
    for anything that is not a single well-formed document of plain data
    (syntax errors, duplicate keys, recursive aliases, non-string keys, tags
    without a plain-data meaning).
    """
    try:
        document = load_yaml_document(text, source=filename)
    except DocumentError as exc:
        pos = Pos(exc.line or 1, exc.column or 1)
        raise scenario_error(filename, pos, exc.message) from exc
    source = SourceMap(
        keys={path: Pos(*lc) for path, lc in document.key_positions.items()},
        values={path: Pos(*lc) for path, lc in document.positions.items()},
    )
    return document.data, source

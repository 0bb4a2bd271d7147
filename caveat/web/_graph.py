"""The lineage graph drawn for people: ancestors on the left, descendants on the right,
one column per generation, each node coloured by its state (an SVG the page inlines)."""

from __future__ import annotations

from dataclasses import dataclass

import lifecycle

__all__ = ["Drawing", "draw"]

_W, _H = 176, 62  # a node's smallest box (three lines: id and state, subject, attribute)
_GAP_X, _GAP_Y = 50, 16  # between columns and between rows
_PAD = 12
_CHAR = 7.2  # a generous width of one character of the labels' 12px font


@dataclass(frozen=True)
class Node:
    """A drawn node: its box, the item and whether it is the page's own item."""

    x: int
    y: int
    id: int
    state: str
    lines: tuple[str, ...]  # the subject and the attribute, whole
    me: bool


@dataclass(frozen=True)
class Edge:
    """A drawn parent -> child edge, as an SVG path."""

    path: str


@dataclass(frozen=True)
class Drawing:
    """An SVG's size, nodes and edges."""

    width: int
    height: int
    w: int
    h: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def _lines(n: lifecycle.LineageNode) -> tuple[str, ...]:
    """A node's label, whole: the subject on one line and the attribute on the next."""
    return ("redacted",) if n.redacted else (n.subject, n.attribute)


def _width(nodes: list[lifecycle.LineageNode]) -> int:
    """A box wide enough for the longest line of any node (names are never cut)."""
    longest = max(len(line) for n in nodes for line in (f"#{n.id} · {n.state}", *_lines(n)))
    return max(_W, int(longest * _CHAR) + 20)


def draw(lin: lifecycle.Lineage) -> Drawing:
    """Lay the lineage out in generations; only the nodes the lineage holds (what the
    reader may read) are drawn, and only the edges between them."""
    nodes = [*lin.ancestors, lin.item, *lin.descendants]
    columns: dict[int, list[lifecycle.LineageNode]] = {}
    for n in nodes:
        columns.setdefault(n.depth, []).append(n)
    first = min(columns)
    w = _width(nodes)
    dx, dy = w + _GAP_X, _H + _GAP_Y
    where: dict[int, tuple[int, int]] = {}
    drawn = []
    for depth in sorted(columns):
        for row, n in enumerate(sorted(columns[depth], key=lambda m: m.id)):
            x, y = _PAD + (depth - first) * dx, _PAD + row * dy
            where[n.id] = (x, y)
            drawn.append(Node(x, y, n.id, n.state, _lines(n), n.id == lin.item.id))
    edges = []
    for parent, child in sorted(lin.graph.edges):
        if parent in where and child in where:
            (x1, y1), (x2, y2) = where[parent], where[child]
            sx, sy, ex, ey = x1 + w, y1 + _H // 2, x2, y2 + _H // 2
            mid = (sx + ex) // 2
            edges.append(Edge(f"M{sx},{sy} C{mid},{sy} {mid},{ey} {ex},{ey}"))
    width = _PAD * 2 + (max(columns) - first) * dx + w
    height = _PAD * 2 + (max(len(c) for c in columns.values()) - 1) * dy + _H
    return Drawing(width, height, w, _H, tuple(drawn), tuple(edges))
